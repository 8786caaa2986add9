/**
 * pnpm bench:tools — tool calls from sandboxed code (issue 18), in ONE run on the real engine.
 *
 *   npx tsx bench/tools.ts [--rounds 5] [--execs 20] [--cpu-rounds 40] [--host-runs 300] [--pool-rounds 15] [--seed N] [--no-pool]
 *
 * 1. Round trip of one call of a no-op tool, timed INSIDE the sandbox by the sandboxed code itself
 *    (Python time.perf_counter_ns, JavaScript process.hrtime.bigint, bash $EPOCHREALTIME), printed
 *    as JSON: Python 200 sequential calls and 4 threads × 50; JavaScript the same with
 *    Promise.all of 4 async lanes × 50; bash 50 `hermes-tool noop` in a loop (a process each).
 *    Each execution makes 20 unmeasured calls first (bash 5). Side by side, in the same shuffled
 *    rounds, the baseline: one `docker exec <ctr> ls /tmp/rpc` round trip into a running container
 *    with the SDK's hardening (what a host loop polling request files through the engine pays
 *    per poll, as Hermes' file transport does), through the docker CLI and through the Engine API
 *    (dockerode: exec create, start hijacked, inspect for the exit code). Goal: p50 ≤ 2 ms.
 *    CPU per call (client + engine + sandbox): the Python execution's CPU minus that of the same
 *    program making no calls, over the calls made; per poll: the window over the execs.
 * 2. The sandbox's own CPU per execution (the container's cgroup, cpuacct, bench/engine.ts; one
 *    window per execution, closed once the container is removed; a window in which someone
 *    else's container was created is left out): a bare `python3 -c 'print(1)'` container with the
 *    SDK's hardening (the reference variant of bench/run.ts), `print(1)` through the SDK (the
 *    supervisor as PID 1, then `python3 main.py`), with tools given, with `import hermes_tools`,
 *    with one call, and with one call through a lean client (the C modules _socket and _json
 *    instead of socket and json: what the generated module could do); to split the supervisor's
 *    share, containers running /bin/true bare, through the supervisor in plain mode (exec in
 *    place) and in framed mode (fork, pipes, relay), and a bare `python3 -c` that first makes the
 *    warm pool preload's imports. Also per round: where importing hermes_tools, and the preload's
 *    imports, spend their CPU, timed in the sandbox with time.process_time_ns.
 *    Then the same supervisor binary (images/runner/build/hermes-run, the one the images copy) on
 *    this host, outside any container: many runs per variant, the reaped children's CPU, so the
 *    supervisor's own milliseconds are not lost in the ±3 ms of runc's work in each container.
 * 3. (--no-pool skips it) The warm pool (size 1): print(1), with tools given, with one call:
 *    latency and the sandbox CPU per execution (a window from a settled, idle pool to the next,
 *    i.e. one pooled sandbox's whole life, its preloaded interpreter included).
 *
 * Prints a Markdown report on standard output (progress on standard error). Ctrl-C stops the run
 * and removes every container it created (executors closed, the rest by this run's labels).
 */
import { spawn, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { encodeRunnerPayload, makeRunKey } from "@hermes-sandbox/core/RunnerProtocol"
import { Label } from "@hermes-sandbox/core/Labels"
// The stubs are core internals (tools/ is not exported): the bench measures them from the source.
import { toolModules } from "../packages/core/src/tools/stubs.js"
import { createExecutor, DockerEngine, type SandboxExecutor } from "@hermes-sandbox/docker"
import { type CpuSnapshot, EngineCpu, EngineEvents } from "./engine.js"
import { BenchLabel, benchSpec, createOptionsFor, PYTHON_IMAGE, RUNNER_COMMAND } from "./hardening.js"
import { median, percentile, rng, shuffle, summarize } from "./stats.js"

const argv = process.argv.slice(2)
if (argv[0] === "--") argv.shift()
const { values: opts } = parseArgs({
  args: argv,
  strict: true,
  options: {
    rounds: { type: "string" },
    execs: { type: "string" },
    "cpu-rounds": { type: "string" },
    "pool-rounds": { type: "string" },
    "host-runs": { type: "string" },
    seed: { type: "string" },
    "no-pool": { type: "boolean", default: false }
  }
})
const int = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v))
const config = {
  rounds: int(opts.rounds, 5),
  execs: int(opts.execs, 20),
  cpuRounds: int(opts["cpu-rounds"], 40),
  poolRounds: opts["no-pool"] ? 0 : int(opts["pool-rounds"], 15),
  hostRuns: int(opts["host-runs"], 300),
  seed: int(opts.seed, Math.floor(Math.random() * 2 ** 31))
}
const random = rng(config.seed)
const log = (s: string) => process.stderr.write(`${s}\n`)

type Request = Parameters<SandboxExecutor["executeCode"]>[0]

const runId = randomUUID().slice(0, 8)
const { docker } = DockerEngine.resolveEndpoint()
const labels = (variant: string) => ({ [BenchLabel.run]: runId, [BenchLabel.variant]: variant })
const TOOLS = { noop: { description: "Does nothing.", handler: () => null } }
const SEQ = 200
const THREADS = 4
const PER_THREAD = 50
const BASH_CALLS = 50
const WARM_CALLS = 20

// ---- the sandboxed programs -------------------------------------------------------------------

