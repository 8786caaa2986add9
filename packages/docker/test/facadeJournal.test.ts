/**
 * The Promise facades' default journal is in memory and bounded: a service running
 * executions for weeks keeps the recent window, not every event ever recorded. A PostgreSQL
 * URL (as a string, { url }, or { path } as the CLI's --journal passes it) is the shared,
 * durable journal, on the run's throwaway cluster here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Stream } from "effect"
import { Event, Journal } from "@hermes-sandbox/events"
import { DEFAULT_MEMORY_EVENTS, type FacadeJournal, facadeJournalLayer } from "../src/internal/facadeJournal.js"
import { createDatabase } from "../../../test/support/postgres.js"

const fill = (journal: Journal.Journal["Type"], n: number) =>
  Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) =>
    journal.append({ streamId: `e${i % 500}`, executorId: "x", events: [Event.make("ContainerStarted", { containerId: `c${i}` })] }), { discard: true })

const retained = (layer: Layer.Layer<Journal.Journal, unknown>, appends: number) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* Layer.build(layer)
    const journal = ctx.unsafeMap.get(Journal.Journal.key) as Journal.Journal["Type"]
    yield* fill(journal, appends)
    return { last: yield* journal.lastSequence, kept: Chunk.size(yield* Stream.runCollect(journal.read())) }
  }))

describe("the facades' journal", () => {
  it.effect("\"memory\" (the default) keeps about the last DEFAULT_MEMORY_EVENTS events", () =>
    Effect.gen(function*() {
      const { kept, last } = yield* retained(facadeJournalLayer(undefined), DEFAULT_MEMORY_EVENTS * 3)
      expect(last).toBe(DEFAULT_MEMORY_EVENTS * 3)
      expect(kept).toBeGreaterThanOrEqual(DEFAULT_MEMORY_EVENTS)
      expect(kept).toBeLessThanOrEqual(DEFAULT_MEMORY_EVENTS * 1.25)
      expect(yield* retained(facadeJournalLayer("memory"), 100)).toEqual({ last: 100, kept: 100 })
    }), 60_000)

  it.effect("{ maxEvents } sets the window", () =>
    Effect.gen(function*() {
      const { kept } = yield* retained(facadeJournalLayer({ maxEvents: 50 }), 500)
      expect(kept).toBeGreaterThanOrEqual(50)
      expect(kept).toBeLessThanOrEqual(62)
    }))

  it.live("a PostgreSQL URL, { url } or { path } holding one: everything, durably, in that database", () =>
    Effect.gen(function*() {
      const variants: Array<(url: string) => FacadeJournal> = [
        (url) => url as FacadeJournal,
        (url) => ({ url }),
        (url) => ({ path: url })
      ]
      for (const variant of variants) {
        const url = createDatabase("facade")
        expect(yield* retained(facadeJournalLayer(variant(url)), 30)).toEqual({ last: 30, kept: 30 })
        // Reopened: still there.
        expect(yield* retained(facadeJournalLayer(variant(url)), 1)).toEqual({ last: 31, kept: 31 })
      }
    }))

  it.live("an unreachable PostgreSQL server fails the layer with a JournalError naming it, without the password", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(Layer.build(facadeJournalLayer("postgres://u:hunter2@127.0.0.1:1/db"))))
      expect(error).toMatchObject({ _tag: "JournalError" })
      expect(String((error as Error).message)).toContain("127.0.0.1:1")
      expect(String((error as Error).message)).not.toContain("hunter2")
    }))
})
