/**
 * The in-memory journal's retention window (`maxEvents`): a long-running process that keeps
 * its events in memory holds a bounded number of them, and reads stay consistent.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { Journal } from "../src/Journal.js"
import * as MemoryJournal from "../src/MemoryJournal.js"
import { range, sequences, started } from "./helpers.js"

const withJournal = <A, E>(options: MemoryJournal.Options, f: (journal: Journal["Type"]) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.flatMap(Layer.build(MemoryJournal.layer(options)), (ctx) =>
      f(ctx.unsafeMap.get(Journal.key) as Journal["Type"])
    )
  )

const appendMany = (journal: Journal["Type"], n: number, streams: number) =>
  Effect.forEach(
    range(1, n),
    (i) => journal.append({ streamId: `s${i % streams}`, executorId: "x", events: [started(`c${i}`)] }),
    { discard: true }
  )

describe("MemoryJournal maxEvents", () => {
  it.effect("keeps about the last maxEvents events; sequences go on; a replay starts at the oldest retained", () =>
    withJournal({ maxEvents: 100 }, (journal) =>
      Effect.gen(function* () {
        yield* appendMany(journal, 1_000, 7)
        expect(yield* journal.lastSequence).toBe(1_000)
        const all = Chunk.toArray(yield* Stream.runCollect(journal.read()))
        // Evicted in batches: between maxEvents and maxEvents + a quarter of it are kept.
        expect(all.length).toBeGreaterThanOrEqual(100)
        expect(all.length).toBeLessThanOrEqual(125)
        expect(sequences(all)).toEqual(range(1_001 - all.length, 1_000))
        // A replay from before the window starts at its oldest event; bounds still apply.
        expect(
          sequences(Chunk.toArray(yield* Stream.runCollect(journal.read({ fromSequence: 1, toSequence: 950 }))))
        ).toEqual(range(1_001 - all.length, 950))
        // Per-stream reads see only the retained events of that stream, in order, with their versions going on.
        const s3 = Chunk.toArray(yield* Stream.runCollect(journal.read({ streamId: "s3" })))
        expect(s3.every((e) => e.streamId === "s3")).toBe(true)
        expect(sequences(s3)).toEqual(sequences(all.filter((e) => e.streamId === "s3")))
        expect(s3.at(-1)!.version).toBe(range(1, 1_000).filter((i) => i % 7 === 3).length)
        expect(yield* journal.streamVersion("s3")).toBe(s3.at(-1)!.version)
      })
    )
  )

  it.effect("a stream whose every event was evicted is forgotten; appending to it starts a new history", () =>
    withJournal({ maxEvents: 10 }, (journal) =>
      Effect.gen(function* () {
        yield* journal.append({ streamId: "old", executorId: "x", events: [started("a"), started("b")] })
        yield* appendMany(journal, 50, 3)
        expect(Chunk.toArray(yield* Stream.runCollect(journal.read({ streamId: "old" })))).toEqual([])
        expect(yield* journal.streamVersion("old")).toBe(0)
        const [again] = yield* journal.append({ streamId: "old", executorId: "x", events: [started("c")] })
        expect(again!.version).toBe(1)
        expect(again!.sequence).toBe(53)
      })
    )
  )

  it.live("follow from the start: the retained events, then live ones, with no gap or duplicate", () =>
    withJournal({ maxEvents: 20 }, (journal) =>
      Effect.gen(function* () {
        yield* appendMany(journal, 100, 4)
        const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(journal.follow({ fromSequence: 0 }), 30)))
        // Appended once the follower is past the retained events (fewer than 30 of them).
        yield* Effect.sleep("50 millis")
        yield* appendMany(journal, 20, 4)
        const got = sequences(Chunk.toArray(yield* Fiber.join(fiber)))
        expect(got).toEqual(range(got[0]!, got[0]! + 29))
        expect(got[0]!).toBeGreaterThan(75)
      })
    )
  )

  it.effect("maxEvents must be a positive integer", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(withJournal({ maxEvents: 0 }, () => Effect.void))
      expect(Exit.isFailure(exit)).toBe(true)
    })
  )
})
