/**
 * pnpm bench:remote — a cold print(1) (a fresh container each run, no warm pool) over each way of
 * reaching an engine, on loopback, side by side in one run:
 *
 *   unix (shared)  the shared engine's socket, /var/run/docker.sock
 *   ssh            the same engine through a loopback sshd (docker system dial-stdio)
 *   unix (private) a private dockerd's socket (test/remote/harness.ts TlsEngine)
 *   tls            the same private dockerd over tcp+TLS with client certificates
 *
 * Same image and executor options for all; N rounds, each round one run per transport in a
 * shuffled order (so drift on the shared machine falls on all alike), after 2 warm-up runs each.
 * Prints a markdown table; BENCHMARKS.md records it with the date.
 *
 *   HERMES_BENCH_REMOTE_RUNS=40 pnpm bench:remote
 */
import { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "@hermes-sandbox/docker"
import { SshServer, TlsEngine } from "../test/remote/harness.js"

const N = Number(process.env.HERMES_BENCH_REMOTE_RUNS ?? 30)
const common: CreateExecutorOptions = { journal: "memory", timeoutMs: 30_000, maxConcurrency: 1, sweepOnStart: false }

const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const shuffle = <A>(xs: Array<A>): Array<A> => {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}

const tls = await TlsEngine.create()
const ssh = await SshServer.create()
const executors: Array<{ name: string; executor: SandboxExecutor; times: Array<number> }> = []
try {
  await tls.start()
  tls.loadImages()
  await ssh.start()
  const variants: Array<[string, CreateExecutorOptions]> = [
    ["unix (shared engine)", { socketPath: "/var/run/docker.sock" }],
    ["ssh (shared engine, loopback sshd)", ssh.options],
    ["unix (private engine)", { socketPath: tls.engine.socketPath }],
    ["tls (private engine, tcp 127.0.0.1, client certificates, verified)", tls.options]
  ]
  for (const [name, options] of variants)
    executors.push({ name, executor: await createExecutor({ ...common, ...options }), times: [] })
  const once = async (executor: SandboxExecutor) => {
    const t0 = performance.now()
    const r = await executor.executeCode({ language: "python", code: "print(1)" })
    if (r.stdout !== "1\n") throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
    return performance.now() - t0
  }
  for (const e of executors) for (let i = 0; i < 2; i++) await once(e.executor)
  for (let round = 0; round < N; round++) {
    for (const e of shuffle([...executors])) e.times.push(await once(e.executor))
  }
  console.log(
    `pnpm bench:remote, ${new Date().toISOString()}, ${N} rounds, cold python print(1), maxConcurrency 1, no warm pool\n`
  )
  console.log("| transport | runs | p50 (ms) | p90 (ms) | min | max |")
  console.log("| --- | --- | --- | --- | --- | --- |")
  for (const e of executors) {
    console.log(
      `| ${e.name} | ${e.times.length} | ${pct(e.times, 50).toFixed(0)} | ${pct(e.times, 90).toFixed(0)} | ${Math.min(...e.times).toFixed(0)} | ${Math.max(...e.times).toFixed(0)} |`
    )
  }
} finally {
  for (const e of executors) await e.executor.close().catch(() => undefined)
  await ssh.destroy()
  await tls.destroy()
}
