/**
 * Several OS processes append to one journal at once while this process follows it. One body for
 * each store: MultiProcess.test.ts runs it on a SQLite file, MultiProcess.pg.test.ts on PostgreSQL.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type { EventEnvelope } from "../../src/Event.js"
import * as PostgresJournal from "../../src/PostgresJournal.js"
import * as SqliteJournal from "../../src/SqliteJournal.js"
import {
  checkWriterStream,
  eventually,
  range,
  sequences,
  spawnWriter,
  tempJournalPath,
  testDatabaseUrl
} from "../helpers.js"

const WRITERS = 4
const APPENDS = 120

/** Where the writers write: a SQLite file (the unit tier), a PostgreSQL database (the journal tier). */
export const multiProcessTargets = {
  sqlite: {
    name: "SqliteJournal",
    location: () => tempJournalPath("multi"),
    open: (path: string) => SqliteJournal.make({ path })
  },
  postgres: {
    name: "PostgresJournal",
    // This file's database, whose journal tables the writers create at the same moment
    // (the migration's advisory lock makes that safe).
    location: testDatabaseUrl,
    open: (url: string) => PostgresJournal.make({ url })
  }
} as const

export const acrossProcesses = (target: (typeof multiProcessTargets)[keyof typeof multiProcessTargets]) =>
  describe(`${target.name} across processes`, () => {
    it.live(`${WRITERS} processes append concurrently: sequences unique and gap-free, each writer in order`, () => {
      const file = target.location()
      return Effect.gen(function* () {
        // All writers open the (not yet existing) file at the same time, then start together.
        const children = range(1, WRITERS).map((w) => spawnWriter(["multi", file, String(w), String(APPENDS)]))
        yield* Effect.promise(() => Promise.all(children.map((c) => c.ready)))
        const { journal } = yield* target.open(file)

        // Follow while they write: every event exactly once, in order, live.
        const followed: Array<EventEnvelope> = []
        const follower = yield* journal.follow().pipe(
          Stream.runForEach((e) => Effect.sync(() => followed.push(e))),
          Effect.fork
        )
        for (const c of children) c.go()
        const exits = yield* Effect.promise(() => Promise.all(children.map((c) => c.exit)))
        for (const exit of exits) expect(exit).toMatchObject({ code: 0, stderr: "" })
        const total = children.reduce((n, c) => n + Number(c.lines.find((l) => l.startsWith("done "))!.slice(5)), 0)

        const all = Chunk.toArray(yield* Stream.runCollect(journal.read()))
        expect(sequences(all)).toEqual(range(1, total))
        expect(new Set(all.map((e) => e.id)).size).toBe(total)
        expect(new Set(all.map((e) => e.metadata.pid)).size).toBe(WRITERS)
        for (let w = 1; w <= WRITERS; w++) {
          expect(checkWriterStream(all.filter((e) => e.streamId === `w-${w}`))).toBe(APPENDS)
        }
        // (How much the writers interleave depends on scheduling, so it is not asserted; they
        // are released together after all of them opened the file.)

        yield* eventually(
          Effect.sync(() => followed.length >= total),
          "the follower to catch up"
        )
        expect(followed).toEqual(all)
        yield* Fiber.interrupt(follower)
      }).pipe(Effect.scoped)
    })
  })
