/**
 * `pnpm bench`: `print(1)` in a hardened Python sandbox through six paths,
 * alternating between them, with latency, throughput, CPU and memory figures.
 * See BENCHMARKS.md for the method; `pnpm bench -- --help` for the options.
 *
 * Layout: this process orchestrates and measures the engine (bench/engine.ts);
 * each variant runs in its own driver process (bench/driver.ts) so that its
 * client CPU and memory are its own.
 */
import { type ChildProcess, fork } from "node:child_process"
import type Docker from "dockerode"
import { randomUUID } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { cpus, loadavg, totalmem } from "node:os"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { DockerEngine } from "@hermes-sandbox/docker"
import { Label } from "@hermes-sandbox/core/Labels"
import { cgroupMethodUnavailable, type CpuWindow, EngineCpu, EngineEvents } from "./engine.js"
import {
  BenchLabel,
  benchSpec,
  cliFlags,
  createOptionsFor,
  EXPECTED_STDOUT,
  expectedRunnerStdout,
  hardeningDiff,
  PROGRAM,
  PYTHON_IMAGE,
  RUNNER_COMMAND,
  runnerPayload
} from "./hardening.js"
import type { BatchResult, ClientCpu, FromDriver, ToDriver } from "./protocol.js"
import {
  type BurstResult,
  type LevelResult,
  renderSection,
  type RunResults,
  type VariantResult,
  writeBenchmarksMd
} from "./report.js"
import { rng, shuffle, summarize } from "./stats.js"
import { latencyChart } from "./svg.js"
import { type VariantContext, VariantLabels, type VariantName, VariantNames } from "./variants.js"

const HELP = `usage: pnpm bench -- [options]

  --iterations N     sequential rounds in the latency phase (default 60; --quick 10)
  --warmup N         unrecorded rounds first (default 3; --quick 1)
  --count N          executions per concurrency level (default 48; --quick 16)
  --levels LIST      concurrency levels (default 1,4,8,16; --quick 1,8)
  --burst N          requests arriving at once; also the warm pool's size (default 8)
  --burst-rounds N   bursts per variant (default 3; --quick 1)
  --pool-size N      warm pool size (default: --burst)
  --variants LIST    subset of ${VariantNames.join(",")}
  --seed N           seed of the shuffled variant order (default: random)
  --cpu-method M     engine CPU accounting: cgroup (exact; root, cgroup v1 cpuacct) or poll
                     (samples /proc; misses short-lived processes). Default: cgroup when possible
  --cpu-poll-ms N    shim CPU sampling interval of the poll method (default 10)
  --quick            a short run; does not rewrite BENCHMARKS.md unless --write
  --write / --no-write   rewrite BENCHMARKS.md, bench/results/latency.svg and run.json (default: yes unless --quick)
  --json PATH        also write the run's results (run.json's form) to PATH (bench/client.ts reads them)
`

const argv = process.argv.slice(2)
if (argv[0] === "--") argv.shift()
const parse = () =>
  parseArgs({
    args: argv,
    strict: true,
    options: {
      iterations: { type: "string" },
      warmup: { type: "string" },
      count: { type: "string" },
      levels: { type: "string" },
      burst: { type: "string" },
      "burst-rounds": { type: "string" },
      "pool-size": { type: "string" },
      variants: { type: "string" },
      seed: { type: "string" },
      "cpu-poll-ms": { type: "string" },
      "cpu-method": { type: "string" },
      quick: { type: "boolean", default: false },
      write: { type: "boolean" },
      "no-write": { type: "boolean" },
      json: { type: "string" },
      help: { type: "boolean", short: "h" }
    }
  })
