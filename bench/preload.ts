/**
 * pnpm bench:preload — what a warm pool's `preload` saves (issue 28, item 9): a pooled
 * `import pandas, matplotlib.pyplot; print(1)` on hermes-sandbox/python-data with
 * `warmPool.preload.python: ["pandas", "matplotlib.pyplot"]` against the same pool without it, and
 * a pooled `print(1)` as the floor. Three executors, each a pool of 1 on the data image; each round
 * runs the three in turn, each once every pool has its sandbox ready (so every run is a claim, never a
 * cold start, and no refill runs beside it), and times executeCode from the call to the result. Prints p50/p95 and the ratio of
 * the preloaded import to the plain one within the same run; BENCHMARKS.md records it.
 *
 *   pnpm bench:preload [--runs 15] [--image hermes-sandbox/python-data:latest] [--settle-ms 3000]
 */
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback
}
const RUNS = Number(arg("runs", "15"))
const IMAGE = arg("image", "hermes-sandbox/python-data:latest")
const SETTLE_MS = Number(arg("settle-ms", "3000"))
const MODULES = ["pandas", "matplotlib.pyplot"]
const IMPORT = "import pandas, matplotlib.pyplot\nprint(1)\n"

const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

const pool = (preload: boolean) =>
  createExecutor({
    images: { python: IMAGE },
    timeoutMs: 60_000,
    warmPool: { size: 1, languages: ["python"], ...(preload ? { preload: { python: MODULES } } : {}) }
  })

const ready = async (e: SandboxExecutor) => {
  while (((await e.stats()).warm["python"] ?? 0) < 1) await new Promise((r) => setTimeout(r, 10))
}

const variants: Array<{ readonly name: string; readonly executor: SandboxExecutor; readonly code: string }> = []
try {
  variants.push({ name: `pooled \`print(1)\` (floor)`, executor: await pool(false), code: "print(1)\n" })
  variants.push({ name: "pooled import pandas, matplotlib.pyplot", executor: await pool(false), code: IMPORT })
  variants.push({ name: "the same, with preload", executor: await pool(true), code: IMPORT })
  const times = variants.map(() => [] as Array<number>)
  for (let round = -1; round < RUNS; round++) {
    for (const [i, v] of variants.entries()) {
      // Every pool full first: a refill (a preloading one imports pandas, seconds of CPU) must not
      // run beside the measured run.
      for (const w of variants) await ready(w.executor)
      // A pool counts a sandbox ready once it started, while its interpreter may still be importing:
      // a claim then waits for the rest of the import (never longer than without preload). The
      // steady state, a pool refilled between requests, is what this measures.
      await new Promise((r) => setTimeout(r, SETTLE_MS))
      const t0 = performance.now()
      const r = await v.executor.executeCode({ language: "python", code: v.code })
      const ms = performance.now() - t0
      if (r.exitCode !== 0 || r.stdout !== "1\n") throw new Error(`${v.name}: exit ${r.exitCode}: ${r.stderr}`)
      if (round >= 0) times[i]!.push(ms) // round -1 warms each path up, unmeasured
    }
  }
  const base = pct(times[1]!, 50)
  console.log(
    `pnpm bench:preload -- --runs ${RUNS} --image ${IMAGE} --settle-ms ${SETTLE_MS}   (${new Date().toISOString()}, load ${(await import("node:os")).loadavg()[0]!.toFixed(2)})\n`
  )
  console.log("| run (warm pool of 1, data image) | p50 (ms) | p95 (ms) | p50 ÷ pooled import without preload |")
  console.log("| --- | ---: | ---: | ---: |")
  for (const [i, v] of variants.entries()) {
    const p50 = pct(times[i]!, 50)
    console.log(`| ${v.name} | ${p50.toFixed(0)} | ${pct(times[i]!, 95).toFixed(0)} | ${(p50 / base).toFixed(2)}× |`)
  }
} finally {
  await Promise.all(variants.map((v) => v.executor.close()))
}
