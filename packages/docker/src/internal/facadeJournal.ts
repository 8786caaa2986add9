/**
 * Where the Promise facades (createExecutor, createSession) record lifecycle events.
 *
 * In memory by default, bounded: a service that runs executions for weeks must not keep every
 * event it ever recorded (live subscribers still see them all; replays cover the recent
 * window). The SQLite journal keeps everything, durably.
 */
import type { Layer } from "effect"
import { Journal, MemoryJournal, SqliteJournal } from "@hermes-sandbox/events"

/** Events the default in-memory journal keeps (about 2,000 executions' worth). */
export const DEFAULT_MEMORY_EVENTS = 10_000

/**
 * "memory" (default): the last DEFAULT_MEMORY_EVENTS events in memory; { maxEvents }: in memory,
 * that many; "default": the SQLite journal at the CLI's default path; { path }: a SQLite file.
 */
export type FacadeJournal = "memory" | "default" | { readonly path: string } | { readonly maxEvents: number }

export const facadeJournalLayer = (journal: FacadeJournal | undefined): Layer.Layer<Journal.Journal, unknown> =>
  journal === undefined || journal === "memory"
    ? MemoryJournal.layer({ maxEvents: DEFAULT_MEMORY_EVENTS })
    : journal === "default"
    ? SqliteJournal.layer({})
    : "maxEvents" in journal
    ? MemoryJournal.layer({ maxEvents: journal.maxEvents })
    : SqliteJournal.layer({ path: journal.path })
