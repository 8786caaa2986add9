/**
 * Issue 16's measurement: `execute_code` of `print(1)` through the MCP server over stdio, side by
 * side in ONE run with the SDK's cold path and `docker run --rm`. Goal: the MCP layer adds at most
 * 10 ms at p50 over the SDK's cold path.
 *
 *   npx tsx bench/mcp.ts [--iterations 60] [--warmup 5] [--pings 200] [--seed 16]
 *                        [--variants docker-run,sdk-cold,mcp-stdio,mcp-memory]
 *
 * Variants (same image, hermes-sandbox/python:latest; each round visits every variant once, in a
 * shuffled order, so drift on the machine hits every variant alike; warm-up rounds first):
 * - docker-run: `docker run --rm --network none IMAGE python3 -c 'print(1)'`, the whole CLI
 *   process (it returns once the container is removed). The familiar baseline; ratios are to it.
 * - sdk-cold: `createExecutor({ journal: "memory" })` once, `executeCode` per iteration, timed
 *   around the call, in its own process.
 * - mcp-stdio: the built `hermes-sandbox mcp --no-journal` (plain Node on packages/cli/dist, as
 *   clients start it; `pnpm build` first), one long-lived server, the SDK's Client over
 *   StdioClientTransport in this process; `tools/call execute_code` timed on the client side,
 *   from the request to the response.
 * - mcp-memory: the same server in-process (McpSandbox + createServer) and the SDK's Client over
 *   its InMemoryTransport, in its own process: the protocol and the result's shaping without the
 *   process boundary and the stdio framing.
 * The SDK and the in-process MCP variant run on the compiled packages (the `hermes-sandbox-dist`
 * condition), as the stdio server does, so all three execute the same code.
 *
 * Same thing compared: `executeCode` resolves once the result is in hand and removes the container
 * in the background (awaitRemoval off, the default), and execute_code answers at the same point
 * (it awaits that same call). Between two measured calls the runner waits for the previous
 * container's `destroy` on the engine's event stream, so no background removal overlaps the next
 * measurement. Journal: in memory (the last 10,000 events) for all three (`--no-journal` is the
 * server's "memory"). Both MCP clients list the tools first, as clients do, so the client
 * validates each structuredContent against the tool's outputSchema.
 *
 * After the rounds: `ping` round trips over each MCP transport (the protocol alone, no container).
 * Prints a Markdown report on standard output, progress on standard error.
 */
