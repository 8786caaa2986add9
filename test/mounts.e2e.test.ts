/**
 * The mount check on the real engine: the Docker runtime says which socket it talks to
 * (SandboxRuntime.engine), and a session refuses to mount the directory holding that socket,
 * wherever it lives — here a temp directory with a link to the engine's socket, the engine reached
 * through the link (`socketPath`). Refused before any sandbox exists: nothing to clean up on the engine.
 */
import { mkdtempSync, rmSync, symlinkSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Effect, Either, Layer } from "effect"
import { MemoryJournal } from "@hermes-sandbox/events"
import { SandboxRuntime } from "@hermes-sandbox/core"
import * as Session from "@hermes-sandbox/core/Session"
import * as DockerEngine from "@hermes-sandbox/docker/DockerEngine"
import * as DockerRuntime from "@hermes-sandbox/docker/DockerRuntime"
import * as EngineEndpoint from "@hermes-sandbox/docker/EngineEndpoint"

/** The test engine's socket, when it is reached by one. */
const resolved = EngineEndpoint.resolveTransport()
const engineSocket =
  Either.isRight(resolved) && resolved.right.transport.kind === "unix" ? resolved.right.transport.socketPath : undefined

const dir = mkdtempSync(join("/tmp", "hs-mnt-")) // short: unix socket paths are limited
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("mounts on the real engine", () => {
  it.skipIf(engineSocket === undefined)(
    "the engine reached through a socket elsewhere: a session refuses the directory holding it",
    async () => {
      const link = join(dir, "engine.sock")
      symlinkSync(engineSocket!, link)
      const layer = Session.layer({ sweepOnStart: false, reapOnStart: false }).pipe(
        Layer.provideMerge(DockerRuntime.layer()),
        Layer.provide(DockerEngine.layer({ socketPath: link })),
        Layer.provide(MemoryJournal.layer())
      )
      const { engine, error } = await Effect.runPromise(
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const sessions = yield* Session.Sessions
          const error = yield* Effect.flip(sessions.open({ mounts: [{ hostPath: dir, containerPath: "/data" }] }))
          return { engine: runtime.engine, error }
        }).pipe(Effect.provide(layer), Effect.scoped)
      )
      expect(engine).toEqual({ kind: "local", socketPath: link })
      expect(error).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
      expect(error.message).toContain(`contains the Docker socket ${link}`)
    }
  )
})
