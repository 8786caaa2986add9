/** Labels on every container the benchmark creates itself (the SDK's carry its executor id instead). */
export const BenchLabel = {
  run: "org.hermes-bench.run",
  variant: "org.hermes-bench.variant"
} as const