import { type ChildProcess, fork, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import { cpus, loadavg, totalmem } from "node:os"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import Docker from "dockerode"
import { BenchLabel } from "./benchLabel.js"
import { percentile, rng, shuffle, summarize } from "./stats.js"

const IMAGE = "hermes-sandbox/python:latest"
const CODE = "print(1)"
const EXPECTED = "1\n"
/** execute_code's default timeout_s (McpSandbox's resolveLimits); the SDK call gets the same. */
const TIMEOUT_MS = 50_000

const VariantNames = ["docker-run", "sdk-cold", "mcp-stdio", "mcp-memory"] as const
type VariantName = (typeof VariantNames)[number]
const Labels: Record<VariantName, string> = {
  "docker-run": "`docker run --rm` (CLI, whole process)",
  "sdk-cold": "SDK `executeCode`, cold path",
  "mcp-stdio": "MCP `execute_code` over stdio (built server)",
  "mcp-memory": "MCP `execute_code`, in-process (InMemoryTransport)"
}

/** One measured call: its latency, and the container to wait for before the next. */
interface Call {
  readonly ms: number
  readonly ok: boolean
  readonly detail?: string
  readonly containerName?: string
}

interface Variant {
  readonly call: () => Promise<Call>
  /** ping round trips (MCP variants only), ms each. */
  readonly pings?: (n: number) => Promise<Array<number>>
  /** CPU seconds of the process doing the work (SDK / MCP server), cumulative. */
  readonly cpuSec?: () => Promise<number>
  readonly info?: string
  readonly close: () => Promise<void>
}

// ---------------------------------------------------------------------------------------------
// Child side: the in-process variants, each in its own process, commanded over IPC.

type ToChild =
  | { readonly type: "call" }
  | { readonly type: "pings"; readonly n: number }
  | { readonly type: "cpu" }
  | { readonly type: "close" }
type FromChild =
  | { readonly type: "ready"; readonly info: string }
  | { readonly type: "failed"; readonly reason: string }
  | { readonly type: "call"; readonly call: Call }
  | { readonly type: "pings"; readonly ms: Array<number> }
  | { readonly type: "cpu"; readonly sec: number }
  | { readonly type: "closed" }

interface InProcess {
  readonly info: string
  readonly call: () => Promise<Call>
  readonly ping?: () => Promise<void>
  readonly close: () => Promise<void>
}

type ToolResult = Record<string, unknown>

/** A tools/call result's verdict, and its container. */
const checkTool = (ms: number, r: ToolResult): Call => {
  const s = (r.structuredContent ?? {}) as { status?: string; stdout?: string; container_name?: string }
  return s.status === "success" && s.stdout === EXPECTED && r.isError !== true
    ? { ms, ok: true, ...(s.container_name === undefined ? {} : { containerName: s.container_name }) }
    : {
        ms,
        ok: false,
        detail: JSON.stringify(r).slice(0, 300),
        ...(s.container_name === undefined ? {} : { containerName: s.container_name })
      }
}

const executeCodeArgs = { name: "execute_code", arguments: { code: CODE, language: "python" } }

const openInProcess = async (variant: "sdk-cold" | "mcp-memory"): Promise<InProcess> => {
  if (variant === "sdk-cold") {
    const { createExecutor } = await import("@hermes-sandbox/docker")
    // The startup sweep is off the measured path and could remove other engineers' orphans on a shared engine.
    const executor = await createExecutor({ journal: "memory", sweepOnStart: false })
    return {
      info: `executor ${executor.executorId}, journal memory`,
      call: async () => {
        const s = performance.now()
        const r = await executor.executeCode({ language: "python", code: CODE, timeoutMs: TIMEOUT_MS })
        const ms = performance.now() - s
        return r.exitCode === 0 && r.stdout === EXPECTED
          ? { ms, ok: true, containerName: r.containerName }
          : {
              ms,
              ok: false,
              detail: `exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}`,
              containerName: r.containerName
            }
      },
      close: () => executor.close()
    }
  }
  const { clientSide, serverSide } = await import("../test/support/mcpSdk.js")
  const [{ Client, InMemoryTransport }, { McpSandbox, createServer }] = await Promise.all([clientSide(), serverSide()])
  const sandbox = await McpSandbox.open({ journal: "memory", sweepOnStart: false })
  const session = sandbox.openSession({ id: randomUUID(), transport: "stdio" })
  const server = createServer(session)
  const [clientEnd, serverEnd] = InMemoryTransport.createLinkedPair()
  await server.connect(serverEnd)
  const client = new Client({ name: "bench-mcp", version: "1.0.0" })
  await client.connect(clientEnd)
  await client.listTools()
  return {
    info: `executor ${sandbox.executorId}, journal memory`,
    call: async () => {
      const s = performance.now()
      const r = await client.callTool(executeCodeArgs)
      return checkTool(performance.now() - s, r)
    },
    ping: async () => void (await client.ping()),
    close: async () => {
      await client.close()
      await session.close("bench done")
      await sandbox.close()
    }
  }
}

const child = (variant: "sdk-cold" | "mcp-memory") => {
  const send = (m: FromChild) => process.send?.(m)
  let opened: InProcess | undefined
  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= (opened?.close() ?? Promise.resolve()).catch(
      (e) => void process.stderr.write(`${variant}: close failed: ${String(e)}\n`)
    ))
  process.on("message", async (raw) => {
    const m = raw as ToChild
    try {
      switch (m.type) {
        case "call":
          send({ type: "call", call: await opened!.call() })
          break
        case "pings": {
          const ms: Array<number> = []
          for (let i = 0; i < m.n; i++) {
            const s = performance.now()
            await opened!.ping!()
            ms.push(performance.now() - s)
          }
          send({ type: "pings", ms })
          break
        }
        case "cpu": {
          const u = process.cpuUsage()
          send({ type: "cpu", sec: (u.user + u.system) / 1e6 })
          break
        }
        case "close":
          await close()
          send({ type: "closed" })
          process.disconnect?.()
          break
      }
    } catch (e) {
      send({ type: "failed", reason: e instanceof Error ? (e.stack ?? e.message) : String(e) })
    }
  })
  // Ctrl-C reaches the whole process group: the parent orchestrates the cleanup.
  process.on("SIGINT", () => {})
  process.on("disconnect", () => void close().then(() => process.exit(0)))
  openInProcess(variant).then(
    (o) => {
      opened = o
      send({ type: "ready", info: o.info })
    },
    (e) => send({ type: "failed", reason: e instanceof Error ? (e.stack ?? e.message) : String(e) })
  )
}

