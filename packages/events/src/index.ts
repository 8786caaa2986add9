/**
 * @hermes-sandbox/events — the container-lifecycle journal.
 *
 * Modules are exported as namespaces (`Event.make(...)`, `MemoryJournal.layer()`,
 * `SqliteJournal.layer(...)`, `PostgresJournal.layer(...)`, `Projection.project(...)`). Flat, and
 * nowhere else on this entry: the errors, the event types users write in their own signatures, and
 * the Rx module's Promise and rxjs face (`openJournal`, `toObservable`; no `Rx` namespace). Every top-level
 * module is also an entry of its own (`@hermes-sandbox/events/Projection`); `internal/` is not exported.
 */

export * as Event from "./Event.js"
export * as HostIdentity from "./HostIdentity.js"
export * as Journal from "./Journal.js"
export * as JournalLocation from "./JournalLocation.js"
export * as MemoryJournal from "./MemoryJournal.js"
export * as PostgresJournal from "./PostgresJournal.js"
export * as ProcessStart from "./ProcessStart.js"
export * as Projection from "./Projection.js"
export * as SqliteJournal from "./SqliteJournal.js"

export { JournalError, VersionConflict } from "./JournalError.js"
export type { EventEnvelope, EventType, JournalEvent } from "./Event.js"
export type { JournalService } from "./Journal.js"
export { type JournalClient, type OpenJournalOptions, openJournal, toObservable } from "./Rx.js"
