/**
 * Remote engines on loopback, for test/remote/*.remote.test.ts:
 *
 * - TlsEngine: a private dockerd (test/chaos/privateEngine.ts: its own data root, no bridge, no
 *   iptables) that also serves the Engine API on tcp://127.0.0.1:PORT with --tlsverify, from a
 *   CA, a server certificate (IP:127.0.0.1) and a client certificate the test makes with openssl.
 *   It starts empty: the language images are copied from the shared engine (docker save | load).
 * - SshServer: Debian's openssh-server on 127.0.0.1:PORT with its own config, host key, client
 *   key and authorized_keys in a temp directory (public keys only, no passwords, no PAM), in front
 *   of the shared engine: the SDK runs `docker system dial-stdio` there, as the docker CLI does.
 *
 * Missing tools fail with the Debian package to install: openssl, openssh-server.
 */
import { copyImages } from "../support/docker.js"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Docker from "dockerode"
import { defaultLanguageRuntimes, Languages } from "@hermes-sandbox/core"
import type { CreateExecutorOptions } from "@hermes-sandbox/docker"
import { PrivateEngine, readdirProc } from "../chaos/privateEngine.js"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Fails (with the Debian package that provides it) when a tool the harness needs is absent. */
export const requireTool = (path: string, debianPackage: string): void => {
  const found = path.startsWith("/")
    ? existsSync(path)
    : (() => {
        try {
          execFileSync("sh", ["-c", `command -v ${path}`], { stdio: "pipe" })
          return true
        } catch {
          return false
        }
      })()
  if (!found)
    throw new Error(
      `${path} is missing: install the Debian package ${debianPackage} (apt-get install -y ${debianPackage}; see docs/remote-engines.md "Testing")`
    )
}

/** A free tcp port on 127.0.0.1 (free when asked; the daemons bind it right after). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

const openssl = (dir: string, args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })

export interface Certificates {
  readonly dir: string
  /** ca.pem, cert.pem, key.pem: the client's, as DOCKER_CERT_PATH wants them. */
  readonly clientDir: string
  readonly ca: string
  readonly cert: string
  readonly key: string
  readonly serverCert: string
  readonly serverKey: string
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all EC P-256, valid one day. */
export const makeCertificates = (dir: string): Certificates => {
  requireTool("openssl", "openssl")
  mkdirSync(dir, { recursive: true })
  const key = (name: string) =>
    openssl(dir, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name])
  key("ca-key.pem")
  openssl(dir, [
    "req",
    "-x509",
    "-new",
    "-key",
    "ca-key.pem",
    "-days",
    "1",
    "-subj",
    "/CN=hermes-sandbox test CA",
    "-out",
    "ca.pem"
  ])
  const signed = (name: string, subject: string, ext: string) => {
    key(`${name}-key.pem`)
    openssl(dir, ["req", "-new", "-key", `${name}-key.pem`, "-subj", subject, "-out", `${name}.csr`])
    writeFileSync(join(dir, `${name}.ext`), ext)
    openssl(dir, [
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca-key.pem",
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
      "-out",
      `${name}-cert.pem`
    ])
  }
  signed("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
  signed("client", "/CN=hermes-sandbox test client", "extendedKeyUsage=clientAuth\n")
  const clientDir = join(dir, "client")
  mkdirSync(clientDir)
  const read = (f: string) => readFileSync(join(dir, f), "utf8")
  writeFileSync(join(clientDir, "ca.pem"), read("ca.pem"))
  writeFileSync(join(clientDir, "cert.pem"), read("client-cert.pem"))
  writeFileSync(join(clientDir, "key.pem"), read("client-key.pem"), { mode: 0o600 })
  return {
    dir,
    clientDir,
    ca: read("ca.pem"),
    cert: read("client-cert.pem"),
    key: read("client-key.pem"),
    serverCert: join(dir, "server-cert.pem"),
    serverKey: join(dir, "server-key.pem")
  }
}

/** The language images (one saved set: they share their layers), copied from the shared engine. */
const copyLanguageImages = (socketPath: string): void =>
  copyImages(
    Languages.map((l) => defaultLanguageRuntimes[l].image),
    socketPath
  )

/** A private dockerd serving TLS (client certificates required) on 127.0.0.1. */
export class TlsEngine {
  readonly certs: Certificates
  readonly engine: PrivateEngine
  readonly port: number
  private readonly certDir: string

  private constructor(port: number, certDir: string) {
    this.port = port
    this.certDir = certDir
    this.certs = makeCertificates(certDir)
    this.engine = new PrivateEngine({
      daemonArgs: [
        "-H",
        `tcp://127.0.0.1:${port}`,
        "--tlsverify",
        "--tlscacert",
        join(certDir, "ca.pem"),
        "--tlscert",
        this.certs.serverCert,
        "--tlskey",
        this.certs.serverKey
      ]
    })
  }

  static async create(): Promise<TlsEngine> {
    return new TlsEngine(await freePort(), mkdtempSync(join(tmpdir(), "hermes-remote-tls-")))
  }

  get endpoint(): string {
    return `tcp://127.0.0.1:${this.port}`
  }

  /** The engine's unix socket, for the test's own checks (what is on the engine). */
  get local(): Docker {
    return this.engine.client
  }

  /** Executor options that reach the engine over TLS only. */
  get options(): CreateExecutorOptions {
    return { host: this.endpoint, tls: { ca: this.certs.ca, cert: this.certs.cert, key: this.certs.key } }
  }

  /** The same, as the docker CLI's variables. */
  get env(): Record<string, string> {
    return { DOCKER_HOST: this.endpoint, DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: this.certs.clientDir }
  }

