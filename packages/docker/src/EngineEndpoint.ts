/**
 * Which Docker engine to talk to, and how: the one place that reads the engine options,
 * DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_TLS / DOCKER_CERT_PATH and docker contexts, in the
 * docker CLI's order of precedence:
 *
 *   1. options: `host` ("unix://…", "tcp://…", "ssh://user@host[:port]", or a bare hostname with
 *      `port`, as before) or `socketPath`                       -> source "option"
 *   2. options: `context`                                        -> source "context NAME"
 *   3. $DOCKER_HOST                                              -> source "DOCKER_HOST"
 *   4. $DOCKER_CONTEXT, else ~/.docker/config.json currentContext -> source "context NAME"
 *   5. unix:///var/run/docker.sock                               -> source "default"
 *
 * It returns a description for people (kind, endpoint without secrets, whether TLS is verified,
 * where the choice came from), the transport for another process that must reach the same
 * engine the same way (the watchdog: it holds keys, so it travels on a pipe, never on argv),
 * and the dockerode client.
 *
 * Plain tcp to a non-loopback address is refused (anyone on the path could read the code and
 * drive the engine, which is root on its host) unless `allowInsecureTcp` or
 * HERMES_SANDBOX_ALLOW_INSECURE_TCP=1 says so. An ssh:// host key is checked against
 * known_hosts (or `ssh.hostKey`), as the ssh client the docker CLI runs would.
 */
import { Agent as HttpsAgent } from "node:https"
import { existsSync, readFileSync } from "node:fs"
import { homedir, userInfo } from "node:os"
import { createRequire } from "node:module"
import { join } from "node:path"
import type Docker from "dockerode"
import { Either } from "effect"
import { invalidRequest } from "@hermes-sandbox/core/Errors"
import { onFirstUse } from "@hermes-sandbox/core/OnFirstUse"
import { type EngineHost, type InvalidRequest } from "@hermes-sandbox/core"
import * as DockerContext from "./DockerContext.js"
import * as KnownHosts from "./internal/knownHosts.js"
import { type SshLogin, sshAgent } from "./internal/sshAgent.js"

/** PEM text (or its bytes). */
export type Pem = string | Buffer

/** TLS client material: inline, or a directory holding ca.pem, cert.pem and key.pem (as DOCKER_CERT_PATH). */
export type TlsOptions = { readonly ca?: Pem; readonly cert: Pem; readonly key: Pem } | { readonly certPath: string }

export interface SshOptions {
  /** The client's private key (PEM / OpenSSH format). Default: the agent at $SSH_AUTH_SOCK and ~/.ssh/id_ed25519, id_ecdsa, id_rsa. */
  readonly privateKey?: Pem
  /** A file holding the private key (instead of `privateKey`). */
  readonly identityFile?: string
  readonly passphrase?: string
  /** An ssh-agent socket. Default $SSH_AUTH_SOCK. */
  readonly agent?: string
  /** The server's public key(s) ("ssh-ed25519 AAAA…"), instead of looking in known_hosts. */
  readonly hostKey?: string | ReadonlyArray<string>
  /** Default ~/.ssh/known_hosts. */
  readonly knownHostsFile?: string
  /** Check the server's host key (default true). false accepts any key: a man in the middle gets the engine. */
  readonly verifyHostKey?: boolean
}

/** The options that pick the engine (DockerEngineOptions extends them). */
export interface EngineEndpointOptions {
  /** Unix socket path. Default: $DOCKER_HOST, a docker context, or /var/run/docker.sock. */
  readonly socketPath?: string
  /**
   * "unix:///path", "tcp://host:port", "ssh://user@host[:port]", or a bare hostname (tcp, with
   * `port`). Takes precedence over `socketPath`, `context` and the environment.
   */
  readonly host?: string
  /** The tcp port for a bare `host`. Default 2375 (2376 with TLS). */
  readonly port?: number
  /** tcp with TLS and this client certificate. Default: from DOCKER_TLS_VERIFY / DOCKER_TLS and DOCKER_CERT_PATH. */
  readonly tls?: TlsOptions
  /** Check the engine's certificate against `tls.ca` (default true). */
  readonly tlsVerify?: boolean
  readonly ssh?: SshOptions
  /** A docker context by name (see `docker context ls`), read from ~/.docker/contexts. */
  readonly context?: string
  /** Allow plain (unencrypted, unauthenticated) tcp to a non-loopback address. Also: HERMES_SANDBOX_ALLOW_INSECURE_TCP=1. */
  readonly allowInsecureTcp?: boolean
}

