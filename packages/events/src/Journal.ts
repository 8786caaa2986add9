/**
 * The journal port: an append-only, totally ordered log of {@link EventEnvelope}s, split
 * into streams (one per execution, session, pool container or executor).
 *
 * Guarantees every implementation gives (and `test/journal-contract.test.ts` checks):
 * - `sequence` is global, strictly increasing and gap-free from 1; `version` is the
 *   1-based position inside the stream.
 * - An append is atomic: all of its events are committed or none.
 * - `live` publishes an event only after it is committed.
 * - `follow` delivers history and then live events with no gap and no duplicate, even
 *   while other writers (for SQLite: other processes) append.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { EventEnvelope, EventType, JournalEvent } from "./Event.js"
import type { JournalError, VersionConflict } from "./JournalError.js"

export { JournalError, VersionConflict } from "./JournalError.js"

/**
 * @category models
 */
export interface AppendInput {
  /** The stream appended to: an execution, session, pool container or executor id. */
  readonly streamId: string
  readonly events: ReadonlyArray<JournalEvent>
  readonly executorId: string
  /**
   * The stream's current last version (0 = the stream must not exist yet). When given and
   * different, nothing is written and the append fails with {@link VersionConflict}.
   */
  readonly expectedVersion?: number | undefined
}

/**
 * One stream's share of an `appendBatch`.
 *
 * @category models
 */
export interface BatchAppendInput {
  readonly streamId: string
  readonly events: ReadonlyArray<JournalEvent>
  readonly executorId: string
}

/**
 * Filters of a finite replay. All bounds are inclusive.
 *
 * @category models
 */
export interface ReplayOptions {
  readonly fromSequence?: number | undefined
  readonly toSequence?: number | undefined
  readonly streamId?: string | undefined
  readonly types?: ReadonlyArray<EventType> | undefined
}

/**
 * @category models
 */
export interface FollowOptions {
  /** First sequence to deliver (inclusive); default 1, the whole history. */
  readonly fromSequence?: number | undefined
  readonly streamId?: string | undefined
  readonly types?: ReadonlyArray<EventType> | undefined
}

/**
 * @category models
 */
export interface JournalService {
  /**
   * Appends atomically (all or nothing), in order, to one stream and returns the committed
   * envelopes. Every event is validated against its Schema first.
   */
  readonly append: (input: AppendInput) => Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError | VersionConflict>
  /** Appends to many streams in one transaction (throughput); all or nothing. */
  readonly appendBatch: (
    input: ReadonlyArray<BatchAppendInput>
  ) => Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError>
  /**
   * Finite replay in sequence order, in constant memory (paged). It ends at the last event
   * committed when the stream started (or `toSequence`), so it terminates even under a
   * steady stream of appends.
   */
  readonly read: (options?: ReplayOptions) => Stream.Stream<EventEnvelope, JournalError>
  /**
   * Replay, then live, with no gap and no duplicate, including events other writers
   * commit meanwhile. Never ends on its own (it ends when the journal is closed).
   */
  readonly follow: (options?: FollowOptions) => Stream.Stream<EventEnvelope, JournalError>
  /** Events committed by this journal instance from the moment the stream starts. */
  readonly live: Stream.Stream<EventEnvelope>
  /** Sequence of the last committed event (0 for an empty journal). */
  readonly lastSequence: Effect.Effect<number, JournalError>
  /** Version of the stream's last event (0 when the stream does not exist). */
  readonly streamVersion: (streamId: string) => Effect.Effect<number, JournalError>
  /**
   * Durable journals only: where the startup sweep's next replay may start. A sweep sets it to
   * the first sequence of the earliest lifecycle it left open (or past the last event it read),
   * so every lifecycle still open began at or after it, and the next sweep replays from there
   * instead of the whole window — a one-shot CLI run's startup then does not grow with the
   * journal. Absent on a memory journal (it starts empty with its process).
   */
  readonly sweepMark?: {
    readonly get: Effect.Effect<number | undefined, JournalError>
    readonly set: (sequence: number) => Effect.Effect<void, JournalError>
  }
  /**
   * True for a journal that processes on other hosts read and write (PostgreSQL). Owners of
   * containers hold an ownership lease in it by default (core's OwnerLease); a SQLite file or a
   * memory journal is one host's, where a lease would tell nobody anything and only grow it.
   */
  readonly sharedAcrossHosts?: true
}

/**
 * @category tags
 */
export class Journal extends Context.Tag("@hermes-sandbox/events/Journal")<Journal, JournalService>() {}

/**
 * Counters that let tests (and operators) see that readers, followers and live
 * subscriptions release what they hold once their consumer stops.
 *
 * @category models
 */
export interface JournalStats {
  /** `read` streams currently running. */
  readonly activeReaders: number
  /** `follow` streams currently running. */
  readonly activeFollowers: number
  /** `live` subscriptions currently open. */
  readonly liveSubscribers: number
  /** Page queries issued by followers so far (grows only while someone follows). */
  readonly followerPolls: number
  /** False once the journal's scope has closed. */
  readonly open: boolean
}

/**
 * Diagnostics of a journal instance; provided next to {@link Journal} by the layers of
 * this package (it is not part of the port, so test doubles of `Journal` need not have it).
 *
 * @category tags
 */
export class JournalDiagnostics extends Context.Tag("@hermes-sandbox/events/JournalDiagnostics")<
  JournalDiagnostics,
  { readonly stats: Effect.Effect<JournalStats> }
>() {}