  async start(): Promise<void> {
    await this.engine.start()
    // The tcp listener comes up with the unix one; wait until TLS answers too.
    const client = new Docker({
      host: "127.0.0.1",
      port: this.port,
      protocol: "https",
      ca: this.certs.ca,
      cert: this.certs.cert,
      key: this.certs.key
    })
    for (let i = 0; ; i++) {
      try {
        await client.ping()
        return
      } catch (error) {
        if (i > 100)
          throw new Error(
            `the TLS listener on ${this.endpoint} does not answer: ${(error as Error).message}\n${this.engine.log()}`
          )
        await sleep(100)
      }
    }
  }

  loadImages(): void {
    copyLanguageImages(this.engine.socketPath)
  }

  async destroy(): Promise<void> {
    await this.engine.destroy()
    rmSync(this.certDir, { recursive: true, force: true })
  }
}

/** sshd on 127.0.0.1 in front of the shared engine. */
export class SshServer {
  readonly dir: string
  readonly port: number
  readonly clientKey: string
  readonly hostPublicKey: string
  private child: ChildProcess | undefined
  private readonly logPath: string

  private constructor(dir: string, port: number) {
    requireTool("/usr/sbin/sshd", "openssh-server")
    requireTool("ssh-keygen", "openssh-client")
    this.dir = dir
    this.port = port
    this.logPath = join(dir, "sshd.log")
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "host_key")])
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "client_key")])
    this.clientKey = readFileSync(join(dir, "client_key"), "utf8")
    this.hostPublicKey = readFileSync(join(dir, "host_key.pub"), "utf8").trim()
    writeFileSync(join(dir, "authorized_keys"), readFileSync(join(dir, "client_key.pub")), { mode: 0o600 })
    writeFileSync(join(dir, "known_hosts"), `[127.0.0.1]:${port} ${this.hostPublicKey}\n`)
    writeFileSync(
      join(dir, "sshd_config"),
      [
        `Port ${port}`,
        "ListenAddress 127.0.0.1",
        `HostKey ${join(dir, "host_key")}`,
        `PidFile ${join(dir, "sshd.pid")}`,
        `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        // The temp directory is not root-owned all the way up as StrictModes wants.
        "StrictModes no",
        "AllowTcpForwarding no",
        "X11Forwarding no",
        // Many short connections at once (docker-modem opens one per request).
        "MaxStartups 100:30:200",
        "MaxSessions 100",
        "LogLevel ERROR",
        ""
      ].join("\n")
    )
  }

  static async create(): Promise<SshServer> {
    return new SshServer(mkdtempSync(join(tmpdir(), "hermes-remote-ssh-")), await freePort())
  }

  get user(): string {
    return execFileSync("id", ["-un"], { encoding: "utf8" }).trim()
  }

  get endpoint(): string {
    return `ssh://${this.user}@127.0.0.1:${this.port}`
  }

  /** Executor options that reach the shared engine through this sshd only. */
  get options(): CreateExecutorOptions {
    return { host: this.endpoint, ssh: { privateKey: this.clientKey, knownHostsFile: join(this.dir, "known_hosts") } }
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  log(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, "utf8").slice(-3000) : ""
  }

  async start(): Promise<void> {
    // sshd's privilege separation directory (the package makes it at boot via tmpfiles).
    mkdirSync("/run/sshd", { recursive: true, mode: 0o755 })
    this.child = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(this.dir, "sshd_config"), "-E", this.logPath], {
      stdio: "ignore"
    })
    const exited = new Promise<void>((resolve) => this.child!.once("exit", () => resolve()))
    for (let i = 0; i < 100; i++) {
      const listening = await new Promise<boolean>((resolve) => {
        const socket = new Socket()
        socket.once("connect", () => {
          socket.destroy()
          resolve(true)
        })
        socket.once("error", () => resolve(false))
        socket.connect(this.port, "127.0.0.1")
      })
      if (listening) return
      if (await Promise.race([exited.then(() => true), sleep(100).then(() => false)])) break
    }
    throw new Error(`sshd did not start on 127.0.0.1:${this.port}:\n${this.log()}`)
  }

  /** The processes serving connections: the listener's descendants (per-connection sshd, its session, dial-stdio). */
  connectionPids(): Array<number> {
    const master = this.child?.pid
    if (master === undefined) return []
    const parents = new Map<number, number>()
    for (const { pid } of readdirProc()) {
      try {
        parents.set(
          pid,
          Number(
            readFileSync(`/proc/${pid}/stat`, "utf8")
              .replace(/^.*\) /, "")
              .split(" ")[1]
          )
        )
      } catch {
        // ended meanwhile
      }
    }
    const found: Array<number> = []
    let frontier = [master]
    while (frontier.length > 0) {
      const next = [...parents].filter(([, ppid]) => frontier.includes(ppid)).map(([pid]) => pid)
      found.push(...next)
      frontier = next
    }
    return found
  }

  /** Cut every open ssh connection: SIGKILL the processes serving them (the listener stays and takes new ones). */
  cutConnections(): number {
    const pids = this.connectionPids()
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // ended meanwhile
      }
    }
    return pids.length
  }

  async destroy(): Promise<void> {
    const child = this.child
    const serving = this.connectionPids()
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      child.kill("SIGTERM")
      await Promise.race([exited, sleep(5_000)])
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
    // Connections' processes outlive a SIGTERM of the listener: end them too.
    for (const pid of [
      ...serving,
      ...readdirProc()
        .filter((p) => p.cmdline.includes(this.dir))
        .map((p) => p.pid)
    ]) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone
      }
    }
    rmSync(this.dir, { recursive: true, force: true })
  }
}
