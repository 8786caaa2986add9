/**
 * Where a durable journal is, as a user gives it (`--journal`, `HERMES_SANDBOX_JOURNAL`, a
 * facade's option): a SQLite file path, or a PostgreSQL URL (`postgres://…`,
 * `postgresql://…`).
 */
import type * as Layer from "effect/Layer"
import type { Journal, JournalDiagnostics } from "./Journal.js"
import type { JournalError } from "./JournalError.js"
import * as PostgresJournal from "./PostgresJournal.js"
import * as SqliteJournal from "./SqliteJournal.js"

/**
 * The location given, else the default one ({@link SqliteJournal.defaultJournalPath}, which
 * `HERMES_SANDBOX_JOURNAL` may set to a URL).
 *
 * @category utils
 */
export const resolve = (location?: string | undefined, env: NodeJS.ProcessEnv = process.env): string =>
  location ?? SqliteJournal.defaultJournalPath(env)

/**
 * The journal at `location` (resolved as {@link resolve} does): PostgreSQL for a URL, else SQLite.
 *
 * @category layers
 */
export const layer = (
  location?: string | undefined
): Layer.Layer<Journal | JournalDiagnostics, JournalError | SqliteJournal.SqliteAddonMissing> => {
  const at = resolve(location)
  return PostgresJournal.isPostgresUrl(at) ? PostgresJournal.layer({ url: at }) : SqliteJournal.layer({ path: at })
}

/**
 * How to print the location: a URL without its password.
 *
 * @category utils
 */
export const describe = (location: string): string =>
  PostgresJournal.isPostgresUrl(location) ? PostgresJournal.describeUrl(location) : location
