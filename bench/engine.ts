/**
 * What the engine spends, and what it is doing, while a variant runs.
 *
 * CPU, preferred method ("cgroup"): exact kernel accounting. As root on a cgroup v1 host with a
 * cpuacct hierarchy of its own (accounting only: no controller that changes scheduling), the
 * engine's dockerd, containerd and shims are moved into a cpuacct group of the bench's; every
 * process they start later (shims, runc, containerd-shim `start`) is born in it, and the
 * sandboxes' processes are accounted in the engine's own container groups (`docker/<id>`,
 * cgroupfs driver), whose parent keeps what removed children used. Nothing is sampled, so
 * short-lived processes are not missed. The engine's processes are moved back when the bench
 * ends. Work the kernel does in its own threads (network-namespace and cgroup teardown, RCU) and
 * softirq time are read host-wide from /proc and reported on their own: on a quiet host they are
 * the containers' too.
 *
 * CPU, fallback method ("poll"), when the above is not possible: dockerd and containerd (of the engine behind /var/run/docker.sock) are long-lived: utime+stime+cutime+cstime from
 * /proc/<pid>/stat before and after a window (cutime includes the short
 * `containerd-shim-runc-v2 start` processes containerd reaps). Each container's
 * shim daemon is re-parented to PID 1 and lives only as long as its container,
 * so it cannot be read "before and after": a poller samples every shim's
 * utime+stime+cutime+cstime every few milliseconds and keeps the last value seen.
 * The shim reaps runc (create/start/delete) and the container's init, which has
 * reaped the program, so a shim's total is "runc + the sandbox's own processes +
 * the shim". What a shim spends in its last poll interval before it exits is
 * missed (an underestimate, bounded by the poll interval).
 *
 * Events: the engine's event stream tells which container ids belong to this run
 * (bench labels, or the SDK executors' ids), counts other engineers' containers
 * created meanwhile (contention), and lets the runner wait until a variant's
 * containers are gone (or its warm pool is full again) without polling the engine.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs"
import type { IncomingMessage } from "node:http"
import type Docker from "dockerode"
import { Label } from "@hermes-sandbox/core/Labels"
import { BenchLabel } from "./hardening.js"

const TICKS_PER_SEC = 100

/** utime+stime+cutime+cstime in ticks, or undefined if the process is gone. */
const statTicks = (pid: number): number | undefined => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])
  } catch {
    return undefined
  }
}

const readComm = (pid: number): string | undefined => {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim()
  } catch {
    return undefined
  }
}

const parentOf = (pid: number): number | undefined => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return undefined
  }
}

/**
 * The dockerd behind our socket and the containerd it runs. Other engines may run on the same
 * host (tests start private dockerd instances): only this one's daemons are counted.
 */
export const findEngineDaemons = (pidFile = "/var/run/docker.pid"): Array<number> => {
  let dockerd: number | undefined
  try {
    dockerd = Number(readFileSync(pidFile, "utf8").trim())
  } catch {
    dockerd = undefined
  }
  if (dockerd === undefined || readComm(dockerd) !== "dockerd") {
    throw new Error(`bench: no dockerd behind ${pidFile}; the engine CPU figures need the engine's pid`)
  }
  const pids = readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
  const containerd = pids.filter((pid) => readComm(pid) === "containerd" && parentOf(pid) === dockerd)
  if (containerd.length === 0)
    throw new Error(`bench: dockerd ${dockerd} runs no containerd of its own (an external containerd is not supported)`)
  return [dockerd, ...containerd]
}

export interface CpuSnapshot {
  readonly daemonTicks: number
  readonly shims: ReadonlyMap<number, number>
  /** cgroup method: the engine group's and the containers' parent group's usage (s), and each container group's. */
  readonly engineGroupSec?: number
  readonly containersGroupSec?: number
  readonly containerGroups?: ReadonlyMap<string, number>
  /** Kernel threads' CPU and softirq time, host-wide. */
  readonly kernel: KernelTicks
  readonly at: number
}

export interface CpuWindow {
  /** poll: dockerd + containerd (and the processes they reaped); cgroup: dockerd, containerd, shims and runc. Seconds. */
  readonly daemonsSec: number
  /** poll: shims of this run's containers (with runc and the sandbox processes); cgroup: the sandboxes' own processes. Seconds. */
  readonly shimsSec: number
  /** Other people's containers on the same engine in the same window, seconds (contention indicator). */
  readonly foreignShimsSec: number
  /** Kernel threads + softirq, host-wide, seconds. */
  readonly kernelSec: number
  readonly wallSec: number
}

export type CpuMethod = "cgroup" | "poll"

const CPUACCT = "/sys/fs/cgroup/cpuacct"
const ENGINE_GROUP = `${CPUACCT}/hermes-bench-engine`
const CONTAINERS_GROUP = `${CPUACCT}/docker`

