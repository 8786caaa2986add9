/**
 * In-memory {@link Journal}: for tests and single-process tools. Same ordering, atomicity,
 * replay and follow guarantees as the SQLite journal, without durability.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/memoryJournal.js"
import { Journal, JournalDiagnostics, type JournalService, type JournalStats } from "./Journal.js"

/**
 * @category models
 */
export interface Options {
  /** Rows per replay page (default 1,000). */
  readonly pageSize?: number | undefined
  /**
   * Keep only about this many most recent events (default: all). For long-running processes
   * that keep events in memory: older events are evicted in batches, a replay or follow from
   * before the window starts at its oldest event, and a stream whose every event is evicted is
   * forgotten. Live subscribers see every event as before.
   */
  readonly maxEvents?: number | undefined
}

/**
 * Builds a journal whose live subscriptions end when the scope closes.
 *
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<
  { readonly journal: JournalService; readonly diagnostics: { readonly stats: Effect.Effect<JournalStats> } },
  never,
  Scope.Scope
> => internal.make(options)

/**
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Journal | JournalDiagnostics> =>
  Layer.scopedContext(
    Effect.map(make(options), (impl) =>
      Context.make(Journal, impl.journal).pipe(Context.add(JournalDiagnostics, impl.diagnostics))
    )
  )
