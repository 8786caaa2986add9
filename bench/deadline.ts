/**
 * pnpm bench:deadline — how long after its deadline a sandbox is gone, for programs that try to
 * outlive it (hostile review, finding 1): a JavaScript exit handler that spins after printing, a
 * Python atexit handler that sleeps, and, as the reference, a plain busy loop. For each, N runs
 * with timeoutMs = 2000 and awaitRemoval (the result arrives once the container is removed):
 * "deadline to gone" = the result's arrival minus (the run's start + its timeout). Also: with
 * maxConcurrency 1, how late the next queued print(1) finishes after the hostile run's deadline.
 * Prints a markdown table; BENCHMARKS.md records it with the date.
 */
import { createExecutor } from "@hermes-sandbox/docker"

const N = Number(process.env.HERMES_BENCH_DEADLINE_RUNS ?? 10)
const TIMEOUT_MS = 2_000
const programs = [
  ["busy loop (reference)", { language: "python" as const, code: "while True:\n    pass" }],
  [
    "JS exit handler spinning 30 s after its output",
    {
      language: "javascript" as const,
      code: `console.log("done"); process.on("exit", () => { const t = Date.now(); while (Date.now() - t < 30000); })`
    }
  ],
  [
    "Python atexit sleeping 60 s",
    {
      language: "python" as const,
      code: "import atexit, time\nprint('done', flush=True)\natexit.register(lambda: time.sleep(60))"
    }
  ]
] as const

const pct = (xs: Array<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

const executor = await createExecutor({ timeoutMs: TIMEOUT_MS, awaitRemoval: true, maxConcurrency: 1 })
const rows: Array<string> = []
try {
  for (const [name, request] of programs) {
    const late: Array<number> = []
    for (let i = 0; i < N; i++) {
      const r = await executor.executeCode(request)
      if (!r.timedOut) throw new Error(`${name}: expected a timeout, got exit ${r.exitCode}`)
      late.push(Date.now() - (Date.parse(r.startedAt) + TIMEOUT_MS))
    }
    rows.push(`| ${name} | ${N} | ${pct(late, 50)} | ${pct(late, 95)} | ${Math.max(...late)} |`)
  }
  // The slot: the next queued execution after a hostile one.
  const queued: Array<number> = []
  for (let i = 0; i < N; i++) {
    const hostile = executor.executeCode(programs[1][1])
    const next = executor.executeCode({ language: "python", code: "print(1)" })
    const h = await hostile
    await next
    queued.push(Date.now() - (Date.parse(h.startedAt) + TIMEOUT_MS))
  }
  rows.push(
    `| the next queued print(1) after the JS exit-handler run (maxConcurrency 1), until its result | ${N} | ${pct(queued, 50)} | ${pct(queued, 95)} | ${Math.max(...queued)} |`
  )
} finally {
  const t = Date.now()
  await executor.close()
  rows.push(`| close() after all of it | 1 | ${Date.now() - t} | | |`)
}
console.log(`pnpm bench:deadline, ${new Date().toISOString()}, timeoutMs ${TIMEOUT_MS}, awaitRemoval\n`)
console.log("| program | runs | deadline → gone p50 (ms) | p95 | max |")
console.log("| --- | --- | --- | --- | --- |")
for (const r of rows) console.log(r)
