/**
 * Crash consistency: a writer process is kill -9'd at random moments, many times, on the
 * same journal. After each kill the journal must open, replay a valid gap-free history, and hold
 * every commit the writer reported (it reports only after `append` returned). One body for each
 * store: Crash.test.ts runs it on a SQLite file, Crash.pg.test.ts on a PostgreSQL database.
 */ import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { JournalService } from "../../src/Journal.js"
import type { JournalError } from "../../src/JournalError.js"
import * as PostgresJournal from "../../src/PostgresJournal.js"
import * as SqliteJournal from "../../src/SqliteJournal.js"
import {
  type Child,
  checkWriterStream,
  range,
  sequences,
  spawnWriter,
  tempJournalPath,
  testDatabaseUrl
} from "../helpers.js"

const ROUNDS = 20

interface Reported {
  readonly first: number
  readonly last: number
  readonly append: number
  readonly size: number
}

const reportedCommits = (lines: ReadonlyArray<string>): Array<Reported> =>
  lines
    .filter((l) => l.startsWith("c "))
    .map((l) => {
      const [first, last, append, size] = l.slice(2).split(" ").map(Number)
      return { first: first!, last: last!, append: append!, size: size! }
    })

interface Target {
  readonly name: string
  /** A fresh journal location for the writers (a file, a URL). */
  readonly location: () => string
  /** The store's own integrity check, after a kill. */
  readonly integrity: (location: string) => void
  readonly open: (
    location: string
  ) => Effect.Effect<{ readonly journal: JournalService }, JournalError | SqliteJournal.SqliteAddonMissing, Scope.Scope>
}

/** Where the writers write: a SQLite file (the unit tier), a PostgreSQL database (the journal tier). */
export const crashTargets = {
  sqlite: {
    name: "SqliteJournal",
    location: () => tempJournalPath("crash"),
    integrity: (file) => {
      const raw = new Database(file, { readonly: true })
      expect(raw.pragma("integrity_check", { simple: true })).toBe("ok")
      raw.close()
    },
    open: (path) => SqliteJournal.make({ path })
  },
  postgres: {
    name: "PostgresJournal",
    // The server rolls back a killed writer's open transaction when its connection drops.
    location: testDatabaseUrl,
    integrity: () => {},
    open: (url) => PostgresJournal.make({ url })
  }
} satisfies Record<string, Target>

export const crashConsistency = (target: Target) =>
  describe(`${target.name} crash consistency`, () => {
    it.live(`${ROUNDS} rounds of kill -9 mid-append leave a valid journal with every reported commit`, () => {
      const file = target.location()
      return Effect.gen(function* () {
        const spawnRound = (round: number) => spawnWriter(["crash", file, `r${round}`])
        // The next rounds' processes start (and open the file) while the current one runs, so
        // process start-up does not add up over the rounds.
        const AHEAD = 3
        const queue: Array<Child> = range(0, Math.min(AHEAD, ROUNDS) - 1).map(spawnRound)
        const allReported = new Map<number, Array<Reported>>()
        for (let round = 0; round < ROUNDS; round++) {
          const child = queue.shift()!
          if (round + AHEAD < ROUNDS) queue.push(spawnRound(round + AHEAD))
          yield* Effect.promise(() => child.ready)
          child.go()
          // A random moment: after 1–40 reported commits, plus 0–8 ms.
          const commits = 1 + Math.floor(Math.random() * 40)
          yield* Effect.promise(() => child.waitFor((lines) => reportedCommits(lines).length >= commits))
          const delay = Math.floor(Math.random() * 9)
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, delay)))
          child.process.kill("SIGKILL")
          const exit = yield* Effect.promise(() => child.exit)
          expect(exit.signal).toBe("SIGKILL")
          const reported = reportedCommits(child.lines)
          allReported.set(round, reported)

          // Integrity at the store's level...
          target.integrity(file)

          // ...and at the journal level: reopen and replay.
          const all = yield* Effect.scoped(
            Effect.flatMap(target.open(file), ({ journal }) => Stream.runCollect(journal.read()))
          ).pipe(Effect.map(Chunk.toArray))
          expect(sequences(all)).toEqual(range(1, all.length))
          const bySequence = new Map(all.map((e) => [e.sequence, e]))
          for (let r = 0; r <= round; r++) {
            const stream = all.filter((e) => e.streamId === `w-r${r}`)
            const appends = checkWriterStream(stream)
            const mine = allReported.get(r)!
            // Everything reported is there; at most one more append (committed, killed before
            // it could print) may be.
            expect(appends).toBeGreaterThanOrEqual(mine.length)
            expect(appends).toBeLessThanOrEqual(mine.length + 1)
            for (const commit of mine) {
              for (const sequence of range(commit.first, commit.last)) {
                const envelope = bySequence.get(sequence)
                expect(envelope?.streamId).toBe(`w-r${r}`)
                expect(envelope?.type === "ExecutorStats" && envelope.data.inFlight).toBe(commit.append)
              }
              expect(commit.last - commit.first + 1).toBe(commit.size)
            }
          }
        }
        expect([...allReported.values()].flat().length).toBeGreaterThanOrEqual(ROUNDS)
      })
    })
  })
