import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import * as Event from "../src/Event.js"
import { arbEvent, arbExecuteRequest, arbJournalHistory, arbLifecycle, toEnvelopes } from "../src/testing.js"

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("testing arbitraries", () => {
  it.prop(
    "arbExecuteRequest: a plain request; optional fields omitted, never undefined",
    [arbExecuteRequest],
    ([request]) => {
      expect(["python", "javascript", "bash"]).toContain(request.language)
      expect(typeof request.code).toBe("string")
      for (const [key, value] of Object.entries(request)) {
        expect(["language", "code", "stdin", "timeoutMs"]).toContain(key)
        expect(value).not.toBeUndefined()
      }
      if (request.timeoutMs !== undefined) expect(request.timeoutMs).toBeGreaterThan(0)
    }
  )

  it("arbExecuteRequest sometimes omits stdin and timeout", () => {
    const sample = fc.sample(arbExecuteRequest, 200)
    expect(sample.some((r) => !("stdin" in r))).toBe(true)
    expect(sample.some((r) => "stdin" in r)).toBe(true)
    expect(sample.some((r) => !("timeoutMs" in r))).toBe(true)
  })

  it.prop(
    "arbEvent produces only schema-valid events",
    [arbEvent],
    ([event]) => {
      expect(Schema.is(Event.JournalEvent)(event)).toBe(true)
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("arbEvent covers every event type", () => {
    const types = new Set(fc.sample(arbEvent, 1000).map((e) => e.type))
    expect([...types].sort()).toEqual([...Event.eventTypes].sort())
  })

  it.prop("arbLifecycle(id) keeps the given id, and its pool stream is separate", [arbLifecycle("fixed-id")], ([l]) => {
    expect(l.executionId).toBe("fixed-id")
    if (l.path === "pooled") {
      expect(l.pool?.streamId).not.toBe("fixed-id")
      expect(l.events.find((e) => e.type === "ContainerClaimed")?.data).toMatchObject({
        poolStreamId: l.pool?.streamId
      })
    } else {
      expect(l.pool).toBeUndefined()
    }
  })

  it.prop(
    "arbJournalHistory: valid envelopes, sequences 1..n, versions 1..k per stream, time never goes back",
    [arbJournalHistory],
    ([history]) => {
      expect(history.map((e) => e.sequence)).toEqual(history.map((_, i) => i + 1))
      const versions = new Map<string, number>()
      let time = 0
      for (const e of history) {
        expect(Schema.is(Event.EventEnvelope)(e)).toBe(true)
        expect(e.id).toMatch(UUID_V7)
        expect(e.version).toBe((versions.get(e.streamId) ?? 0) + 1)
        versions.set(e.streamId, e.version)
        expect(e.timestamp).toBeGreaterThanOrEqual(time)
        time = e.timestamp
        if (e.type === "ContainerClaimed") {
          // The claimed container's pool stream was started before the claim.
          const pool = history.filter((p) => p.streamId === e.data.poolStreamId && p.sequence < e.sequence)
          expect(pool.map((p) => p.type)).toEqual(["ContainerCreated", "ContainerStarted"])
        }
      }
      expect(new Set(history.map((e) => e.id)).size).toBe(history.length)
    },
    { fastCheck: { numRuns: 200 } }
  )

  it("toEnvelopes numbers from the given sequence and version", () => {
    const envelopes = toEnvelopes("s", [Event.make("ExecutorStats", { inFlight: 0, queued: 0 })], {
      startSequence: 5,
      startVersion: 3
    })
    expect(envelopes).toMatchObject([{ sequence: 5, version: 3, streamId: "s", schemaVersion: 1 }])
  })
})
