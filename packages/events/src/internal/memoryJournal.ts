import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { EventEnvelope, EventType } from "../Event.js"
import { VersionConflict } from "../JournalError.js"
import * as core from "./core.js"
import { makeEnvelope, matches } from "./envelope.js"

export interface MemoryJournalOptions {
  readonly pageSize?: number | undefined
}

export const make = (options: MemoryJournalOptions = {}) =>
  Effect.suspend(() => {
    // Index i holds sequence i + 1: the array is the sequence space, so unfiltered pages are
    // plain slices.
    const log: Array<EventEnvelope> = []
    const versions = new Map<string, number>()
    // Per-stream positions make `executionId` filters cheap on large in-memory journals.
    const byStream = new Map<string, Array<number>>()

    const backend: core.Backend = {
      pageSize: options.pageSize ?? 1000,
      pollInterval: undefined,
      commit: (appends, timestamp) => {
        // Check every expectation before writing anything: all or nothing.
        const next = new Map<string, number>()
        for (const append of appends) {
          const current = next.get(append.executionId) ?? versions.get(append.executionId) ?? 0
          if (append.expectedVersion !== undefined && append.expectedVersion !== current) {
            return Either.left(
              new VersionConflict({ executionId: append.executionId, expected: append.expectedVersion, actual: current })
            )
          }
          next.set(append.executionId, current + append.events.length)
        }
        const out: Array<EventEnvelope> = []
        for (const append of appends) {
          let version = versions.get(append.executionId) ?? 0
          let positions = byStream.get(append.executionId)
          if (positions === undefined) {
            positions = []
            byStream.set(append.executionId, positions)
          }
          for (const event of append.events) {
            version++
            const envelope = makeEnvelope(log.length + 1, append.executionId, version, timestamp, event, append.metadata)
            positions.push(log.length)
            log.push(envelope)
            out.push(envelope)
          }
          versions.set(append.executionId, version)
        }
        return Either.right(out)
      },
      readPage: ({ after, executionId, limit, to, types }) => {
        const end = Math.min(to ?? log.length, log.length)
        const typeSet: ReadonlySet<EventType> | undefined = types === undefined ? undefined : new Set(types)
        const rows: Array<EventEnvelope> = []
        if (executionId === undefined && typeSet === undefined) {
          for (let i = Math.max(0, after); i < end && rows.length < limit; i++) rows.push(log[i]!)
          return Either.right({ rows, scannedTo: rows.at(-1)?.sequence ?? Math.max(after, end) })
        }
        if (executionId !== undefined) {
          const positions = byStream.get(executionId) ?? []
          // Binary search for the first position > after (positions are ascending).
          let lo = 0
          let hi = positions.length
          while (lo < hi) {
            const mid = (lo + hi) >>> 1
            if (positions[mid]! + 1 > after) hi = mid
            else lo = mid + 1
          }
          for (let i = lo; i < positions.length && rows.length < limit; i++) {
            const envelope = log[positions[i]!]!
            if (envelope.sequence > end) break
            if (matches(envelope, undefined, typeSet)) rows.push(envelope)
          }
          return Either.right({ rows, scannedTo: rows.length < limit ? Math.max(after, end) : rows.at(-1)!.sequence })
        }
        let i = Math.max(0, after)
        for (; i < end && rows.length < limit; i++) {
          const envelope = log[i]!
          if (matches(envelope, undefined, typeSet)) rows.push(envelope)
        }
        return Either.right({ rows, scannedTo: Math.max(after, i) })
      },
      lastSequence: () => Either.right(log.length),
      streamVersion: (executionId) => Either.right(versions.get(executionId) ?? 0),
      close: () => {}
    }
    return core.make(backend)
  })
