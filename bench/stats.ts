/** Small statistics helpers (no dependencies). */

/** Percentile with linear interpolation between closest ranks (the "R-7" / NumPy default). */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = (p / 100) * (sorted.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo)
}

export const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length

export const median = (values: ReadonlyArray<number>): number => percentile(values, 50)

export interface Summary {
  readonly n: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly mean: number
  readonly min: number
  readonly max: number
}

export const summarize = (values: ReadonlyArray<number>): Summary => ({
  n: values.length,
  p50: percentile(values, 50),
  p95: percentile(values, 95),
  p99: percentile(values, 99),
  mean: mean(values),
  min: values.length === 0 ? Number.NaN : Math.min(...values),
  max: values.length === 0 ? Number.NaN : Math.max(...values)
})

/** A seeded PRNG (mulberry32), so a run's variant order can be reproduced. */
export const rng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const shuffle = <A>(items: ReadonlyArray<A>, random: () => number): Array<A> => {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}