export type EngineKind = "unix" | "tcp" | "tls" | "ssh"

/** How the engine is reached, for people (doctor, messages): no key, no password. */
export interface EngineDescription {
  readonly kind: EngineKind
  /** unix:///var/run/docker.sock, tcp://host:port (also for tls), ssh://user@host:port. */
  readonly endpoint: string
  /** TLS with the engine's certificate checked against the CA (false for every kind but a verified tls). */
  readonly tlsVerified: boolean
  /** ssh only: whether the server's host key is checked. */
  readonly hostKeyVerified?: boolean
  /** "option", "DOCKER_HOST", "context NAME" or "default". */
  readonly source: string
}

/** What another process needs to reach the engine the same way (JSON; holds secrets). */
export type EngineTransport =
  | { readonly kind: "unix"; readonly socketPath: string }
  | { readonly kind: "tcp"; readonly host: string; readonly port: number }
  | {
      readonly kind: "tls"
      readonly host: string
      readonly port: number
      readonly ca?: string
      readonly cert: string
      readonly key: string
      readonly verify: boolean
    }
  | (SshLogin & {
      readonly kind: "ssh"
      /** base64 wire blobs of the accepted host keys (checked when verifyHostKey). */
      readonly hostKeys: ReadonlyArray<string>
      readonly verifyHostKey: boolean
    })

export interface EngineEndpoint {
  readonly description: EngineDescription
  readonly transport: EngineTransport
  readonly docker: Docker
}

/** The environment variable that allows plain tcp to a non-loopback engine. */
export const ALLOW_INSECURE_TCP_ENV = "HERMES_SANDBOX_ALLOW_INSECURE_TCP"
export const DEFAULT_SOCKET = "/var/run/docker.sock"

export const isLoopback = (host: string): boolean => {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase()
  return h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/.test(h)
}

const enabled = (value: string | undefined): boolean =>
  value !== undefined && value !== "" && value !== "0" && value.toLowerCase() !== "false"

interface Place {
  readonly host: string
  readonly source: string
  /** TLS material and verification that came with the place (a context's). */
  readonly tls?: { readonly material?: TlsMaterial; readonly verify: boolean }
  /** Whether DOCKER_TLS_VERIFY/DOCKER_TLS/DOCKER_CERT_PATH apply (not for a context, which has its own). */
  readonly envTls: boolean
}

interface TlsMaterial {
  readonly ca?: string | undefined
  readonly cert?: string | undefined
  readonly key?: string | undefined
}

type Resolved<A> = Either.Either<A, InvalidRequest>

const fail = (field: string, value: unknown, allowed: string): Resolved<never> =>
  Either.left(invalidRequest(field, value, allowed))

const text = (pem: Pem | undefined): string | undefined =>
  pem === undefined ? undefined : typeof pem === "string" ? pem : pem.toString("utf8")

const readCertDir = (field: string, dir: string): Resolved<TlsMaterial> => {
  const files = { ca: join(dir, "ca.pem"), cert: join(dir, "cert.pem"), key: join(dir, "key.pem") }
  const missing = [files.cert, files.key].filter((f) => !existsSync(f))
  if (missing.length > 0)
    return fail(field, dir, `a directory holding cert.pem and key.pem (and ca.pem); missing ${missing.join(", ")}`)
  return Either.right({
    ...(existsSync(files.ca) ? { ca: readFileSync(files.ca, "utf8") } : {}),
    cert: readFileSync(files.cert, "utf8"),
    key: readFileSync(files.key, "utf8")
  })
}

/** Where the engine is, before any transport detail: the first of option, context option, DOCKER_HOST, current context, default. */
const place = (options: EngineEndpointOptions, env: NodeJS.ProcessEnv, home: string): Resolved<Place> => {
  if (options.host !== undefined) {
    // A bare hostname is the old { host, port } option: tcp.
    const host = /^[a-z]+:\/\//i.test(options.host)
      ? options.host
      : `tcp://${bracketed(options.host)}${options.port === undefined ? "" : `:${options.port}`}`
    return Either.right({ host, source: "option", envTls: true })
  }
  if (options.socketPath !== undefined)
    return Either.right({ host: `unix://${options.socketPath}`, source: "option", envTls: false })
  const fromContext = (name: string): Resolved<Place> => {
    let context: DockerContext.DockerContext | undefined
    try {
      context = DockerContext.read(name, env, home)
    } catch (error) {
      return fail("context", name, (error as Error).message)
    }
    if (context === undefined) return Either.right(defaultPlace(env, `context default`))
    const tls = context.tls === undefined ? undefined : { material: context.tls, verify: !context.skipTlsVerify }
    return Either.right({
      host: context.host,
      source: `context ${name}`,
      envTls: false,
      ...(tls === undefined ? {} : { tls })
    })
  }
  if (options.context !== undefined) return fromContext(options.context)
  if (env.DOCKER_HOST !== undefined && env.DOCKER_HOST !== "")
    return Either.right({ host: env.DOCKER_HOST, source: "DOCKER_HOST", envTls: true })
  let current: string | undefined
  try {
    current = DockerContext.currentName(env, home)
  } catch (error) {
    return fail("context", "currentContext", (error as Error).message)
  }
  if (current !== undefined) return fromContext(current)
  return Either.right(defaultPlace(env, "default"))
}

