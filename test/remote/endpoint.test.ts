/**
 * Engine endpoint resolution, with no engine: options, DOCKER_HOST and its TLS variables, docker
 * contexts in a temporary HOME (the docker CLI's files), the refusal of plain tcp to a remote
 * address, ssh keys and host keys. Each case passes its own environment and HOME, so nothing of
 * this machine's configuration leaks in.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Either } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { DockerEngine, EngineEndpoint, Watchdog } from "@hermes-sandbox/docker"
import { KnownHosts } from "@hermes-sandbox/docker/testing"

const root = mkdtempSync(join(tmpdir(), "hermes-endpoint-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let homes = 0
/** An empty HOME of its own. */
const home = (): string => {
  const dir = join(root, `home-${homes++}`)
  mkdirSync(dir, { recursive: true })
  return dir
}
const PEM = {
  ca: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n",
  cert: "-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n",
  key: "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"
}
const certDir = (dir: string, files: Partial<typeof PEM> = PEM): string => {
  mkdirSync(dir, { recursive: true })
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, `${name}.pem`), content)
  return dir
}

const ok = (options: EngineEndpoint.EngineEndpointOptions, env: NodeJS.ProcessEnv = {}, h = home()) => {
  const r = EngineEndpoint.resolveTransport(options, env, h)
  if (Either.isLeft(r)) throw new Error(`expected a resolution, got: ${r.left.message}`)
  return r.right
}
const refused = (options: EngineEndpoint.EngineEndpointOptions, env: NodeJS.ProcessEnv = {}, h = home()) => {
  const r = EngineEndpoint.resolveTransport(options, env, h)
  if (Either.isRight(r)) throw new Error(`expected a refusal, got ${JSON.stringify(r.right.description)}`)
  expect(r.left._tag).toBe("InvalidRequest")
  return r.left
}

/** A docker context as `docker context create` stores it. */
const writeContext = (
  h: string,
  name: string,
  host: string,
  options: { tls?: Partial<typeof PEM>; skipTlsVerify?: boolean; current?: boolean } = {}
) => {
  const digest = createHash("sha256").update(name).digest("hex")
  const meta = join(h, ".docker", "contexts", "meta", digest)
  mkdirSync(meta, { recursive: true })
  writeFileSync(
    join(meta, "meta.json"),
    JSON.stringify({
      Name: name,
      Metadata: {},
      Endpoints: { docker: { Host: host, SkipTLSVerify: options.skipTlsVerify ?? false } }
    })
  )
  if (options.tls !== undefined) certDir(join(h, ".docker", "contexts", "tls", digest, "docker"), options.tls)
  if (options.current === true)
    writeFileSync(join(h, ".docker", "config.json"), JSON.stringify({ auths: {}, currentContext: name }))
}

describe("engine endpoint: unix and plain tcp (what worked before keeps working)", () => {
  it("nothing set: the local socket, source default", () => {
    expect(ok({}).description).toEqual({
      kind: "unix",
      endpoint: "unix:///var/run/docker.sock",
      tlsVerified: false,
      source: "default"
    })
  })

  it("socketPath option, and DOCKER_HOST=unix://", () => {
    expect(ok({ socketPath: "/tmp/x.sock" }).description).toMatchObject({
      kind: "unix",
      endpoint: "unix:///tmp/x.sock",
      source: "option"
    })
    expect(ok({}, { DOCKER_HOST: "unix:///run/d.sock" }).description).toMatchObject({
      kind: "unix",
      endpoint: "unix:///run/d.sock",
      source: "DOCKER_HOST"
    })
    // An explicit socketPath wins over DOCKER_HOST, as before.
    expect(ok({ socketPath: "/tmp/x.sock" }, { DOCKER_HOST: "tcp://10.0.0.1:2375" }).transport).toEqual({
      kind: "unix",
      socketPath: "/tmp/x.sock"
    })
  })

  it("the old { host, port } option and loopback tcp: plain tcp, allowed", () => {
    expect(ok({ host: "127.0.0.1", port: 2999 }).transport).toEqual({ kind: "tcp", host: "127.0.0.1", port: 2999 })
    expect(ok({ host: "localhost" }).description).toMatchObject({
      kind: "tcp",
      endpoint: "tcp://localhost:2375",
      tlsVerified: false
    })
    expect(ok({}, { DOCKER_HOST: "tcp://[::1]:2375" }).description).toMatchObject({
      kind: "tcp",
      endpoint: "tcp://[::1]:2375",
      source: "DOCKER_HOST"
    })
    expect(ok({ host: "tcp://127.0.0.2:1234" }).transport).toEqual({ kind: "tcp", host: "127.0.0.2", port: 1234 })
  })

  it("a malformed or unsupported DOCKER_HOST is an InvalidRequest naming DOCKER_HOST", () => {
    const e = refused({}, { DOCKER_HOST: "http://example.com" })
    expect(e.field).toBe("DOCKER_HOST")
    expect(e.message).toContain("ssh://user@host")
  })
})

