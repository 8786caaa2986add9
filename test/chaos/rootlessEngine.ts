/**
 * A rootless Docker engine for tests: dockerd run by an unprivileged user through rootlesskit
 * (Debian's dockerd-rootless.sh), with its own data root and socket. On this machine it runs
 * without a network namespace of its own (rootlesskit --net=host: no /dev/net/tun for the user)
 * and with no bridge; sandboxes have no network anyway. Everything it starts is killed and its
 * directory removed by destroy().
 */
import { copyImages } from "../support/docker.js"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { chmodSync, chownSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import Docker from "dockerode"
import { readdirProc } from "./privateEngine.js"

const SCRIPT = "/usr/share/docker.io/contrib/dockerd-rootless.sh"
export const ROOTLESS_USER = "hermes-rootless"
/**
 * The user's host uid and gid: fixed, never useradd's next free uid (1001 on a fresh machine).
 * Sandboxes run as host uid 1001 by default, and the kernel counts inotify instances, POSIX
 * mqueue bytes and pending signals per host uid: a sandbox on the shared engine could exhaust the
 * rootless engine's own. Outside SandboxUid.RANGE (the per-sandbox uids) too.
 */
export const ROOTLESS_UID = 1990

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const have = (command: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${command}`], { stdio: "pipe" })
    return true
  } catch {
    return false
  }
}

/** The user (created if missing, with subordinate ids) and its uid/gid. */
const ensureUser = (): { uid: number; gid: number; home: string } => {
  const id = (flag: string): number | undefined => {
    try {
      return Number(execFileSync("id", [flag, ROOTLESS_USER], { encoding: "utf8", stdio: "pipe" }).trim())
    } catch {
      return undefined
    }
  }
  const holder = (db: string) =>
    execFileSync("sh", ["-c", `getent ${db} ${ROOTLESS_UID} | cut -d: -f1`], { encoding: "utf8" }).trim()
  const existing = id("-u")
  if (existing === undefined) {
    for (const db of ["passwd", "group"]) {
      const taken = holder(db)
      if (taken !== "") throw new Error(`id ${ROOTLESS_UID} (for ${ROOTLESS_USER}) is taken in ${db} by ${taken}`)
    }
    execFileSync("groupadd", ["-g", String(ROOTLESS_UID), ROOTLESS_USER], { stdio: "pipe" })
    execFileSync(
      "useradd",
      ["-m", "-s", "/bin/sh", "-u", String(ROOTLESS_UID), "-g", String(ROOTLESS_UID), ROOTLESS_USER],
      { stdio: "pipe" }
    )
  } else if (existing !== ROOTLESS_UID || id("-g") !== ROOTLESS_UID) {
    // Made by an earlier version of this helper with useradd's next free uid (1001, the sandboxes' uid).
    if (existing !== ROOTLESS_UID)
      execFileSync("usermod", ["-u", String(ROOTLESS_UID), ROOTLESS_USER], { stdio: "pipe" })
    if (id("-g") !== ROOTLESS_UID)
      execFileSync("groupmod", ["-g", String(ROOTLESS_UID), ROOTLESS_USER], { stdio: "pipe" })
  }
  for (const file of ["/etc/subuid", "/etc/subgid"]) {
    if (
      !readFileSync(file, "utf8")
        .split("\n")
        .some((l) => l.startsWith(`${ROOTLESS_USER}:`))
    ) {
      throw new Error(`${file} has no range for ${ROOTLESS_USER}; add one, e.g. "${ROOTLESS_USER}:300000:65536"`)
    }
  }
  const [uid, gid, home] = execFileSync(
    "sh",
    ["-c", `id -u ${ROOTLESS_USER}; id -g ${ROOTLESS_USER}; getent passwd ${ROOTLESS_USER} | cut -d: -f6`],
    { encoding: "utf8" }
  )
    .trim()
    .split("\n")
  return { uid: Number(uid), gid: Number(gid), home: home! }
}

/** The first host uid of the user's subordinate range: container uid N (N ≥ 1) is this + N − 1 on the host. */
export const subordinateBase = (): number =>
  Number(
    readFileSync("/etc/subuid", "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${ROOTLESS_USER}:`))!
      .split(":")[1]
  )

export class RootlessEngine {
  readonly dir: string
  readonly socketPath: string
  readonly client: Docker
  private child: ChildProcess | undefined
  private readonly logPath: string

  constructor() {
    for (const [command, pkg] of [
      ["rootlesskit", "rootlesskit"],
      ["newuidmap", "uidmap"],
      [SCRIPT, "docker.io"]
    ] as const) {
      if (!have(command))
        throw new Error(
          `${command} is missing: install ${pkg} (Debian: apt-get install ${pkg}; scripts/test.sh does it)`
        )
    }
    this.dir = mkdtempSync("/tmp/hsr-")
    this.socketPath = join(this.dir, "docker.sock")
    this.logPath = join(this.dir, "dockerd.log")
    this.client = new Docker({ socketPath: this.socketPath })
  }

  async start(timeoutMs = 60_000): Promise<void> {
    const user = ensureUser()
    chownSync(this.dir, user.uid, user.gid)
    chmodSync(this.dir, 0o700)
    const out = openSync(this.logPath, "a")
    chownSync(this.logPath, user.uid, user.gid)
    this.child = spawn(
      SCRIPT,
      [
        "--data-root",
        join(this.dir, "data"),
        "--exec-root",
        join(this.dir, "exec"),
        "--pidfile",
        join(this.dir, "docker.pid"),
        "-H",
        `unix://${this.socketPath}`,
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--log-level=warn"
      ],
      {
        uid: user.uid,
        gid: user.gid,
        stdio: ["ignore", out, out],
        env: {
          HOME: user.home,
          USER: ROOTLESS_USER,
          PATH: "/usr/share/docker.io/contrib:/usr/sbin:/usr/bin:/sbin:/bin",
          XDG_RUNTIME_DIR: this.dir,
          DOCKERD_ROOTLESS_ROOTLESSKIT_NET: "host",
          DOCKERD_ROOTLESS_ROOTLESSKIT_PORT_DRIVER: "none"
        }
      }
    )
    closeSync(out)
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`rootless dockerd exited at start:\n${this.log()}`)
      try {
        await this.client.ping()
        return
      } catch {
        await sleep(200)
      }
    }
    throw new Error(`rootless dockerd did not answer within ${timeoutMs} ms:\n${this.log()}`)
  }

  log(): string {
    try {
      return readFileSync(this.logPath, "utf8")
        .split("\n")
        .filter((l) => !l.startsWith("+"))
        .slice(-20)
        .join("\n")
    } catch {
      return ""
    }
  }

  /** Copy an image from the shared engine. */
  loadImage(image: string): void {
    copyImages([image], this.socketPath)
  }

  /** Stop rootlesskit (and the dockerd inside), then anything left that names this directory. */
  async destroy(): Promise<void> {
    const child = this.child
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      child.kill("SIGTERM")
      await Promise.race([exited, sleep(20_000)])
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
    for (let round = 0; round < 20; round++) {
      const left = readdirProc().filter((p) => p.cmdline.includes(this.dir) && p.pid !== process.pid)
      if (left.length === 0) break
      for (const p of left) {
        try {
          process.kill(p.pid, "SIGKILL")
        } catch {
          // gone
        }
      }
      await sleep(100)
    }
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true })
  }
}
