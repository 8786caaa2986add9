import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { EventEnvelope, EventType } from "../Event.js"
import { VersionConflict } from "../JournalError.js"
import * as core from "./core.js"
import { makeEnvelope, matches } from "./envelope.js"

export interface MemoryJournalOptions {
  readonly pageSize?: number | undefined
  /** Keep only the most recent events (undefined: all). */
  readonly maxEvents?: number | undefined
}

export const make = (options: MemoryJournalOptions = {}) =>
  Effect.suspend(() => {
    // Index i holds sequence base + i + 1: the array is the (retained) sequence space, so
    // unfiltered pages are plain slices. `base` counts the events evicted by `maxEvents`.
    let log: Array<EventEnvelope> = []
    let base = 0
    const versions = new Map<string, number>()
    // Per-stream sequences (ascending) make `streamId` filters cheap on large in-memory journals.
    const byStream = new Map<string, Array<number>>()
    const maxEvents = options.maxEvents
    if (maxEvents !== undefined && !(Number.isSafeInteger(maxEvents) && maxEvents > 0)) {
      return Effect.die(new RangeError(`maxEvents must be a positive integer, got ${maxEvents}`))
    }
    const at = (sequence: number) => log[sequence - 1 - base]!
    const last = () => base + log.length

    /**
     * Forget the oldest events beyond `maxEvents`, in batches (a quarter of the window) so the
     * cost per append stays constant. A stream whose every event is gone is forgotten too
     * (its version restarts if it is ever appended to again).
     */
    const evict = () => {
      if (maxEvents === undefined || log.length <= maxEvents + Math.max(1, maxEvents >> 2)) return
      const drop = log.length - maxEvents
      for (let i = 0; i < drop; i++) {
        const envelope = log[i]!
        const sequences = byStream.get(envelope.streamId)
        if (sequences === undefined) continue
        sequences.shift()
        if (sequences.length === 0) {
          byStream.delete(envelope.streamId)
          versions.delete(envelope.streamId)
        }
      }
      log = log.slice(drop)
      base += drop
    }

    const backend: core.Backend = {
      pageSize: options.pageSize ?? 1000,
      pollInterval: undefined,
      commit: (appends, timestamp) => {
        // Check every expectation before writing anything: all or nothing.
        const next = new Map<string, number>()
        for (const append of appends) {
          const current = next.get(append.streamId) ?? versions.get(append.streamId) ?? 0
          if (append.expectedVersion !== undefined && append.expectedVersion !== current) {
            return Either.left(
              new VersionConflict({ streamId: append.streamId, expected: append.expectedVersion, actual: current })
            )
          }
          next.set(append.streamId, current + append.events.length)
        }
        const out: Array<EventEnvelope> = []
        for (const append of appends) {
          let version = versions.get(append.streamId) ?? 0
          let positions = byStream.get(append.streamId)
          if (positions === undefined) {
            positions = []
            byStream.set(append.streamId, positions)
          }
          for (const event of append.events) {
            version++
            const envelope = makeEnvelope(last() + 1, append.streamId, version, timestamp, event, append.metadata)
            positions.push(envelope.sequence)
            log.push(envelope)
            out.push(envelope)
          }
          versions.set(append.streamId, version)
        }
        evict()
        return Either.right(out)
      },
      readPage: ({ after, streamId, limit, to, types }) => {
        const end = Math.min(to ?? last(), last())
        // Evicted events are gone: a reader from before the window starts at its oldest event.
        const from = Math.max(after, base)
        const typeSet: ReadonlySet<EventType> | undefined = types === undefined ? undefined : new Set(types)
        const rows: Array<EventEnvelope> = []
        if (streamId === undefined && typeSet === undefined) {
          for (let seq = from + 1; seq <= end && rows.length < limit; seq++) rows.push(at(seq))
          return Either.right({ rows, scannedTo: rows.at(-1)?.sequence ?? Math.max(after, end) })
        }
        if (streamId !== undefined) {
          const sequences = byStream.get(streamId) ?? []
          // Binary search for the first sequence > from (ascending).
          let lo = 0
          let hi = sequences.length
          while (lo < hi) {
            const mid = (lo + hi) >>> 1
            if (sequences[mid]! > from) hi = mid
            else lo = mid + 1
          }
          for (let i = lo; i < sequences.length && rows.length < limit; i++) {
            if (sequences[i]! > end) break
            const envelope = at(sequences[i]!)
            if (matches(envelope, undefined, typeSet)) rows.push(envelope)
          }
          return Either.right({ rows, scannedTo: rows.length < limit ? Math.max(after, end) : rows.at(-1)!.sequence })
        }
        let seq = from + 1
        for (; seq <= end && rows.length < limit; seq++) {
          const envelope = at(seq)
          if (matches(envelope, undefined, typeSet)) rows.push(envelope)
        }
        return Either.right({ rows, scannedTo: Math.max(after, seq - 1) })
      },
      lastSequence: () => Either.right(last()),
      streamVersion: (streamId) => Either.right(versions.get(streamId) ?? 0),
      close: () => {}
    }
    return core.make(backend)
  })