const groupSec = (dir: string): number => Number(readFileSync(`${dir}/cpuacct.usage`, "utf8").trim()) / 1e9

/** Kernel threads (children of kthreadd) by pid, and softirq time, host-wide, in ticks. */
interface KernelTicks {
  readonly threads: ReadonlyMap<number, number>
  readonly softirq: number
}

const kernelTicks = (): KernelTicks => {
  const threads = new Map<number, number>()
  for (const d of readdirSync("/proc")) {
    const c = d.charCodeAt(0)
    if (c < 48 || c > 57) continue
    try {
      const s = readFileSync(`/proc/${d}/stat`, "utf8")
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ")
      if (f[1] === "2" || d === "2") threads.set(Number(d), Number(f[11]) + Number(f[12]))
    } catch {
      // gone
    }
  }
  return { threads, softirq: Number(readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/)[7]) }
}

/**
 * Seconds the kernel's threads and softirqs spent between two readings. Per thread, so a
 * worker that exits in between does not subtract its lifetime (what it spent in the window
 * before exiting is missed); a recycled pid counts from zero.
 */
const kernelSecBetween = (a: KernelTicks, b: KernelTicks): number => {
  let ticks = b.softirq - a.softirq
  for (const [pid, t] of b.threads) {
    const before = a.threads.get(pid) ?? 0
    ticks += t >= before ? t - before : t
  }
  return ticks / TICKS_PER_SEC
}

/** The cgroup of `pid` in the cpuacct hierarchy (v1), e.g. "/". */
const cpuacctGroupOf = (pid: number): string | undefined => {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, "utf8")
      .split("\n")
      .find((l) => l.split(":")[1]?.split(",").includes("cpuacct"))
    return line?.split(":")[2]
  } catch {
    return undefined
  }
}

/**
 * Why the cgroup method cannot be used here, or undefined when it can: root, cgroup v1 with a
 * cpuacct hierarchy mounted alone (moving processes there changes no scheduling), and the
 * cgroupfs driver's `docker` parent group.
 */
export const cgroupMethodUnavailable = (): string | undefined => {
  if (process.getuid?.() !== 0) return "not root"
  let mounts = ""
  try {
    mounts = readFileSync("/proc/mounts", "utf8")
  } catch {
    return "no /proc/mounts"
  }
  const cpuacct = mounts.split("\n").find((l) => l.split(" ")[1] === CPUACCT && l.split(" ")[2] === "cgroup")
  if (cpuacct === undefined) return "no cgroup v1 cpuacct hierarchy at " + CPUACCT
  if (cpuacct.split(" ")[3]!.split(",").includes("cpu"))
    return "cpuacct is mounted together with cpu (moving the engine would change its CPU shares)"
  if (!existsSync(`${CONTAINERS_GROUP}/cpuacct.usage`))
    return "no cpuacct group 'docker' (the engine does not use the cgroupfs driver)"
  return undefined
}

export class EngineCpu {
  readonly method: CpuMethod
  readonly methodNote: string
  private moved: Array<{ pid: number; group: string }> = []
  readonly daemonPids: ReadonlyArray<number>
  private readonly shimIds = new Map<number, string>()
  private readonly lastTicks = new Map<number, number>()
  private readonly notShims = new Set<number>()
  /** Young processes not (yet) recognised as shims: a fork shows its parent's name until it execs. */
  private readonly young = new Map<number, number>()
  private timer: NodeJS.Timeout | undefined
  polls = 0

  constructor(
    private readonly pollMs: number,
    private readonly engineContainerIds: ReadonlySet<string> = new Set(),
    forcePoll = false
  ) {
    this.daemonPids = findEngineDaemons()
    const why = forcePoll ? "--cpu-method poll" : cgroupMethodUnavailable()
    this.method = why === undefined ? "cgroup" : "poll"
    this.methodNote =
      why === undefined
        ? "cgroup accounting (cpuacct): engine processes = dockerd, containerd, shims, runc; sandbox processes = the containers' cgroups"
        : `polling /proc every ${pollMs} ms (cgroup accounting unavailable: ${why}); a shim's last interval is missed, so engine CPU is underestimated`
  }

  start() {
    if (this.method === "cgroup") {
      // The engine's daemons and the shims of its containers (shims of other engines on this host stay out).
      mkdirSync(ENGINE_GROUP, { recursive: true })
      const pids = [...this.daemonPids]
      for (const d of readdirSync("/proc")) {
        if (!/^\d+$/.test(d)) continue
        const id = this.shimContainerId(Number(d))
        if (id !== undefined && this.engineContainerIds.has(id)) pids.push(Number(d))
      }
      for (const pid of pids) {
        const group = cpuacctGroupOf(pid)
        if (group === undefined || group === "/hermes-bench-engine") continue
        writeFileSync(`${ENGINE_GROUP}/cgroup.procs`, String(pid))
        this.moved.push({ pid, group })
      }
      return
    }
    this.poll()
    this.timer = setInterval(() => this.poll(), this.pollMs)
    this.timer.unref()
  }

