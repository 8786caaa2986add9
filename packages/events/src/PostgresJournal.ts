/**
 * The {@link Journal} in PostgreSQL, for a fleet: every executor, on any host, appends to
 * and follows one database (`@effect/sql-pg`'s pool; one more connection for LISTEN).
 *
 * - **One gap-free order across every writer.** An append is one transaction (one call of
 *   the schema's `append` function: one round trip) that first takes the row lock of a
 *   one-row `head` table (`SELECT … FOR UPDATE`) and holds it until COMMIT. Appends therefore run one at a time: the next one gets its
 *   numbers only after the previous one committed, so sequences are gap-free (a rolled-back
 *   append rolls its `head` update back too; a `bigserial` would leave holes) and become
 *   visible in sequence order. That last property is what lets a follower page with
 *   `WHERE sequence > cursor` and never skip a row that commits late. The price is that
 *   appends do not overlap: throughput is one commit at a time, which `appendBatch` amortises.
 *   A primary key on `sequence` and a unique `(stream_id, version)` back both invariants up.
 * - **Expected versions** are checked under that lock, so a mismatch is a
 *   {@link VersionConflict} and nothing is written.
 * - **Replays** page through the table (`pageSize` rows a query), in constant memory, up to
 *   the last sequence committed when they started.
 * - **`follow`** pages through history and then waits for a commit. Each append sends a
 *   `NOTIFY` in its transaction (delivered at COMMIT, in commit order); each journal instance
 *   LISTENs on a connection of its own, opened on the first `follow`, and wakes its followers.
 *   When that connection drops it is reopened (backoff up to 5 s) and, as notifications sent
 *   meanwhile are lost, the followers look again. A slow re-check (`recheckInterval`, 5 s)
 *   remains only as a safety net for a connection that died without a word.
 * - **Migrations** run on first use: a `layout` table records the layout version; a
 *   transaction-scoped advisory lock makes several processes opening a new database at once
 *   safe. Tables live in their own schema (`schema`, default `hermes_sandbox`).
 * - Events are validated on append and stored as the SQLite journal stores them (data and
 *   metadata as the JSON text `JSON.stringify` wrote), so envelopes read back unchanged.
 *
 * Opening fails with a {@link JournalError} naming the server (never the password) within
 * `connectTimeout` (5 s) when it cannot be reached or refuses the login.
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as url from "./internal/postgresUrl.js"
import { Journal, JournalDiagnostics, type JournalService, type JournalStats } from "./Journal.js"
import { JournalError } from "./JournalError.js"

/**
 * @category models
 */
export interface Options {
  /** `postgres://user:password@host:port/database` (or `postgresql://`; libpq's parameters, e.g. `?sslmode=require`). */
  readonly url: string
  /** Schema of the journal's tables, created if needed (default `hermes_sandbox`): several journals can share a database. */
  readonly schema?: string | undefined
  /** Pool connections (default 4), plus one for LISTEN once something follows. */
  readonly poolSize?: number | undefined
  /** Rows per replay page (default 1,000). */
  readonly pageSize?: number | undefined
  /** How long opening (and each new connection) may take (default 5 s). */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /** Followers' safety re-check when no notification came (default 5 s; see the module notes). */
  readonly recheckInterval?: Duration.DurationInput | undefined
}

/**
 * Whether a journal location is a PostgreSQL URL (`postgres://…` or `postgresql://…`) rather
 * than a SQLite file path.
 *
 * @category utils
 */
export const isPostgresUrl: (location: string) => boolean = url.isPostgresUrl

/**
 * The URL as it may be printed: no password, no parameters but the host.
 *
 * @category utils
 */
export const describeUrl: (url: string) => string = url.describeUrl

/**
 * Connects (creating or migrating the tables if needed); the connections are closed when the
 * scope closes, after running `follow`/`live` streams have been ended.
 *
 * The driver (pg, @effect/sql-pg) is loaded here, on first use: importing this package (the
 * CLI's start, a SQLite or memory journal) does not pay for it.
 *
 * @category constructors
 */
export const make = (
  options: Options
): Effect.Effect<
  { readonly journal: JournalService; readonly diagnostics: { readonly stats: Effect.Effect<JournalStats> } },
  JournalError,
  Scope.Scope
> =>
  Effect.tryPromise({
    try: () => import("./internal/postgresJournal.js"),
    catch: (cause) =>
      new JournalError({
        message: `cannot load the PostgreSQL driver: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause
      })
  }).pipe(Effect.flatMap((internal) => internal.make(options)))

/**
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Journal | JournalDiagnostics, JournalError> =>
  Layer.scopedContext(
    Effect.map(make(options), (impl) =>
      Context.make(Journal, impl.journal).pipe(Context.add(JournalDiagnostics, impl.diagnostics))
    )
  )