/** The CLI's "default" context: DOCKER_HOST when set, else the local socket. */
const defaultPlace = (env: NodeJS.ProcessEnv, source: string): Place =>
  env.DOCKER_HOST !== undefined && env.DOCKER_HOST !== ""
    ? { host: env.DOCKER_HOST, source: "DOCKER_HOST", envTls: true }
    : { host: `unix://${DEFAULT_SOCKET}`, source, envTls: false }

const bracketed = (host: string) => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/** TLS for a tcp place: the options', else the place's (a context), else the environment's; undefined for plain tcp. */
const tlsOf = (
  options: EngineEndpointOptions,
  at: Place,
  env: NodeJS.ProcessEnv,
  home: string
): Resolved<{ material: TlsMaterial; verify: boolean } | undefined> => {
  if (options.tls !== undefined) {
    const verify = options.tlsVerify ?? true
    if ("certPath" in options.tls)
      return Either.map(readCertDir("tls.certPath", options.tls.certPath), (material) => ({ material, verify }))
    const material = {
      cert: text(options.tls.cert),
      key: text(options.tls.key),
      ...(options.tls.ca === undefined ? {} : { ca: text(options.tls.ca) })
    }
    return Either.right({ material, verify })
  }
  if (at.tls !== undefined)
    return Either.right({ material: at.tls.material ?? {}, verify: options.tlsVerify ?? at.tls.verify })
  if (!at.envTls) return Either.right(undefined)
  // The docker CLI's rule: DOCKER_TLS_VERIFY means TLS with verification, DOCKER_TLS TLS without.
  const verify = options.tlsVerify ?? enabled(env.DOCKER_TLS_VERIFY)
  if (!verify && !enabled(env.DOCKER_TLS) && options.tlsVerify === undefined) return Either.right(undefined)
  const dir =
    env.DOCKER_CERT_PATH !== undefined && env.DOCKER_CERT_PATH !== ""
      ? env.DOCKER_CERT_PATH
      : DockerContext.configDir(env, home)
  return Either.map(readCertDir("DOCKER_CERT_PATH", dir), (material) => ({ material, verify }))
}

const DEFAULT_IDENTITIES = ["id_ed25519", "id_ecdsa", "id_rsa"]

const sshTransport = (
  url: URL,
  options: SshOptions,
  env: NodeJS.ProcessEnv,
  home: string
): Resolved<Extract<EngineTransport, { kind: "ssh" }>> => {
  const host = url.hostname.replace(/^\[|\]$/g, "")
  const port = url.port === "" ? 22 : Number(url.port)
  const username = decodeURIComponent(url.username) || env.USER || safeUsername()
  let privateKey = text(options.privateKey)
  if (privateKey === undefined && options.identityFile !== undefined) {
    if (!existsSync(options.identityFile))
      return fail("ssh.identityFile", options.identityFile, "a readable private key file")
    privateKey = readFileSync(options.identityFile, "utf8")
  }
  const agent =
    options.agent ?? (env.SSH_AUTH_SOCK !== undefined && env.SSH_AUTH_SOCK !== "" ? env.SSH_AUTH_SOCK : undefined)
  if (privateKey === undefined) {
    const found = DEFAULT_IDENTITIES.map((n) => join(home, ".ssh", n)).find((f) => existsSync(f))
    if (found !== undefined) privateKey = readFileSync(found, "utf8")
  }
  if (privateKey === undefined && agent === undefined) {
    return fail(
      "ssh",
      `${username}@${host}:${port}`,
      "a key: ssh.privateKey or ssh.identityFile, an ssh-agent ($SSH_AUTH_SOCK or ssh.agent), or ~/.ssh/id_ed25519, id_ecdsa or id_rsa"
    )
  }
  const verifyHostKey = options.verifyHostKey ?? true
  let hostKeys: ReadonlyArray<string> = []
  if (options.hostKey !== undefined) {
    hostKeys = (typeof options.hostKey === "string" ? [options.hostKey] : options.hostKey).map(KnownHosts.keyBlob)
  } else if (verifyHostKey) {
    const file = options.knownHostsFile ?? join(home, ".ssh", "known_hosts")
    const known = existsSync(file)
      ? KnownHosts.lookup(readFileSync(file, "utf8"), host, port)
      : { accepted: [], revoked: [] }
    hostKeys = known.accepted.filter((k) => !known.revoked.includes(k))
    if (hostKeys.length === 0) {
      return fail(
        "ssh.hostKey",
        KnownHosts.hostPattern(host, port),
        `a host key for ${KnownHosts.hostPattern(host, port)} in ${file} (check it, then: ssh-keyscan -p ${port} ${host} >> ${file}), ssh.hostKey, or ssh.verifyHostKey: false`
      )
    }
  }
  return Either.right({
    kind: "ssh",
    host,
    port,
    username,
    ...(privateKey === undefined ? {} : { privateKey }),
    ...(options.passphrase === undefined ? {} : { passphrase: options.passphrase }),
    ...(agent === undefined ? {} : { agent }),
    hostKeys,
    verifyHostKey
  })
}