const pythonProgram = (seq: number, threads: number, perThread: number, warm: number) => `
import json, threading, time
from hermes_tools import noop
for _ in range(${warm}):
    noop()
seq = []
for _ in range(${seq}):
    t = time.perf_counter_ns(); noop(); seq.append(time.perf_counter_ns() - t)
lanes = [[] for _ in range(${threads})]
go = threading.Barrier(${threads} + 1)
def lane(out):
    go.wait()
    for _ in range(${perThread}):
        t = time.perf_counter_ns(); noop(); out.append(time.perf_counter_ns() - t)
workers = [threading.Thread(target=lane, args=(l,)) for l in lanes]
for w in workers: w.start()
go.wait(); t0 = time.perf_counter_ns()
for w in workers: w.join()
wall = time.perf_counter_ns() - t0
print(json.dumps({"seq": seq, "conc": [x for l in lanes for x in l], "concWallNs": wall}))
`

const javascriptProgram = `
const { noop } = require("hermes_tools");
const now = () => process.hrtime.bigint();
(async () => {
  for (let i = 0; i < ${WARM_CALLS}; i++) await noop({});
  const seq = [];
  for (let i = 0; i < ${SEQ}; i++) { const t = now(); await noop({}); seq.push(Number(now() - t)); }
  const conc = [];
  const t0 = now();
  await Promise.all(Array.from({ length: ${THREADS} }, async () => {
    for (let i = 0; i < ${PER_THREAD}; i++) { const t = now(); await noop({}); conc.push(Number(now() - t)); }
  }));
  console.log(JSON.stringify({ seq, conc, concWallNs: Number(now() - t0) }));
})();
`

// $EPOCHREALTIME is "<s>.<µs>": without the dot, microseconds.
const bashProgram = `
for ((i = 0; i < 5; i++)); do hermes-tool noop '{}' >/dev/null; done
out=""
for ((i = 0; i < ${BASH_CALLS}; i++)); do
  t0=$EPOCHREALTIME; hermes-tool noop '{}' >/dev/null; t1=$EPOCHREALTIME
  out="$out\${out:+,}$(( (\${t1/./} - \${t0/./}) * 1000 ))"
done
echo "{\\"seq\\":[$out]}"
`

/**
 * A tool call without the socket and json modules (whose imports pull in enum and re): the C
 * modules under them, the same wire protocol. What the generated hermes_tools could do; here only
 * to measure it.
 */
const LEAN_CLIENT = `
import _json, _socket, os
class _Ctx: pass
_c = _Ctx()
_c.strict = True; _c.object_hook = None; _c.object_pairs_hook = None; _c.parse_float = float; _c.parse_int = int
_c.parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__
_c.memo = {}
_scan = _json.make_scanner(_c)
def _default(o): raise TypeError(type(o).__name__ + " is not JSON serializable")
_encode = _json.make_encoder(None, _default, _json.encode_basestring, None, ":", ",", False, False, False)
def call_tool(name, args):
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.connect(os.environ["HERMES_TOOLS_SOCKET"])
        s.sendall(name.encode() + b"\\n" + "".join(_encode(args, 0)).encode())
        s.shutdown(_socket.SHUT_WR)
        chunks = []
        while True:
            c = s.recv(65536)
            if not c: break
            chunks.append(c)
    finally:
        s.close()
    r = b"".join(chunks)
    if r[:1] != b"0": raise RuntimeError(r[1:].decode())
    return _scan(r[1:].decode(), 0)[0]
`

/** Process CPU of each step of importing hermes_tools, in the sandbox: the C modules, then what socket and json add. */
const IMPORT_STEPS = [
  "_json + _socket (C modules)",
  "enum",
  "re (after enum)",
  "json (the rest)",
  "socket (the rest)",
  "read hermes_tools.py",
  "compile hermes_tools.py",
  "run its body"
]
const importBreakdownProgram = `
import sys, time
c = time.process_time_ns
t = [c()]
import _json, _socket; t.append(c())
import enum; t.append(c())
import re; t.append(c())
import json; t.append(c())
import socket; t.append(c())
path = sys.path[0] + "/hermes_tools.py"
src = open(path, "rb").read(); t.append(c())
code = compile(src, path, "exec"); t.append(c())
exec(code, {"__name__": "hermes_tools"}); t.append(c())
print(json.dumps({"steps": [(t[i + 1] - t[i]) / 1e6 for i in range(len(t) - 1)], "python": sys.version.split()[0]}))
`

/** The imports of the warm pool's preloaded interpreter (hermes-run.c, PYTHON_PRELOAD), before it waits for a program. */
const PRELOAD_IMPORTS = "import atexit, os, sys, runpy, threading, traceback"
const PRELOAD_STEPS = [
  "import threading",
  "import runpy",
  "import traceback",
  "runpy.run_path of an empty file, first call (imports pkgutil, which imports typing)",
  "compile + exec of the same file"
]
const preloadBreakdownProgram = `
import os, sys, time
empty = os.path.join(sys.path[0], "empty.py")
open(empty, "w").close()
c = time.process_time_ns
t = [c()]
import threading; t.append(c())
import runpy; t.append(c())
import traceback; t.append(c())
runpy.run_path(empty, run_name="__main__"); t.append(c())
exec(compile(open(empty, "rb").read(), empty, "exec"), {"__name__": "__main__"}); t.append(c())
import json
print(json.dumps([(t[i + 1] - t[i]) / 1e6 for i in range(len(t) - 1)]))
`

interface Samples {
  readonly seq: Array<number>
  readonly conc?: Array<number>
  readonly concWallNs?: number
}