describe("engine endpoint: plain tcp to a remote address is refused unless asked for", () => {
  it("DOCKER_HOST=tcp://10.1.2.3:2375: refused, the message names allowInsecureTcp and the variable", () => {
    const e = refused({}, { DOCKER_HOST: "tcp://10.1.2.3:2375" })
    expect(e.field).toBe("DOCKER_HOST")
    expect(e.message).toContain("tcp://10.1.2.3:2375")
    expect(e.message).toContain("allowInsecureTcp: true")
    expect(e.message).toContain("HERMES_SANDBOX_ALLOW_INSECURE_TCP=1")
  })

  it("the host option too, and a hostname", () => {
    expect(refused({ host: "tcp://docker.example.com:2375" }).field).toBe("host")
    expect(refused({ host: "192.168.1.10", port: 2375 }).field).toBe("host")
  })

  it("allowInsecureTcp or HERMES_SANDBOX_ALLOW_INSECURE_TCP=1 allows it", () => {
    expect(ok({ host: "tcp://10.1.2.3:2375", allowInsecureTcp: true }).description).toMatchObject({
      kind: "tcp",
      tlsVerified: false
    })
    expect(
      ok({}, { DOCKER_HOST: "tcp://10.1.2.3:2375", HERMES_SANDBOX_ALLOW_INSECURE_TCP: "1" }).description.kind
    ).toBe("tcp")
    refused({}, { DOCKER_HOST: "tcp://10.1.2.3:2375", HERMES_SANDBOX_ALLOW_INSECURE_TCP: "0" })
  })

  it("DockerEngine.make fails with the InvalidRequest before any connection", async () => {
    const { Effect } = await import("effect")
    const saved = process.env.DOCKER_HOST
    process.env.DOCKER_HOST = "tcp://10.1.2.3:2375"
    try {
      const exit = await Effect.runPromiseExit(DockerEngine.make({ connectTimeoutMs: 200 }))
      expect(exit._tag).toBe("Failure")
      expect(JSON.stringify(exit)).toContain("InvalidRequest")
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST
      else process.env.DOCKER_HOST = saved
    }
  })
})

