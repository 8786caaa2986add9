import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { v7 as uuidv7 } from "uuid"
import type { EventEnvelope, EventMetadata, EventType, JournalEvent } from "../Event.js"
import { JournalEvent as JournalEventSchema, SCHEMA_VERSION } from "../Event.js"
import * as HostIdentity from "../HostIdentity.js"
import type { BatchAppendInput } from "../Journal.js"
import { JournalError } from "../JournalError.js"
import { startTimeOf } from "../ProcessStart.js"

/** One stream's events, validated, ready to be numbered and committed. */
export interface PreparedAppend {
  readonly streamId: string
  readonly events: ReadonlyArray<JournalEvent>
  readonly metadata: EventMetadata
  readonly expectedVersion: number | undefined
}

/** The host id (HostIdentity: HERMES_SANDBOX_HOST_ID, else the hostname), as the owner labels carry it. */
const host = HostIdentity.current
/** This process's kernel start time (see EventMetadata.started). */
const started = startTimeOf(process.pid)

const validate = Schema.validateEither(JournalEventSchema, { onExcessProperty: "ignore" })

const metadataCache = new Map<string, EventMetadata>()

/** Metadata objects are shared per executor id: they are immutable and identical. */
export const metadataFor = (executorId: string): EventMetadata => {
  let metadata = metadataCache.get(executorId)
  if (metadata === undefined) {
    metadata = Object.freeze(
      started === undefined ? { executorId, host, pid: process.pid } : { executorId, host, pid: process.pid, started }
    )
    if (metadataCache.size > 1024) metadataCache.clear()
    metadataCache.set(executorId, metadata)
  }
  return metadata
}

/**
 * Validates inputs synchronously. Validation happens before any numbering so that a bad
 * event rejects the whole append and nothing is written (atomicity).
 */
export const prepare = (
  inputs: ReadonlyArray<BatchAppendInput & { readonly expectedVersion?: number | undefined }>
): Either.Either<ReadonlyArray<PreparedAppend>, JournalError> => {
  const prepared: Array<PreparedAppend> = []
  for (const input of inputs) {
    if (typeof input.streamId !== "string" || input.streamId.length === 0) {
      return Either.left(new JournalError({ message: "streamId must be a non-empty string" }))
    }
    if (typeof input.executorId !== "string") {
      return Either.left(new JournalError({ message: "executorId must be a string" }))
    }
    const expected = input.expectedVersion
    if (expected !== undefined && !(Number.isSafeInteger(expected) && expected >= 0)) {
      return Either.left(
        new JournalError({ message: `expectedVersion must be a non-negative integer, got ${expected}` })
      )
    }
    const events: Array<JournalEvent> = []
    for (const event of input.events) {
      const result = validate(event)
      if (Either.isLeft(result)) {
        return Either.left(
          new JournalError({
            message: `invalid ${describe(event)} event for stream ${input.streamId}: ${ParseResult.TreeFormatter.formatErrorSync(
              result.left
            )}`,
            cause: result.left
          })
        )
      }
      events.push(result.right)
    }
    prepared.push({
      streamId: input.streamId,
      events,
      metadata: metadataFor(input.executorId),
      expectedVersion: expected
    })
  }
  return Either.right(prepared)
}

const describe = (event: unknown): string =>
  typeof event === "object" && event !== null && "type" in event
    ? JSON.stringify((event as { type: unknown }).type)
    : "a malformed"

export const makeEnvelope = (
  sequence: number,
  streamId: string,
  version: number,
  timestamp: number,
  event: JournalEvent,
  metadata: EventMetadata,
  id: string = uuidv7()
): EventEnvelope =>
  ({
    id,
    sequence,
    streamId,
    version,
    timestamp,
    type: event.type,
    data: event.data,
    schemaVersion: SCHEMA_VERSION,
    metadata
  }) as EventEnvelope

/** Filter predicate shared by the in-memory backend and post-checks. */
export const matches = (
  envelope: EventEnvelope,
  streamId: string | undefined,
  types: ReadonlySet<EventType> | undefined
): boolean =>
  (streamId === undefined || envelope.streamId === streamId) && (types === undefined || types.has(envelope.type))
