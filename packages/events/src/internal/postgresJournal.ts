import * as Reactivity from "@effect/experimental/Reactivity"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import pg from "pg"
import type { EventEnvelope } from "../Event.js"
import type { Options } from "../PostgresJournal.js"
import { SCHEMA_VERSION } from "../Event.js"
import { JournalError, VersionConflict } from "../JournalError.js"
import * as core from "./core.js"
import { describeUrl, isPostgresUrl } from "./postgresUrl.js"
import * as stored from "./storedRows.js"

/** The public options (PostgresJournal.Options), documented there. */
export type PostgresJournalOptions = Options

/** Bumped (with a migration appended to MIGRATIONS) whenever the table layout changes. */
const LAYOUT = 1

/** Migration i brings layout i to i + 1 (simple-protocol SQL: several statements, no parameters). */
const MIGRATIONS: ReadonlyArray<(s: string) => string> = [
  (s) => `
CREATE TABLE ${s}.events (
  sequence       bigint  PRIMARY KEY,
  id             uuid    NOT NULL,
  stream_id      text    NOT NULL,
  version        bigint  NOT NULL,
  timestamp_ms   bigint  NOT NULL,
  type           text    NOT NULL,
  data           text    NOT NULL, -- the event's data as JSON.stringify wrote it (query it as data::jsonb)
  schema_version integer NOT NULL,
  metadata       text    NOT NULL, -- JSON
  CONSTRAINT events_stream_version UNIQUE (stream_id, version)
);
-- Per-stream paging by sequence (follow/read with streamId) without sorting the stream.
CREATE INDEX events_stream_sequence ON ${s}.events (stream_id, sequence);
-- The last committed sequence; its row lock orders every append (see PostgresJournal.ts).
CREATE TABLE ${s}.head (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  last     bigint  NOT NULL
);
INSERT INTO ${s}.head (last) VALUES (0);
-- Named positions in the log (the startup sweep's mark).
CREATE TABLE ${s}.marks (
  name  text   PRIMARY KEY,
  value bigint NOT NULL
);
-- One append (several streams' shares, in order) in one call. Sequences follow the events'
-- order from head + 1; a stream's versions follow its stored version in the same order
-- (PostgresJournal's internal commit numbers them the same way for the envelopes). Nothing is
-- written when an expected version differs. Returns the head before, each append's stream
-- version before it, and whether it wrote.
CREATE FUNCTION ${s}.append(
  p_streams text[], p_expected bigint[], p_counts integer[], p_metadata text[],
  p_event_append integer[], p_ids uuid[], p_types text[], p_data text[],
  p_timestamp bigint, p_schema_version integer, p_channel text,
  OUT base bigint, OUT before bigint[], OUT written boolean
) LANGUAGE plpgsql AS $fn$
DECLARE
  v_total integer := coalesce(cardinality(p_ids), 0);
  v_conflict boolean;
BEGIN
  -- The lock that orders every append, held to COMMIT. Each statement below takes a fresh
  -- snapshot (READ COMMITTED), so it sees the append that held the lock before.
  SELECT h.last INTO base FROM ${s}.head h FOR UPDATE;
  SELECT array_agg(x.before ORDER BY x.ord), coalesce(bool_or(x.expected IS NOT NULL AND x.expected <> x.before), false)
    INTO before, v_conflict
    FROM (
      SELECT a.ord, a.expected,
             st.v + coalesce(sum(a.cnt) OVER (PARTITION BY a.stream ORDER BY a.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
        FROM unnest(p_streams, p_expected, p_counts) WITH ORDINALITY AS a(stream, expected, cnt, ord)
        CROSS JOIN LATERAL (SELECT coalesce(max(e.version), 0) AS v FROM ${s}.events e WHERE e.stream_id = a.stream) st
    ) x;
  written := NOT v_conflict;
  IF v_conflict OR v_total = 0 THEN
    RETURN;
  END IF;
  INSERT INTO ${s}.events (sequence, id, stream_id, version, type, data, metadata, timestamp_ms, schema_version)
  SELECT base + ev.ord, ev.id, p_streams[ev.app],
         st.v + row_number() OVER (PARTITION BY p_streams[ev.app] ORDER BY ev.ord),
         ev.type, ev.data, p_metadata[ev.app], p_timestamp, p_schema_version
    FROM unnest(p_event_append, p_ids, p_types, p_data) WITH ORDINALITY AS ev(app, id, type, data, ord)
    CROSS JOIN LATERAL (SELECT coalesce(max(e.version), 0) AS v FROM ${s}.events e WHERE e.stream_id = p_streams[ev.app]) st;
  UPDATE ${s}.head SET last = base + v_total;
  -- Delivered at COMMIT, in commit order, to every listening session.
  PERFORM pg_notify(p_channel, (base + v_total)::text);
END
$fn$;`
]