// ---- containers of this run ---------------------------------------------------------------------

let counter = 0
const executors: Array<SandboxExecutor> = []
const executorIds: Array<string> = []
let events: EngineEvents | undefined
let engineCpu: EngineCpu | undefined
let cleaning: Promise<void> | undefined

const cleanup = () =>
  (cleaning ??= (async () => {
    await Promise.all(executors.map((e) => e.close().catch(() => {})))
    engineCpu?.stop()
    events?.stop()
    for (const label of [`${BenchLabel.run}=${runId}`, ...executorIds.map((id) => `${Label.executor}=${id}`)]) {
      for (const c of await docker.listContainers({ all: true, filters: { label: [label] } }).catch(() => [])) {
        await docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {})
      }
    }
  })())

let interrupted = false
const onSignal = (signal: NodeJS.Signals) => {
  if (interrupted) return
  interrupted = true
  log(`\n${signal}: removing every container this run created...`)
  void cleanup().finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
}
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)

const newExecutor = async (owner: string, options: Parameters<typeof createExecutor>[0]) => {
  const executorId = randomUUID()
  executorIds.push(executorId)
  events!.registerExecutor(executorId, owner)
  const executor = await createExecutor({ sweepOnStart: false, executorId, ...options })
  executors.push(executor)
  return executor
}

/** A container with the SDK's hardening running `command` (stdin attached when given), removed inline. */
const runBare = async (command: ReadonlyArray<string>, stdin?: Uint8Array): Promise<void> => {
  const container = await docker.createContainer(
    createOptionsFor(benchSpec(`hermes-bench-${runId}-bare-${++counter}`, labels("bare"), command, stdin !== undefined))
  )
  try {
    const stream = (await container.attach({
      stream: true,
      stdin: stdin !== undefined,
      stdout: true,
      stderr: true,
      hijack: stdin !== undefined
    })) as unknown as NodeJS.ReadWriteStream
    stream.on("data", () => {})
    const ended = new Promise<void>((resolve) => {
      stream.once("end", resolve)
      stream.once("close", resolve)
      stream.once("error", () => resolve())
    })
    await container.start()
    if (stdin !== undefined) stream.end(Buffer.from(stdin))
    const { StatusCode } = (await container.wait()) as { StatusCode: number }
    await ended
    if (StatusCode !== 0) throw new Error(`${command.join(" ")}: exit ${StatusCode}`)
  } finally {
    await container.remove({ force: true, v: true }).catch(() => {})
  }
}

const dockerCli = (args: ReadonlyArray<string>) =>
  new Promise<number | null>((resolve, reject) => {
    const child = spawn("docker", args, { stdio: ["ignore", "ignore", "ignore"] })
    child.on("error", reject)
    child.on("close", resolve)
  })

// ---- CPU windows ----------------------------------------------------------------------------------

interface Cpu {
  readonly clientMs: number
  readonly engineMs: number
  readonly sandboxMs: number
  /** Containers other people created during the window. */
  readonly foreign: number
}

/** CPU of the children this process reaped (cutime + cstime, clock ticks of 10 ms), ms. */
const childrenMs = () => {
  const s = readFileSync("/proc/self/stat", "utf8")
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
  return (Number(f[13]) + Number(f[14])) * 10
}

/** This process's CPU and that of the children it reaped (docker CLI processes), ms. */
const clientMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000 + childrenMs()
}

/** Until `owner`'s containers are gone, on the engine's event stream. */
const settle = async (owner: string) => {
  if (!(await events!.waitUntil(() => events!.count(owner).others === 0, 60_000)))
    log(`${owner}: not settled after 60 s; continuing`)
}

/** Until this run's running containers use no more CPU (a pooled interpreter done starting). */
const idle = async () => {
  const mine = (s: CpuSnapshot) =>
    [...(s.containerGroups ?? [])].reduce((n, [id, sec]) => (events!.isMine(id) ? n + sec : n), 0)
  if (engineCpu!.method !== "cgroup") return new Promise((r) => setTimeout(r, 500))
  let last = mine(engineCpu!.snapshot())
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 50))
    const now = mine(engineCpu!.snapshot())
    if (now - last < 20e-6) return
    last = now
  }
}

/**
 * A pool of size 1 at rest: exactly one container of the executor, running, none of `before` (the
 * claimed one is gone, its replacement started), and idle. Returns its id.
 */