const safeUsername = (): string => {
  try {
    return userInfo().username
  } catch {
    return "root"
  }
}

/** The transport and its description, without a client (unit-testable: no engine, no network). */
export interface ResolvedTransport {
  readonly description: EngineDescription
  readonly transport: EngineTransport
}

export const resolveTransport = (
  options: EngineEndpointOptions = {},
  env: NodeJS.ProcessEnv = process.env,
  home: string = homedir()
): Resolved<ResolvedTransport> =>
  Either.flatMap(place(options, env, home), (at): Resolved<ResolvedTransport> => {
    const field = at.source === "option" ? "host" : at.source === "DOCKER_HOST" ? "DOCKER_HOST" : at.source
    if (at.host.startsWith("unix://")) {
      const socketPath = at.host.slice("unix://".length) || DEFAULT_SOCKET
      return Either.right({
        description: { kind: "unix", endpoint: `unix://${socketPath}`, tlsVerified: false, source: at.source },
        transport: { kind: "unix", socketPath }
      })
    }
    let url: URL
    try {
      url = new URL(at.host)
    } catch {
      return fail(field, at.host, "unix:///path, tcp://host:port or ssh://user@host[:port]")
    }
    if (url.protocol === "ssh:") {
      return Either.map(
        sshTransport(url, options.ssh ?? {}, env, home),
        (transport): ResolvedTransport => ({
          description: {
            kind: "ssh",
            endpoint: `ssh://${transport.username}@${bracketed(transport.host)}:${transport.port}`,
            tlsVerified: false,
            hostKeyVerified: transport.verifyHostKey,
            source: at.source
          },
          transport
        })
      )
    }
    if (url.protocol !== "tcp:") return fail(field, at.host, "unix:///path, tcp://host:port or ssh://user@host[:port]")
    const host = url.hostname.replace(/^\[|\]$/g, "")
    return Either.flatMap(tlsOf(options, at, env, home), (tls): Resolved<ResolvedTransport> => {
      const port = url.port === "" ? (tls === undefined ? 2375 : 2376) : Number(url.port)
      const endpoint = `tcp://${bracketed(host)}:${port}`
      if (tls === undefined) {
        const allowed = options.allowInsecureTcp === true || enabled(env[ALLOW_INSECURE_TCP_ENV])
        if (!isLoopback(host) && !allowed) {
          return fail(
            field,
            endpoint,
            `plain tcp only to a loopback address: use TLS (tls option, or DOCKER_TLS_VERIFY=1 with DOCKER_CERT_PATH), ssh://, or allow unencrypted tcp explicitly with allowInsecureTcp: true (${ALLOW_INSECURE_TCP_ENV}=1)`
          )
        }
        return Either.right({
          description: { kind: "tcp", endpoint, tlsVerified: false, source: at.source },
          transport: { kind: "tcp", host, port }
        })
      }
      const { cert, key, ca } = tls.material
      if (cert === undefined || key === undefined)
        return fail(field, endpoint, "TLS with a client certificate and key (cert.pem, key.pem)")
      if (tls.verify && ca === undefined && at.source.startsWith("context "))
        return fail(field, endpoint, "a verified TLS context with its ca.pem")
      return Either.right({
        description: { kind: "tls", endpoint, tlsVerified: tls.verify, source: at.source },
        transport: { kind: "tls", host, port, cert, key, verify: tls.verify, ...(ca === undefined ? {} : { ca }) }
      })
    })
  })

