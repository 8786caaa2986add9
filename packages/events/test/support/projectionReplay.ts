/**
 * Replaying a journal equals projecting it live, one property for every implementation:
 * Projection.test.ts runs it in memory and on SQLite, Projection.pg.test.ts on PostgreSQL.
 */
import { expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type { JournalEvent } from "../../src/Event.js"
import { Journal, JournalDiagnostics } from "../../src/Journal.js"
import * as Projection from "../../src/Projection.js"
import { arbJournalHistory } from "../../src/testing.js"
import { eventually, type Implementation } from "../helpers.js"

export const replayEqualsLive = (impl: Implementation) =>
  it.live.prop(
    `${impl.name}: replay (project(read())) equals the live projection of the same appends`,
    [arbJournalHistory],
    ([history]) =>
      Effect.gen(function* () {
        const journal = yield* Journal
        const diagnostics = yield* JournalDiagnostics
        const live = Projection.makeProjector()
        const updates: Array<Projection.ExecutionState> = []
        const liveFiber = yield* journal.live.pipe(
          Stream.take(history.length),
          Stream.runForEach((e) => Effect.sync(() => live.apply(e))),
          Effect.fork
        )
        const lastLifecycleSequence = history.filter(Projection.isLifecycleEvent).at(-1)!.sequence
        const viaStates = yield* Projection.states(journal.live).pipe(
          Stream.takeUntil((s) => s.lastSequence === lastLifecycleSequence),
          Stream.runForEach((s) => Effect.sync(() => updates.push(s))),
          Effect.fork
        )
        yield* eventually(
          Effect.map(diagnostics.stats, (s) => s.liveSubscribers === 2),
          "live subscriptions"
        )
        // Append as the history says: one stream at a time, in history order, in random-size groups.
        let i = 0
        while (i < history.length) {
          const head = history[i]!
          let j = i + 1
          while (j < history.length && history[j]!.streamId === head.streamId && j - i < 3) j++
          yield* journal.append({
            streamId: head.streamId,
            executorId: "x",
            events: history.slice(i, j).map((e) => ({ type: e.type, data: e.data }) as JournalEvent)
          })
          i = j
        }
        yield* Fiber.join(liveFiber)
        const replayed = yield* Projection.projectStream(journal.read())
        expect(replayed).toEqual(live.states)
        expect(Projection.summarize(replayed)).toEqual(live.summary())
        // The same states also come out of Projection.states, one per lifecycle event.
        yield* Fiber.join(viaStates)
        const lastById = new Map(updates.map((s) => [s.streamId, s]))
        for (const [id, state] of replayed) {
          if (state.claimedBy === undefined) expect(lastById.get(id)).toEqual(state)
        }
        // And it equals the pure projection of the generated history (timestamps aside).
        const strip = (m: ReadonlyMap<string, Projection.ExecutionState>) =>
          [...m.values()].map(
            ({
              completedAt: _c,
              createdAt: _cr,
              destroyedAt: _d,
              finishedAt: _f,
              requestedAt: _r,
              startedAt: _s,
              ...rest
            }) => rest
          )
        expect(strip(replayed)).toEqual(strip(Projection.project(history)))
        expect(Chunk.size(yield* Stream.runCollect(journal.read()))).toBe(history.length)
      }).pipe(Effect.provide(impl.layer())),
    { fastCheck: { numRuns: impl.name === "sqlite" ? 20 : 50 } }
  )
