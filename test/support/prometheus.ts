/**
 * Reading the Prometheus text the services expose (Metrics.ts) in tests, with a Prometheus parser
 * from npm (parse-prometheus-text-format), and what the journal's own projection says the
 * counters must be. Shared by the unit tier (packages/core/test/Metrics.test.ts,
 * packages/mcp/test/metrics-http.test.ts), the journal tier and the engine tier
 * (test/mcp-http.e2e.test.ts).
 */
import parsePrometheusTextFormat, { type PrometheusFamily } from "parse-prometheus-text-format"
import { type EventEnvelope, Projection } from "@hermes-sandbox/events"
import type { ExecutionState } from "@hermes-sandbox/events/Projection"

export type Family = PrometheusFamily

/** Every metric family of an exposition, by name. */
export const parseFamilies = (text: string): ReadonlyMap<string, Family> =>
  new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f] as const))

/** The samples of a family that are above zero, by their labels' values joined with "/" (in `keys` order). */
export const byLabels = (
  family: Family | undefined,
  keys: ReadonlyArray<string>,
  field: "value" | "count" = "value"
): Record<string, number> =>
  Object.fromEntries(
    (family?.metrics ?? [])
      .map((m) => [keys.map((k) => m.labels?.[k] ?? "").join("/"), Number(m[field])] as const)
      .filter(([, n]) => n > 0)
  )

/** The value of an unlabelled sample (a gauge, a counter), or of the sample with these labels. */
export const sampleValue = (
  families: ReadonlyMap<string, Family>,
  name: string,
  labels: Readonly<Record<string, string>> = {}
): number => {
  const sample = families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
  return Number(sample?.value)
}

/**
 * A labelled histogram's count per label value (those above zero). parse-prometheus-text-format
 * 1.1.1 folds a histogram's samples into one, keeping only the buckets of the last label set (their
 * other labels, `_count` and `_sum` dropped), so each label value's lines are parsed alone and its
 * count is its `+Inf` bucket.
 */
export const histogramCounts = (
  text: string,
  name: string,
  label: string,
  values: ReadonlyArray<string>
): Record<string, number> =>
  Object.fromEntries(
    values
      .map((v) => {
        const lines = text
          .split("\n")
          .filter(
            (l) =>
              l === `# TYPE ${name} histogram` || (l.startsWith(`${name}_bucket{`) && l.includes(`${label}="${v}"`))
          )
        const family = parseFamilies(`${lines.join("\n")}\n`).get(name)
        if (family?.metrics.length !== 1) throw new Error(`${name}{${label}="${v}"}: not one histogram in the text`)
        return [v, Number(family.metrics[0]?.buckets?.["+Inf"])] as const
      })
      .filter(([, n]) => n > 0)
  )

/** `hermes_sandbox_executions_total`'s outcome for an execution the journal's projection folded ("open": none yet). */
export const outcomeLabel = (s: ExecutionState): string =>
  s.outcome === "exited"
    ? s.oomKilled === true
      ? "oom"
      : s.exitCode === 0
        ? "ok"
        : "error"
    : s.outcome === "timedOut"
      ? "timeout"
      : (s.outcome ?? "open")

/** What `hermes_sandbox_executions_total` must count, by "language/outcome", from the journal's projection. */
export const expectedExecutions = (states: Iterable<ExecutionState>): Record<string, number> => {
  const expected: Record<string, number> = {}
  for (const s of states) {
    if (s.kind !== "execution") continue
    const key = `${s.language}/${outcomeLabel(s)}`
    expected[key] = (expected[key] ?? 0) + 1
  }
  return expected
}

/**
 * What the services' metrics must say after the events of a journal, by the journal's own
 * projection and summary: `hermes_sandbox_executions_total` by "language/outcome", the phase
 * histogram's counts by phase (from the execution streams' events), and
 * `hermes_sandbox_tool_calls_total` by "tool/outcome" (a name not among `tools` as "other").
 */
export const journalExpectations = (events: ReadonlyArray<EventEnvelope>, tools: ReadonlyArray<string>) => {
  const states = Projection.project(events)
  const summary = Projection.summarize(states)
  const executions = [...states.values()].filter((s) => s.kind === "execution")
  const oneShot = new Set(executions.filter((s) => s.sessionId === undefined).map((s) => s.streamId))
  const phases: Record<string, number> = {}
  const add = (counts: Record<string, number>, key: string, n = 1) => {
    if (n > 0) counts[key] = (counts[key] ?? 0) + n
  }
  for (const e of events) {
    if (!oneShot.has(e.streamId)) continue
    if (e.type === "ContainerCreated") add(phases, "create"), add(phases, "queue")
    if (e.type === "ContainerClaimed") add(phases, "claim"), add(phases, "queue")
    if (e.type === "ContainerStarted") add(phases, "start")
    if (e.type === "ArtifactsCollected") add(phases, "collect")
  }
  // run: what the summary's durations count (start or claim to the terminal event); removal: ended, then destroyed.
  add(
    phases,
    "run",
    executions.filter((s) => oneShot.has(s.streamId) && s.startedAt !== undefined && s.finishedAt !== undefined).length
  )
  add(
    phases,
    "removal",
    executions.filter((s) => oneShot.has(s.streamId) && s.finishedAt !== undefined && s.destroyedAt !== undefined)
      .length
  )
  const toolCalls: Record<string, number> = {}
  for (const [tool, c] of Object.entries(summary.toolCalls)) {
    const label = tools.includes(tool) ? tool : "other"
    add(toolCalls, `${label}/completed`, c.completed)
    add(toolCalls, `${label}/failed`, c.failed)
    add(toolCalls, `${label}/refused`, c.refused)
  }
  return { states, summary, executions: expectedExecutions(executions), phases, toolCalls }
}
