/**
 * The durable {@link Journal}: one SQLite file (better-sqlite3, WAL) that several processes
 * may append to and follow at the same time.
 *
 * - Appends run in `BEGIN IMMEDIATE` transactions that compute `sequence = max + 1` while
 *   holding the write lock, so sequences are unique and gap-free across processes, and a
 *   commit becomes visible only after every smaller sequence. Unique indexes on `sequence`
 *   (the rowid) and `(execution_id, version)` back both invariants up.
 * - `synchronous = FULL` by default: an append has reached the disk when it returns. Pass
 *   `synchronous: "normal"` for bulk loads (WAL mode keeps the file consistent and survives
 *   a process crash; only the last commits before a power loss can be lost).
 * - Replays page through the table 1,000 rows at a time (`WHERE sequence > ? ORDER BY
 *   sequence LIMIT ?`), so memory does not grow with the journal.
 * - `follow` pages through history, then polls every `pollInterval` (25 ms) for rows other
 *   processes committed, and wakes at once on appends made through this instance.
 *
 * Rows are trusted on the way out: every event was validated against its Schema when it
 * was appended, so a replay only parses JSON and checks `schemaVersion` and `type` (a row
 * from a newer schema version fails the replay with a `JournalError` rather than being
 * misread). Use `Event.decodeEnvelope` for full validation of foreign files.
 *
 * better-sqlite3 is synchronous: a statement (and a writer waiting for another process's
 * lock, up to `busyTimeoutMs`) blocks the Node event loop while it runs. Transactions are
 * short, so in practice this is a few milliseconds at worst.
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as os from "node:os"
import * as path from "node:path"
import * as internal from "./internal/sqliteJournal.js"
import { Journal, JournalDiagnostics, type JournalService, type JournalStats } from "./Journal.js"
import type { JournalError } from "./JournalError.js"

/**
 * @category models
 */
export interface Options {
  /** Database file; default {@link defaultJournalPath}. Parent directories are created. */
  readonly path?: string | undefined
  /** `"full"` (default, durable commits) or `"normal"` (faster; see the module notes). */
  readonly synchronous?: "full" | "normal" | undefined
  /** How long a writer waits for another process's write lock (default 60 s). */
  readonly busyTimeoutMs?: number | undefined
  /** Rows per replay page (default 1,000). */
  readonly pageSize?: number | undefined
  /** How often followers look for rows committed by other processes (default 25 ms). */
  readonly pollInterval?: Duration.DurationInput | undefined
}

/**
 * The journal could not be opened because better-sqlite3's native addon cannot be loaded:
 * `"not-built"` (its build script never ran: pnpm 10 runs dependencies' build scripts only once
 * approved) or `"incompatible"` (built for another Node.js). The message says how to fix it; the
 * in-memory journal needs no addon.
 *
 * @category errors
 */
export class SqliteAddonMissing extends Schema.TaggedError<SqliteAddonMissing>(
  "@hermes-sandbox/events/SqliteAddonMissing"
)("SqliteAddonMissing", {
  path: Schema.String,
  reason: Schema.Literal("not-built", "incompatible"),
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    const what =
      this.reason === "not-built"
        ? "the native SQLite addon of better-sqlite3 is not built (pnpm 10 skips dependencies' build scripts until they are approved)"
        : "the native SQLite addon of better-sqlite3 was built for another Node.js version"
    return (
      `cannot open journal ${this.path}: ${what}. Fix: with pnpm, \`pnpm approve-builds\` (choose better-sqlite3; ` +
      `or list it in onlyBuiltDependencies) then \`pnpm rebuild better-sqlite3\`; with npm, \`npm rebuild better-sqlite3\` ` +
      `(building from source needs python3, make and a C++ compiler). The in-memory journal needs no addon.`
    )
  }
}

/**
 * Where the journal lives by default:
 * `$HERMES_SANDBOX_JOURNAL`, else `$XDG_STATE_HOME/hermes-sandbox/journal.sqlite`, else
 * `~/.local/state/hermes-sandbox/journal.sqlite`. (Relative `XDG_STATE_HOME` values are
 * ignored, as the XDG spec requires.)
 *
 * @category constructors
 */
export const defaultJournalPath = (env: NodeJS.ProcessEnv = process.env): string => {
  const explicit = env["HERMES_SANDBOX_JOURNAL"]
  if (explicit !== undefined && explicit !== "") return explicit
  const xdg = env["XDG_STATE_HOME"]
  const stateHome = xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".local", "state")
  return path.join(stateHome, "hermes-sandbox", "journal.sqlite")
}

/**
 * Opens (creating if needed) the journal; the database is closed when the scope closes,
 * after running `follow`/`live` streams have been ended.
 *
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<
  { readonly journal: JournalService; readonly diagnostics: { readonly stats: Effect.Effect<JournalStats> } },
  JournalError | SqliteAddonMissing,
  Scope.Scope
> => {
  const path = options.path ?? defaultJournalPath()
  return internal
    .make({
      path,
      synchronous: options.synchronous,
      busyTimeoutMs: options.busyTimeoutMs,
      pageSize: options.pageSize,
      pollInterval: options.pollInterval
    })
    .pipe(
      Effect.mapError((error) => {
        const reason = internal.addonFailure(error.cause)
        return reason === undefined ? error : new SqliteAddonMissing({ path, reason, cause: error.cause })
      })
    )
}

/**
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Journal | JournalDiagnostics, JournalError | SqliteAddonMissing> =>
  Layer.scopedContext(
    Effect.map(make(options), (impl) =>
      Context.make(Journal, impl.journal).pipe(Context.add(JournalDiagnostics, impl.diagnostics))
    )
  )
