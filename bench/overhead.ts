/**
 * The SDK's own CPU per execution, without an engine: `pnpm bench:overhead`.
 *
 * The executor (supervision, deadline, journal, events, the warm pool) runs on the in-memory
 * FakeRuntime through the same ManagedRuntime path the Promise facade takes, so what is
 * measured is everything the SDK adds on top of the Engine API calls themselves (which
 * `pnpm bench` measures with a real engine, next to hand-written dockerode making the same calls).
 *
 * Two rhythms: back to back (the code stays hot in the CPU's caches), and one execution every
 * 100 ms (about one real execution's duration here, so the process idles in between, as it does
 * against a real engine and as it is under load, when the engine's processes run in between).
 * The baseline, measured in the same run: a process that only wakes up at the same rhythm.
 * Each (variant, rhythm) runs in a fresh process, alternating, several rounds; medians reported.
 *
 *   pnpm bench:overhead [-- --rounds 3 --spaced 100 --write]
 */
import { spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"

const Variants = ["wake", "sdk", "sdk-pool"] as const
type Variant = (typeof Variants)[number]
const Labels: Record<Variant, string> = {
  wake: "baseline: wake up only",
  sdk: "SDK executeCode, cold path (fake runtime)",
  "sdk-pool": "SDK executeCode, warm pool (fake runtime)"
}

interface ChildResult {
  readonly cpuMsPerExecution: number
  readonly executions: number
}

const child = async (variant: Variant, gapMs: number, n: number): Promise<ChildResult> => {
  const pause = () => (gapMs > 0 ? new Promise<void>((r) => setTimeout(r, gapMs)) : Promise.resolve())
  let once: () => Promise<void> = async () => {}
  let dispose = async () => {}
  if (variant !== "wake") {
    const { Layer, ManagedRuntime } = await import("effect")
    const { Executor } = await import("@hermes-sandbox/core")
    const { FakeRuntime } = await import("@hermes-sandbox/core/testing")
    const { MemoryJournal } = await import("@hermes-sandbox/events")
    // The facade's defaults: the bounded in-memory journal (10,000 events), removal off the caller's path.
    const runtime = ManagedRuntime.make(
      Executor.layer({
        sweepOnStart: false,
        ...(variant === "sdk-pool" ? { warmPool: { size: 4, languages: ["python"] } } : {})
      }).pipe(Layer.provideMerge(FakeRuntime.layer()), Layer.provideMerge(MemoryJournal.layer({ maxEvents: 10_000 })))
    )
    const executor = await runtime.runPromise(Executor.Executor)
    once = async () => {
      const r = await runtime.runPromise(executor.executeCode({ language: "python", code: "print(1)" }))
      if (r.exitCode !== 0) throw new Error(`unexpected exit ${r.exitCode}`)
    }
    dispose = () => runtime.dispose()
  }
  // Warm up (JIT, pool filled), then measure.
  for (let i = 0; i < 300; i++) await once()
  await pause()
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) {
    await pause()
    await once()
  }
  const used = process.cpuUsage(before)
  await dispose()
  return { cpuMsPerExecution: (used.user + used.system) / 1000 / n, executions: n }
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const runChild = (variant: Variant, gapMs: number, n: number) =>
  new Promise<ChildResult>((resolve, reject) => {
    const p = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), "--child", variant, String(gapMs), String(n)],
      {
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    let out = ""
    p.stdout.setEncoding("utf8").on("data", (d: string) => (out += d))
    p.on("error", reject)
    p.on("close", (code) =>
      code === 0
        ? resolve(JSON.parse(out) as ChildResult)
        : reject(new Error(`${variant} (gap ${gapMs} ms) exited ${code}`))
    )
  })

const main = async () => {
  const argv = process.argv.slice(2)
  if (argv[0] === "--child") {
    process.stdout.write(JSON.stringify(await child(argv[1] as Variant, Number(argv[2]), Number(argv[3]))))
    return
  }
  if (argv[0] === "--") argv.shift()
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: "string", default: "3" },
      spaced: { type: "string", default: "100" },
      hot: { type: "string", default: "3000" },
      count: { type: "string", default: "100" },
      write: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" }
    }
  })
  if (values.help) {
    process.stdout.write(
      "usage: pnpm bench:overhead -- [--rounds 3] [--spaced 100 (ms between executions)] [--hot 3000] [--count 100] [--write]\n"
    )
    return
  }
  const rounds = Number(values.rounds)
  const rhythms = [
    { name: "back to back", gapMs: 0, n: Number(values.hot) },
    { name: `one every ${values.spaced} ms`, gapMs: Number(values.spaced), n: Number(values.count) }
  ]
  const results = new Map<string, Array<number>>()
  const started = Date.now()
  for (let round = 1; round <= rounds; round++) {
    for (const rhythm of rhythms) {
      // Alternate the order between rounds so drift on the machine hits every variant alike.
      const order = round % 2 ? [...Variants] : [...Variants].reverse()
      for (const variant of order) {
        process.stderr.write(`\rround ${round}/${rounds}: ${Labels[variant]}, ${rhythm.name}...\x1b[K`)
        const r = await runChild(variant, rhythm.gapMs, rhythm.n)
        const key = `${variant}|${rhythm.gapMs}`
        results.set(key, [...(results.get(key) ?? []), r.cpuMsPerExecution])
      }
    }
  }
  process.stderr.write("\n")
  const cell = (variant: Variant, gapMs: number) => median(results.get(`${variant}|${gapMs}`) ?? [NaN])
  const lines: Array<string> = []
  const p = (s = "") => lines.push(s)
  p(
    `Run ${new Date(started).toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s, Node ${process.version}. ` +
      `Command: \`pnpm bench:overhead${rounds === 3 && values.spaced === "100" ? "" : ` -- --rounds ${rounds} --spaced ${values.spaced}`}\`. ` +
      `CPU = the process's user + system time (GC helper threads included) per execution, median of ${rounds} fresh processes.`
  )
  p()
  p(
    `| variant | ${rhythms.map((r) => `${r.name}: CPU per execution`).join(" | ")} | ${rhythms.map((r) => `${r.name}: above the baseline`).join(" | ")} |`
  )
  p(`|---|${rhythms.map(() => "---:").join("|")}|${rhythms.map(() => "---:").join("|")}|`)
  for (const v of Variants) {
    const own = rhythms.map((r) => `${cell(v, r.gapMs).toFixed(2)} ms`)
    const net = rhythms.map((r) => (v === "wake" ? "—" : `${(cell(v, r.gapMs) - cell("wake", r.gapMs)).toFixed(2)} ms`))
    p(`| ${Labels[v]} | ${own.join(" | ")} | ${net.join(" | ")} |`)
  }
  const table = lines.join("\n")
  process.stdout.write(`${table}\n`)
  if (values.write) {
    const path = fileURLToPath(new URL("../BENCHMARKS.md", import.meta.url))
    const START = "<!-- bench:overhead:start -->"
    const END = "<!-- bench:overhead:end -->"
    const text = readFileSync(path, "utf8")
    if (!text.includes(START) || !text.includes(END)) throw new Error(`BENCHMARKS.md has no ${START} … ${END} section`)
    writeFileSync(
      path,
      `${text.slice(0, text.indexOf(START) + START.length)}\n${table}\n${text.slice(text.indexOf(END))}`
    )
    process.stderr.write("BENCHMARKS.md updated\n")
  }
}

await main()
