import type Database from "better-sqlite3"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import type { EventType } from "../Event.js"
import { SCHEMA_VERSION } from "../Event.js"
import type { JournalError, VersionConflict } from "../JournalError.js"
import * as core from "./core.js"
import * as stored from "./storedRows.js"
import { toJournalError } from "./storedRows.js"

export interface SqliteJournalOptions {
  readonly path: string
  readonly synchronous?: "full" | "normal" | undefined
  readonly busyTimeoutMs?: number | undefined
  readonly pageSize?: number | undefined
  readonly pollInterval?: Duration.DurationInput | undefined
}

/** Bumped (with a migration) whenever the table layout changes. */
const USER_VERSION = 1

// `execution_id` holds the stream id (`streamId`: an execution, session, pool container or
// executor). The column keeps its layout-1 name: renaming it would be a layout change, which
// processes running an older library against the same file would refuse.

const DDL = `
CREATE TABLE IF NOT EXISTS events (
  sequence       INTEGER PRIMARY KEY, -- rowid alias: unique, and pages are b-tree range scans
  id             TEXT    NOT NULL,
  execution_id   TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  timestamp      INTEGER NOT NULL,
  type           TEXT    NOT NULL,
  data           TEXT    NOT NULL,    -- JSON
  schema_version INTEGER NOT NULL,
  metadata       TEXT    NOT NULL     -- JSON
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS events_stream_version ON events (execution_id, version);
-- Per-stream paging by sequence (follow/read with streamId) without sorting the stream.
CREATE INDEX IF NOT EXISTS events_stream_sequence ON events (execution_id, sequence);
-- Named positions in the log (the startup sweep's mark). Additive: a library without it ignores it.
CREATE TABLE IF NOT EXISTS marks (
  name  TEXT    PRIMARY KEY,
  value INTEGER NOT NULL
) STRICT;
`

const COLUMNS = "sequence, id, execution_id, version, timestamp, type, data, schema_version, metadata"

class Conflict {
  constructor(readonly error: VersionConflict) {}
}

const attempt = <A>(message: string, f: () => A): Either.Either<A, JournalError> => {
  try {
    return Either.right(f())
  } catch (cause) {
    return Either.left(toJournalError(message)(cause))
  }
}

/**
 * Whether opening failed because better-sqlite3's native addon cannot be loaded: "not-built" when
 * its build script never ran (pnpm 10 runs dependencies' build scripts only once approved; the
 * `bindings` package then says "Could not locate the bindings file"), "incompatible" when it was
 * built for another Node.js (dlopen refuses it). The addon loads on the first `new Database`, so
 * importing better-sqlite3 (and the in-memory journal) works without it.
 */
export const addonFailure = (cause: unknown): "not-built" | "incompatible" | undefined => {
  const message = cause instanceof Error ? cause.message : String(cause)
  if (message.includes("Could not locate the bindings file")) return "not-built"
  const code = (cause as { readonly code?: unknown } | null)?.code
  if (
    message.includes("better_sqlite3.node") &&
    (code === "ERR_DLOPEN_FAILED" || message.includes("NODE_MODULE_VERSION"))
  ) {
    return "incompatible"
  }
  return undefined
}

/**
 * The driver, imported when the first SQLite journal opens: the in-memory and PostgreSQL journals
 * never need it, and importing the package need not load it (BENCHMARKS.md, "The client's own cost").
 */
let driver: Promise<typeof Database> | undefined
const loadDriver = (): Promise<typeof Database> =>
  (driver ??= import("better-sqlite3").then(
    (m) => m.default,
    (error: unknown) => {
      driver = undefined
      throw error
    }
  ))