// ---------------------------------------------------------------------------------------------
// Parent side.

const root = fileURLToPath(new URL("..", import.meta.url))

/** An in-process variant's child: the compiled packages (as the built server), tsx for this file. */
const openChild = (variant: "sdk-cold" | "mcp-memory"): Promise<Variant> =>
  new Promise((resolve, reject) => {
    const p: ChildProcess = fork(fileURLToPath(import.meta.url), ["--child", variant], {
      cwd: root,
      execArgv: ["--conditions=hermes-sandbox-dist", "--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    let pending: ((m: FromChild) => void) | undefined
    const ask = <T extends FromChild["type"]>(m: ToChild, answer: T) =>
      new Promise<Extract<FromChild, { type: T }>>((ok, fail) => {
        pending = (r) =>
          r.type === answer
            ? ok(r as Extract<FromChild, { type: T }>)
            : fail(new Error(`${variant}: ${r.type === "failed" ? r.reason : r.type}`))
        p.send(m)
      })
    p.on("message", (raw) => {
      const m = raw as FromChild
      if (m.type === "ready") {
        resolve({
          info: m.info,
          call: async () => (await ask({ type: "call" }, "call")).call,
          ...(variant === "mcp-memory"
            ? { pings: async (n: number) => (await ask({ type: "pings", n }, "pings")).ms }
            : {}),
          cpuSec: async () => (await ask({ type: "cpu" }, "cpu")).sec,
          close: async () => {
            if (p.exitCode !== null || !p.connected) return
            const exited = new Promise<void>((r) => p.once("exit", () => r()))
            await ask({ type: "close" }, "closed").catch(() => {})
            await exited
          }
        })
      } else if (m.type === "failed" && pending === undefined) reject(new Error(`${variant}: ${m.reason}`))
      else {
        const f = pending
        pending = undefined
        f?.(m)
      }
    })
    p.once("exit", (code) => {
      reject(new Error(`${variant}: the child exited (${code}) before it was ready`))
      pending?.({ type: "failed", reason: `the child exited (${code})` })
    })
  })

const docker = new Docker()
const runId = randomUUID().slice(0, 8)
let counter = 0

/** `docker run --rm`, the whole process; it returns once the container is removed. */
const dockerRun = (): Variant => ({
  call: () =>
    new Promise((resolve, reject) => {
      const name = `hermes-bench-mcp-${runId}-${++counter}`
      const s = performance.now()
      const p = spawn(
        "docker",
        [
          "run",
          "--rm",
          "--network",
          "none",
          "--name",
          name,
          "--label",
          `${BenchLabel.run}=${runId}`,
          IMAGE,
          "python3",
          "-c",
          CODE
        ],
        {
          stdio: ["ignore", "pipe", "pipe"]
        }
      )
      let stdout = ""
      let stderr = ""
      p.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
      p.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
      p.on("error", reject)
      p.on("close", (code) => {
        const ms = performance.now() - s
        resolve(
          code === 0 && stdout === EXPECTED
            ? { ms, ok: true }
            : {
                ms,
                ok: false,
                detail: `exit ${code}, stdout ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr.slice(0, 200))}`
              }
        )
      })
    }),
  close: async () => {}
})

/** CPU seconds (utime + stime) of a process, from /proc. */
const procCpuSec = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8")
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
  return (Number(f[11]) + Number(f[12])) / 100
}

/** The built server over stdio, the SDK's Client here. */
const openStdio = async (): Promise<Variant> => {
  const { mcpServerCommand } = await import("../test/support/mcp.js")
  const { clientSide } = await import("../test/support/mcpSdk.js")
  const { Client, StdioClientTransport } = await clientSide()
  const { command, args } = mcpServerCommand(["--no-journal"])
  const transport = new StdioClientTransport({
    command,
    args,
    env: process.env as Record<string, string>,
    stderr: "pipe",
    cwd: root
  })
  let stderr = ""
  transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()))
  const client = new Client({ name: "bench-mcp", version: "1.0.0" })
  await client.connect(transport)
  await client.listTools()
  const pid = transport.pid
  return {
    info: `\`${[command === process.execPath ? "node" : command, ...args].join(" ")}\` (pid ${pid}); ${stderr.trim().split("\n").pop() ?? ""}`,
    call: async () => {
      const s = performance.now()
      const r = await client.callTool(executeCodeArgs)
      return checkTool(performance.now() - s, r)
    },
    pings: async (n) => {
      const ms: Array<number> = []
      for (let i = 0; i < n; i++) {
        const s = performance.now()
        await client.ping()
        ms.push(performance.now() - s)
      }
      return ms
    },
    ...(pid === null ? {} : { cpuSec: async () => procCpuSec(pid) }),
    // Closing stdin ends the server's session (its sandboxes removed) and the server.
    close: () => client.close()
  }
}

