/**
 * The Journal contract, one body for every implementation: JournalContract.test.ts runs it on
 * memory and SQLite (a temp file), JournalContract.pg.test.ts on PostgreSQL (a fresh schema per
 * journal in that file's database on the run's throwaway cluster).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as Event from "../../src/Event.js"
import type { EventEnvelope, EventType } from "../../src/Event.js"
import { Journal, JournalDiagnostics, type ReplayOptions } from "../../src/Journal.js"
import { JournalError, VersionConflict } from "../../src/JournalError.js"
import { arbEvent, arbJournalHistory } from "../../src/testing.js"
import { eventually, type Implementation, range, sequences, started, stats } from "../helpers.js"

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const readAll = (options?: ReplayOptions) =>
  Effect.flatMap(Journal, (journal) => Stream.runCollect(journal.read(options))).pipe(Effect.map(Chunk.toArray))

/** Replays a generated history into the journal, one append per event. */
const load = (history: ReadonlyArray<EventEnvelope>) =>
  Effect.flatMap(Journal, (journal) =>
    Effect.forEach(
      history,
      (e) =>
        journal.append({
          streamId: e.streamId,
          executorId: "loader",
          events: [{ type: e.type, data: e.data } as Event.JournalEvent]
        }),
      { discard: true }
    )
  )