const COLUMNS = "sequence, id, stream_id, version, timestamp_ms, type, data, schema_version, metadata"

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,47}$/

/** The underlying error's own words (pg's errors, Node's socket errors, AggregateErrors of both families). */
const detail = (cause: unknown): string => {
  let error: unknown = cause
  // SqlError wraps the driver's error; its own message is generic.
  while (error !== null && typeof error === "object" && (error as { _tag?: unknown })._tag === "SqlError") {
    const inner = (error as { cause?: unknown }).cause
    if (inner === undefined) break
    error = inner
  }
  if (error instanceof AggregateError && error.message === "" && error.errors.length > 0) {
    return error.errors.map(detail).join("; ")
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code
    return error.message !== "" ? error.message : typeof code === "string" ? code : error.name
  }
  return String(error)
}

const journalError = (message: string) => (cause: unknown) =>
  new JournalError({ message: `${message}: ${detail(cause)}`, cause })

const quote = (identifier: string) => `"${identifier}"`

export const make = (options: PostgresJournalOptions) =>
  Effect.gen(function* () {
    const where = describeUrl(options.url)
    const schema = options.schema ?? "hermes_sandbox"
    if (!isPostgresUrl(options.url)) {
      return yield* new JournalError({ message: `not a PostgreSQL URL (postgres://…): ${where}` })
    }
    if (!SCHEMA_NAME.test(schema)) {
      return yield* new JournalError({
        message: `schema must match ${SCHEMA_NAME.source}, got ${JSON.stringify(schema)}`
      })
    }
    const connectTimeout = Duration.decode(options.connectTimeout ?? Duration.seconds(5))
    const s = quote(schema)
    const events = `${s}.events`
    const head = `${s}.head`
    const channel = `${schema}_journal`
    const applicationName = "hermes-sandbox journal"

    const sql = yield* PgClient.make({
      url: Redacted.make(options.url),
      maxConnections: options.poolSize ?? 4,
      connectTimeout,
      applicationName
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.mapError(
        (error) =>
          new JournalError({
            message: `cannot open journal ${where}: ${
              error.message.includes("timed out")
                ? `no answer within ${Duration.format(connectTimeout)}`
                : detail(error)
            }`,
            cause: error
          })
      )
    )

    yield* migrate(sql, schema).pipe(Effect.mapError(journalError(`cannot open journal ${where}`)))

    const query = (text: string, params: ReadonlyArray<unknown> = []) => sql.unsafe(text, params).values
    const decode = stored.makeRowDecoder()
    const decodeRows = (rows: ReadonlyArray<ReadonlyArray<unknown>>): Array<EventEnvelope> =>
      rows.map((row) => decode(row as unknown as stored.Row))
    const attempt = <A>(message: string, effect: Effect.Effect<A, SqlError>): Effect.Effect<A, JournalError> =>
      effect.pipe(Effect.mapError(journalError(message)))

    /**
     * One round trip: the whole append is the `append` function (one transaction in autocommit),
     * so the head lock is held for the server's work and the commit only. It returns the head
     * before it and, per append, the stream's version before it; the same numbering is then
     * done here (stored.number) to build the envelopes, and checked against what it wrote.
     */
    const commit = (prepared: ReadonlyArray<stored.PreparedRows>, timestamp: number) =>
      Effect.gen(function* () {
        const eventAppend: Array<number> = []
        const ids: Array<string> = []
        const types: Array<string> = []
        const data: Array<string> = []
        prepared.forEach((append, i) => {
          for (const row of append.rows) {
            eventAppend.push(i + 1)
            ids.push(row.id)
            types.push(row.event.type)
            data.push(row.dataJson)
          }
        })
        const [[base, before, written]] = (yield* query(
          `SELECT * FROM ${s}.append($1::text[], $2::bigint[], $3::integer[], $4::text[], $5::integer[], $6::uuid[], $7::text[], $8::text[], $9::bigint, $10::integer, $11::text)`,
          [
            prepared.map((append) => append.streamId),
            prepared.map((append) => append.expectedVersion ?? null),
            prepared.map((append) => append.rows.length),
            prepared.map((append) => append.metadataJson),
            eventAppend,
            ids,
            types,
            data,
            timestamp,
            SCHEMA_VERSION,
            channel
          ]
        )) as [[string, ReadonlyArray<string>, boolean]]
        const versionBefore = new Map<string, number>()
        prepared.forEach((append, i) => {
          if (!versionBefore.has(append.streamId)) versionBefore.set(append.streamId, Number(before[i]))
        })
        const conflict = stored.number(prepared, Number(base) + 1, (stream) => versionBefore.get(stream)!)
        if ((conflict === undefined) !== written) {
          return yield* Effect.fail(
            new JournalError({ message: "append: the server and this library numbered the append differently" })
          )
        }
        if (conflict !== undefined) return yield* Effect.fail(conflict)
      })

    const readPage = ({
      after,
      limit,
      streamId,
      to,
      types
    }: core.PageQuery): Effect.Effect<core.Page, JournalError> => {
      const params: Array<unknown> = [after]
      const conditions = ["sequence > $1"]
      if (to !== undefined) conditions.push(`sequence <= $${params.push(to)}`)
      if (streamId !== undefined) conditions.push(`stream_id = $${params.push(streamId)}`)
      if (types !== undefined) conditions.push(`type = ANY($${params.push(types)}::text[])`)
      const page = `SELECT ${COLUMNS} FROM ${events} WHERE ${conditions.join(" AND ")} ORDER BY sequence LIMIT $${params.push(limit)}`
      if (streamId === undefined && types === undefined) {
        return attempt("replay failed", query(page, params)).pipe(
          Effect.flatMap((rows) => Effect.try({ try: () => decodeRows(rows), catch: journalError("replay failed") })),
          Effect.map((rows) => ({ rows, scannedTo: rows.at(-1)?.sequence ?? after }))
        )
      }
      // Filtered: the page and the head in one statement (one snapshot), so that when the page
      // is short nothing matching exists up to the head, and a follower need not rescan it.
      return attempt(
        "replay failed",
        query(`SELECT h.last, p.* FROM ${head} h LEFT JOIN LATERAL (${page}) p ON true`, params)
      ).pipe(
        Effect.flatMap((result) =>
          Effect.try({
            try: (): core.Page => {
              const top = Number(result[0]![0])
              const rows = decodeRows(result.filter((row) => row[1] !== null).map((row) => row.slice(1)))
              if (rows.length >= limit) return { rows, scannedTo: rows.at(-1)!.sequence }
              return { rows, scannedTo: Math.max(after, to === undefined ? top : Math.min(to, top)) }
            },
            catch: journalError("replay failed")
          })
        )
      )
    }

    /**
     * The LISTEN side: its own connection (not the pool's, whose connections come and go),
     * reconnected with backoff when it drops. Every (re)connection wakes the followers too,
     * since notifications sent while it was down are lost.
     */
    const watchCommits = (wake: () => void): Effect.Effect<never> => {
      const session = Effect.gen(function* () {
        const client = yield* Effect.acquireRelease(
          Effect.tryPromise(async () => {
            const client = new pg.Client({
              connectionString: options.url,
              connectionTimeoutMillis: Duration.toMillis(connectTimeout),
              keepAlive: true,
              application_name: `${applicationName} (listen)`
            })
            client.on("error", () => {}) // reported through `lost` below
            await client.connect()
            return client
          }),
          (client) => Effect.promise(() => client.end().catch(() => {})).pipe(Effect.timeoutOption("1 second"))
        )
        const lost = yield* Deferred.make<void>()
        client.on("notification", () => wake())
        client.on("error", () => Deferred.unsafeDone(lost, Effect.void))
        client.on("end", () => Deferred.unsafeDone(lost, Effect.void))
        yield* Effect.tryPromise(() => client.query(`LISTEN ${quote(channel)}`))
        wake()
        yield* Deferred.await(lost)
      }).pipe(Effect.scoped, Effect.ignore)
      return session.pipe(
        Effect.repeat(
          Schedule.exponential("100 millis").pipe(
            Schedule.union(Schedule.spaced("5 seconds")),
            Schedule.resetAfter("1 minute")
          )
        ),
        Effect.zipRight(Effect.never)
      )
    }

    const backend: core.Backend = {
      pageSize: options.pageSize ?? 1000,
      // A safety net only: notifications wake followers. It bounds the delay if the LISTEN
      // connection died silently (a half-open TCP connection reports nothing until keepalive
      // gives up), which a reconnect cannot cover because nothing says it is needed.
      pollInterval: options.recheckInterval ?? Duration.seconds(5),
      watchCommits,
      commit: (appends, timestamp) =>
        Effect.suspend(() => {
          // Serialise outside the transaction: the head lock is shared by every writer.
          const prepared = stored.serialize(appends)
          if (stored.isNoop(prepared)) return Effect.succeed([])
          return commit(prepared, timestamp).pipe(
            Effect.catchTag("SqlError", (error) => Effect.fail(journalError("append failed")(error))),
            Effect.map(() => stored.envelopes(prepared, timestamp))
          )
        }) as Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError | VersionConflict>,
      readPage,
      lastSequence: () =>
        attempt("cannot read the last sequence", query(`SELECT last FROM ${head}`)).pipe(
          Effect.map((rows) => Number(rows[0]![0]))
        ),
      streamVersion: (streamId) =>
        attempt(
          "cannot read the stream version",
          query(`SELECT coalesce(max(version), 0) FROM ${events} WHERE stream_id = $1`, [streamId])
        ).pipe(Effect.map((rows) => Number(rows[0]![0]))),
      sharedAcrossHosts: true,
      sweepMark: {
        get: () =>
          attempt("cannot read the sweep mark", query(`SELECT value FROM ${s}.marks WHERE name = 'sweep'`)).pipe(
            Effect.map((rows) => (rows.length === 0 ? undefined : Number(rows[0]![0])))
          ),
        set: (sequence) =>
          attempt(
            "cannot write the sweep mark",
            query(
              `INSERT INTO ${s}.marks (name, value) VALUES ('sweep', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
              [sequence]
            )
          ).pipe(Effect.asVoid)
      },
      // The pool (and the LISTEN connection, a fiber of the core's scope) close with the scope.
      close: () => {}
    }
    return yield* core.make(backend)
  })

/**
 * Brings the schema to LAYOUT. The usual case (already current) reads one row and takes no
 * lock. Otherwise a transaction-scoped advisory lock serialises the processes that open a new
 * database at the same moment: the first creates the tables, the others then find them.
 */
const migrate = (sql: SqlClient, schema: string) =>
  Effect.gen(function* () {
    const s = quote(schema)
    const layoutOf = Effect.gen(function* () {
      const [[table]] = (yield* sql.unsafe("SELECT to_regclass($1)::text", [`${s}.layout`]).values) as [[string | null]]
      if (table === null) return 0
      const [[version]] = (yield* sql.unsafe(`SELECT coalesce(max(version), 0) FROM ${s}.layout`).values) as [[number]]
      return version
    })
    const found = yield* layoutOf
    if (found === LAYOUT) return
    if (found > LAYOUT)
      return yield* Effect.fail(new Error(`journal layout version ${found} is newer than this library's (${LAYOUT})`))
    yield* Effect.gen(function* () {
      yield* sql.unsafe("SELECT pg_advisory_xact_lock(hashtext($1))", [`hermes-sandbox journal ${schema}`]).raw
      const exists = yield* sql.unsafe("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]).values
      if (exists.length === 0) yield* sql.unsafe(`CREATE SCHEMA ${s}`).raw
      yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS ${s}.layout (version integer PRIMARY KEY)`).raw
      const [[current]] = (yield* sql.unsafe(`SELECT coalesce(max(version), 0) FROM ${s}.layout`).values) as [[number]]
      if (current > LAYOUT) {
        return yield* Effect.fail(
          new Error(`journal layout version ${current} is newer than this library's (${LAYOUT})`)
        )
      }
      for (let version = current; version < LAYOUT; version++) {
        yield* sql.unsafe(MIGRATIONS[version]!(s)).raw
        yield* sql.unsafe(`INSERT INTO ${s}.layout (version) VALUES ($1)`, [version + 1]).raw
      }
    }).pipe(sql.withTransaction)
  })