let opts: ReturnType<typeof parse>["values"]
try {
  opts = parse().values
} catch (e) {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n\n${HELP}`)
  process.exit(2)
}
if (opts.help) {
  process.stdout.write(HELP)
  process.exit(0)
}
const int = (v: string | undefined, fallback: number, name: string) => {
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer, got ${v}`)
  return n
}
const quick = opts.quick === true
const config = {
  iterations: int(opts.iterations, quick ? 10 : 60, "iterations"),
  warmup: int(opts.warmup, quick ? 1 : 3, "warmup"),
  count: int(opts.count, quick ? 16 : 48, "count"),
  levels: (opts.levels ?? (quick ? "1,8" : "1,4,8,16"))
    .split(",")
    .map((s) => int(s.trim(), 1, "levels"))
    .filter((n) => n > 0),
  burst: int(opts.burst, 8, "burst"),
  burstRounds: int(opts["burst-rounds"], quick ? 1 : 3, "burst-rounds"),
  poolSize: 0,
  seed: int(opts.seed, Math.floor(Math.random() * 2 ** 31), "seed"),
  cpuPollMs: int(opts["cpu-poll-ms"], 10, "cpu-poll-ms"),
  cpuMethod: ((m) => {
    if (m === undefined || m === "cgroup" || m === "poll") return m ?? "auto"
    throw new Error(`--cpu-method must be cgroup or poll, got ${m}`)
  })(opts["cpu-method"]),
  write: opts["no-write"] ? false : (opts.write ?? !quick)
}
config.poolSize = int(opts["pool-size"], config.burst, "pool-size")
const selected = (opts.variants?.split(",").map((s) => s.trim()) ?? [...VariantNames]) as Array<VariantName>
for (const v of selected)
  if (!VariantNames.includes(v)) throw new Error(`unknown variant ${v}; one of ${VariantNames.join(", ")}`)

const log = (s: string) => process.stderr.write(`${s}\n`)
const status = (s: string) => process.stderr.write(process.stderr.isTTY ? `\r\x1b[K${s}` : `${s}\n`)
const endStatus = () => process.stderr.isTTY && process.stderr.write("\n")

const runId = randomUUID().slice(0, 8)
const root = fileURLToPath(new URL("..", import.meta.url))
const { docker } = DockerEngine.resolveEndpoint()

/** Everything a driver needs, computed here so a driver loads only its own variant's libraries. */
const contextFor = (name: string, executorId: string, poolSize: number): VariantContext => {
  const labels = { [BenchLabel.run]: runId, [BenchLabel.variant]: name }
  const unnamed = (o: Docker.ContainerCreateOptions) => {
    const { name: _name, ...rest } = o
    return rest
  }
  const runnerCreateOptions = unnamed(createOptionsFor(benchSpec("-", labels)))
  return {
    runId,
    poolSize,
    executorId,
    image: PYTHON_IMAGE,
    program: PROGRAM,
    expectedStdout: EXPECTED_STDOUT,
    expectedRunnerStdout: expectedRunnerStdout(),
    runnerCommand: RUNNER_COMMAND,
    payload: runnerPayload().toString("base64"),
    runnerFlags: cliFlags(runnerCreateOptions),
    programFlags: cliFlags(unnamed(createOptionsFor(benchSpec("-", labels, ["python3", "-c", PROGRAM], false)))),
    sleeperFlags: cliFlags(unnamed(createOptionsFor(benchSpec("-", labels, ["sleep", "infinity"], false)))),
    runnerCreateOptions,
    runnerSpec: benchSpec("-", labels),
    programCreateOptions: unnamed(createOptionsFor(benchSpec("-", labels, ["python3", "-c", PROGRAM], false)))
  }
}

type WithoutId<M> = M extends unknown ? Omit<M, "id"> : never

/** One variant's process. */
class Driver {
  readonly child: ChildProcess
  readonly exited: Promise<void>
  readonly executorId = randomUUID()
  private nextId = 1
  private readonly pending = new Map<number, (m: FromDriver) => void>()
  private lifecycle: ((m: FromDriver) => void) | undefined
  alive = true