/**
 * The engine's machine, for the mount check (SandboxRuntime.engine): a unix socket is this
 * machine's engine, on that socket; tcp, tls or ssh to a loopback address is this machine's too
 * (its socket unknown); to any other address a remote engine, named by its endpoint (no secrets).
 */
export const engineHost = ({ description, transport }: ResolvedTransport): EngineHost =>
  transport.kind === "unix"
    ? { kind: "local", socketPath: transport.socketPath }
    : isLoopback(transport.host)
      ? { kind: "local" }
      : { kind: "remote", endpoint: description.endpoint }

/**
 * docker-modem merges DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH into every client's
 * options (and throws on a malformed one), so a client built for an explicit endpoint could
 * silently pick up the environment's host or TLS files. The resolution above already read the
 * environment; the client is built with those variables hidden (synchronously: no other code
 * runs in between, and a child spawned later sees them again).
 */
const withoutDockerEnv = <A>(f: () => A): A => {
  const names = ["DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_PATH_PREFIX"] as const
  const saved = names.map((n) => [n, process.env[n]] as const)
  for (const n of names) delete process.env[n]
  try {
    return f()
  } finally {
    for (const [n, v] of saved) if (v !== undefined) process.env[n] = v
  }
}

/** The ssh2 host key check for a transport: the server's key blob must be one of the accepted ones. */
export const hostVerifier =
  (transport: Extract<EngineTransport, { kind: "ssh" }>) =>
  (key: Buffer): boolean =>
    !transport.verifyHostKey || transport.hostKeys.includes(key.toString("base64"))

// dockerode loads with the first client, not with the package: docker-modem, and with them ssh2 and
// grpc-js for BuildKit, that importing @hermes-sandbox/docker need not pay.
const Dockerode = onFirstUse<typeof Docker>(
  () => require("dockerode"),
  () => createRequire(import.meta.url)("dockerode")
)

/** A dockerode client over the transport. */
export const client = (transport: EngineTransport): Docker =>
  withoutDockerEnv(() => {
    const DockerClient = Dockerode()
    switch (transport.kind) {
      case "unix":
        return new DockerClient({ socketPath: transport.socketPath })
      case "tcp":
        return new DockerClient({ host: transport.host, port: transport.port, protocol: "http" })
      case "tls":
        return new DockerClient({
          host: transport.host,
          port: transport.port,
          protocol: "https",
          cert: transport.cert,
          key: transport.key,
          ...(transport.ca === undefined ? {} : { ca: transport.ca }),
          // Unverified (DOCKER_TLS without _VERIFY, a context's SkipTLSVerify): encrypted, but any certificate is taken.
          ...(transport.verify ? {} : { agent: new HttpsAgent({ keepAlive: true, rejectUnauthorized: false }) })
        } as Docker.DockerOptions)
      case "ssh":
        // One ssh connection, a `docker system dial-stdio` channel per HTTP connection (the
        // remote therefore needs the docker CLI); docker-modem's own ssh transport would make a
        // new ssh connection for every request.
        return new DockerClient({
          host: transport.host,
          port: transport.port,
          protocol: "http",
          agent: sshAgent({
            host: transport.host,
            port: transport.port,
            username: transport.username,
            ...(transport.privateKey === undefined ? {} : { privateKey: transport.privateKey }),
            ...(transport.passphrase === undefined ? {} : { passphrase: transport.passphrase }),
            ...(transport.agent === undefined ? {} : { agent: transport.agent }),
            hostVerifier: hostVerifier(transport),
            readyTimeout: 10_000
          })
        } as Docker.DockerOptions)
    }
  })

/** Resolve the engine and build its client; an InvalidRequest names the option or variable at fault. */
export const resolve = (
  options: EngineEndpointOptions = {},
  env: NodeJS.ProcessEnv = process.env,
  home: string = homedir()
): Resolved<EngineEndpoint> =>
  Either.map(resolveTransport(options, env, home), ({ description, transport }) => ({
    description,
    transport,
    docker: client(transport)
  }))

/** "tls (verified) tcp://h:2376 from context prod", for one-line messages. */
export const describe = (d: EngineDescription): string =>
  `${d.kind === "tls" ? `tls (${d.tlsVerified ? "verified" : "NOT verified"})` : d.kind === "ssh" ? `ssh (host key ${d.hostKeyVerified ? "checked" : "NOT checked"})` : d.kind} ${d.endpoint} from ${d.source}`
