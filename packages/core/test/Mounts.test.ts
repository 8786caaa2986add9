import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type EngineHost, Mounts, SandboxRuntime, Session } from "@hermes-sandbox/core"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { Layer } from "effect"

describe("dangerous mounts: one check on every path", () => {
  it("refuses /, the Docker socket, DOCKER_HOST's socket and every directory holding one, also through symlinks", () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-mounts-"))
    try {
      symlinkSync("/var", join(dir, "innocent"))
      for (const p of [
        "/",
        "/var",
        "/var/",
        "/run",
        "/var/run",
        "/var/run/docker.sock",
        "/run/docker.sock",
        join(dir, "innocent")
      ]) {
        expect(Mounts.mountDanger(p, undefined), p).toBeDefined()
      }
      expect(Mounts.mountDanger("/srv/engine", "/srv/engine/docker.sock")).toMatch(/contains the Docker socket/)
      for (const p of ["/tmp", "/home/data", "/var-lib-not", dir])
        expect(Mounts.mountDanger(p, undefined), p).toBeUndefined()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.effect(
    "createSession's mounts get the strong check: /var (it holds the Docker socket) is refused as InvalidRequest",
    () =>
      Effect.gen(function* () {
        const sessions = yield* Session.Sessions
        const error = yield* Effect.flip(sessions.open({ mounts: [{ hostPath: "/var", containerPath: "/data" }] }))
        expect(error).toMatchObject({
          _tag: "InvalidRequest",
          field: "mounts[0].hostPath",
          message: expect.stringMatching(/Docker socket/)
        })
      }).pipe(
        Effect.provide(
          Session.layer({ sweepOnStart: false, reapOnStart: false }).pipe(
            Layer.provide(FakeRuntime.layer()),
            Layer.provide(MemoryJournal.layer())
          )
        ),
        Effect.scoped
      )
  )
})

/** A unix socket at `socketPath`, as an engine's; closed (and its directory removed) by the scope. */
const listening = (socketPath: string) =>
  Effect.acquireRelease(
    Effect.async<net.Server>((resume) => {
      const server = net.createServer()
      server.listen(socketPath, () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

/** A temp directory (short: unix socket paths are limited), removed by the scope. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join("/tmp", "hs-mnt-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const sessionsOn = (engine: EngineHost) =>
  Session.layer({ sweepOnStart: false, reapOnStart: false }).pipe(
    Layer.provide(FakeRuntime.layer({}, { engine })),
    Layer.provide(MemoryJournal.layer())
  )

describe("dangerous mounts: the engine the runtime talks to", () => {
  it.scoped("a local engine's own socket (not a usual path, not named docker.sock): its directory is refused", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      mkdirSync(join(dir, "run"))
      mkdirSync(join(dir, "data"))
      const socketPath = join(dir, "run", "engine.sock")
      yield* listening(socketPath)
      symlinkSync(join(dir, "run"), join(dir, "innocent"))
      const engine: EngineHost = { kind: "local", socketPath }
      yield* Effect.gen(function* () {
        const sessions = yield* Session.Sessions
        for (const hostPath of [join(dir, "run"), `${join(dir, "run")}/`, dir, socketPath, join(dir, "innocent")]) {
          const error = yield* Effect.flip(sessions.open({ mounts: [{ hostPath, containerPath: "/data" }] }))
          expect(error, hostPath).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
          expect(error.message, hostPath).toMatch(/Docker socket/)
        }
        // A sibling of the socket's directory is fine; so is the socket's directory when forced.
        const fine = yield* sessions.open({ mounts: [{ hostPath: join(dir, "data"), containerPath: "/data" }] })
        yield* fine.close
        const forced = yield* sessions.open({
          mounts: [{ hostPath: join(dir, "run"), containerPath: "/data" }],
          allowDangerousMounts: true
        })
        yield* forced.close
      }).pipe(Effect.provide(sessionsOn(engine)))
      // Without the engine's socket, the same directory passes: the runtime's engine is what counts.
      expect(Mounts.mountDanger(join(dir, "run"), undefined)).toBeUndefined()
      expect(Mounts.mountDanger(join(dir, "run"), engine)).toBe(
        `it contains the Docker socket ${socketPath} (full control of the host)`
      )
    })
  )

  it.scoped("a local engine reached through a symlinked socket path: the real socket's directory is refused too", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      mkdirSync(join(dir, "real"))
      mkdirSync(join(dir, "links"))
      const real = join(dir, "real", "engine.sock")
      yield* listening(real)
      const link = join(dir, "links", "engine.sock")
      symlinkSync(real, link)
      const engine: EngineHost = { kind: "local", socketPath: link }
      for (const p of [join(dir, "real"), join(dir, "links"), real, link])
        expect(Mounts.mountDanger(p, engine), p).toMatch(/Docker socket/)
      expect(Mounts.mountDanger(join(dir, "elsewhere"), engine)).toBeUndefined()
      // The usual sockets stay refused whatever the engine.
      expect(Mounts.mountDanger("/var/run", engine)).toMatch(/contains the Docker socket/)
      expect(Mounts.mountDanger("/", engine)).toBe("it mounts the host's root directory")
    })
  )

  it.scoped(
    "a remote engine: paths are judged as written (not through this machine's symlinks), and the refusal says so",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        symlinkSync("/var", join(dir, "innocent"))
        const engine: EngineHost = { kind: "remote", endpoint: "ssh://builder@engine.example:22" }
        const remote = /the engine is remote \(ssh:\/\/builder@engine\.example:22\): the path was judged as written/
        yield* Effect.gen(function* () {
          const sessions = yield* Session.Sessions
          const error = yield* Effect.flip(
            sessions.open({ mounts: [{ hostPath: "/var/run", containerPath: "/data" }] })
          )
          expect(error).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
          expect(error.message).toMatch(/contains the Docker socket \/var\/run\/docker.sock/)
          expect(error.message).toMatch(remote)
          // A symlink on this machine says nothing about the engine's host: judged as written, it passes.
          const s = yield* sessions.open({ mounts: [{ hostPath: join(dir, "innocent"), containerPath: "/data" }] })
          yield* s.close
        }).pipe(Effect.provide(sessionsOn(engine)))
        for (const p of [
          "/",
          "/var",
          "/run/",
          "/var/run/docker.sock",
          "/var/run/../run/docker.sock",
          "/srv/x/docker.sock"
        ])
          expect(Mounts.mountDanger(p, engine), p).toMatch(remote)
        expect(Mounts.mountDanger("/", engine)).toMatch(/^it mounts the host's root directory/)
        for (const p of ["/srv/data", join(dir, "innocent"), "/var-lib-not"])
          expect(Mounts.mountDanger(p, engine), p).toBeUndefined()
      })
  )

  it.effect("the fake runtime says which engine it stands for: by default a local one on the usual socket", () =>
    Effect.gen(function* () {
      const runtime = yield* SandboxRuntime
      expect(runtime.engine).toEqual({ kind: "local", socketPath: "/var/run/docker.sock" })
    }).pipe(Effect.provide(FakeRuntime.layer()))
  )
})
