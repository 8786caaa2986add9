import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { EventEnvelope } from "../src/Event.js"
import { Journal, JournalDiagnostics } from "../src/Journal.js"
import { JournalError } from "../src/JournalError.js"
import * as SqliteJournal from "../src/SqliteJournal.js"
import { eventually, range, sequences, stats, tempJournalPath } from "./helpers.js"

const open = (options: SqliteJournal.Options) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(SqliteJournal.layer(options), scope)
    return {
      journal: Context.get(context, Journal),
      diagnostics: Context.get(context, JournalDiagnostics),
      close: Scope.close(scope, Exit.void)
    }
  })

describe("SqliteJournal", () => {
  describe("defaultJournalPath", () => {
    it("prefers $HERMES_SANDBOX_JOURNAL", () => {
      expect(SqliteJournal.defaultJournalPath({ HERMES_SANDBOX_JOURNAL: "/x/j.sqlite", XDG_STATE_HOME: "/s" })).toBe(
        "/x/j.sqlite"
      )
    })
    it("then $XDG_STATE_HOME, then ~/.local/state", () => {
      expect(SqliteJournal.defaultJournalPath({ XDG_STATE_HOME: "/s" })).toBe("/s/hermes-sandbox/journal.sqlite")
      expect(SqliteJournal.defaultJournalPath({})).toBe(
        path.join(os.homedir(), ".local/state/hermes-sandbox/journal.sqlite")
      )
      // The XDG spec says relative values are invalid and must be ignored.
      expect(SqliteJournal.defaultJournalPath({ XDG_STATE_HOME: "rel" })).toBe(
        path.join(os.homedir(), ".local/state/hermes-sandbox/journal.sqlite")
      )
    })
  })

  it.live(
    "a journal it creates is its owner's alone (0600, its -wal and -shm too; new directories 0700); an existing file keeps its mode",
    () =>
      Effect.gen(function* () {
        const dir = path.join(path.dirname(tempJournalPath()), `private-${Math.random().toString(36).slice(2)}`)
        const file = path.join(dir, "j.sqlite")
        const umask = process.umask(0o022)
        try {
          const created = yield* open({ path: file })
          yield* created.journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
          const mode = (p: string) => fs.statSync(p).mode & 0o777
          expect(mode(dir)).toBe(0o700)
          expect([mode(file), mode(`${file}-wal`), mode(`${file}-shm`)]).toEqual([0o600, 0o600, 0o600])
          yield* created.close
          const shared = path.join(dir, "shared.sqlite")
          fs.writeFileSync(shared, "")
          fs.chmodSync(shared, 0o640)
          const reopened = yield* open({ path: shared })
          yield* reopened.journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
          yield* reopened.close
          expect(mode(shared)).toBe(0o640)
        } finally {
          process.umask(umask)
        }
      })
  )

  it.live("creates missing directories, uses WAL, persists across reopen", () =>
    Effect.gen(function* () {
      const file = path.join(path.dirname(tempJournalPath()), "nested", "deeper", "j.sqlite")
      const first = yield* open({ path: file })
      const written = yield* first.journal.append({ streamId: "a", executorId: "x", events: [stats(1), stats(2)] })
      yield* first.close
      const raw = new Database(file, { readonly: true })
      expect(raw.pragma("journal_mode", { simple: true })).toBe("wal")
      expect(raw.prepare("SELECT data, metadata FROM events ORDER BY sequence").all()).toEqual([
        { data: '{"inFlight":1,"queued":0}', metadata: JSON.stringify(written[0]!.metadata) },
        { data: '{"inFlight":2,"queued":0}', metadata: JSON.stringify(written[0]!.metadata) }
      ])
      raw.close()
      const second = yield* open({ path: file })
      expect(Chunk.toArray(yield* Stream.runCollect(second.journal.read()))).toEqual(written)
      expect(yield* second.journal.append({ streamId: "a", executorId: "x", events: [stats(3)] })).toMatchObject([
        { sequence: 3, version: 3 }
      ])
      yield* second.close
    })
  )

  it.live("reads files written before the streamId rename: the execution_id column is the stream id", () =>
    Effect.gen(function* () {
      // A layout-1 file as earlier releases wrote it (the envelope then called the stream
      // `executionId`); the row is inserted by hand so the test does not depend on this
      // library's own writer.
      const file = tempJournalPath()
      const raw = new Database(file)
      raw.exec(`CREATE TABLE events (
        sequence INTEGER PRIMARY KEY, id TEXT NOT NULL, execution_id TEXT NOT NULL, version INTEGER NOT NULL,
        timestamp INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, schema_version INTEGER NOT NULL,
        metadata TEXT NOT NULL) STRICT`)
      raw
        .prepare("INSERT INTO events VALUES (1, 'id-1', 'session-1', 1, 1700000000000, 'ExecutorStats', ?, 1, ?)")
        .run(JSON.stringify({ inFlight: 1, queued: 0 }), JSON.stringify({ executorId: "old", host: "h", pid: 1 }))
      raw.pragma("user_version = 1")
      raw.close()
      const { close, journal } = yield* open({ path: file })
      expect(Chunk.toArray(yield* Stream.runCollect(journal.read({ streamId: "session-1" })))).toMatchObject([
        { sequence: 1, streamId: "session-1", version: 1, type: "ExecutorStats" }
      ])
      expect(yield* journal.streamVersion("session-1")).toBe(1)
      expect(yield* journal.append({ streamId: "session-1", executorId: "x", events: [stats(2)] })).toMatchObject([
        { sequence: 2, streamId: "session-1", version: 2 }
      ])
      yield* close
    })
  )

  it.live("closing the layer closes the database, even with a follower running", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const { close, diagnostics, journal } = yield* open({ path: file })
      yield* journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
      const follower = yield* Effect.fork(Stream.runDrain(journal.follow()))
      yield* eventually(
        Effect.map(diagnostics.stats, (s) => s.activeFollowers === 1),
        "the follower"
      )
      expect(fs.existsSync(`${file}-wal`)).toBe(true)
      yield* close
      expect(yield* Fiber.await(follower)).toEqual(Exit.void)
      // SQLite checkpoints and deletes the WAL when the last connection closes: the file
      // being gone proves the connection was really closed.
      expect(fs.existsSync(`${file}-wal`)).toBe(false)
      expect(yield* diagnostics.stats).toMatchObject({ open: false, activeFollowers: 0 })
    })
  )

  it.live("follow sees other connections' appends by polling; polling stops when the consumer stops", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const reader = yield* open({ path: file, pageSize: 10, pollInterval: "5 millis" })
      const writer = yield* open({ path: file })
      yield* writer.journal.appendBatch(
        range(1, 95).map((i) => ({ streamId: `s${i % 4}`, executorId: "w", events: [stats(i)] }))
      )
      const seen: Array<EventEnvelope> = []
      const follower = yield* Effect.fork(
        Stream.runForEach(reader.journal.follow({ fromSequence: 1 }), (e) => Effect.sync(() => seen.push(e)))
      )
      // Append from the other connection while the follower is still replaying.
      for (let i = 96; i <= 250; i += 5) {
        yield* writer.journal.append({
          streamId: `s${i % 4}`,
          executorId: "w",
          events: range(i, i + 4).map((n) => stats(n))
        })
        if (i % 25 === 1) yield* Effect.sleep("1 millis")
      }
      yield* eventually(
        Effect.sync(() => seen.length >= 250),
        "250 events"
      )
      expect(sequences(seen)).toEqual(range(1, 250))
      // Idle: the follower keeps polling for other writers...
      const before = (yield* reader.diagnostics.stats).followerPolls
      yield* eventually(
        Effect.map(reader.diagnostics.stats, (s) => s.followerPolls > before + 3),
        "idle polls"
      )
      yield* Fiber.interrupt(follower)
      // ...and stops for good once interrupted.
      const stopped = yield* reader.diagnostics.stats
      expect(stopped.activeFollowers).toBe(0)
      yield* Effect.sleep("100 millis")
      expect((yield* reader.diagnostics.stats).followerPolls).toBe(stopped.followerPolls)
      yield* writer.close
      yield* reader.close
    })
  )

  it.live("a writer that cannot get the lock fails with JournalError after busyTimeoutMs, then recovers", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const { close, journal } = yield* open({ path: file, busyTimeoutMs: 30 })
      const blocker = new Database(file)
      blocker.exec("BEGIN IMMEDIATE")
      const error = yield* Effect.flip(journal.append({ streamId: "a", executorId: "x", events: [stats(1)] }))
      expect(error).toBeInstanceOf(JournalError)
      expect(error.message).toMatch(/locked|busy/i)
      blocker.exec("COMMIT")
      blocker.close()
      expect(sequences(yield* journal.append({ streamId: "a", executorId: "x", events: [stats(1)] }))).toEqual([1])
      yield* close
    })
  )

  it.live("refuses rows of a newer schema version instead of misreading them", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const { close, journal } = yield* open({ path: file })
      yield* journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
      const raw = new Database(file)
      raw
        .prepare(
          "INSERT INTO events (sequence, id, execution_id, version, timestamp, type, data, schema_version, metadata) VALUES (2, 'x', 'a', 2, 0, 'ExecutorStats', '{}', 2, '{}')"
        )
        .run()
      raw.close()
      const error = yield* Effect.flip(Stream.runCollect(journal.read()))
      expect(error).toBeInstanceOf(JournalError)
      expect(error.message).toContain("schemaVersion 2")
      yield* close
    })
  )

  it.live("refuses to open a journal written by a newer layout version", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const raw = new Database(file)
      raw.pragma("user_version = 99")
      raw.close()
      const error = yield* Effect.flip(open({ path: file }))
      expect(error).toBeInstanceOf(JournalError)
      expect(error.message).toContain("newer")
    })
  )

  it.live("the unique indexes reject a duplicate sequence or stream version", () =>
    Effect.gen(function* () {
      const file = tempJournalPath()
      const { close, journal } = yield* open({ path: file })
      yield* journal.append({ streamId: "a", executorId: "x", events: [stats(1)] })
      yield* close
      const raw = new Database(file)
      const insert = raw.prepare(
        "INSERT INTO events (sequence, id, execution_id, version, timestamp, type, data, schema_version, metadata) VALUES (?, 'x', ?, ?, 0, 'ExecutorStats', '{}', 1, '{}')"
      )
      expect(() => insert.run(1, "b", 1)).toThrow(/UNIQUE|PRIMARY/)
      expect(() => insert.run(2, "a", 1)).toThrow(/UNIQUE/)
      raw.close()
    })
  )
})