/** Names of containers the engine destroyed, from its event stream: what "the container is gone" waits on. */
class Destroyed {
  private readonly seen = new Set<string>()
  private readonly waiters = new Map<string, () => void>()
  private stream: NodeJS.ReadableStream | undefined

  async start() {
    this.stream = (await docker.getEvents({
      filters: { type: ["container"], event: ["destroy"] }
    })) as NodeJS.ReadableStream
    let buffer = ""
    this.stream.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      let nl = buffer.indexOf("\n")
      while (nl >= 0) {
        const line = buffer.slice(0, nl).trim()
        buffer = buffer.slice(nl + 1)
        nl = buffer.indexOf("\n")
        if (line === "") continue
        const name = (JSON.parse(line) as { Actor?: { Attributes?: { name?: string } } }).Actor?.Attributes?.name
        if (name === undefined) continue
        const waiter = this.waiters.get(name)
        if (waiter !== undefined) {
          this.waiters.delete(name)
          waiter()
        } else this.seen.add(name)
      }
    })
  }

  /** Resolves once `name` is destroyed (or already was); false if it still exists after timeoutMs. */
  async gone(name: string, timeoutMs = 30_000): Promise<boolean> {
    if (this.seen.delete(name)) return true
    const destroyed = new Promise<boolean>((resolve) => this.waiters.set(name, () => resolve(true)))
    const late = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref())
    if (await Promise.race([destroyed, late])) return true
    this.waiters.delete(name)
    return docker
      .getContainer(name)
      .inspect()
      .then(
        () => false,
        () => true
      )
  }

  stop() {
    ;(this.stream as unknown as { destroy?: () => void } | undefined)?.destroy?.()
  }
}

const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2))
const signed = (ms: number) => `${ms >= 0 ? "+" : "−"}${fmt(Math.abs(ms))} ms`

