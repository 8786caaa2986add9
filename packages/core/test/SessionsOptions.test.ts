/**
 * The sessions service takes the sandbox defaults only: an executor's scheduling options
 * (slots, queue, warm pool, removal timing) are refused, never validated and then ignored.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Session, type SessionsOptions } from "@hermes-sandbox/core"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"

const build = (options: Record<string, unknown>) =>
  Effect.scoped(Layer.build(Session.layer({ sweepOnStart: false, reapOnStart: false, ...options } as SessionsOptions).pipe(
    Layer.provide(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
  ))).pipe(Effect.flip)

describe("Sessions options", () => {
  for (const [field, value] of [["maxConcurrency", 4], ["maxQueue", 10], ["whenQueueFull", "wait"], ["warmPool", { size: 1 }], ["awaitRemoval", true]] as const) {
    it.effect(`an executor-only option (${field}) is InvalidRequest naming it`, () =>
      Effect.gen(function*() {
        const error = yield* build({ [field]: value })
        expect(error).toMatchObject({ _tag: "InvalidRequest", field, allowed: expect.stringContaining("executor option") })
      }))
  }

  it.effect("the sandbox defaults are decoded as for an executor (same messages)", () =>
    Effect.gen(function*() {
      const error = yield* build({ memory: 536870912.5 })
      expect(error).toMatchObject({ _tag: "InvalidRequest", field: "memory" })
    }))
})
