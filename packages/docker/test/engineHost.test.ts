/**
 * The Docker runtime tells the mount check which engine it talks to (SandboxRuntime.engine): the
 * socket an option, DOCKER_HOST or a docker context chose, or a remote host whose paths this
 * machine cannot resolve. No engine runs here: the endpoints are resolved, never dialled.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { afterAll, beforeAll } from "vitest"
import { Mounts } from "@hermes-sandbox/core"
import { DockerContext, EngineEndpoint } from "@hermes-sandbox/docker"

let dir: string
let socketPath: string
let server: net.Server

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join("/tmp", "hs-eng-")) // short path: unix socket paths are limited
  fs.mkdirSync(path.join(dir, "run"))
  socketPath = path.join(dir, "run", "engine.sock")
  server = net.createServer()
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
})

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()))
  fs.rmSync(dir, { recursive: true, force: true })
})

/** The engine these options pick, with no DOCKER_HOST and no context of the user's. */
const hostOf = (options: EngineEndpoint.EngineEndpointOptions, env: NodeJS.ProcessEnv = {}) => {
  const resolved = EngineEndpoint.resolveTransport(options, env, path.join(dir, "home"))
  if (Either.isLeft(resolved)) throw new Error(resolved.left.message)
  return EngineEndpoint.engineHost(resolved.right)
}

describe("the engine the mount check judges against", () => {
  // Thunks: the socket exists only once beforeAll has run.
  it.each<[string, () => Parameters<typeof hostOf>]>([
    ["socketPath", () => [{ socketPath }]],
    ['host: "unix://…"', () => [{ host: `unix://${socketPath}` }]],
    ["DOCKER_HOST", () => [{}, { DOCKER_HOST: `unix://${socketPath}` }]]
  ])("an engine chosen by %s: the directory holding its socket is refused", (_, choice) => {
    const engine = hostOf(...choice())
    expect(engine).toEqual({ kind: "local", socketPath })
    expect(Mounts.mountDanger(path.join(dir, "run"), engine)).toBe(
      `it contains the Docker socket ${socketPath} (full control of the host)`
    )
    expect(Mounts.mountDanger(socketPath, engine)).toMatch(/Docker socket/)
    expect(Mounts.mountDanger(path.join(dir, "home"), engine)).toBeUndefined()
  })

  it("an engine chosen by a docker context: the directory holding its socket is refused", () => {
    const config = path.join(dir, "home", ".docker")
    const meta = path.join(config, "contexts", "meta", DockerContext.contextDigest("ctx"))
    fs.mkdirSync(meta, { recursive: true })
    fs.writeFileSync(
      path.join(meta, "meta.json"),
      JSON.stringify({ Name: "ctx", Endpoints: { docker: { Host: `unix://${socketPath}` } } })
    )
    fs.writeFileSync(path.join(config, "config.json"), JSON.stringify({ currentContext: "ctx" }))
    for (const engine of [hostOf({ context: "ctx" }), hostOf({})]) {
      expect(engine).toEqual({ kind: "local", socketPath })
      expect(Mounts.mountDanger(path.join(dir, "run"), engine)).toMatch(/contains the Docker socket/)
    }
  })

  it("tcp, tls or ssh to another host: a remote engine, named without secrets; on loopback: this machine's", () => {
    expect(hostOf({ host: "tcp://10.1.2.3:2375", allowInsecureTcp: true })).toEqual({
      kind: "remote",
      endpoint: "tcp://10.1.2.3:2375"
    })
    expect(hostOf({ host: "ssh://builder@engine.example", ssh: { privateKey: "k", verifyHostKey: false } })).toEqual({
      kind: "remote",
      endpoint: "ssh://builder@engine.example:22"
    })
    expect(hostOf({ host: "tcp://127.0.0.1:2375" })).toEqual({ kind: "local" })
    const remote = hostOf({ host: "tcp://10.1.2.3:2375", allowInsecureTcp: true })
    expect(Mounts.mountDanger("/var/run", remote)).toMatch(
      /contains the Docker socket \/var\/run\/docker.sock .*the engine is remote \(tcp:\/\/10\.1\.2\.3:2375\): the path was judged as written/
    )
  })
})
