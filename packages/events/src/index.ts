/**
 * @hermes-sandbox/events — the container-lifecycle journal.
 *
 * Modules are re-exported as namespaces (`Event.make(...)`, `MemoryJournal.layer()`,
 * `SqliteJournal.layer(...)`, `PostgresJournal.layer(...)`, `Projection.project(...)`, `Rx.openJournal(...)`), and the
 * most used names also flat.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Event from "./Event.js"
/** @since 0.2.0 */
export * as HostIdentity from "./HostIdentity.js"
/** @since 0.1.0 */
export * as Journal from "./Journal.js"
/** @since 0.2.0 */
export * as JournalLocation from "./JournalLocation.js"
/** @since 0.1.0 */
export * as MemoryJournal from "./MemoryJournal.js"
/** @since 0.2.0 */
export * as PostgresJournal from "./PostgresJournal.js"
/** @since 0.1.0 */
export * as ProcessStart from "./ProcessStart.js"
/** @since 0.1.0 */
export * as Projection from "./Projection.js"
/** @since 0.1.0 */
export * as Rx from "./Rx.js"
/** @since 0.1.0 */
export * as SqliteJournal from "./SqliteJournal.js"

export type { EnvelopeOf, EventData, EventEnvelope, EventMetadata, EventType, JournalEvent } from "./Event.js"
export type {
  AppendInput,
  BatchAppendInput,
  FollowOptions,
  JournalService,
  JournalStats,
  ReplayOptions
} from "./Journal.js"
export type {
  ExecutionState,
  LeaseState,
  LeaseStatus,
  Outcome,
  Phase,
  Projector,
  Summary,
  ToolCallCounts,
  ToolCallOutcome
} from "./Projection.js"
export type { JournalClient, OpenJournalOptions } from "./Rx.js"
export { JournalError, VersionConflict } from "./JournalError.js"
export { checkLifecycle, evolve, isClosed, makeProjector, project, summarize } from "./Projection.js"
export { openJournal, toObservable } from "./Rx.js"
export { defaultJournalPath } from "./SqliteJournal.js"