const poolAtRest = async (executorId: string, before: ReadonlySet<string>): Promise<Set<string>> => {
  for (let i = 0; i < 1_200; i++) {
    const list = await docker.listContainers({ all: true, filters: { label: [`${Label.executor}=${executorId}`] } })
    if (list.length === 1 && list[0]!.State === "running" && !before.has(list[0]!.Id)) {
      await idle()
      return new Set([list[0]!.Id])
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error("the warm pool did not come back to one idle sandbox within 60 s")
}

/**
 * One measured step: latency and the CPU window around it. The window opens with `owner` settled
 * (no container of it left; "exec": its long-lived container stays) and closes once the step's
 * containers are removed.
 */
const measured = async <A>(owner: string, fn: () => Promise<A>): Promise<{ value: A; cpu: Cpu; ms: number }> => {
  if (owner !== "exec") await settle(owner)
  events!.takeForeignCreates()
  const c0 = clientMs()
  const e0 = engineCpu!.snapshot()
  const t0 = performance.now()
  const value = await fn()
  const ms = performance.now() - t0
  if (owner !== "exec") await settle(owner)
  const e1 = engineCpu!.snapshot()
  const c1 = clientMs()
  return { value, ms, cpu: cpuBetween(e0, e1, c0, c1) }
}

const cpuBetween = (e0: CpuSnapshot, e1: CpuSnapshot, c0: number, c1: number): Cpu => {
  const w = engineCpu!.window(e0, e1, events!.isMine)
  return {
    clientMs: c1 - c0,
    engineMs: w.daemonsSec * 1000,
    sandboxMs: w.shimsSec * 1000,
    foreign: events!.takeForeignCreates()
  }
}

// ---- formatting -----------------------------------------------------------------------------------

const ms = (x: number) => {
  if (Number.isNaN(x)) return "—"
  const a = Math.abs(x)
  return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3)
}
const ratio = (x: number) => (x >= 0.1 ? `${x.toFixed(2)}×` : `${x.toFixed(4)}×`)

const main = async () => {
  const loadStart = loadavg()
  const started = new Date()
  events = new EngineEvents(docker, runId)
  await events.start()
  engineCpu = new EngineCpu(10, new Set((await docker.listContainers({ all: true })).map((c) => c.Id)))
  engineCpu.start()
  log(`bench:tools ${runId}: ${JSON.stringify(config)}; engine CPU: ${engineCpu.methodNote}`)
  const out: Array<string> = []
  const command = `npx tsx bench/tools.ts${argv.length > 0 ? ` ${argv.join(" ")}` : ""}`
  const enc = new TextEncoder()

  // ---- 1. round trips ----
  const sdk = await newExecutor("sdk", { timeoutMs: 120_000, toolLimits: { maxCalls: 1_000 } })
  const execName = `hermes-bench-${runId}-exec`
  const execContainer = await docker.createContainer(
    createOptionsFor(benchSpec(execName, labels("exec"), ["sleep", "infinity"], false))
  )
  await execContainer.start()
  if ((await dockerCli(["exec", execName, "mkdir", "-p", "/tmp/rpc"])) !== 0)
    throw new Error("mkdir /tmp/rpc in the exec container failed")

  const tool = (language: Request["language"], code: string, expectedCalls: number) => async (): Promise<Samples> => {
    const r = await sdk.executeCode({ language, code, tools: TOOLS })
    if (r.exitCode !== 0 || r.toolCallsMade !== expectedCalls)
      throw new Error(`${language}: exit ${r.exitCode}, ${r.toolCallsMade} calls, stderr ${r.stderr.slice(0, 400)}`)
    return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Samples
  }
  const execCli = async () => {
    for (let i = 0; i < config.execs; i++) {
      const t0 = performance.now()
      const code = await dockerCli(["exec", execName, "ls", "/tmp/rpc"])
      lat.execCli.push(performance.now() - t0)
      if (code !== 0) throw new Error(`docker exec: exit ${code}`)
    }
  }
  const execApi = async () => {
    for (let i = 0; i < config.execs; i++) {
      const t0 = performance.now()
      const exec = await execContainer.exec({ Cmd: ["ls", "/tmp/rpc"], AttachStdout: true, AttachStderr: true })
      const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as NodeJS.ReadableStream
      await new Promise<void>((resolve) => {
        stream.on("data", () => {})
        stream.once("end", resolve)
        stream.once("close", resolve)
        stream.once("error", () => resolve())
      })
      const info = await exec.inspect()
      lat.execApi.push(performance.now() - t0)
      if (info.ExitCode !== 0) throw new Error(`exec API: exit ${info.ExitCode}`)
    }
  }
  const lat = {
    pySeq: [] as Array<number>,
    pyConc: [] as Array<number>,
    jsSeq: [] as Array<number>,
    jsConc: [] as Array<number>,
    bash: [] as Array<number>,
    execCli: [] as Array<number>,
    execApi: [] as Array<number>
  }
  const walls = { py: [] as Array<number>, js: [] as Array<number> }
  const cpu1 = { py: [] as Array<Cpu>, py0: [] as Array<Cpu>, execCli: [] as Array<Cpu>, execApi: [] as Array<Cpu> }
  const pyCalls = WARM_CALLS + SEQ + THREADS * PER_THREAD
  const phase1 = {
    python: tool("python", pythonProgram(SEQ, THREADS, PER_THREAD, WARM_CALLS), pyCalls),
    python0: tool("python", pythonProgram(0, THREADS, 0, 0), 0),
    javascript: tool("javascript", javascriptProgram, WARM_CALLS + SEQ + THREADS * PER_THREAD),
    bash: tool("bash", bashProgram, 5 + BASH_CALLS)
  }
  // Warm-up: one of each, unmeasured.
  for (const f of Object.values(phase1)) await f()
  await dockerCli(["exec", execName, "ls", "/tmp/rpc"])
  for (let round = 0; round < config.rounds; round++) {
    for (const step of shuffle(["python", "python0", "javascript", "bash", "execCli", "execApi"] as const, random)) {
      log(`[round trips ${round + 1}/${config.rounds}] ${step}`)
      if (step === "execCli" || step === "execApi") {
        const m = await measured("exec", step === "execCli" ? execCli : execApi)
        cpu1[step].push(m.cpu)
        continue
      }
      const m = await measured("sdk", phase1[step])
      const s = m.value
      if (step === "python") {
        lat.pySeq.push(...s.seq.map((n) => n / 1e6))
        lat.pyConc.push(...s.conc!.map((n) => n / 1e6))
        walls.py.push(s.concWallNs! / 1e6)
        cpu1.py.push(m.cpu)
      } else if (step === "python0") cpu1.py0.push(m.cpu)
      else if (step === "javascript") {
        lat.jsSeq.push(...s.seq.map((n) => n / 1e6))
        lat.jsConc.push(...s.conc!.map((n) => n / 1e6))
        walls.js.push(s.concWallNs! / 1e6)
      } else lat.bash.push(...s.seq.map((n) => n / 1e6))
    }
  }
  await execContainer.remove({ force: true, v: true })

  const cli = summarize(lat.execCli)
  const api = summarize(lat.execApi)
  const concurrent = THREADS * PER_THREAD
  out.push(
    `Command: \`${command}\` (seed ${config.seed}), ${started.toISOString()}; load average before: ${loadStart.map((l) => l.toFixed(2)).join(" / ")}; engine CPU: ${engineCpu.methodNote}.`,
    ""
  )
  out.push(
    `#### Round trip of one call of a no-op tool, timed inside the sandbox (${config.rounds} executions per caller, shuffled rounds), and one \`docker exec\` round trip`,
    ""
  )
  out.push("| caller | calls | p50 ms | p95 ms | p99 ms | calls/s | p50 / `docker exec` CLI p50 | p50 / exec API p50 |")
  out.push("|---|---:|---:|---:|---:|---:|---:|---:|")
  const row = (name: string, xs: Array<number>, perSec: number) => {
    const s = summarize(xs)
    out.push(
      `| ${name} | ${s.n} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.p99)} | ${perSec.toFixed(0)} | ${ratio(s.p50 / cli.p50)} | ${ratio(s.p50 / api.p50)} |`
    )
  }
  const seqRate = (xs: Array<number>) => 1000 / (xs.reduce((a, b) => a + b, 0) / xs.length)
  const concRate = (wallsMs: Array<number>) =>
    (concurrent * wallsMs.length) / (wallsMs.reduce((a, b) => a + b, 0) / 1000)
  row(`Python, ${SEQ} sequential`, lat.pySeq, seqRate(lat.pySeq))
  row(`Python, ${THREADS} threads × ${PER_THREAD}`, lat.pyConc, concRate(walls.py))
  row(`JavaScript, ${SEQ} sequential`, lat.jsSeq, seqRate(lat.jsSeq))
  row(`JavaScript, Promise.all of ${THREADS} × ${PER_THREAD}`, lat.jsConc, concRate(walls.js))
  row(`bash, \`hermes-tool noop '{}'\` × ${BASH_CALLS} (a process each)`, lat.bash, seqRate(lat.bash))
  row(`baseline: \`docker exec <ctr> ls /tmp/rpc\` (CLI)`, lat.execCli, seqRate(lat.execCli))
  row(
    `baseline: the same through the Engine API (dockerode: create, start, inspect)`,
    lat.execApi,
    seqRate(lat.execApi)
  )
  const pyP50 = percentile(lat.pySeq, 50)
  out.push(
    "",
    `Goal p50 ≤ 2 ms (Python, sequential): ${ms(pyP50)} ms, **${pyP50 <= 2 ? "met" : "not met"}**; one sequential Python call is ${(cli.p50 / pyP50).toFixed(0)}× faster than one \`docker exec\` poll through the CLI and ${(api.p50 / pyP50).toFixed(0)}× faster than one through the Engine API.`,
    ""
  )

  const per = (xs: Array<Cpu>, k: keyof Omit<Cpu, "foreign">, n: number) => median(xs.map((c) => c[k])) / n
  const cpuRow = (name: string, xs: Array<Cpu>, n: number, minus?: Array<Cpu>) => {
    const v = (k: keyof Omit<Cpu, "foreign">) => (per(xs, k, 1) - (minus ? per(minus, k, 1) : 0)) / n
    const total = v("clientMs") + v("engineMs") + v("sandboxMs")
    out.push(`| ${name} | ${ms(v("clientMs"))} | ${ms(v("engineMs"))} | ${ms(v("sandboxMs"))} | ${ms(total)} |`)
  }
  out.push(
    "CPU per call or poll (median window of the rounds, ms; client = this process and the docker CLI processes it reaped, engine = dockerd, containerd, shims, runc; sandbox = the containers' cgroups):",
    ""
  )
  out.push("| | client | engine processes | sandbox processes | total |", "|---|---:|---:|---:|---:|")
  cpuRow(
    `one Python tool call (the execution's CPU minus the same program making no calls, / ${pyCalls})`,
    cpu1.py,
    pyCalls,
    cpu1.py0
  )
  cpuRow("one `docker exec` poll, CLI", cpu1.execCli, config.execs)
  cpuRow("one `docker exec` poll, Engine API", cpu1.execApi, config.execs)
  out.push("")

  // ---- 2. the sandbox's CPU per execution ----
  const cpuExecutor = await newExecutor("sdk-cpu", { awaitRemoval: true, timeoutMs: 60_000 })
  const sdkRun =
    (request: Request, calls = 0) =>
    async () => {
      const r = await cpuExecutor.executeCode(request)
      if (r.exitCode !== 0 || r.stdout !== "1\n" || (r.toolCallsMade ?? 0) !== calls)
        throw new Error(
          `exit ${r.exitCode}, stdout ${JSON.stringify(r.stdout)}, ${r.toolCallsMade} calls, stderr ${r.stderr.slice(0, 400)}`
        )
    }
  const runnerPayload = (framed: boolean, args: ReadonlyArray<string>) =>
    encodeRunnerPayload({ ...(framed ? { key: makeRunKey() } : {}), args, files: [], stdin: new Uint8Array() })
  const cpuVariants: ReadonlyArray<{ key: string; label: string; owner: string; run: () => Promise<void> }> = [
    {
      key: "true",
      label: "container running `/bin/true` (runc's init in the container, no supervisor)",
      owner: "bare",
      run: () => runBare(["/bin/true"])
    },
    {
      key: "plain-true",
      label: "supervisor, plain mode (exec in place) → `/bin/true`",
      owner: "bare",
      run: () => runBare(RUNNER_COMMAND, runnerPayload(false, ["/bin/true"]))
    },
    {
      key: "framed-true",
      label: "supervisor, framed mode (fork, pipes, relay, frames) → `/bin/true`",
      owner: "bare",
      run: () => runBare(RUNNER_COMMAND, runnerPayload(true, ["/bin/true"]))
    },
    {
      key: "bare",
      label: "**reference**: bare `python3 -c 'print(1)'` container, same hardening",
      owner: "bare",
      run: () => runBare(["python3", "-c", "print(1)"])
    },
    {
      key: "preload",
      label: "bare `python3 -c` with the warm pool preload's imports first (`" + PRELOAD_IMPORTS + "; print(1)`)",
      owner: "bare",
      run: () => runBare(["python3", "-c", `${PRELOAD_IMPORTS}\nprint(1)`])
    },
    {
      key: "sdk",
      label: "SDK `print(1)` (supervisor PID 1 → `python3 main.py`)",
      owner: "sdk-cpu",
      run: sdkRun({ language: "python", code: "print(1)" })
    },
    {
      key: "tools",
      label: "SDK `print(1)`, tools given, no call",
      owner: "sdk-cpu",
      run: sdkRun({ language: "python", code: "print(1)", tools: TOOLS })
    },
    {
      key: "import",
      label: "SDK, tools given, `import hermes_tools`, no call",
      owner: "sdk-cpu",
      run: sdkRun({ language: "python", code: "import hermes_tools\nprint(1)", tools: TOOLS })
    },
    {
      key: "call",
      label: "SDK, tools given, one call (`from hermes_tools import noop; noop()`)",
      owner: "sdk-cpu",
      run: sdkRun({ language: "python", code: "from hermes_tools import noop\nnoop()\nprint(1)", tools: TOOLS }, 1)
    },
    {
      key: "lean",
      label: "SDK, tools given, one call through a lean client (`_socket` + `_json`, no `socket`/`json` import)",
      owner: "sdk-cpu",
      run: sdkRun({ language: "python", code: `${LEAN_CLIENT}\ncall_tool("noop", {})\nprint(1)`, tools: TOOLS }, 1)
    }
  ]
  const sandbox = new Map<string, Array<number>>(cpuVariants.map((v) => [v.key, []]))
  const contaminated = new Map<string, number>(cpuVariants.map((v) => [v.key, 0]))
  const steps: Array<Array<number>> = IMPORT_STEPS.map(() => [])
  const preloadSteps: Array<Array<number>> = PRELOAD_STEPS.map(() => [])
  let pythonVersion = ""
  for (const v of cpuVariants) await v.run()
  for (let round = 0; round < config.cpuRounds; round++) {
    log(`[sandbox CPU ${round + 1}/${config.cpuRounds}]`)
    for (const v of shuffle(cpuVariants, random)) {
      const m = await measured(v.owner, v.run)
      if (m.cpu.foreign > 0) contaminated.set(v.key, contaminated.get(v.key)! + 1)
      else sandbox.get(v.key)!.push(m.cpu.sandboxMs)
    }
    const r = await cpuExecutor.executeCode({ language: "python", code: importBreakdownProgram, tools: TOOLS })
    if (r.exitCode !== 0) throw new Error(`import breakdown: ${r.stderr}`)
    const b = JSON.parse(r.stdout.trim()) as { steps: Array<number>; python: string }
    for (const [i, x] of b.steps.entries()) steps[i]!.push(x)
    pythonVersion = b.python
    const p = await cpuExecutor.executeCode({ language: "python", code: preloadBreakdownProgram })
    if (p.exitCode !== 0) throw new Error(`preload breakdown: ${p.stderr}`)
    for (const [i, x] of (JSON.parse(p.stdout.trim()) as Array<number>).entries()) preloadSteps[i]!.push(x)
  }
  const med = (key: string) => median(sandbox.get(key)!)
  out.push(
    `#### The sandbox's own CPU per execution (the container's cgroup; median of ${config.cpuRounds} shuffled rounds; ${PYTHON_IMAGE}, Python ${pythonVersion})`,
    ""
  )
  out.push(
    "| variant | median ms | p25–p75 ms | Δ vs bare `python3 -c` | windows (left out: someone else's container created meanwhile) |",
    "|---|---:|---:|---:|---:|"
  )
  for (const v of cpuVariants) {
    const xs = sandbox.get(v.key)!
    out.push(
      `| ${v.label} | ${ms(median(xs))} | ${ms(percentile(xs, 25))}–${ms(percentile(xs, 75))} | ${v.key === "bare" ? "—" : `${med(v.key) - med("bare") >= 0 ? "+" : ""}${ms(med(v.key) - med("bare"))}`} | ${xs.length} (${contaminated.get(v.key)}) |`
    )
  }
  const d = (a: string, b: string) => `${ms(med(a) - med(b))} ms`
  out.push(
    "",
    `The runner: SDK \`print(1)\` − bare \`python3 -c\` = **${d("sdk", "bare")}**; the supervisor alone: plain mode ${d("plain-true", "true")}, framed ${d("framed-true", "true")} over \`/bin/true\`. ` +
      `The warm pool preload's imports: ${d("preload", "bare")}. Tools given, no call: ${d("tools", "sdk")}; \`import hermes_tools\`: ${d("import", "tools")} more; the call itself: ${d("call", "import")}; one call through the lean client: ${d("lean", "tools")} over tools given.`,
    ""
  )
  out.push(
    "Where importing hermes_tools spends its CPU (in the sandbox, time.process_time_ns, in this order; median ms):",
    ""
  )
  out.push(`| ${IMPORT_STEPS.join(" | ")} | total |`, `|${IMPORT_STEPS.map(() => "---:").join("|")}|---:|`)
  const stepMedians = steps.map((xs) => median(xs))
  out.push(`| ${stepMedians.map(ms).join(" | ")} | ${ms(stepMedians.reduce((a, b) => a + b, 0))} |`, "")
  const preloadMedians = preloadSteps.map((xs) => median(xs))
  out.push(
    "What the warm pool's preloaded interpreter does besides the program: its imports before it waits, then `runpy.run_path` on the request's path (a fresh interpreter, in this order; median ms):",
    ""
  )
  out.push(`| ${PRELOAD_STEPS.join(" | ")} |`, `|${PRELOAD_STEPS.map(() => "---:").join("|")}|`)
  out.push(`| ${preloadMedians.map(ms).join(" | ")} |`, "")

  // ---- 2b. the supervisor outside a container ----
  const supervisor = fileURLToPath(new URL("../images/runner/build/hermes-run", import.meta.url))
  if (config.hostRuns > 0 && existsSync(supervisor) && existsSync("/usr/bin/python3")) {
    const dir = `${tmpdir()}/hermes-bench-tools-${runId}`
    mkdirSync(`${dir}/ws`, { recursive: true })
    mkdirSync(`${dir}/m`, { recursive: true })
    writeFileSync(`${dir}/m/main.py`, "print(1)")
    const env = {
      PATH: "/usr/bin:/bin",
      LANG: "C.UTF-8",
      PYTHONDONTWRITEBYTECODE: "1",
      PYTHONUNBUFFERED: "1",
      HOME: `${dir}/ws`,
      HERMES_CODE_DIR: `${dir}/code`,
      HERMES_WORKSPACE: `${dir}/ws`
    }
    const code = enc.encode("print(1)")
    const modules = toolModules("python", [
      { name: "noop", description: "Does nothing.", parameters: { type: "object" } }
    ]).map((m) => [m.path, enc.encode(m.content)] as const)
    const framedCode = (tools: boolean) => () =>
      encodeRunnerPayload({
        key: makeRunKey(),
        language: "python",
        code,
        files: [],
        stdin: new Uint8Array(),
        ...(tools ? { tools: { maxInFlight: 8, maxRequestBytes: 1 << 20, maxReplyBytes: 1 << 20, modules } } : {})
      })
    const hostVariants: ReadonlyArray<{
      key: string
      label: string
      argv: ReadonlyArray<string>
      input?: () => Uint8Array
    }> = [
      { key: "true", label: "`/bin/true`", argv: ["/bin/true"] },
      {
        key: "plain-true",
        label: "supervisor, plain mode → `/bin/true`",
        argv: [supervisor],
        input: () => runnerPayload(false, ["/bin/true"])
      },
      {
        key: "framed-true",
        label: "supervisor, framed mode → `/bin/true`",
        argv: [supervisor],
        input: () => runnerPayload(true, ["/bin/true"])
      },
      { key: "py-c", label: "`python3 -c 'print(1)'`", argv: ["/usr/bin/python3", "-c", "print(1)"] },
      {
        key: "py-main",
        label: "`python3 main.py` (the same one line in a file)",
        argv: ["/usr/bin/python3", `${dir}/m/main.py`]
      },
      {
        key: "framed-code",
        label: "supervisor, framed, `print(1)` as the SDK sends it (→ `python3 main.py`)",
        argv: [supervisor],
        input: framedCode(false)
      },
      {
        key: "framed-tools",
        label:
          "the same with the tool channel (socket, `hermes-tool` link, PYTHONPATH, hermes_tools.py written), no import",
        argv: [supervisor],
        input: framedCode(true)
      },
      {
        key: "py-preload",
        label: "`python3 -c` with the warm pool preload's imports, then `print(1)`",
        argv: ["/usr/bin/python3", "-c", `${PRELOAD_IMPORTS}\nprint(1)`]
      },
      {
        key: "py-json-socket",
        label: "`python3 -c 'import json, socket; print(1)'`",
        argv: ["/usr/bin/python3", "-c", "import json, socket\nprint(1)"]
      },
      {
        key: "py-lean",
        label: "`python3 -c 'import _json, _socket; print(1)'`",
        argv: ["/usr/bin/python3", "-c", "import _json, _socket\nprint(1)"]
      }
    ]
    const hostCpu = new Map<string, number>(hostVariants.map((v) => [v.key, 0]))
    const slices = 10
    const perSlice = Math.max(1, Math.round(config.hostRuns / slices))
    try {
      for (let slice = 0; slice < slices; slice++) {
        log(`[supervisor on the host ${slice + 1}/${slices}]`)
        for (const v of shuffle(hostVariants, random)) {
          const before = childrenMs()
          for (let i = 0; i < perSlice; i++) {
            const r = spawnSync(v.argv[0]!, v.argv.slice(1), {
              env,
              ...(v.input ? { input: v.input() } : {}),
              stdio: [v.input ? "pipe" : "ignore", "ignore", "ignore"]
            })
            if (r.status !== 0) throw new Error(`host ${v.key}: exit ${r.status}`)
          }
          hostCpu.set(v.key, hostCpu.get(v.key)! + childrenMs() - before)
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const runs = slices * perSlice
    const h = (key: string) => hostCpu.get(key)! / runs
    out.push(
      `#### The supervisor outside any container (this host, no namespaces, cgroups or seccomp; ${runs} runs each in ${slices} shuffled slices; CPU of the process tree per run, from the reaped children's times)`,
      ""
    )
    out.push("| command | CPU ms per run |", "|---|---:|")
    for (const v of hostVariants) out.push(`| ${v.label} | ${ms(h(v.key))} |`)
    const hd = (a: string, b: string) => `${ms(h(a) - h(b))} ms`
    out.push(
      "",
      `The supervisor's own share: plain ${hd("plain-true", "true")}, framed ${hd("framed-true", "true")} over \`/bin/true\`; \`main.py\` instead of \`-c\`: ${hd("py-main", "py-c")}; ` +
        `the SDK's payload over \`python3 -c\`: ${hd("framed-code", "py-c")}; the tool channel's setup: ${hd("framed-tools", "framed-code")}; ` +
        `the preload's imports: ${hd("py-preload", "py-c")}; \`import json, socket\`: ${hd("py-json-socket", "py-c")}; \`import _json, _socket\`: ${hd("py-lean", "py-c")}.`,
      ""
    )
  }

  // ---- 3. the warm pool ----
  if (config.poolRounds > 0) {
    const pool = await newExecutor("pool", { warmPool: { size: 1, languages: ["python"] }, timeoutMs: 60_000 })
    const poolId = pool.executorId
    let claimed = 0
    pool.events$.subscribe((e) => {
      if (e.type === "ContainerClaimed") claimed++
    })
    const poolRun =
      (request: Request, calls = 0) =>
      async () => {
        const r = await pool.executeCode(request)
        if (r.exitCode !== 0 || r.stdout !== "1\n" || (r.toolCallsMade ?? 0) !== calls)
          throw new Error(`pool: exit ${r.exitCode}, ${r.stderr.slice(0, 400)}`)
      }
    const poolVariants = [
      {
        key: "print",
        label: "warm pool, `print(1)` (the preloaded interpreter runs it)",
        run: poolRun({ language: "python", code: "print(1)" })
      },
      {
        key: "tools",
        label: "warm pool, `print(1)`, tools given, no call",
        run: poolRun({ language: "python", code: "print(1)", tools: TOOLS })
      },
      {
        key: "call",
        label: "warm pool, tools given, one call",
        run: poolRun({ language: "python", code: "from hermes_tools import noop\nnoop()\nprint(1)", tools: TOOLS }, 1)
      }
    ]
    const pLat = new Map<string, Array<number>>(poolVariants.map((v) => [v.key, []]))
    const pCpu = new Map<string, Array<number>>(poolVariants.map((v) => [v.key, []]))
    let atRest = await poolAtRest(poolId, new Set())
    for (const v of poolVariants) {
      await v.run()
      atRest = await poolAtRest(poolId, atRest)
    }
    const claimedBefore = claimed
    for (let round = 0; round < config.poolRounds; round++) {
      log(`[warm pool ${round + 1}/${config.poolRounds}]`)
      for (const v of shuffle(poolVariants, random)) {
        events.takeForeignCreates()
        const c0 = clientMs()
        const e0 = engineCpu.snapshot()
        const t0 = performance.now()
        await v.run()
        pLat.get(v.key)!.push(performance.now() - t0)
        atRest = await poolAtRest(poolId, atRest)
        const cpu = cpuBetween(e0, engineCpu.snapshot(), c0, clientMs())
        if (cpu.foreign === 0) pCpu.get(v.key)!.push(cpu.sandboxMs)
      }
    }
    out.push(
      `#### Warm pool (size 1; ${config.poolRounds} shuffled rounds; each window from an idle, full pool to the next: one pooled sandbox's whole life; ${claimed - claimedBefore} of ${config.poolRounds * poolVariants.length} executions claimed a pooled sandbox)`,
      ""
    )
    out.push(
      "| variant | latency p50 ms | p95 ms | sandbox CPU median ms | Δ CPU vs pooled `print(1)` |",
      "|---|---:|---:|---:|---:|"
    )
    const base = median(pCpu.get("print")!)
    for (const v of poolVariants) {
      const c = median(pCpu.get(v.key)!)
      out.push(
        `| ${v.label} | ${ms(percentile(pLat.get(v.key)!, 50))} | ${ms(percentile(pLat.get(v.key)!, 95))} | ${ms(c)} | ${v.key === "print" ? "—" : `+${ms(c - base)}`} |`
      )
    }
    out.push("")
  }
  out.push(
    `Load average after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" / ")}.`
  )
  await cleanup()
  process.stdout.write(`\n${out.join("\n")}\n`)
}

main().then(
  () => process.exit(0),
  async (e: unknown) => {
    if (interrupted) return
    log(`bench:tools failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`)
    await cleanup().catch(() => {})
    process.exit(1)
  }
)