describe("engine endpoint: tcp + TLS", () => {
  it("DOCKER_TLS_VERIFY=1 + DOCKER_CERT_PATH: verified TLS with the directory's certificates; port 2376 by default", () => {
    const dir = certDir(join(root, "certs-env"))
    const r = ok({}, { DOCKER_HOST: "tcp://10.0.0.5", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: dir })
    expect(r.description).toEqual({
      kind: "tls",
      endpoint: "tcp://10.0.0.5:2376",
      tlsVerified: true,
      source: "DOCKER_HOST"
    })
    expect(r.transport).toEqual({
      kind: "tls",
      host: "10.0.0.5",
      port: 2376,
      ca: PEM.ca,
      cert: PEM.cert,
      key: PEM.key,
      verify: true
    })
  })

  it("DOCKER_TLS=1 without _VERIFY: TLS, NOT verified; the certificates default to ~/.docker", () => {
    const h = home()
    certDir(join(h, ".docker"))
    expect(ok({}, { DOCKER_HOST: "tcp://10.0.0.5:2376", DOCKER_TLS: "1" }, h).description).toMatchObject({
      kind: "tls",
      tlsVerified: false
    })
  })

  it("missing certificate files are an InvalidRequest naming the directory and the files", () => {
    const dir = certDir(join(root, "certs-partial"), { ca: PEM.ca })
    const e = refused({}, { DOCKER_HOST: "tcp://10.0.0.5:2376", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: dir })
    expect(e.field).toBe("DOCKER_CERT_PATH")
    expect(e.message).toContain("cert.pem")
  })

  it("the tls option: inline PEM or certPath; tlsVerify: false", () => {
    expect(ok({ host: "tcp://h.example:2376", tls: PEM }).description).toMatchObject({
      kind: "tls",
      tlsVerified: true,
      source: "option"
    })
    const dir = certDir(join(root, "certs-opt"))
    expect(ok({ host: "tcp://h.example:2376", tls: { certPath: dir }, tlsVerify: false }).transport).toMatchObject({
      kind: "tls",
      verify: false,
      cert: PEM.cert
    })
    expect(refused({ host: "tcp://h.example:2376", tls: { certPath: join(root, "nowhere") } }).field).toBe(
      "tls.certPath"
    )
  })

  it("the description never holds key material", () => {
    const r = ok({ host: "tcp://h.example:2376", tls: PEM })
    expect(JSON.stringify(r.description)).not.toContain("KEY")
  })
})

describe("engine endpoint: docker contexts (DOCKER_CONTEXT, config.json currentContext, the context option)", () => {
  it("currentContext with TLS files: verified TLS from the context's files, source 'context NAME'", () => {
    const h = home()
    writeContext(h, "prod", "tcp://10.9.9.9:2376", { tls: PEM, current: true })
    const r = ok({}, {}, h)
    expect(r.description).toEqual({
      kind: "tls",
      endpoint: "tcp://10.9.9.9:2376",
      tlsVerified: true,
      source: "context prod"
    })
    expect(r.transport).toMatchObject({ ca: PEM.ca, cert: PEM.cert, key: PEM.key })
  })

  it("DOCKER_CONTEXT wins over currentContext; the context option over DOCKER_HOST", () => {
    const h = home()
    writeContext(h, "a", "unix:///run/a.sock", { current: true })
    writeContext(h, "b", "unix:///run/b.sock")
    expect(ok({}, { DOCKER_CONTEXT: "b" }, h).description).toMatchObject({
      endpoint: "unix:///run/b.sock",
      source: "context b"
    })
    expect(ok({ context: "a" }, { DOCKER_HOST: "unix:///run/env.sock" }, h).description).toMatchObject({
      endpoint: "unix:///run/a.sock",
      source: "context a"
    })
    // DOCKER_HOST wins over the current context, as in the docker CLI.
    expect(ok({}, { DOCKER_HOST: "unix:///run/env.sock" }, h).description.source).toBe("DOCKER_HOST")
  })

  it("SkipTLSVerify: TLS not verified; an ssh context; DOCKER_CONFIG moves the directory", () => {
    const h = home()
    writeContext(h, "skip", "tcp://10.9.9.9:2376", { tls: PEM, skipTlsVerify: true })
    expect(ok({ context: "skip" }, {}, h).description.tlsVerified).toBe(false)
    const cfg = join(h, "elsewhere")
    writeContext(cfg.replace(/\/\.docker$/, ""), "x", "unix:///x.sock")
    expect(ok({}, { DOCKER_CONFIG: join(cfg, ".docker"), DOCKER_CONTEXT: "x" }, h).description.endpoint).toBe(
      "unix:///x.sock"
    )
  })

  it("a context that does not exist is an InvalidRequest naming it; 'default' is the local engine", () => {
    const e = refused({ context: "nope" })
    expect(e.field).toBe("context")
    expect(e.message).toContain("docker context ls")
    expect(ok({}, { DOCKER_CONTEXT: "default" }).description).toMatchObject({ kind: "unix", source: "default" })
  })

  it("a context to plain tcp on a remote address is refused like DOCKER_HOST", () => {
    const h = home()
    writeContext(h, "plain", "tcp://10.9.9.9:2375", { current: true })
    expect(refused({}, {}, h).message).toContain("allowInsecureTcp")
  })
})