  constructor(readonly name: VariantName | "floor") {
    this.child = fork(fileURLToPath(new URL("./driver.ts", import.meta.url)), [], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      env: { ...process.env, TESTCONTAINERS_RYUK_DISABLED: "true" }
    })
    // A send racing the driver's exit (e.g. during Ctrl-C) is answered through `exited`, not thrown.
    this.child.on("error", () => {})
    this.child.on("message", (raw) => {
      const m = raw as FromDriver
      if ("id" in m) {
        this.pending.get(m.id)?.(m)
        this.pending.delete(m.id)
      } else this.lifecycle?.(m)
    })
    this.exited = new Promise((resolve) =>
      this.child.once("exit", (code, signal) => {
        this.alive = false
        const failure: FromDriver = { type: "failed", reason: `driver exited (${signal ?? code})` }
        for (const f of this.pending.values()) f(failure)
        this.pending.clear()
        this.lifecycle?.(failure)
        resolve()
      })
    )
  }

  private lifecycleMessage(m: ToDriver, timeoutMs: number): Promise<FromDriver> {
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => resolve({ type: "failed", reason: `no answer to ${m.type} within ${timeoutMs} ms` }),
        timeoutMs
      )
      this.lifecycle = (a) => {
        clearTimeout(timer)
        this.lifecycle = undefined
        resolve(a)
      }
      if (this.alive && this.child.connected) this.child.send(m)
    })
  }

  init(poolSize: number) {
    return this.lifecycleMessage(
      { type: "init", variant: this.name, ctx: contextFor(this.name, this.executorId, poolSize) },
      120_000
    )
  }

  close() {
    return this.alive
      ? this.lifecycleMessage({ type: "close" }, 60_000)
      : Promise.resolve<FromDriver>({ type: "closed" })
  }

  private request<T extends FromDriver["type"]>(
    m: WithoutId<Extract<ToDriver, { id: number }>>,
    type: T
  ): Promise<Extract<FromDriver, { type: T }>> {
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      if (!this.alive || !this.child.connected || cleaning !== undefined) {
        reject(new Error(`${this.name}: the driver is gone`))
        return
      }
      this.pending.set(id, (a) =>
        a.type === type
          ? resolve(a as Extract<FromDriver, { type: T }>)
          : reject(new Error(`${this.name}: ${"reason" in a ? a.reason : a.type}`))
      )
      this.child.send({ ...m, id } as ToDriver)
    })
  }

  batch(total: number, concurrency: number): Promise<BatchResult> {
    return this.request({ type: "batch", total, concurrency }, "batch").then((a) => a.result)
  }

  cpu(): Promise<{ cpu: ClientCpu; counters: Record<string, number> }> {
    return this.request({ type: "cpu" }, "cpu")
  }

  probe(): Promise<number | null> {
    return this.request({ type: "probe" }, "probe").then((a) => a.helperRssKb)
  }
}

const drivers = new Map<VariantName, Driver>()
let floor: Driver | undefined
let events: EngineEvents | undefined
let engineCpu: EngineCpu | undefined
let cleaning: Promise<number> | undefined

/** Close every driver (each removes what it created), then remove anything of this run that is left. */
const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.all(
      [...drivers.values(), ...(floor ? [floor] : [])].map(async (d) => {
        const a = await d.close()
        if (a.type !== "closed") {
          log(`${d.name}: ${"reason" in a ? a.reason : a.type}; stopping it`)
          d.child.kill("SIGTERM")
        }
        await Promise.race([d.exited, new Promise((r) => setTimeout(r, 30_000))])
      })
    )
    engineCpu?.stop()
    events?.stop()
    const mine = [
      `${BenchLabel.run}=${runId}`,
      ...[...drivers.values()].map((d) => `${Label.executor}=${d.executorId}`)
    ]
    let left = 0
    for (const label of mine) {
      const found = await docker.listContainers({ all: true, filters: { label: [label] } }).catch(() => [])
      for (const c of found) {
        left++
        await docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {})
      }
    }
    if (left > 0) log(`removed ${left} container(s) of this run that were left behind`)
    return left
  })())

let interrupted = false
let interruptedAt = 0
const onSignal = (signal: NodeJS.Signals) => {
  // tsx relays the terminal's SIGINT to this process, which also got it from the process group: one Ctrl-C, two signals.
  if (interrupted && performance.now() - interruptedAt < 2_000) return
  if (interrupted) {
    log("second signal: exiting without waiting for the cleanup")
    process.exit(130)
  }
  interrupted = true
  interruptedAt = performance.now()
  endStatus()
  log(`${signal}: stopping; removing everything this run created (Ctrl-C again to give up waiting)...`)
  void cleanup().finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
}
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)

/** Busy CPU time of the whole host (all cores), seconds: user+nice+system+irq+softirq+steal from /proc/stat. */
const hostBusySec = () => {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!) / 100
}
/** This process and every child it reaped (the drivers, their docker CLI processes), seconds. */
const selfTreeSec = () => {
  const s = readFileSync("/proc/self/stat", "utf8")
  const f = s
    .slice(s.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number)
  return (f[11]! + f[12]! + f[13]! + f[14]!) / 100
}

