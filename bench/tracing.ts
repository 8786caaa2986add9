/**
 * `pnpm bench:tracing`: what metrics and traces cost the client per execution (issue 31), without an
 * engine: `executeCode` on the in-memory FakeRuntime through a ManagedRuntime (the Promise facade's
 * path, as bench/overhead.ts), in four variants measured in the same run, alternating, each in a
 * fresh process, medians of the rounds:
 *
 * 1. baseline: no metrics, no traces (the executor given a Metrics service that does nothing);
 * 2. metrics only: the executor as shipped without OTEL_EXPORTER_OTLP_ENDPOINT (its Prometheus registry);
 * 3. metrics + recordCode: the audit trail on (each run's code and output heads journaled);
 * 4. metrics + traces: OTEL_EXPORTER_OTLP_ENDPOINT set, spans exported over OTLP/HTTP (JSON) to a
 *    loopback receiver in this (parent) process, whose CPU is not charged to the child.
 *
 *   pnpm bench:tracing [-- --rounds 3 --count 2000]
 */
import { spawn } from "node:child_process"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"

const Variants = ["baseline", "metrics", "recorded", "traced"] as const
type Variant = (typeof Variants)[number]
const Labels: Record<Variant, string> = {
  baseline: "baseline: no metrics, no traces",
  metrics: "metrics only (as shipped, no OTLP endpoint)",
  recorded: "metrics + recordCode (the audit trail: CodeRecorded and OutputRecorded per run)",
  traced: "metrics + traces to a loopback OTLP/HTTP receiver"
}

const child = async (variant: Variant, n: number): Promise<number> => {
  const { Effect, Layer, ManagedRuntime } = await import("effect")
  const { Executor, Metrics, Tracing } = await import("@hermes-sandbox/core")
  const { FakeRuntime } = await import("@hermes-sandbox/core/testing")
  const { MemoryJournal } = await import("@hermes-sandbox/events")
  const none = () => {}
  const noMetrics = Layer.succeed(Metrics.Metrics, {
    text: Effect.succeed(""),
    contentType: Metrics.CONTENT_TYPE,
    registry: undefined,
    observe: none,
    appended: none,
    slotTaken: none,
    collectBegan: none,
    leakedRemoved: none,
    addLiveState: () => none,
    addPhaseObserver: () => none
  } as unknown as import("@hermes-sandbox/core/Metrics").SandboxMetrics)
  const executor = Executor.layer({
    sweepOnStart: false,
    ...(variant === "recorded" ? { recordCode: true } : {})
  }).pipe(Layer.provideMerge(FakeRuntime.layer()), Layer.provideMerge(MemoryJournal.layer({ maxEvents: 10_000 })))
  const runtime = ManagedRuntime.make(
    variant === "baseline"
      ? executor.pipe(Layer.provide(noMetrics))
      : executor.pipe(Layer.provideMerge(Tracing.layer()))
  )
  const ex = await runtime.runPromise(Executor.Executor)
  const once = async () => {
    const r = await runtime.runPromise(ex.executeCode({ language: "python", code: "print(1)" }))
    if (r.exitCode !== 0) throw new Error(`unexpected exit ${r.exitCode}`)
  }
  for (let i = 0; i < 300; i++) await once()
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) await once()
  const used = process.cpuUsage(before)
  await runtime.dispose()
  return (used.user + used.system) / 1000 / n
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const runChild = (variant: Variant, n: number, endpoint: string) =>
  new Promise<number>((resolve, reject) => {
    const env = { ...process.env }
    delete env.OTEL_EXPORTER_OTLP_ENDPOINT
    delete env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    if (variant === "traced") {
      env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint
      env.OTEL_SERVICE_NAME = "bench"
      // JSON bodies: the receiver counts the spans by their "spanId" keys.
      env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json"
    }
    const p = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), "--child", variant, String(n)],
      { stdio: ["ignore", "pipe", "inherit"], env }
    )
    let out = ""
    p.stdout.setEncoding("utf8").on("data", (d: string) => (out += d))
    p.on("error", reject)
    p.on("close", (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`${variant} exited ${code}`))))
  })

const main = async () => {
  const argv = process.argv.slice(2)
  if (argv[0] === "--child") {
    process.stdout.write(String(await child(argv[1] as Variant, Number(argv[2]))))
    return
  }
  if (argv[0] === "--") argv.shift()
  const { values } = parseArgs({
    args: argv,
    options: { rounds: { type: "string", default: "3" }, count: { type: "string", default: "2000" } }
  })
  const rounds = Number(values.rounds)
  const n = Number(values.count)
  // The receiver: counts the spans it is sent (the bodies are the exporter's OTLP JSON).
  let spans = 0
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      spans += (
        Buffer.concat(chunks)
          .toString("utf8")
          .match(/"spanId"/g) ?? []
      ).length
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const results = new Map<Variant, Array<number>>()
  const started = Date.now()
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 ? [...Variants] : [...Variants].reverse()
    for (const v of order) {
      process.stderr.write(`\rround ${round}/${rounds}: ${Labels[v]}...\x1b[K`)
      results.set(v, [...(results.get(v) ?? []), await runChild(v, n, endpoint)])
    }
  }
  process.stderr.write("\n")
  server.close()
  const base = median(results.get("baseline") ?? [Number.NaN])
  const lines = [
    `Run ${new Date(started).toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s, Node ${process.version}. Command: \`pnpm bench:tracing${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}\`. CPU = the process's user + system time per execution (back to back, ${n} executions after 300 unmeasured), median of ${rounds} fresh processes per variant, alternating. The receiver got ${spans} spans.`,
    "",
    "| variant | client CPU per execution | ÷ baseline | above the baseline |",
    "|---|---:|---:|---:|",
    ...Variants.map((v) => {
      const m = median(results.get(v) ?? [Number.NaN])
      return `| ${Labels[v]} | ${m.toFixed(3)} ms | ${(m / base).toFixed(2)}× | ${v === "baseline" ? "—" : `${(m - base).toFixed(3)} ms`} |`
    })
  ]
  process.stdout.write(`${lines.join("\n")}\n`)
}

await main()
