import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Mounts, Session } from "@hermes-sandbox/core"
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