const main = async () => {
  const { values } = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== "--"),
    options: {
      iterations: { type: "string", default: "60" },
      warmup: { type: "string", default: "5" },
      pings: { type: "string", default: "200" },
      seed: { type: "string", default: "16" },
      variants: { type: "string", default: VariantNames.join(",") },
      help: { type: "boolean", short: "h" }
    }
  })
  if (values.help) {
    process.stdout.write(
      `usage: npx tsx bench/mcp.ts [--iterations 60] [--warmup 5] [--pings 200] [--seed 16] [--variants ${VariantNames.join(",")}]\n`
    )
    return
  }
  const iterations = Number(values.iterations)
  const warmup = Number(values.warmup)
  const pingCount = Number(values.pings)
  const chosen = values.variants.split(",").map((v) => v.trim()) as Array<VariantName>
  for (const v of chosen)
    if (!VariantNames.includes(v)) throw new Error(`unknown variant ${v}; one of ${VariantNames.join(", ")}`)
  const log = (s: string) => process.stderr.write(`${s}\n`)
  const status = (s: string) => process.stderr.write(`\r${s}\x1b[K`)

  await docker
    .getImage(IMAGE)
    .inspect()
    .catch(() => {
      throw new Error(`${IMAGE} is missing: build the images first (hermes-sandbox doctor)`)
    })
  const version = await docker.version()
  const info = (await docker.info()) as Record<string, unknown>
  const loadBefore = loadavg()
  const started = Date.now()
  log(
    `bench/mcp ${runId}: ${chosen.join(", ")}; ${iterations} rounds after ${warmup} warm-up; load ${loadBefore.map((l) => l.toFixed(2)).join(" ")}`
  )

  const destroyed = new Destroyed()
  await destroyed.start()
  const variants = new Map<VariantName, Variant>()
  let stopping = false
  process.on("SIGINT", () => {
    stopping = true
    log("\nstopping (Ctrl-C): closing every variant...")
  })
  try {
    for (const name of chosen) {
      status(`starting ${name}...`)
      variants.set(
        name,
        name === "docker-run" ? dockerRun() : name === "mcp-stdio" ? await openStdio() : await openChild(name)
      )
    }
    status("")
    for (const [name, v] of variants) if (v.info !== undefined) log(`${name}: ${v.info}`)

    const times = new Map<VariantName, Array<number>>(chosen.map((n) => [n, []]))
    /** Per round, so differences can be paired round by round. */
    const rounds: Array<Partial<Record<VariantName, number>>> = []
    const failures = new Map<VariantName, Array<string>>(chosen.map((n) => [n, []]))
    const cpuAtStart = new Map<VariantName, number>()
    const random = rng(Number(values.seed))
    for (let i = 0; i < warmup + iterations && !stopping; i++) {
      const warm = i < warmup
      if (i === warmup) for (const [name, v] of variants) if (v.cpuSec) cpuAtStart.set(name, await v.cpuSec())
      const round: Partial<Record<VariantName, number>> = {}
      for (const name of shuffle(chosen, random)) {
        if (stopping) break
        status(`${warm ? `warm-up ${i + 1}/${warmup}` : `round ${i - warmup + 1}/${iterations}`}: ${name}`)
        const r = await variants.get(name)!.call()
        // Let background removal finish before anything else is measured.
        if (r.containerName !== undefined && !(await destroyed.gone(r.containerName)))
          log(`\n${name}: ${r.containerName} still exists after 30 s`)
        if (warm) {
          if (!r.ok) log(`\n${name} warm-up failed: ${r.detail}`)
          continue
        }
        if (r.ok) {
          times.get(name)!.push(r.ms)
          round[name] = r.ms
        } else failures.get(name)!.push(r.detail ?? "wrong result")
      }
      if (!warm) rounds.push(round)
    }
    status("")
    const cpuPerCall = new Map<VariantName, number>()
    for (const [name, v] of variants) {
      const start = cpuAtStart.get(name)
      const n = times.get(name)!.length + failures.get(name)!.length
      if (v.cpuSec && start !== undefined && n > 0) cpuPerCall.set(name, (((await v.cpuSec()) - start) * 1000) / n)
    }
    const pings = new Map<VariantName, Array<number>>()
    if (!stopping && pingCount > 0) {
      for (const [name, v] of variants) {
        if (v.pings === undefined) continue
        status(`${name}: ${pingCount} pings...`)
        await v.pings(20)
        pings.set(name, await v.pings(pingCount))
      }
      status("")
    }
    const loadAfter = loadavg()

    // ---- report
    const out: Array<string> = []
    const p = (s = "") => out.push(s)
    const base = times.get("docker-run")
    p(
      `Run \`${runId}\`, ${new Date(started).toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s. Command: \`npx tsx bench/mcp.ts${process.argv
        .slice(2)
        .filter((a) => a !== "--")
        .map((a) => ` ${a}`)
        .join("")}\`.`
    )
    p()
    p(
      `Machine: ${cpus().length} cores (${cpus()[0]?.model.trim() ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Docker Engine ${version.Version} (${String(info.DefaultRuntime)}, cgroup v${String(info.CgroupVersion ?? "1")}) on the same cores; Node ${process.version}. ` +
        `Load average (1/5/15 min) before: ${loadBefore.map((l) => l.toFixed(2)).join(" / ")}, after: ${loadAfter.map((l) => l.toFixed(2)).join(" / ")}.`
    )
    p()
    p(
      `Latency of one \`print(1)\`, ${iterations} rounds (each round runs every variant once, shuffled) after ${warmup} warm-up rounds; ratios to \`docker run --rm\`.`
    )
    p()
    p("| variant | p50 | p95 | min | max | mean | CPU per call | failed |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (const name of chosen) {
      const t = times.get(name)!
      const s = summarize(t)
      const ratio = (x: number, q: number) =>
        base === undefined || base.length === 0 || name === "docker-run"
          ? ""
          : ` (${(x / percentile(base, q)).toFixed(2)}×)`
      const cpu = cpuPerCall.get(name)
      p(
        `| ${Labels[name]} | ${fmt(s.p50)} ms${ratio(s.p50, 50)} | ${fmt(s.p95)} ms${ratio(s.p95, 95)} | ${fmt(s.min)} ms | ${fmt(s.max)} ms | ${fmt(s.mean)} ms | ${cpu === undefined ? "—" : `${fmt(cpu)} ms`} | ${failures.get(name)!.length}/${t.length + failures.get(name)!.length} |`
      )
    }
    p()
    p(
      "CPU per call: the process doing the work (the SDK's process; the MCP server's process; the in-process MCP variant's client and server together), user + system over the measured rounds, per call."
    )
    const sdk = times.get("sdk-cold")
    const verdicts: Array<string> = []
    if (sdk !== undefined && sdk.length > 0) {
      p()
      p("MCP minus the SDK's cold path:")
      p()
      p("| variant | Δ p50 | Δ p95 | ratio p50 | ratio p95 | median of per-round Δ |")
      p("|---|---:|---:|---:|---:|---:|")
      for (const name of ["mcp-stdio", "mcp-memory"] as const) {
        const t = times.get(name)
        if (t === undefined || t.length === 0) continue
        const d50 = percentile(t, 50) - percentile(sdk, 50)
        const d95 = percentile(t, 95) - percentile(sdk, 95)
        const paired = rounds.flatMap((r) =>
          r[name] !== undefined && r["sdk-cold"] !== undefined ? [r[name]! - r["sdk-cold"]!] : []
        )
        p(
          `| ${Labels[name]} | ${signed(d50)} | ${signed(d95)} | ${(percentile(t, 50) / percentile(sdk, 50)).toFixed(3)}× | ${(percentile(t, 95) / percentile(sdk, 95)).toFixed(3)}× | ${signed(percentile(paired, 50))} (${paired.length} rounds) |`
        )
        if (name === "mcp-stdio")
          verdicts.push(
            `MCP over stdio adds ${signed(d50)} at p50 over the SDK's cold path (goal ≤ +10 ms: **${d50 <= 10 ? "met" : "not met"}**).`
          )
      }
    }
    if (pings.size > 0) {
      p()
      p(
        `\`ping\` round trip (the protocol alone, no container; ${pingCount} after 20 unmeasured): ` +
          [...pings]
            .map(
              ([name, ms]) =>
                `${name === "mcp-stdio" ? "stdio" : "in-memory"} p50 ${fmt(percentile(ms, 50))} ms, p95 ${fmt(percentile(ms, 95))} ms`
            )
            .join("; ") +
          "."
      )
    }
    for (const v of verdicts) {
      p()
      p(v)
    }
    const failed = [...failures].filter(([, f]) => f.length > 0)
    for (const [name, f] of failed) p(`\n${name}: ${f.length} failed, e.g. ${f[0]}`)
    process.stdout.write(`${out.join("\n")}\n`)
  } finally {
    for (const [name, v] of variants) await v.close().catch((e) => log(`${name}: close failed: ${String(e)}`))
    destroyed.stop()
    // Whatever docker run left (a run cut short).
    const left = await docker
      .listContainers({ all: true, filters: { label: [`${BenchLabel.run}=${runId}`] } })
      .catch(() => [])
    await Promise.all(
      left.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {})
      )
    )
  }
}

const argv = process.argv.slice(2)
if (argv[0] === "--child") child(argv[1] as "sdk-cold" | "mcp-memory")
else
  main().then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`\nbench/mcp: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
      process.exit(1)
    }
  )