  /** Put the engine's processes back where they were (a previous run's leftovers go to the root group), remove the group. */
  stop() {
    if (this.timer) clearInterval(this.timer)
    if (this.method !== "cgroup" || !existsSync(ENGINE_GROUP)) return
    const original = new Map(this.moved.map((m) => [m.pid, m.group]))
    const dockerdGroup = original.get(this.daemonPids[0]!) ?? "/"
    for (const line of readFileSync(`${ENGINE_GROUP}/cgroup.procs`, "utf8").split("\n")) {
      const pid = Number(line)
      if (!pid) continue
      const target = `${CPUACCT}${original.get(pid) ?? dockerdGroup}`.replace(/\/$/, "")
      try {
        writeFileSync(`${target}/cgroup.procs`, String(pid))
      } catch {
        try {
          writeFileSync(`${CPUACCT}/cgroup.procs`, String(pid))
        } catch {
          // exited meanwhile
        }
      }
    }
    try {
      rmdirSync(ENGINE_GROUP)
    } catch {
      // a process was born in it meanwhile; the next run reuses the group
    }
  }

  /** Containers whose shims were seen. */
  shimContainerIds(): ReadonlyMap<number, string> {
    return this.shimIds
  }

  poll() {
    this.polls++
    const present = new Set<number>()
    for (const d of readdirSync("/proc")) {
      const c = d.charCodeAt(0)
      if (c < 48 || c > 57) continue
      const pid = Number(d)
      present.add(pid)
      if (this.notShims.has(pid)) continue
      if (!this.shimIds.has(pid)) {
        const id = this.shimContainerId(pid)
        if (id === undefined) {
          // containerd forks, then execs the shim; the shim's `start` invocation forks the daemon, then
          // execs it: until then a new pid shows its parent's name. Decide only once it is old enough.
          const first = this.young.get(pid)
          if (first === undefined) this.young.set(pid, performance.now())
          else if (performance.now() - first > 1_000) {
            this.young.delete(pid)
            this.notShims.add(pid)
          }
          continue
        }
        this.young.delete(pid)
        this.shimIds.set(pid, id)
      }
      const t = statTicks(pid)
      if (t !== undefined) this.lastTicks.set(pid, t)
    }
    // Forget exited non-shim pids, so a recycled pid is looked at again.
    for (const pid of this.notShims) if (!present.has(pid)) this.notShims.delete(pid)
    for (const pid of this.young.keys()) if (!present.has(pid)) this.young.delete(pid)
  }

  /** The container id if `pid` is a shim daemon (not its short-lived `start` invocation, which containerd reaps). */
  shimContainerId(pid: number): string | undefined {
    const comm = readComm(pid)
    if (comm === undefined || !comm.startsWith("containerd-shim")) return undefined
    let cmdline: Array<string>
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    } catch {
      return undefined
    }
    const i = cmdline.indexOf("-id")
    if (i < 0 || cmdline.includes("start")) return undefined
    return cmdline[i + 1]
  }

  snapshot(): CpuSnapshot {
    if (this.method === "cgroup") {
      const containerGroups = new Map<string, number>()
      for (const d of readdirSync(CONTAINERS_GROUP, { withFileTypes: true })) {
        if (!d.isDirectory()) continue
        try {
          containerGroups.set(d.name, groupSec(`${CONTAINERS_GROUP}/${d.name}`))
        } catch {
          // removed meanwhile
        }
      }
      return {
        daemonTicks: 0,
        shims: new Map(),
        engineGroupSec: groupSec(ENGINE_GROUP),
        containersGroupSec: groupSec(CONTAINERS_GROUP),
        containerGroups,
        kernel: kernelTicks(),
        at: performance.now()
      }
    }
    this.poll()
    let daemonTicks = 0
    for (const pid of this.daemonPids) daemonTicks += statTicks(pid) ?? 0
    return { daemonTicks, shims: new Map(this.lastTicks), kernel: kernelTicks(), at: performance.now() }
  }

  window(a: CpuSnapshot, b: CpuSnapshot, isMine: (containerId: string) => boolean): CpuWindow {
    if (this.method === "cgroup") {
      // Other people's containers that lived through the window are taken out; ones they created
      // and removed within it cannot be (their count is reported as contention).
      let foreign = 0
      for (const [id, sec] of b.containerGroups ?? []) {
        const before = a.containerGroups?.get(id)
        if (before !== undefined && !isMine(id)) foreign += sec - before
      }
      return {
        daemonsSec: b.engineGroupSec! - a.engineGroupSec!,
        shimsSec: b.containersGroupSec! - a.containersGroupSec! - foreign,
        foreignShimsSec: foreign,
        kernelSec: kernelSecBetween(a.kernel, b.kernel),
        wallSec: (b.at - a.at) / 1000
      }
    }
    let mine = 0
    let foreign = 0
    for (const [pid, ticks] of b.shims) {
      const delta = ticks - (a.shims.get(pid) ?? 0)
      if (delta <= 0) continue
      const id = this.shimIds.get(pid)
      if (id !== undefined && isMine(id)) mine += delta
      else foreign += delta
    }
    return {
      daemonsSec: (b.daemonTicks - a.daemonTicks) / TICKS_PER_SEC,
      shimsSec: mine / TICKS_PER_SEC,
      foreignShimsSec: foreign / TICKS_PER_SEC,
      kernelSec: kernelSecBetween(a.kernel, b.kernel),
      wallSec: (b.at - a.at) / 1000
    }
  }
}

