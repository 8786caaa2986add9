/**
 * The sessions service takes the sandbox defaults only: an executor's scheduling options
 * (slots, queue, warm pool, removal timing) are refused, never validated and then ignored.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { Session } from "@hermes-sandbox/core"
import { type SessionsOptions } from "@hermes-sandbox/core/Session"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"

const build = (options: Record<string, unknown>) =>
  Effect.scoped(
    Layer.build(
      Session.layer({ sweepOnStart: false, reapOnStart: false, ...options } as SessionsOptions).pipe(
        Layer.provide(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
      )
    )
  ).pipe(Effect.flip)

/** A session opened with `options` on a fresh service: the InvalidRequest it fails with. */
const openRefused = (options: Record<string, unknown>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(
        Session.layer({ sweepOnStart: false, reapOnStart: false }).pipe(
          Layer.provide(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
        )
      )
      const sessions = Context.get(context, Session.Sessions)
      return yield* Effect.flip(sessions.open(options as Session.SessionOptions))
    })
  )

describe("Sessions options", () => {
  // Decoded with core's shared schemas: the field (with the mount's index), the value, what is allowed.
  for (const [options, field, allowed] of [
    [{ mounts: [{ hostPath: "relative", containerPath: "/data" }] }, "mounts[0].hostPath", "an absolute host path"],
    [
      { mounts: [{ hostPath: "/tmp", containerPath: "/" }] },
      "mounts[0].containerPath",
      "an absolute container path other than /"
    ],
    [{ mounts: [{ hostPath: "/tmp", containerPath: "/a", mode: "wr" }] }, "mounts[0].mode", `"ro" (default) or "rw"`],
    [
      {
        mounts: [
          { hostPath: "/tmp", containerPath: "/a" },
          { hostPath: "/srv", containerPath: "/a" }
        ]
      },
      "mounts[1].containerPath",
      "a container path mounted once"
    ],
    [{ mounts: [{ hostPath: "/var", containerPath: "/a" }] }, "mounts[0].hostPath", "does not hand over the host"],
    [{ memory: 536870912.5 }, "memory", "at least 6m"],
    [{ cpus: 0 }, "cpus", ""],
    [{ lifetimeSeconds: 0 }, "lifetimeSeconds", ""],
    [{ maxLifetimeMs: 25 * 3600_000 }, "maxLifetimeMs", "86400000"],
    [{ workingDir: "tmp" }, "workingDir", "an absolute path"],
    [{ keepBackgroundProcesses: "yes" }, "keepBackgroundProcesses", "true or false"],
    [{ env: { "BAD-NAME": "x" } }, "env", ""]
  ] as const) {
    it.effect(`${JSON.stringify(options)} is InvalidRequest on ${field}`, () =>
      Effect.gen(function* () {
        const error = yield* openRefused(options)
        expect(error).toMatchObject({
          _tag: "InvalidRequest",
          field: expect.stringContaining(field),
          allowed: expect.stringContaining(allowed)
        })
      })
    )
  }

  for (const [field, value] of [
    ["maxConcurrency", 4],
    ["maxQueue", 10],
    ["whenQueueFull", "wait"],
    ["warmPool", { size: 1 }],
    ["awaitRemoval", true]
  ] as const) {
    it.effect(`an executor-only option (${field}) is InvalidRequest naming it`, () =>
      Effect.gen(function* () {
        const error = yield* build({ [field]: value })
        expect(error).toMatchObject({
          _tag: "InvalidRequest",
          field,
          allowed: expect.stringContaining("executor option")
        })
      })
    )
  }

  it.effect("the sandbox defaults are decoded as for an executor (same messages)", () =>
    Effect.gen(function* () {
      const error = yield* build({ memory: 536870912.5 })
      expect(error).toMatchObject({ _tag: "InvalidRequest", field: "memory" })
    })
  )
})