export const journalContract = (impl: Implementation) => {
  describe(`Journal contract: ${impl.name}`, () => {
    // pageSize 7: small pages make every multi-page path (and its boundaries) run.
    const provide = <A, E>(effect: Effect.Effect<A, E, Journal | JournalDiagnostics | Scope.Scope>) =>
      Effect.scoped(Effect.provide(effect, impl.layer({ pageSize: 7 })))

    it.live("append commits in order with sequence, version, ids and metadata", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          const first = yield* journal.append({ streamId: "a", executorId: "ex-1", events: [stats(1), stats(2)] })
          const second = yield* journal.append({ streamId: "b", executorId: "ex-2", events: [started("c")] })
          const third = yield* journal.append({ streamId: "a", executorId: "ex-1", events: [stats(3)] })
          const all = [...first, ...second, ...third]
          expect(all.map((e) => [e.streamId, e.sequence, e.version])).toEqual([
            ["a", 1, 1],
            ["a", 2, 2],
            ["b", 3, 1],
            ["a", 4, 3]
          ])
          for (const e of all) {
            expect(e.id).toMatch(UUID_V7)
            expect(e.schemaVersion).toBe(1)
            expect(e.metadata.pid).toBe(process.pid)
            expect(typeof e.metadata.host).toBe("string")
            expect(e.timestamp).toBeGreaterThan(1_600_000_000_000)
          }
          expect(new Set(all.map((e) => e.id)).size).toBe(4)
          expect(second[0]!.metadata.executorId).toBe("ex-2")
          expect(yield* readAll()).toEqual(all)
          expect(yield* journal.lastSequence).toBe(4)
          expect(yield* journal.streamVersion("a")).toBe(3)
          expect(yield* journal.streamVersion("b")).toBe(1)
          expect(yield* journal.streamVersion("nope")).toBe(0)
        })
      )
    )

    it.live("an empty journal reads empty; an empty append writes nothing", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          expect(yield* readAll()).toEqual([])
          expect(yield* journal.lastSequence).toBe(0)
          expect(yield* journal.append({ streamId: "a", executorId: "x", events: [] })).toEqual([])
          expect(yield* journal.appendBatch([])).toEqual([])
          expect(yield* journal.lastSequence).toBe(0)
        })
      )
    )

    it.live("expectedVersion: matches append, mismatch fails with VersionConflict and writes nothing", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          yield* journal.append({ streamId: "s", executorId: "x", events: [stats(1)], expectedVersion: 0 })
          yield* journal.append({ streamId: "s", executorId: "x", events: [stats(2), stats(3)], expectedVersion: 1 })
          const conflict = yield* Effect.flip(
            journal.append({ streamId: "s", executorId: "x", events: [stats(4)], expectedVersion: 1 })
          )
          expect(conflict).toBeInstanceOf(VersionConflict)
          expect(conflict).toMatchObject({ _tag: "VersionConflict", streamId: "s", expected: 1, actual: 3 })
          const fresh = yield* Effect.flip(
            journal.append({ streamId: "new", executorId: "x", events: [stats(1)], expectedVersion: 2 })
          )
          expect(fresh).toMatchObject({ _tag: "VersionConflict", streamId: "new", expected: 2, actual: 0 })
          expect(yield* journal.lastSequence).toBe(3)
          expect(yield* journal.streamVersion("new")).toBe(0)
          // Conflicting writers: exactly one of several appends expecting version 3 wins.
          const results = yield* Effect.all(
            range(1, 5).map((i) =>
              Effect.either(
                journal.append({ streamId: "s", executorId: `w${i}`, events: [stats(i)], expectedVersion: 3 })
              )
            ),
            { concurrency: "unbounded" }
          )
          expect(results.filter((r) => r._tag === "Right")).toHaveLength(1)
          expect(yield* journal.streamVersion("s")).toBe(4)
        })
      )
    )

    it.live("append is all or nothing: one invalid event rejects the whole append", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          yield* journal.append({ streamId: "a", executorId: "x", events: [stats(0)] })
          const error = yield* Effect.flip(
            journal.append({
              streamId: "a",
              executorId: "x",
              events: [
                stats(1),
                { type: "ContainerStarted", data: { containerId: 42 } } as unknown as Event.JournalEvent,
                stats(3)
              ]
            })
          )
          expect(error).toBeInstanceOf(JournalError)
          expect(error.message).toContain("ContainerStarted")
          expect(sequences(yield* readAll())).toEqual([1])
          expect(yield* journal.streamVersion("a")).toBe(1)
        })
      )
    )

    it.live("appendBatch: many streams in one transaction, all or nothing", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          const committed = yield* journal.appendBatch([
            { streamId: "a", executorId: "x", events: [stats(1), stats(2)] },
            { streamId: "b", executorId: "y", events: [stats(3)] },
            { streamId: "a", executorId: "x", events: [stats(4)] }
          ])
          expect(committed.map((e) => [e.streamId, e.sequence, e.version, e.metadata.executorId])).toEqual([
            ["a", 1, 1, "x"],
            ["a", 2, 2, "x"],
            ["b", 3, 1, "y"],
            ["a", 4, 3, "x"]
          ])
          const error = yield* Effect.flip(
            journal.appendBatch([
              { streamId: "c", executorId: "x", events: [stats(5)] },
              { streamId: "d", executorId: "x", events: [{ type: "Bogus", data: {} } as unknown as Event.JournalEvent] }
            ])
          )
          expect(error).toBeInstanceOf(JournalError)
          expect(yield* journal.lastSequence).toBe(4)
          expect(yield* journal.streamVersion("c")).toBe(0)
          expect(yield* readAll()).toEqual(committed)
        })
      )
    )

    it.live.prop(
      "read filters (streamId, types, from/toSequence) select exactly the matching events, in order",
      {
        history: arbJournalHistory,
        filter: fc.record(
          {
            fromSequence: fc.integer({ min: -2, max: 60 }),
            toSequence: fc.integer({ min: 0, max: 60 }),
            pick: fc.nat(),
            types: fc.subarray([...Event.eventTypes] as Array<EventType>)
          },
          { requiredKeys: [] }
        )
      },
      ({ filter, history }) =>
        provide(
          Effect.gen(function* () {
            yield* load(history)
            const all = yield* readAll()
            expect(all.map((e) => [e.sequence, e.streamId, e.version, e.type])).toEqual(
              history.map((e) => [e.sequence, e.streamId, e.version, e.type])
            )
            const streamId = filter.pick === undefined ? undefined : history[filter.pick % history.length]!.streamId
            const options: ReplayOptions = {
              ...(filter.fromSequence === undefined ? {} : { fromSequence: filter.fromSequence }),
              ...(filter.toSequence === undefined ? {} : { toSequence: filter.toSequence }),
              ...(filter.types === undefined ? {} : { types: filter.types }),
              ...(streamId === undefined ? {} : { streamId })
            }
            const expected = all.filter(
              (e) =>
                (options.fromSequence === undefined || e.sequence >= options.fromSequence) &&
                (options.toSequence === undefined || e.sequence <= options.toSequence) &&
                (options.streamId === undefined || e.streamId === options.streamId) &&
                (options.types === undefined || options.types.includes(e.type))
            )
            expect(yield* readAll(options)).toEqual(expected)
          })
        ),
      { fastCheck: { numRuns: impl.name === "memory" ? 60 : 25 } }
    )

    it.live("read is bounded by what was committed when it started", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          for (let i = 0; i < 20; i++) yield* journal.append({ streamId: "a", executorId: "x", events: [stats(i)] })
          // Append while the replay is running (between pages): the replay still ends at 20.
          const seen = yield* journal.read().pipe(
            Stream.tap((e) =>
              e.sequence % 7 === 0
                ? journal.append({ streamId: "a", executorId: "x", events: [stats(100 + e.sequence)] })
                : Effect.void
            ),
            Stream.runCollect
          )
          expect(sequences(seen)).toEqual(range(1, 20))
          expect(yield* journal.lastSequence).toBe(22)
        })
      )
    )

    it.live("live publishes only committed events, after commit, and nothing for failed appends", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          const diagnostics = yield* JournalDiagnostics
          yield* journal.append({ streamId: "a", executorId: "x", events: [stats(0)] }) // before subscribing
          const received: Array<{ envelope: EventEnvelope; visible: boolean }> = []
          const fiber = yield* journal.live.pipe(
            Stream.take(4),
            Stream.runForEach((envelope) =>
              // At delivery time the event must already be readable: published after commit.
              Effect.map(
                Stream.runCollect(journal.read({ fromSequence: envelope.sequence, toSequence: envelope.sequence })),
                (found) => {
                  received.push({ envelope, visible: Chunk.size(found) === 1 })
                }
              )
            ),
            Effect.fork
          )
          yield* eventually(
            Effect.map(diagnostics.stats, (s) => s.liveSubscribers === 1),
            "the live subscription"
          )
          yield* Effect.flip(journal.append({ streamId: "a", executorId: "x", events: [stats(1)], expectedVersion: 9 }))
          yield* Effect.flip(
            journal.append({
              streamId: "a",
              executorId: "x",
              events: [stats(1), { type: "ExecutorStats", data: { inFlight: -1, queued: 0 } }]
            })
          )
          yield* journal.append({ streamId: "a", executorId: "x", events: [stats(2), stats(3)] })
          yield* journal.appendBatch([{ streamId: "b", executorId: "x", events: [stats(4), stats(5)] }])
          yield* Fiber.join(fiber)
          expect(received.map((r) => r.envelope.sequence)).toEqual([2, 3, 4, 5])
          expect(received.every((r) => r.visible)).toBe(true)
          yield* eventually(
            Effect.map(diagnostics.stats, (s) => s.liveSubscribers === 0),
            "the subscription's release"
          )
        })
      )
    )

    it.live("follow: replay then live with no gap and no duplicate while appends run during the replay", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          const diagnostics = yield* JournalDiagnostics
          const prefill = 300
          const extra = 200
          yield* journal.appendBatch(
            range(1, prefill).map((i) => ({ streamId: `e${i % 13}`, executorId: "x", events: [stats(i)] }))
          )
          const gate = yield* Deferred.make<void>()
          const follower = yield* journal.follow().pipe(
            // Let the writer go as soon as the replay is under way (pages of 7).
            Stream.tap((e) => (e.sequence === 10 ? Deferred.succeed(gate, undefined) : Effect.void)),
            // takeUntil (not take(n)): with a gap or a duplicate the test fails fast, not hangs.
            Stream.takeUntil((e) => e.sequence >= prefill + extra),
            Stream.runCollect,
            Effect.fork
          )
          const writer = yield* Effect.gen(function* () {
            yield* Deferred.await(gate)
            let written = 0
            while (written < extra) {
              const n = Math.min(extra - written, 1 + (written % 4))
              yield* journal.append({
                streamId: `w${written % 3}`,
                executorId: "w",
                events: range(1, n).map((i) => stats(written + i))
              })
              written += n
              yield* Effect.yieldNow()
            }
          }).pipe(Effect.fork)
          const seen = yield* Fiber.join(follower)
          yield* Fiber.join(writer)
          expect(sequences(seen)).toEqual(range(1, prefill + extra))
          expect(Chunk.toArray(seen)).toEqual(yield* readAll())
          yield* eventually(
            Effect.map(diagnostics.stats, (s) => s.activeFollowers === 0 && s.liveSubscribers === 0),
            "the follower's release"
          )
        })
      )
    )

    it.live("follow honours fromSequence, streamId and types, across replay and live", () =>
      provide(
        Effect.gen(function* () {
          const journal = yield* Journal
          for (let i = 1; i <= 30; i++) {
            yield* journal.append({
              streamId: i % 2 === 0 ? "even" : "odd",
              executorId: "x",
              events: [i % 3 === 0 ? started(`c${i}`) : stats(i)]
            })
          }
          const expected = range(5, 60)
            .filter((i) => i % 2 === 0 && i % 3 !== 0)
            .slice(0, 12)
          const evenStats = yield* journal.follow({ streamId: "even", types: ["ExecutorStats"], fromSequence: 5 }).pipe(
            Stream.takeUntil((e) => e.sequence >= expected.at(-1)!),
            Stream.runCollect,
            Effect.fork
          )
          yield* Effect.yieldNow()
          for (let i = 31; i <= 60; i++) {
            yield* journal.append({
              streamId: i % 2 === 0 ? "even" : "odd",
              executorId: "x",
              events: [i % 3 === 0 ? started(`c${i}`) : stats(i)]
            })
          }
          const got = Chunk.toArray(yield* Fiber.join(evenStats))
          expect(sequences(got)).toEqual(expected)
          expect(got.every((e) => e.streamId === "even" && e.type === "ExecutorStats")).toBe(true)
        })
      )
    )

    it.live.prop(
      "concurrent writers (fibers): every writer's events are committed in its own order, sequences 1..n",
      {
        writers: fc.array(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 12 }), {
          minLength: 2,
          maxLength: 6
        })
      },
      ({ writers }) =>
        provide(
          Effect.gen(function* () {
            const journal = yield* Journal
            yield* Effect.forEach(
              writers,
              (batches, w) =>
                Effect.forEach(
                  batches,
                  (size, b) =>
                    Effect.zipRight(
                      Effect.yieldNow(),
                      journal.append({
                        streamId: `writer-${w}`,
                        executorId: `writer-${w}`,
                        events: range(1, size).map((k) => stats(b, k))
                      })
                    ),
                  { discard: true }
                ),
              { concurrency: "unbounded", discard: true }
            )
            const all = yield* readAll()
            const total = writers.flat().reduce((a, b) => a + b, 0)
            expect(sequences(all)).toEqual(range(1, total))
            writers.forEach((batches, w) => {
              const mine = all.filter((e) => e.streamId === `writer-${w}`)
              const expected = batches.flatMap((size, b) => range(1, size).map((k) => [b, k]))
              expect(mine.map((e) => (e.type === "ExecutorStats" ? [e.data.inFlight, e.data.queued] : []))).toEqual(
                expected
              )
              expect(mine.map((e) => e.version)).toEqual(range(1, expected.length))
            })
          })
        ),
      { fastCheck: { numRuns: 20 } }
    )

    it.live("closing the journal ends follow and live streams and releases everything", () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(impl.layer({ pageSize: 7 }), scope)
        const run = <A, E>(effect: Effect.Effect<A, E, Journal | JournalDiagnostics>) => Effect.provide(effect, context)
        const journal = yield* run(Journal)
        const diagnostics = yield* run(JournalDiagnostics)
        yield* journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
        const followed: Array<EventEnvelope> = []
        const lived: Array<EventEnvelope> = []
        const follower = yield* Effect.fork(
          Stream.runForEach(journal.follow(), (e) => Effect.sync(() => followed.push(e)))
        )
        const live = yield* Effect.fork(Stream.runForEach(journal.live, (e) => Effect.sync(() => lived.push(e))))
        yield* eventually(
          Effect.map(diagnostics.stats, (s) => s.activeFollowers === 1 && s.liveSubscribers === 1),
          "follower and live subscriptions"
        )
        yield* journal.append({ streamId: "a", executorId: "x", events: [stats(2)] })
        yield* eventually(
          Effect.sync(() => followed.length === 2 && lived.length === 1),
          "delivery"
        )
        yield* Scope.close(scope, Exit.void)
        // Both end normally: not failed, not hanging.
        expect(yield* Fiber.await(follower)).toEqual(Exit.void)
        expect(yield* Fiber.await(live)).toEqual(Exit.void)
        expect(sequences(followed)).toEqual([1, 2])
        expect(sequences(lived)).toEqual([2])
        const after = yield* diagnostics.stats
        expect(after).toMatchObject({ open: false, activeFollowers: 0, activeReaders: 0, liveSubscribers: 0 })
        const error = yield* Effect.flip(journal.append({ streamId: "a", executorId: "x", events: [stats(3)] }))
        expect(error).toBeInstanceOf(JournalError)
        expect(yield* Effect.flip(Stream.runCollect(journal.read()))).toBeInstanceOf(JournalError)
      })
    )

    it.live.prop(
      "any valid event appends and reads back unchanged",
      [fc.array(arbEvent, { minLength: 1, maxLength: 10 })],
      ([events]) =>
        provide(
          Effect.gen(function* () {
            const journal = yield* Journal
            const committed = yield* journal.append({ streamId: "any", executorId: "x", events })
            expect(committed.map((e) => ({ type: e.type, data: e.data }))).toEqual(events)
            expect(yield* readAll()).toEqual(committed)
          })
        ),
      { fastCheck: { numRuns: 25 } }
    )
  })
}