const main = async () => {
  const started = performance.now()
  const loadStart = loadavg()
  const busyStart = hostBusySec()
  const selfStart = selfTreeSec()
  const version = await docker.version()
  const info = (await docker.info()) as Record<string, unknown>
  const machine = {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    kernel: String(info.KernelVersion),
    os: String(info.OperatingSystem),
    engineVersion: version.Version,
    apiVersion: version.ApiVersion,
    storageDriver: String(info.Driver),
    cgroupVersion: String(info.CgroupVersion ?? "1"),
    runtime: String(info.DefaultRuntime),
    node: process.version
  }
  log(
    `hermes-sandbox bench ${runId}: ${selected.join(", ")}; ${machine.cores} cores, Docker ${machine.engineVersion}, load ${loadStart.map((l) => l.toFixed(2)).join(" ")}`
  )
  log(`config: ${JSON.stringify(config)}`)

  events = new EngineEvents(docker, runId)
  await events.start()
  if (config.cpuMethod === "cgroup" && cgroupMethodUnavailable() !== undefined)
    throw new Error(`--cpu-method cgroup: ${cgroupMethodUnavailable()}`)
  const engineContainers = new Set((await docker.listContainers({ all: true })).map((c) => c.Id))
  engineCpu = new EngineCpu(config.cpuPollMs, engineContainers, config.cpuMethod === "poll")
  engineCpu.start()
  log(`engine CPU: ${engineCpu.methodNote}`)
  const engineStart = engineCpu.snapshot()

  // The CLI flags must give the same container as the SDK's create options.
  const hardeningCheck = await (async () => {
    const cliName = `hermes-bench-${runId}-verify-cli`
    const apiName = `hermes-bench-${runId}-verify-api`
    const labels = { [BenchLabel.run]: runId, [BenchLabel.variant]: "verify" }
    const { spawnSync } = await import("node:child_process")
    const r = spawnSync(
      "docker",
      ["create", ...cliFlags(createOptionsFor(benchSpec(cliName, labels))), PYTHON_IMAGE, ...RUNNER_COMMAND],
      { encoding: "utf8" }
    )
    if (r.status !== 0) throw new Error(`docker create failed: ${r.stderr}`)
    const api = await docker.createContainer(createOptionsFor(benchSpec(apiName, labels)))
    try {
      return hardeningDiff(await docker.getContainer(cliName).inspect(), await api.inspect())
    } finally {
      await docker.getContainer(cliName).remove({ force: true })
      await api.remove({ force: true })
    }
  })()
  log(
    hardeningCheck.length === 0
      ? "hardening check: docker run flags and the SDK's create options give identical containers"
      : `hardening check: DIFFERENCES ${hardeningCheck.join("; ")}`
  )

  floor = new Driver("floor")
  if ((await floor.init(0)).type !== "ready") throw new Error("the floor driver did not start")
  const floorRssKb = (await floor.cpu()).cpu.maxRssKb

  const results = new Map<
    VariantName,
    VariantResult & {
      latencies: Array<number>
      resultLatencies: Array<number>
      latencyFailures: Array<string>
      levels: Array<LevelResult>
    }
  >()
  for (const name of selected) {
    const d = new Driver(name)
    drivers.set(name, d)
    events.registerExecutor(d.executorId, name)
    status(`starting ${name}...`)
    const a = await d.init(config.poolSize)
    const base = { name, latencies: [], resultLatencies: [], latencyFailures: [], latencyCounters: {}, levels: [] }
    if (a.type === "ready") {
      results.set(name, { ...base, status: "ok", info: a.info })
    } else {
      endStatus()
      const reason = "reason" in a ? a.reason : a.type
      log(
        name === "sdk-pool" && a.type === "unavailable"
          ? `warm pool: not available (${reason})`
          : `${name}: ${a.type} (${reason}); skipping it`
      )
      results.set(name, { ...base, status: a.type === "unavailable" ? "unavailable" : "failed", reason })
      await d.close()
      drivers.delete(name)
    }
  }
  endStatus()
  const active = selected.filter((n) => drivers.has(n))
  const random = rng(config.seed)

  const settle = async (name: VariantName) => {
    const settled = () => {
      if (name === "docker-exec") return true
      const c = events!.count(name)
      return name === "sdk-pool" ? c.others === 0 && c.poolRunning >= config.poolSize : c.others === 0
    }
    if (!(await events!.waitUntil(settled, 60_000)))
      log(`\n${name}: not settled after 60 s (${JSON.stringify(events!.count(name))}); continuing`)
  }
  for (const name of active) await settle(name)

  // Phase 1: sequential latency, alternating.
  const rounds = config.warmup + config.iterations
  for (let i = 0; i < rounds; i++) {
    const warm = i < config.warmup
    for (const name of shuffle(active, random)) {
      status(
        `[latency${warm ? " warm-up" : ""}] ${name} ${warm ? i + 1 : i - config.warmup + 1}/${warm ? config.warmup : config.iterations}`
      )
      const r = await drivers.get(name)!.batch(1, 1)
      if (!warm) {
        const v = results.get(name)!
        v.latencies.push(...r.latencies)
        v.resultLatencies.push(...r.resultLatencies)
        v.latencyFailures.push(...r.failures)
      } else if (r.failures.length > 0) log(`\n${name} warm-up failure: ${r.failures[0]}`)
      await settle(name)
    }
    // Reset the per-phase counters (warm-pool claims) after the warm-up.
    if (i === config.warmup - 1) for (const name of active) await drivers.get(name)!.cpu()
  }
  for (const name of active) {
    const v = results.get(name)!
    results.set(name, { ...v, latencyCounters: (await drivers.get(name)!.cpu()).counters })
  }
  endStatus()

  // Phase 2: throughput per concurrency level, with CPU per window.
  let foreignShimsSec = 0
  let foreignCreates = events.takeForeignCreates()
  for (const concurrency of config.levels) {
    for (const name of shuffle(active, random)) {
      const d = drivers.get(name)!
      status(`[throughput c=${concurrency}] ${name}: ${config.count} executions...`)
      await settle(name)
      foreignCreates += events.takeForeignCreates()
      const c0 = await d.cpu()
      const e0 = engineCpu.snapshot()
      const t0 = performance.now()
      const r = await d.batch(config.count, concurrency)
      await settle(name)
      const settledMs = performance.now() - t0
      const e1 = engineCpu.snapshot()
      const c1 = await d.cpu()
      const fc = events.takeForeignCreates()
      foreignCreates += fc
      const w: CpuWindow = engineCpu.window(e0, e1, events.isMine)
      foreignShimsSec += w.foreignShimsSec
      if (r.failures.length > 0) log(`\n${name} c=${concurrency}: ${r.failures.length} failed, e.g. ${r.failures[0]}`)
      results.get(name)!.levels.push({
        concurrency,
        executions: r.latencies.length,
        failures: r.failures.length,
        elapsedMs: r.elapsedMs,
        settledMs,
        latency: summarize(r.latencies),
        cpu: {
          clientSec: c1.cpu.ownSec + c1.cpu.childrenSec - (c0.cpu.ownSec + c0.cpu.childrenSec),
          daemonsSec: w.daemonsSec,
          shimsSec: w.shimsSec,
          executions: r.latencies.length,
          foreignShimsSec: w.foreignShimsSec,
          kernelSec: w.kernelSec,
          foreignCreates: fc
        },
        counters: c1.counters
      })
    }
  }
  endStatus()

  // Phase 3: bursts of N at once (the pool, if any, full before each).
  const bursts = new Map<
    VariantName,
    { elapsedMs: Array<number>; latencies: Array<number>; failures: number; counters: Record<string, number> }
  >()
  for (let round = 0; round < config.burstRounds && config.burst > 0; round++) {
    for (const name of shuffle(active, random)) {
      status(`[burst ${round + 1}/${config.burstRounds}] ${name}: ${config.burst} at once`)
      await settle(name)
      await drivers.get(name)!.cpu()
      const r = await drivers.get(name)!.batch(config.burst, config.burst)
      const counters = (await drivers.get(name)!.cpu()).counters
      const b = bursts.get(name) ?? { elapsedMs: [], latencies: [], failures: 0, counters: {} }
      b.elapsedMs.push(r.elapsedMs)
      b.latencies.push(...r.latencies)
      b.failures += r.failures.length
      for (const [k, n] of Object.entries(counters)) b.counters[k] = (b.counters[k] ?? 0) + n
      bursts.set(name, b)
      await settle(name)
    }
  }
  endStatus()

  // Client memory: each driver's peak RSS, and one docker CLI process's for the CLI variants.
  for (const name of active) {
    const d = drivers.get(name)!
    status(`[memory] ${name}`)
    const helperRssKb = await d.probe()
    await settle(name)
    const { cpu } = await d.cpu()
    const v = results.get(name)!
    const burst: BurstResult | undefined = bursts.get(name)
    results.set(name, { ...v, maxRssKb: cpu.maxRssKb, helperRssKb, ...(burst ? { burst } : {}) })
  }
  endStatus()
  foreignCreates += events.takeForeignCreates()
  // (Before cleanup: it hands the engine's processes back to their own cgroup.)
  const engineEnd = engineCpu.snapshot()
  const leftBehind = await cleanup()
  // Who used the host's CPU during the run: this run (its processes, the engine's daemons, its
  // containers' shims) and everything else, i.e. other people's work.
  const wholeRun = engineCpu.window(engineStart, engineEnd, events.isMine)
  const busy = hostBusySec() - busyStart
  const ours = selfTreeSec() - selfStart + wholeRun.daemonsSec + wholeRun.shimsSec
  const wallSec = (performance.now() - started) / 1000

  const command = `pnpm bench${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}`
  const dockerRunCommand = `docker run --rm ${cliFlags(
    createOptionsFor(
      benchSpec("hermes-bench-<run>-docker-run-<n>", { [BenchLabel.run]: "<run>", [BenchLabel.variant]: "docker-run" })
    )
  )
    .map((a) => (/[\s"'{}]/.test(a) ? `'${a}'` : a))
    .join(" ")} ${PYTHON_IMAGE} ${RUNNER_COMMAND.join(" ")}  # stdin: HERMES/2\\nlang python\\ncode 8\\nprint(1)run\\n`
  const run: RunResults = {
    runId,
    date: new Date().toISOString(),
    command,
    options: config,
    machine,
    contention: {
      loadStart,
      foreignCreates,
      foreignShimsSec,
      hostBusySec: busy,
      runSec: ours,
      otherSec: Math.max(0, busy - ours),
      capacitySec: wallSec * machine.cores
    },
    hardeningCheck,
    dockerRunCommand,
    variants: selected.map((n) => results.get(n)!),
    durationSec: (performance.now() - started) / 1000,
    cpuPollMs: config.cpuPollMs,
    cpuMethod: engineCpu.method,
    cpuMethodNote: engineCpu.methodNote,
    floorRssKb,
    leftBehind
  }
  const section = renderSection(run)
  process.stdout.write(`\n${section}\n`)
  if (opts.json !== undefined) writeFileSync(opts.json, `${JSON.stringify(run, null, 2)}\n`)
  if (config.write) {
    mkdirSync(`${root}/bench/results`, { recursive: true })
    writeFileSync(`${root}/bench/results/run.json`, `${JSON.stringify(run, null, 2)}\n`)
    const ok = run.variants.filter((v) => v.status === "ok")
    writeFileSync(
      `${root}/bench/results/latency.svg`,
      latencyChart(
        ok.map((v) => ({ label: VariantLabels[v.name], values: v.latencies })),
        "print(1) in a hardened Python sandbox: latency per execution (sequential)",
        `${run.date.slice(0, 10)} · ${machine.cores} cores · Docker ${machine.engineVersion} · ${ok[0]?.latencies.length ?? 0} executions per variant · other people's CPU during the run: ${((Math.max(0, busy - ours) / (wallSec * machine.cores)) * 100).toFixed(0)}% of the host`
      )
    )
    writeBenchmarksMd(`${root}/BENCHMARKS.md`, section)
    log(`wrote BENCHMARKS.md, bench/results/latency.svg and bench/results/run.json`)
  }
}

main().then(
  () => process.exit(0),
  async (e: unknown) => {
    if (interrupted) return
    endStatus()
    log(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`)
    await cleanup().catch(() => 0)
    process.exit(1)
  }
)
