/**
 * What the PostgreSQL journal adds to the contract (JournalContract.test.ts runs that on it):
 * migrations under concurrent first use, followers woken by NOTIFY across journal instances
 * (no polling), a LISTEN connection that is cut and comes back, the durable sweep mark, and
 * clear failures for bad URLs and unreachable servers.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { spawnSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import type { EventEnvelope } from "../src/Event.js"
import { JournalError } from "../src/JournalError.js"
import * as MemoryJournal from "../src/MemoryJournal.js"
import * as PostgresJournal from "../src/PostgresJournal.js"
import * as SqliteJournal from "../src/SqliteJournal.js"
import { binDir } from "../../../test/support/postgres.js"
import { eventually, freshPostgresSchema, range, sequences, stats, testDatabaseUrl } from "./helpers.js"

const psql = (url: string, sql: string): string => {
  const r = spawnSync(path.join(binDir(), "psql"), [url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], {
    encoding: "utf8"
  })
  if (r.status !== 0) throw new Error(r.stderr)
  return r.stdout.trim()
}

/** No polling in these tests: only a notification can wake a follower in time. */
const NO_RECHECK = "1 hour"

describe("PostgresJournal", () => {
  it.live(
    "it says it is shared across hosts (owners hold ownership leases in it by default); SQLite and memory journals do not",
    () =>
      Effect.gen(function* () {
        const { journal } = yield* PostgresJournal.make({ url: testDatabaseUrl(), schema: freshPostgresSchema() })
        expect(journal.sharedAcrossHosts).toBe(true)
        const sqlite = yield* SqliteJournal.make({
          path: path.join(mkdtempSync(path.join(tmpdir(), "hs-shared-")), "j.sqlite")
        })
        expect(sqlite.journal.sharedAcrossHosts).toBeUndefined()
        const memory = yield* MemoryJournal.make()
        expect(memory.journal.sharedAcrossHosts).toBeUndefined()
      }).pipe(Effect.scoped)
  )

  it.live("several instances opening a new schema at once all succeed; the tables are made once", () =>
    Effect.gen(function* () {
      const url = testDatabaseUrl()
      const schema = freshPostgresSchema()
      const opened = yield* Effect.all(
        range(1, 6).map(() => PostgresJournal.make({ url, schema })),
        { concurrency: "unbounded" }
      )
      yield* Effect.forEach(opened, ({ journal }, i) =>
        journal.append({ streamId: "s", executorId: `x${i}`, events: [stats(i)] })
      )
      expect(yield* opened[0]!.journal.lastSequence).toBe(6)
      expect(psql(url, `SELECT count(*) FROM "${schema}".layout`)).toBe("1")
    }).pipe(Effect.scoped)
  )

  it.live("a follower on one instance is woken by another instance's commit (NOTIFY), with no polling", () =>
    Effect.gen(function* () {
      const url = testDatabaseUrl()
      const schema = freshPostgresSchema()
      const writer = yield* PostgresJournal.make({ url, schema })
      const reader = yield* PostgresJournal.make({ url, schema, recheckInterval: NO_RECHECK })
      yield* writer.journal.append({ streamId: "a", executorId: "w", events: [stats(1)] })
      const seen: Array<EventEnvelope> = []
      const follower = yield* reader.journal.follow().pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e))),
        Effect.fork
      )
      yield* eventually(
        Effect.sync(() => seen.length === 1),
        "the history"
      )
      for (const i of range(2, 20)) {
        yield* writer.journal.append({ streamId: "a", executorId: "w", events: [stats(i)] })
        yield* eventually(
          Effect.sync(() => seen.length === i),
          `event ${i}`,
          3_000
        )
      }
      expect(sequences(seen)).toEqual(range(1, 20))
      // Idle: no page queries while nothing is committed (once the last notification, which may
      // come after the follower already read its row, has been handled).
      yield* Effect.sleep("200 millis")
      const polls = (yield* reader.diagnostics.stats).followerPolls
      yield* Effect.sleep("300 millis")
      expect((yield* reader.diagnostics.stats).followerPolls).toBe(polls)
      yield* Fiber.interrupt(follower)
    }).pipe(Effect.scoped)
  )

  it.live("when the LISTEN connection is cut, it comes back and the follower misses nothing", () =>
    Effect.gen(function* () {
      const url = testDatabaseUrl()
      const schema = freshPostgresSchema()
      const writer = yield* PostgresJournal.make({ url, schema })
      const reader = yield* PostgresJournal.make({ url, schema, recheckInterval: NO_RECHECK })
      const seen: Array<EventEnvelope> = []
      const follower = yield* reader.journal.follow().pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e))),
        Effect.fork
      )
      yield* writer.journal.append({ streamId: "a", executorId: "w", events: [stats(1)] })
      yield* eventually(
        Effect.sync(() => seen.length === 1),
        "the first event"
      )
      // The follower's first page may have found event 1 before its LISTEN connection was up.
      const listeners =
        "FROM pg_stat_activity WHERE application_name = 'hermes-sandbox journal (listen)' AND datname = current_database()"
      yield* eventually(
        Effect.sync(() => Number(psql(url, `SELECT count(*) ${listeners}`)) >= 1),
        "the LISTEN connection",
        200
      )
      expect(Number(psql(url, `SELECT count(pg_terminate_backend(pid)) ${listeners}`))).toBeGreaterThanOrEqual(1)
      // Appended while the listener is down or reconnecting: the reconnection's wake-up finds them.
      yield* writer.journal.append({ streamId: "a", executorId: "w", events: [stats(2), stats(3)] })
      yield* eventually(
        Effect.sync(() => seen.length === 3),
        "the events appended around the cut",
        5_000
      )
      yield* writer.journal.append({ streamId: "a", executorId: "w", events: [stats(4)] })
      yield* eventually(
        Effect.sync(() => seen.length === 4),
        "an event after the reconnection",
        5_000
      )
      expect(sequences(seen)).toEqual([1, 2, 3, 4])
      yield* Fiber.interrupt(follower)
    }).pipe(Effect.scoped)
  )

  it.live("the sweep mark is durable; a replay reads back what was appended, in order", () =>
    Effect.gen(function* () {
      const url = testDatabaseUrl()
      const schema = freshPostgresSchema()
      const first = yield* Effect.scoped(
        Effect.gen(function* () {
          const { journal } = yield* PostgresJournal.make({ url, schema })
          expect(yield* journal.sweepMark!.get).toBeUndefined()
          yield* journal.sweepMark!.set(42)
          yield* journal.sweepMark!.set(7)
          return yield* journal.appendBatch([
            { streamId: "a", executorId: "x", events: [stats(1), stats(2)] },
            { streamId: "b", executorId: "y", events: [stats(3)] }
          ])
        })
      )
      const { journal } = yield* PostgresJournal.make({ url, schema })
      expect(yield* journal.sweepMark!.get).toBe(7)
      expect(Chunk.toArray(yield* Stream.runCollect(journal.read()))).toEqual(first)
      expect(yield* journal.streamVersion("a")).toBe(2)
    }).pipe(Effect.scoped)
  )

  it.live("a layout newer than this library's is refused", () =>
    Effect.gen(function* () {
      const url = testDatabaseUrl()
      const schema = freshPostgresSchema()
      yield* Effect.scoped(PostgresJournal.make({ url, schema }))
      psql(url, `INSERT INTO "${schema}".layout VALUES (99)`)
      const error = yield* Effect.flip(Effect.scoped(PostgresJournal.make({ url, schema })))
      expect(error).toBeInstanceOf(JournalError)
      expect(error.message).toContain("layout version 99 is newer")
    })
  )

  it.live("bad locations are JournalErrors: not a URL, a bad schema name, nobody listening, an unanswering host", () =>
    Effect.gen(function* () {
      const notUrl = yield* Effect.flip(Effect.scoped(PostgresJournal.make({ url: "/tmp/journal.sqlite" })))
      expect(notUrl.message).toContain("not a PostgreSQL URL")
      const schema = yield* Effect.flip(
        Effect.scoped(PostgresJournal.make({ url: testDatabaseUrl(), schema: "Robert'); DROP" }))
      )
      expect(schema.message).toContain("schema must match")
      const refused = yield* Effect.flip(
        Effect.scoped(PostgresJournal.make({ url: "postgres://me:pw-secret@127.0.0.1:1/db" }))
      )
      expect(refused.message).toMatch(/^cannot open journal postgres:\/\/me@127\.0\.0\.1:1\/db: .*ECONNREFUSED/)
      expect(refused.message).not.toContain("pw-secret")
      // TEST-NET-1 (RFC 5737): packets go nowhere, so only the connect timeout ends the wait.
      const started = Date.now()
      const silent = yield* Effect.flip(
        Effect.scoped(
          PostgresJournal.make({ url: "postgresql://me:pw-secret@192.0.2.1:5432/db", connectTimeout: "1 second" })
        )
      )
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(silent.message).toContain("192.0.2.1:5432")
      expect(silent.message).not.toContain("pw-secret")
    })
  )

  it("describeUrl drops the password and parameters", () => {
    expect(PostgresJournal.describeUrl("postgres://u:p@h:5/db?password=p&sslmode=require")).toBe("postgres://u@h:5/db")
    expect(PostgresJournal.describeUrl("postgresql:///db?host=/run/postgresql")).toBe(
      "postgresql://localhost/db".replace("localhost", "/run/postgresql")
    )
    expect(PostgresJournal.isPostgresUrl("postgres://x")).toBe(true)
    expect(PostgresJournal.isPostgresUrl("POSTGRESQL://x")).toBe(true)
    expect(PostgresJournal.isPostgresUrl("./postgres.sqlite")).toBe(false)
  })
})
