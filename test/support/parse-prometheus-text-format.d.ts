// parse-prometheus-text-format ships no declarations: the shape the metrics tests read.
declare module "parse-prometheus-text-format" {
  export interface PrometheusSample {
    readonly labels?: Readonly<Record<string, string>>
    readonly value?: string
    readonly count?: string
    readonly sum?: string
    readonly buckets?: Readonly<Record<string, string>>
  }
  export interface PrometheusFamily {
    readonly name: string
    readonly help: string
    readonly type: string
    readonly metrics: ReadonlyArray<PrometheusSample>
  }
  const parsePrometheusTextFormat: (text: string) => ReadonlyArray<PrometheusFamily>
  export default parsePrometheusTextFormat
}