describe("engine endpoint: ssh://", () => {
  const keyPair = (dir: string) => {
    mkdirSync(dir, { recursive: true })
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "key")])
    return {
      privateKey: join(dir, "key"),
      publicKey: execFileSync("cat", [join(dir, "key.pub")], { encoding: "utf8" }).trim()
    }
  }

  it("user, host, port; the key from ssh.identityFile; the host key from known_hosts ([host]:port, hashed or not)", () => {
    const h = home()
    const client = keyPair(join(h, "client"))
    const server = keyPair(join(h, "server"))
    const knownHosts = join(h, "known_hosts")
    writeFileSync(knownHosts, `# comment\n[127.0.0.1]:2222 ${server.publicKey}\n`)
    const r = ok(
      { host: "ssh://deploy@127.0.0.1:2222", ssh: { identityFile: client.privateKey, knownHostsFile: knownHosts } },
      {},
      h
    )
    expect(r.description).toEqual({
      kind: "ssh",
      endpoint: "ssh://deploy@127.0.0.1:2222",
      tlsVerified: false,
      hostKeyVerified: true,
      source: "option"
    })
    expect(r.transport).toMatchObject({
      kind: "ssh",
      username: "deploy",
      port: 2222,
      hostKeys: [KnownHosts.keyBlob(server.publicKey)],
      verifyHostKey: true
    })
    expect(JSON.stringify(r.description)).not.toContain("PRIVATE")
    // Hashed entries, as `ssh-keygen -H` writes them.
    execFileSync("ssh-keygen", ["-q", "-H", "-f", knownHosts], { stdio: "ignore" })
    expect(
      ok(
        { host: "ssh://deploy@127.0.0.1:2222", ssh: { identityFile: client.privateKey, knownHostsFile: knownHosts } },
        {},
        h
      ).transport
    ).toMatchObject({ hostKeys: [KnownHosts.keyBlob(server.publicKey)] })
  })

  it("DOCKER_HOST=ssh://...: default key ~/.ssh/id_ed25519 and ~/.ssh/known_hosts; port 22", () => {
    const h = home()
    const client = keyPair(join(h, "gen"))
    const server = keyPair(join(h, "srv"))
    mkdirSync(join(h, ".ssh"))
    execFileSync("cp", [client.privateKey, join(h, ".ssh", "id_ed25519")])
    writeFileSync(join(h, ".ssh", "known_hosts"), `remote.example ${server.publicKey}\n`)
    const r = ok({}, { DOCKER_HOST: "ssh://ops@remote.example" }, h)
    expect(r.description).toMatchObject({
      kind: "ssh",
      endpoint: "ssh://ops@remote.example:22",
      source: "DOCKER_HOST",
      hostKeyVerified: true
    })
    expect(r.transport).toMatchObject({ privateKey: expect.stringContaining("OPENSSH PRIVATE KEY") })
  })

  it("an unknown host key is refused before connecting, naming known_hosts and ssh-keyscan; verifyHostKey: false allows it (reported)", () => {
    const h = home()
    const client = keyPair(join(h, "c"))
    const e = refused({ host: "ssh://u@127.0.0.1:2200", ssh: { identityFile: client.privateKey } }, {}, h)
    expect(e.field).toBe("ssh.hostKey")
    expect(e.message).toContain("ssh-keyscan -p 2200 127.0.0.1")
    expect(
      ok({ host: "ssh://u@127.0.0.1:2200", ssh: { identityFile: client.privateKey, verifyHostKey: false } }, {}, h)
        .description.hostKeyVerified
    ).toBe(false)
  })

  it("no key at all (no agent, no identity, no ~/.ssh/id_*) is an InvalidRequest", () => {
    const e = refused({ host: "ssh://u@127.0.0.1", ssh: { verifyHostKey: false } })
    expect(e.field).toBe("ssh")
    expect(e.message).toContain("SSH_AUTH_SOCK")
  })

  it("known_hosts patterns: wildcards, negation, @revoked", () => {
    const k = "AAAAC3NzaC1lZDI1NTE5AAAAIK"
    expect(KnownHosts.lookup(`*.example.com ssh-ed25519 ${k}\n`, "a.example.com", 22).accepted).toEqual([k])
    expect(KnownHosts.lookup(`*.example.com,!b.example.com ssh-ed25519 ${k}\n`, "b.example.com", 22).accepted).toEqual(
      []
    )
    expect(KnownHosts.lookup(`h ssh-ed25519 ${k}\n`, "h", 2222).accepted).toEqual([])
    expect(KnownHosts.lookup(`@revoked h ssh-ed25519 ${k}\n`, "h", 22)).toEqual({ accepted: [], revoked: [k] })
  })
})

