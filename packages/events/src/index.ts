/**
 * @hermes-sandbox/events — the container-lifecycle journal.
 *
 * Modules are re-exported as namespaces (`Event.make(...)`, `MemoryJournal.layer()`,
 * `SqliteJournal.layer(...)`, `PostgresJournal.layer(...)`, `Projection.project(...)`, `Rx.openJournal(...)`), and the
 * most used names also flat.
 */

export * as Event from "./Event.js"
export * as HostIdentity from "./HostIdentity.js"
export * as Journal from "./Journal.js"
export * as JournalLocation from "./JournalLocation.js"
export * as MemoryJournal from "./MemoryJournal.js"
export * as PostgresJournal from "./PostgresJournal.js"
export * as ProcessStart from "./ProcessStart.js"
export * as Projection from "./Projection.js"
export * as Rx from "./Rx.js"
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
