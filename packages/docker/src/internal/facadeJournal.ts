/**
 * Where the Promise facades (createExecutor, createSession) record lifecycle events.
 *
 * In memory by default, bounded: a service that runs executions for weeks must not keep every
 * event it ever recorded (live subscribers still see them all; replays cover the recent
 * window). The SQLite and PostgreSQL journals keep everything, durably.
 */
import type { Layer } from "effect"
import { Journal, JournalLocation, MemoryJournal, PostgresJournal } from "@hermes-sandbox/events"

/** Events the default in-memory journal keeps (about 2,000 executions' worth). */
export const DEFAULT_MEMORY_EVENTS = 10_000

/** A PostgreSQL connection URL. */
export type PostgresUrl = `postgres://${string}` | `postgresql://${string}`

/**
 * "memory" (default): the last DEFAULT_MEMORY_EVENTS events in memory; { maxEvents }: in memory,
 * that many; "default": the journal at the CLI's default location (SQLite, or the URL in
 * HERMES_SANDBOX_JOURNAL); { path }: a SQLite file (or a PostgreSQL URL given as a path, as the
 * CLI's --journal does); "postgres://…" or { url }: a PostgreSQL database, shared by every
 * executor that writes to it.
 */
export type FacadeJournal =
  | "memory"
  | "default"
  | PostgresUrl
  | { readonly path: string }
  | { readonly url: string }
  | { readonly maxEvents: number }

export const facadeJournalLayer = (journal: FacadeJournal | undefined): Layer.Layer<Journal.Journal, unknown> =>
  journal === undefined || journal === "memory"
    ? MemoryJournal.layer({ maxEvents: DEFAULT_MEMORY_EVENTS })
    : journal === "default"
      ? JournalLocation.layer()
      : typeof journal === "string"
        ? PostgresJournal.layer({ url: journal })
        : "maxEvents" in journal
          ? MemoryJournal.layer({ maxEvents: journal.maxEvents })
          : "url" in journal
            ? PostgresJournal.layer({ url: journal.url })
            : JournalLocation.layer(journal.path)