describe("engine endpoint: the client and the watchdog's invocation", () => {
  it("the dockerode client ignores a conflicting DOCKER_HOST in the environment (docker-modem would merge it)", () => {
    const saved = { h: process.env.DOCKER_HOST, v: process.env.DOCKER_TLS_VERIFY }
    process.env.DOCKER_HOST = "tcp://10.1.2.3:2376"
    process.env.DOCKER_TLS_VERIFY = "1"
    try {
      const docker = EngineEndpoint.client({ kind: "unix", socketPath: "/tmp/x.sock" })
      const modem = docker.modem as unknown as { socketPath?: string; host?: string; protocol?: string }
      expect({ socketPath: modem.socketPath, host: modem.host, protocol: modem.protocol }).toEqual({
        socketPath: "/tmp/x.sock",
        host: undefined,
        protocol: "http"
      })
      expect(process.env.DOCKER_HOST).toBe("tcp://10.1.2.3:2376")
    } finally {
      if (saved.h === undefined) delete process.env.DOCKER_HOST
      else process.env.DOCKER_HOST = saved.h
      if (saved.v === undefined) delete process.env.DOCKER_TLS_VERIFY
      else process.env.DOCKER_TLS_VERIFY = saved.v
    }
  })

  it("the watchdog's argv names the endpoint only; keys are not on it", async () => {
    const { Effect, Scope, Exit } = await import("effect")
    const transport = {
      kind: "tls",
      host: "127.0.0.1",
      port: 1,
      ca: PEM.ca,
      cert: PEM.cert,
      key: PEM.key,
      verify: true
    } as const
    const scope = Effect.runSync(Scope.make())
    const handle = Effect.runSync(Scope.extend(Watchdog.start("endpoint-test-executor", transport), scope))
    try {
      const cmdline = execFileSync("cat", [`/proc/${handle.pid}/cmdline`], { encoding: "utf8" })
        .split("\0")
        .filter((a) => a !== "")
      expect(cmdline.slice(-3)).toEqual(["endpoint-test-executor", "tcp://127.0.0.1:1", "--transport-on-stdin"])
      expect(cmdline.join(" ")).not.toContain("KEY")
    } finally {
      Effect.runSync(Scope.close(scope, Exit.void))
      // It would retry the unreachable engine for two minutes.
      process.kill(handle.pid, "SIGKILL")
    }
  })
})