const open = (Driver: typeof Database, options: SqliteJournalOptions): Database.Database => {
  if (options.path !== ":memory:" && options.path !== "") {
    // The journal may hold what programs ran and printed (recordCode), tool arguments
    // (recordToolArguments) and tags: a journal this creates is its owner's alone, whatever the
    // umask (directories it creates 0700, the file 0600; SQLite gives its -wal and -shm files the
    // database's mode). An existing file keeps the mode its owner gave it.
    fs.mkdirSync(path.dirname(path.resolve(options.path)), { recursive: true, mode: 0o700 })
    try {
      fs.closeSync(fs.openSync(options.path, fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_WRONLY, 0o600))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 60_000
  const db = new Driver(options.path, { timeout: busyTimeoutMs })
  try {
    // Several processes append to the same file: WAL lets readers run during a write, and
    // the busy timeout makes writers queue instead of failing with SQLITE_BUSY.
    db.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`)
    if (options.path !== ":memory:" && options.path !== "") db.pragma("journal_mode = WAL")
    // FULL: a commit is on disk (WAL fsync'd) before append returns. NORMAL in WAL mode
    // survives process crashes but may lose the last commits on power loss; it suits bulk
    // batched loads, where the caller can replay its input.
    db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`)
    db.transaction(() => {
      const version = db.pragma("user_version", { simple: true }) as number
      if (version > USER_VERSION) {
        throw new Error(`journal layout version ${version} is newer than this library's (${USER_VERSION})`)
      }
      db.exec(DDL)
      if (version < USER_VERSION) db.pragma(`user_version = ${USER_VERSION}`)
    }).immediate()
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

export const make = (options: SqliteJournalOptions) =>
  Effect.gen(function* () {
    const Driver = yield* Effect.tryPromise({
      try: loadDriver,
      catch: toJournalError(`cannot open journal ${options.path}`)
    })
    const db = yield* Effect.try({
      try: () => open(Driver, options),
      catch: toJournalError(`cannot open journal ${options.path}`)
    })

    const maxSequence = db.prepare("SELECT coalesce(max(sequence), 0) FROM events").pluck()
    const streamVersion = db.prepare("SELECT coalesce(max(version), 0) FROM events WHERE execution_id = ?").pluck()
    const getMark = db.prepare("SELECT value FROM marks WHERE name = 'sweep'").pluck()
    const setMark = db.prepare(
      "INSERT INTO marks (name, value) VALUES ('sweep', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )
    const insert = db.prepare(`INSERT INTO events (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)

    // Page statements differ by filter shape; prepare each shape once.
    const pageStatements = new Map<string, Database.Statement>()
    const pageStatement = (hasTo: boolean, hasStream: boolean, typeCount: number): Database.Statement => {
      const key = `${hasTo}:${hasStream}:${typeCount}`
      let statement = pageStatements.get(key)
      if (statement === undefined) {
        const where = ["sequence > ?"]
        if (hasTo) where.push("sequence <= ?")
        if (hasStream) where.push("execution_id = ?")
        if (typeCount > 0) where.push(`type IN (${Array.from({ length: typeCount }, () => "?").join(", ")})`)
        statement = db
          .prepare(`SELECT ${COLUMNS} FROM events WHERE ${where.join(" AND ")} ORDER BY sequence LIMIT ?`)
          .raw(true)
        pageStatements.set(key, statement)
      }
      return statement
    }

    const toEnvelope = stored.makeRowDecoder()

    const commitTx = db.transaction((appends: ReadonlyArray<stored.PreparedRows>, timestamp: number) => {
      // Inside BEGIN IMMEDIATE we hold the write lock: max + 1 is the next sequence for
      // every process, and commits become visible in sequence order (followers rely on it).
      const conflict = stored.number(
        appends,
        (maxSequence.get() as number) + 1,
        (streamId) => streamVersion.get(streamId) as number
      )
      if (conflict !== undefined) throw new Conflict(conflict)
      for (const append of appends) {
        for (const row of append.rows) {
          insert.run(
            row.sequence,
            row.id,
            append.streamId,
            row.version,
            timestamp,
            row.event.type,
            row.dataJson,
            SCHEMA_VERSION,
            append.metadataJson
          )
        }
      }
    })

    const filteredPage = db.transaction(
      (
        statement: Database.Statement,
        params: ReadonlyArray<string | number>,
        after: number,
        to: number | undefined,
        limit: number
      ): core.Page => {
        const rows = (statement.all(...params) as Array<stored.Row>).map(toEnvelope)
        if (rows.length >= limit) return { rows, scannedTo: rows.at(-1)!.sequence }
        const top = maxSequence.get() as number
        return { rows, scannedTo: Math.max(after, to === undefined ? top : Math.min(to, top)) }
      }
    )

    const backend: core.Backend = {
      pageSize: options.pageSize ?? 1000,
      pollInterval: options.pollInterval ?? Duration.millis(25),
      commit: (appends, timestamp) => {
        // Serialise outside the transaction: the write lock is shared by every process.
        const prepared = stored.serialize(appends)
        if (stored.isNoop(prepared)) return Either.right([])
        try {
          commitTx.immediate(prepared, timestamp)
        } catch (error) {
          if (error instanceof Conflict) return Either.left(error.error)
          return Either.left(toJournalError("append failed")(error))
        }
        return Either.right(stored.envelopes(prepared, timestamp))
      },
      readPage: ({ after, streamId, limit, to, types }) =>
        attempt("replay failed", () => {
          const typeList: ReadonlyArray<EventType> = types ?? []
          const statement = pageStatement(to !== undefined, streamId !== undefined, typeList.length)
          const params: Array<string | number> = [after]
          if (to !== undefined) params.push(to)
          if (streamId !== undefined) params.push(streamId)
          params.push(...typeList, limit)
          const filtered = streamId !== undefined || typeList.length > 0
          if (!filtered) {
            const rows = (statement.all(...params) as Array<stored.Row>).map(toEnvelope)
            return { rows, scannedTo: rows.at(-1)?.sequence ?? after }
          }
          // Filtered: read the page and the current maximum in one snapshot, so that when
          // the page is short we know nothing matching exists up to that maximum.
          return filteredPage(statement, params, after, to, limit)
        }),
      lastSequence: () => attempt("cannot read the last sequence", () => maxSequence.get() as number),
      streamVersion: (streamId) =>
        attempt("cannot read the stream version", () => streamVersion.get(streamId) as number),
      sweepMark: {
        get: () => attempt("cannot read the sweep mark", () => getMark.get() as number | undefined),
        set: (sequence) => attempt("cannot write the sweep mark", () => void setMark.run(sequence))
      },
      close: () => {
        if (db.open) db.close()
      }
    }
    return yield* core.make(backend)
  })
