/**
 * A private Docker engine for tests that kill or restart the engine: its own dockerd (and the
 * containerd it manages) with its own data root, exec root, socket and pidfile, no bridge and
 * no iptables, so it touches neither the shared engine nor host networking.
 */
import { copyImages } from "../support/docker.js"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import Docker from "dockerode"
import { runChecks } from "@hermes-sandbox/cli/commands/doctor"
import { ProcessStart } from "@hermes-sandbox/events"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const alive = (pid: number | undefined): boolean => {
  if (pid === undefined || pid <= 0) return false
  return ProcessStart.isRunning(pid)
}

export class PrivateEngine {
  readonly dir: string
  readonly socketPath: string
  readonly client: Docker
  private readonly pidfile: string
  private readonly logPath: string
  private child: ChildProcess | undefined

  /**
   * `dataRootOn: "xfs"`: the data root is a fresh XFS filesystem (a sparse file on a loop device,
   * mounted the way XFS mounts by default: no project quotas), so its storage driver reports
   * "overlay2 on xfs". Needs mkfs.xfs (xfsprogs) and loop devices.
   * `daemonArgs`: more dockerd flags, e.g. --userns-remap=default.
   */
  constructor(
    private readonly options: {
      readonly dataRootOn?: "xfs"
      readonly daemonArgs?: ReadonlyArray<string>
      readonly hideCgroups?: ReadonlyArray<string>
    } = {}
  ) {
    // Short: containerd's socket path inside the exec root must stay under 108 bytes.
    this.dir = mkdtempSync("/tmp/hsd-")
    // Traversable (not listable) by others: with userns-remap the remapped root must reach the data root.
    chmodSync(this.dir, 0o711)
    this.socketPath = join(this.dir, "docker.sock")
    this.pidfile = join(this.dir, "docker.pid")
    this.logPath = join(this.dir, "dockerd.log")
    writeFileSync(join(this.dir, "daemon.json"), "{}\n")
    this.client = new Docker({ socketPath: this.socketPath })
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  /**
   * The containerd this dockerd manages (it survives a SIGKILL of dockerd, as in production).
   * Its pidfile outlives it, so the pid counts only while its command line names our directory:
   * a pid reused by another process must never be signalled.
   */
  get containerdPid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.dir, "exec/containerd/containerd.pid"), "utf8").trim())
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      return cmdline.includes(this.dir) ? pid : undefined
    } catch {
      return undefined
    }
  }

  log(): string {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-30).join("\n")
    } catch {
      return ""
    }
  }

  async start(timeoutMs = 30_000): Promise<void> {
    const dataRoot = join(this.dir, "data")
    if (this.options.dataRootOn === "xfs" && !existsSync(dataRoot)) {
      try {
        execFileSync("sh", ["-c", "command -v mkfs.xfs"], { stdio: "pipe" })
      } catch {
        throw new Error(
          "mkfs.xfs is missing: install xfsprogs (Debian: apt-get install xfsprogs; scripts/test.sh does it)"
        )
      }
      const image = join(this.dir, "xfs.img")
      mkdirSync(dataRoot)
      execFileSync("truncate", ["-s", "3G", image])
      execFileSync("mkfs.xfs", ["-q", image], { stdio: "pipe" })
      // A loop mount frees its device when unmounted (destroy unmounts everything under dir).
      execFileSync("mount", ["-o", "loop", image, dataRoot], { stdio: "pipe" })
    }
    const out = openSync(this.logPath, "a")
    // `hideCgroups`: dockerd (and the containerd, shims and runc it starts) runs in a mount
    // namespace where those cgroup v1 hierarchies are unmounted, as on a kernel without them.
    const hidden = this.options.hideCgroups ?? []
    const [command, prefix] =
      hidden.length === 0
        ? ["dockerd", []]
        : [
            "unshare",
            [
              "-m",
              "--propagation",
              "private",
              "sh",
              "-c",
              `${hidden.map((c) => `umount /sys/fs/cgroup/${c} && `).join("")}exec dockerd "$@"`,
              "dockerd"
            ]
          ]
    this.child = spawn(
      command,
      [
        ...prefix,
        "--data-root",
        dataRoot,
        "--exec-root",
        join(this.dir, "exec"),
        "-H",
        `unix://${this.socketPath}`,
        "--pidfile",
        this.pidfile,
        "--config-file",
        join(this.dir, "daemon.json"),
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--userland-proxy=false",
        "--log-level=warn",
        ...(this.options.daemonArgs ?? [])
      ],
      { stdio: ["ignore", out, out] }
    )
    closeSync(out)
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      if (!alive(this.child.pid)) throw new Error(`private dockerd exited at start:\n${this.log()}`)
      try {
        await this.client.ping()
        return
      } catch {
        await sleep(100)
      }
    }
    throw new Error(`private dockerd did not answer within ${timeoutMs} ms:\n${this.log()}`)
  }

  /** Copy an image from the shared engine. */
  loadImage(image: string): void {
    copyImages([image], this.socketPath)
  }

  /** Signal dockerd and wait until it has exited (SIGTERM: it stops its containers first). */
  async stop(signal: NodeJS.Signals = "SIGTERM", timeoutMs = 30_000): Promise<void> {
    // Through the ChildProcess, which knows when dockerd has exited (its pid may be reused after).
    const child = this.child
    const running = () => child !== undefined && child.exitCode === null && child.signalCode === null
    if (!running()) return
    const exited = new Promise<void>((resolve) => child!.once("exit", () => resolve()))
    child!.kill(signal)
    await Promise.race([exited, sleep(timeoutMs)])
    if (running()) {
      child!.kill("SIGKILL")
      await exited
    }
  }

  /** Stop everything this engine started and remove its directory. */
  async destroy(): Promise<void> {
    try {
      await this.stop("SIGTERM", 30_000)
    } catch {
      // fall through to the hard cleanup
    }
    const containerd = this.containerdPid
    if (alive(containerd)) {
      process.kill(containerd!, "SIGTERM")
      for (let i = 0; i < 50 && alive(containerd); i++) await sleep(100)
      if (this.containerdPid === containerd) process.kill(containerd!, "SIGKILL")
    }
    // Shims of containers this engine ran (only if a crash left any), found by their containerd address.
    const address = join(this.dir, "exec/containerd/containerd.sock")
    for (const entry of readdirProc()) {
      if (entry.cmdline.includes(address)) {
        try {
          process.kill(entry.pid, "SIGKILL")
        } catch {
          // gone
        }
      }
    }
    // Mounts a crash may have left under the data root.
    const mounts = readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .map((l) => l.split(" ")[1] ?? "")
      .filter((m) => m.startsWith(this.dir))
    for (const m of mounts.sort((a, b) => b.length - a.length)) {
      try {
        execFileSync("umount", ["-l", m], { stdio: "ignore" })
      } catch {
        // already gone
      }
    }
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true })
  }
}

/** `hermes-sandbox doctor`'s checks against this engine (as with DOCKER_HOST pointing at it). */
export const doctorChecks = async (engine: { readonly socketPath: string }) => {
  const saved = process.env.DOCKER_HOST
  process.env.DOCKER_HOST = `unix://${engine.socketPath}`
  try {
    return await runChecks()
  } finally {
    if (saved === undefined) delete process.env.DOCKER_HOST
    else process.env.DOCKER_HOST = saved
  }
}

/** Every process on the host with its command line. */
export const readdirProc = (): Array<{ pid: number; cmdline: string }> => {
  const out: Array<{ pid: number; cmdline: string }> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      out.push({ pid: Number(name), cmdline: readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0/g, " ") })
    } catch {
      // exited meanwhile
    }
  }
  return out
}
