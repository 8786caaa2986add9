/**
 * The Promise facades' default journal is in memory and bounded: a service running
 * executions for weeks keeps the recent window, not every event ever recorded. A PostgreSQL
 * URL is the shared, durable journal: facadeJournal.pg.test.ts, on the run's throwaway cluster.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { DEFAULT_MEMORY_EVENTS, facadeJournalLayer } from "../src/internal/facadeJournal.js"
import { retained } from "./support/retained.js"

describe("the facades' journal", () => {
  it.effect(
    '"memory" (the default) keeps about the last DEFAULT_MEMORY_EVENTS events',
    () =>
      Effect.gen(function* () {
        const { kept, last } = yield* retained(facadeJournalLayer(undefined), DEFAULT_MEMORY_EVENTS * 3)
        expect(last).toBe(DEFAULT_MEMORY_EVENTS * 3)
        expect(kept).toBeGreaterThanOrEqual(DEFAULT_MEMORY_EVENTS)
        expect(kept).toBeLessThanOrEqual(DEFAULT_MEMORY_EVENTS * 1.25)
        expect(yield* retained(facadeJournalLayer("memory"), 100)).toEqual({ last: 100, kept: 100 })
      }),
    60_000
  )

  it.effect("{ maxEvents } sets the window", () =>
    Effect.gen(function* () {
      const { kept } = yield* retained(facadeJournalLayer({ maxEvents: 50 }), 500)
      expect(kept).toBeGreaterThanOrEqual(50)
      expect(kept).toBeLessThanOrEqual(62)
    })
  )

  it.live("an unreachable PostgreSQL server fails the layer with a JournalError naming it, without the password", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(facadeJournalLayer("postgres://u:hunter2@127.0.0.1:1/db")))
      )
      expect(error).toMatchObject({ _tag: "JournalError" })
      expect(String((error as Error).message)).toContain("127.0.0.1:1")
      expect(String((error as Error).message)).not.toContain("hunter2")
    })
  )
})