interface Tracked {
  readonly owner: string
  readonly pool: boolean
  running: boolean
  started: boolean
}

/** Follows the engine's container events for this run. */
export class EngineEvents {
  private readonly containers = new Map<string, Tracked>()
  private readonly mine = new Set<string>()
  /** executor id -> variant name */
  private readonly executors = new Map<string, string>()
  private foreignCreates = 0
  private stream: IncomingMessage | undefined
  private waiters = new Set<() => void>()

  constructor(
    private readonly docker: Docker,
    private readonly runId: string
  ) {}

  async start() {
    this.stream = (await this.docker.getEvents({ filters: { type: ["container"] } })) as unknown as IncomingMessage
    let buffer = ""
    this.stream.setEncoding("utf8")
    this.stream.on("data", (chunk: string) => {
      buffer += chunk
      let nl: number
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim()
        buffer = buffer.slice(nl + 1)
        if (line !== "") this.onEvent(JSON.parse(line) as DockerEvent)
      }
    })
    this.stream.on("error", () => {})
  }

  stop() {
    this.stream?.destroy()
  }

  registerExecutor(executorId: string, variant: string) {
    this.executors.set(executorId, variant)
  }

  isMine = (containerId: string) => this.mine.has(containerId)

  /** Containers other people created since the last call. */
  takeForeignCreates(): number {
    const n = this.foreignCreates
    this.foreignCreates = 0
    return n
  }

  /** This variant's containers: all, and the running warm-pool ones. */
  count(owner: string, except?: (id: string) => boolean) {
    let all = 0
    let poolRunning = 0
    for (const [id, c] of this.containers) {
      if (c.owner !== owner || except?.(id)) continue
      if (c.pool && c.running) poolRunning++
      else all++
    }
    return { others: all, poolRunning }
  }

  /** Wait until `settled()` holds (re-checked on every event), or the deadline. */
  waitUntil(settled: () => boolean, timeoutMs: number): Promise<boolean> {
    if (settled()) return Promise.resolve(true)
    return new Promise((resolve) => {
      const check = () => {
        if (settled()) {
          done(true)
        }
      }
      const timer = setTimeout(() => done(settled()), timeoutMs)
      const done = (v: boolean) => {
        clearTimeout(timer)
        this.waiters.delete(check)
        resolve(v)
      }
      this.waiters.add(check)
    })
  }

  private ownerOf(attrs: Record<string, string>): string | undefined {
    if (attrs[BenchLabel.run] === this.runId) return attrs[BenchLabel.variant] ?? "bench"
    const executor = attrs[Label.executor]
    return executor === undefined ? undefined : this.executors.get(executor)
  }

  private onEvent(e: DockerEvent) {
    const id = e.id ?? e.Actor?.ID
    const action = (e.Action ?? e.status ?? "").split(":")[0]
    if (id === undefined) return
    const attrs = e.Actor?.Attributes ?? {}
    if (action === "create") {
      const owner = this.ownerOf(attrs)
      if (owner === undefined) {
        this.foreignCreates++
        return
      }
      this.mine.add(id)
      this.containers.set(id, { owner, pool: attrs[Label.pool] === "true", running: false, started: false })
    }
    const c = this.containers.get(id)
    if (c === undefined) return
    if (action === "start") {
      c.running = true
      c.started = true
    } else if (action === "die") {
      c.running = false
    } else if (action === "destroy") {
      this.containers.delete(id)
    }
    for (const w of [...this.waiters]) w()
  }
}

interface DockerEvent {
  readonly id?: string
  readonly status?: string
  readonly Action?: string
  readonly Actor?: { readonly ID?: string; readonly Attributes?: Record<string, string> }
}
