/**
 * Flakes are found, not hidden: rerun chosen test files N times under CPU load and report every
 * failure with what is needed to repeat it (the failing test, its error, a property's seed).
 *
 *   pnpm test:stress [--runs N] [--load K] [--project NAME]… FILE…
 *
 *   --runs N      how many times to run the files (default 5); each run is one `vitest run`
 *   --load K      busy loops started beside the runs, one process each (default: one per core; 0: none)
 *   --project P   only this vitest project (unit, engine, engine-pool, …); default: every project
 *                 the files belong to (a file of the pool list runs with and without the pool)
 *
 * Nothing is retried into green: a run that fails is reported and counted, and the exit code is 1
 * when any run failed. The busy loops are ended however this script ends.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

interface Options {
  readonly runs: number
  readonly load: number
  readonly projects: ReadonlyArray<string>
  readonly files: ReadonlyArray<string>
}

const usage = "usage: pnpm test:stress [--runs N] [--load K] [--project NAME]... FILE..."

export const parseArgs = (argv: ReadonlyArray<string>): Options => {
  let runs = 5
  let load = availableParallelism()
  const projects: Array<string> = []
  const files: Array<string> = []
  const count = (flag: string, value: string | undefined, min: number) => {
    const n = Number(value)
    if (value === undefined || !Number.isInteger(n) || n < min)
      throw new Error(`${flag} takes a whole number >= ${min}\n${usage}`)
    return n
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    if (a === "--runs") runs = count(a, argv[++i], 1)
    else if (a === "--load") load = count(a, argv[++i], 0)
    else if (a === "--project") projects.push(argv[++i] ?? "")
    else if (a === "-h" || a === "--help") throw new Error(usage)
    else if (a.startsWith("-")) throw new Error(`unknown option ${a}\n${usage}`)
    else files.push(a)
  }
  if (projects.some((p) => p === "")) throw new Error(`--project takes a name\n${usage}`)
  if (files.length === 0) throw new Error(`name at least one test file\n${usage}`)
  return { runs, load, projects, files }
}

/** What a failed run printed that a person needs to repeat it: failing tests, errors, seeds. */
export const failureLines = (output: string): Array<string> =>
  output
    .replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "")
    .split("\n")
    .filter((l) =>
      /^ *(FAIL|×) |^ +→ |^[A-Za-z]*Error: |^Counterexample: |\{ seed: |seed[ :=]+-?\d+|^ *❯ (test|packages|images|examples)\/[^ ]+:\d+/.test(
        l
      )
    )
    .map((l) => l.slice(0, 400))

const busyLoops = (n: number): Array<ChildProcess> =>
  Array.from({ length: n }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }))

const runOnce = (
  options: Options
): Promise<{ readonly code: number | null; readonly output: string; readonly ms: number }> =>
  new Promise((resolve) => {
    const t0 = Date.now()
    const args = ["vitest", "run", ...options.projects.flatMap((p) => ["--project", p]), ...options.files]
    const child = spawn("npx", args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, FORCE_COLOR: "0" } })
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    child.on("close", (code) => resolve({ code, output, ms: Date.now() - t0 }))
  })

const main = async () => {
  let options: Options
  try {
    options = parseArgs(process.argv.slice(2))
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`)
    process.exit(2)
  }
  const loops = busyLoops(options.load)
  const stop = () => {
    for (const p of loops) p.kill("SIGKILL")
  }
  process.on("exit", stop)
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130))
  process.stdout.write(`stress: ${options.files.join(" ")}: ${options.runs} runs beside ${options.load} busy loop(s)\n`)
  let failed = 0
  const logs = mkdtempSync(join(tmpdir(), "hermes-stress-"))
  for (let run = 1; run <= options.runs; run++) {
    const r = await runOnce(options)
    const ok = r.code === 0
    process.stdout.write(
      `run ${run}/${options.runs}: ${ok ? "passed" : `FAILED (exit ${r.code})`} in ${(r.ms / 1000).toFixed(1)} s\n`
    )
    if (ok) continue
    failed++
    // The whole output is kept; what is shown is the failures, or the output's end when none is recognised.
    const log = join(logs, `run-${run}.log`)
    writeFileSync(log, r.output)
    const lines = failureLines(r.output)
    const shown = lines.length > 0 ? lines : r.output.trimEnd().split("\n").slice(-30)
    process.stdout.write(`${shown.map((l) => `  ${l}`).join("\n")}\n  (the run's whole output: ${log})\n`)
  }
  process.stdout.write(`stress: ${options.runs - failed} passed, ${failed} failed\n`)
  stop()
  process.exit(failed === 0 ? 0 : 1)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) void main()
