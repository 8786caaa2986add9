/**
 * What the SQL journals (SQLite, PostgreSQL) share about their rows: one row per event, the
 * same columns in the same order, the event's `data` and `metadata` stored as JSON text
 * exactly as `JSON.stringify` wrote them; numbering an append inside the store's transaction;
 * and turning rows back into envelopes.
 */
import { v7 as uuidv7 } from "uuid"
import type { EventEnvelope, EventMetadata, JournalEvent } from "../Event.js"
import { isEventType, SCHEMA_VERSION } from "../Event.js"
import { JournalError, VersionConflict } from "../JournalError.js"
import type { PreparedAppend } from "./envelope.js"
import { makeEnvelope } from "./envelope.js"

/**
 * A stored row, in column order: sequence, id, stream id, version, timestamp (ms), type,
 * data (JSON), schema version, metadata (JSON). Integer columns may arrive as strings (a
 * PostgreSQL bigint).
 */
export type Row = readonly [
  sequence: number | string,
  id: string,
  streamId: string,
  version: number | string,
  timestamp: number | string,
  type: string,
  data: string,
  schemaVersion: number | string,
  metadata: string
]

export interface PreparedRow {
  readonly id: string
  readonly event: JournalEvent
  readonly dataJson: string
  sequence: number
  version: number
}

/** One append, serialised (outside the store's lock: writers share it) and awaiting its numbers. */
export interface PreparedRows {
  readonly streamId: string
  readonly expectedVersion: number | undefined
  readonly metadata: EventMetadata
  readonly metadataJson: string
  readonly rows: ReadonlyArray<PreparedRow>
}

export const serialize = (appends: ReadonlyArray<PreparedAppend>): Array<PreparedRows> =>
  appends.map((append) => ({
    streamId: append.streamId,
    expectedVersion: append.expectedVersion,
    metadata: append.metadata,
    metadataJson: JSON.stringify(append.metadata),
    rows: append.events.map((event) => ({
      id: uuidv7(),
      event,
      dataJson: JSON.stringify(event.data),
      sequence: 0,
      version: 0
    }))
  }))

/** Nothing to write and nothing to check: the store need not be touched. */
export const isNoop = (appends: ReadonlyArray<PreparedRows>): boolean =>
  appends.every((append) => append.rows.length === 0 && append.expectedVersion === undefined)

export const eventCount = (appends: ReadonlyArray<PreparedRows>): number =>
  appends.reduce((n, append) => n + append.rows.length, 0)

/**
 * Numbers the rows from `firstSequence` on, each stream's from its current version
 * (`versionOf`, read inside the store's write lock), checking every `expectedVersion` before
 * anything is written. Returns the conflict, if any (then the store writes nothing).
 */
export const number = (
  appends: ReadonlyArray<PreparedRows>,
  firstSequence: number,
  versionOf: (streamId: string) => number
): VersionConflict | undefined => {
  const versions = new Map<string, number>()
  let sequence = firstSequence - 1
  for (const append of appends) {
    let version = versions.get(append.streamId) ?? versionOf(append.streamId)
    if (append.expectedVersion !== undefined && append.expectedVersion !== version) {
      return new VersionConflict({ streamId: append.streamId, expected: append.expectedVersion, actual: version })
    }
    for (const row of append.rows) {
      row.sequence = ++sequence
      row.version = ++version
    }
    versions.set(append.streamId, version)
  }
  return undefined
}

/** The committed envelopes of numbered rows. */
export const envelopes = (appends: ReadonlyArray<PreparedRows>, timestamp: number): Array<EventEnvelope> => {
  const out: Array<EventEnvelope> = []
  for (const append of appends) {
    for (const row of append.rows) {
      out.push(makeEnvelope(row.sequence, append.streamId, row.version, timestamp, row.event, append.metadata, row.id))
    }
  }
  return out
}

/**
 * Rows → envelopes. Rows are trusted (validated on append): only the JSON is parsed and
 * `schemaVersion`/`type` checked, so a row from a newer library fails loudly instead of being
 * misread. Metadata is identical for all events of one writer: each distinct string is parsed
 * once (the cache is per decoder, so per journal instance).
 */
export const makeRowDecoder = (): ((row: Row) => EventEnvelope) => {
  const metadataCache = new Map<string, EventMetadata>()
  const parseMetadata = (json: string): EventMetadata => {
    let metadata = metadataCache.get(json)
    if (metadata === undefined) {
      metadata = Object.freeze(JSON.parse(json) as EventMetadata)
      if (metadataCache.size >= 256) metadataCache.clear()
      metadataCache.set(json, metadata)
    }
    return metadata
  }
  return (row) => {
    const [sequence, id, streamId, version, timestamp, type, data, schemaVersion, metadata] = row
    if (Number(schemaVersion) !== SCHEMA_VERSION) {
      throw new Error(`event ${sequence} has schemaVersion ${schemaVersion}; this library reads ${SCHEMA_VERSION}`)
    }
    if (!isEventType(type)) throw new Error(`event ${sequence} has unknown type ${JSON.stringify(type)}`)
    return {
      id,
      sequence: Number(sequence),
      streamId,
      version: Number(version),
      timestamp: Number(timestamp),
      type,
      data: JSON.parse(data),
      schemaVersion: SCHEMA_VERSION,
      metadata: parseMetadata(metadata)
    } as EventEnvelope
  }
}

export const toJournalError = (message: string) => (cause: unknown) =>
  new JournalError({ message: `${message}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
