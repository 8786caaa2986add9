import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as fc from "fast-check"
import * as Schema from "effect/Schema"
import * as Event from "../src/Event.js"
import { arbEvent, arbEventOf, arbJournalHistory } from "../src/testing.js"

const roundTrip = <A, I>(schema: Schema.Schema<A, I>, value: A): unknown =>
  Schema.decodeUnknownSync(schema)(JSON.parse(JSON.stringify(Schema.encodeSync(schema)(value))))

describe("Event", () => {
  describe("schema round-trip (encode → JSON → decode)", () => {
    for (const type of Event.eventTypes) {
      it.prop(
        `${type}`,
        [arbEventOf(type)],
        ([event]) => {
          const json = JSON.parse(JSON.stringify(Schema.encodeSync(Event.JournalEvent)(event)))
          // The wire form is exactly { type, data }.
          expect(Object.keys(json).sort()).toEqual(["data", "type"])
          expect(json.type).toBe(type)
          expect(roundTrip(Event.JournalEvent, event)).toEqual(event)
        },
        { fastCheck: { numRuns: 30 } }
      )
    }
  })

  it.prop(
    "envelopes round-trip, with their header",
    [arbJournalHistory],
    ([history]) => {
      for (const envelope of history) {
        expect(roundTrip(Event.EventEnvelope, envelope)).toEqual(envelope)
      }
    },
    { fastCheck: { numRuns: 30 } }
  )

  it("make builds the { type, data } form", () => {
    const event = Event.make("ContainerStarted", { containerId: "abc" })
    expect(event).toEqual({ type: "ContainerStarted", data: { containerId: "abc" } })
    // @ts-expect-error: the payload is checked against the type
    Event.make("ContainerStarted", { exitCode: 1 })
  })

  it("eventTypes lists every member exactly once", () => {
    expect(new Set(Event.eventTypes).size).toBe(Event.members.length)
    expect(Event.eventTypes).toHaveLength(31)
  })

  describe("a session's kernel events (issue 28)", () => {
    const decode = Schema.decodeUnknownEither(Event.JournalEvent)
    const cell = {
      cellId: "c1",
      kernelId: "k1",
      executionCount: 1,
      status: "ok",
      durationMs: 3,
      timeoutMs: 1000,
      codeBytes: 10,
      codeSha256: "0".repeat(64),
      stdoutBytes: 0,
      stderrBytes: 0,
      stdoutTruncated: false,
      stderrTruncated: false,
      outputs: [{ kind: "display", mime: [{ type: "image/png", bytes: 100 }] }],
      outputsOmitted: 0,
      displaysOmitted: 0,
      stateLost: false,
      oomKilled: false,
      toolCallsMade: 0
    }

    it("CellExecuted holds sizes, digests and MIME types: no field for code, data, error values or tracebacks", () => {
      expect(Either.isRight(decode({ type: "CellExecuted", data: cell }))).toBe(true)
      expect(Object.keys(Event.CellExecuted.fields.data.fields).sort()).toEqual(Object.keys(cell).sort())
      // Unknown fields are dropped on decode, never journaled.
      const decoded = Schema.decodeUnknownSync(Event.JournalEvent)({
        type: "CellExecuted",
        data: { ...cell, code: "print(secret)", traceback: ["x"], error: { value: "secret" } }
      })
      expect(JSON.stringify(decoded)).not.toContain("secret")
    })

    it("CellExecuted lists at most 100 outputs of at most 16 types", () => {
      const output = { kind: "display", mime: [{ type: "text/plain", bytes: 1 }] }
      expect(
        Either.isRight(decode({ type: "CellExecuted", data: { ...cell, outputs: Array(100).fill(output) } }))
      ).toBe(true)
      expect(Either.isLeft(decode({ type: "CellExecuted", data: { ...cell, outputs: Array(101).fill(output) } }))).toBe(
        true
      )
      const wide = { kind: "result", mime: Array(17).fill({ type: "text/plain", bytes: 1 }) }
      expect(Either.isLeft(decode({ type: "CellExecuted", data: { ...cell, outputs: [wide] } }))).toBe(true)
      expect(Either.isLeft(decode({ type: "CellExecuted", data: { ...cell, status: "fine" } }))).toBe(true)
    })

    it("KernelRestarted's reasons are the four, KernelStarted's language python", () => {
      for (const reason of ["requested", "timeout", "interrupted", "crashed"])
        expect(
          Either.isRight(decode({ type: "KernelRestarted", data: { kernelId: "k", generation: 1, reason } }))
        ).toBe(true)
      expect(
        Either.isLeft(decode({ type: "KernelRestarted", data: { kernelId: "k", generation: 1, reason: "bored" } }))
      ).toBe(true)
      expect(
        Either.isLeft(
          decode({
            type: "KernelStarted",
            data: { kernelId: "k", generation: 1, language: "ruby", startMs: 1, preload: [], preloadFailed: [] }
          })
        )
      ).toBe(true)
    })
  })

  it("rejects malformed events", () => {
    const decode = Schema.decodeUnknownEither(Event.JournalEvent)
    expect(Either.isLeft(decode({ type: "ContainerStarted", data: {} }))).toBe(true)
    expect(Either.isLeft(decode({ type: "Nope", data: {} }))).toBe(true)
    expect(
      Either.isLeft(decode({ type: "ContainerExited", data: { exitCode: 0.5, oomKilled: false, durationMs: 1 } }))
    ).toBe(true)
    expect(Either.isLeft(decode({ type: "ExecutorStats", data: { inFlight: Number.NaN, queued: 0 } }))).toBe(true)
    expect(
      Either.isLeft(
        decode({
          type: "ContainerDestroyed",
          data: { containerName: "n", containerId: "i", reason: "bored" }
        })
      )
    ).toBe(true)
  })

  it("tool-call events: sizes and a digest; the arguments only as an optional field; the reasons the contract names", () => {
    const decode = Schema.decodeUnknownEither(Event.JournalEvent)
    const requested = { callId: 1, tool: "web_search", argumentBytes: 17, argumentsSha256: "ab" }
    expect(Either.isRight(decode({ type: "ToolCallRequested", data: requested }))).toBe(true)
    expect(
      Either.isRight(decode({ type: "ToolCallRequested", data: { ...requested, arguments: { query: "x" } } }))
    ).toBe(true)
    expect(Either.isLeft(decode({ type: "ToolCallRequested", data: { ...requested, callId: -1 } }))).toBe(true)
    expect(
      Either.isLeft(
        decode({ type: "ToolCallCompleted", data: { callId: 1, tool: "t", durationMs: 2, resultBytes: 0.5 } })
      )
    ).toBe(true)
    expect([...Event.ToolCallFailureReason.literals]).toEqual(["error", "timed-out", "result-too-large", "cancelled"])
    expect([...Event.ToolCallRefusalReason.literals]).toEqual([
      "unknown-tool",
      "invalid-arguments",
      "budget-exhausted",
      "arguments-too-large",
      "host-busy"
    ])
    expect(
      Either.isLeft(
        decode({ type: "ToolCallFailed", data: { callId: 1, tool: "t", durationMs: 2, reason: "bored", message: "m" } })
      )
    ).toBe(true)
    expect(
      Either.isLeft(decode({ type: "ToolCallRefused", data: { callId: 1, tool: "t", reason: "error", message: "m" } }))
    ).toBe(true)
    expect(Event.lifecycleEventTypes).toEqual(
      expect.arrayContaining(["ToolCallRequested", "ToolCallCompleted", "ToolCallFailed", "ToolCallRefused"])
    )
  })

  it("terminal events are the four the contract names", () => {
    expect([...Event.terminalTypes].sort()).toEqual([
      "ContainerExited",
      "ExecutionFailed",
      "ExecutionInterrupted",
      "ExecutionTimedOut"
    ])
    fc.assert(
      fc.property(arbEvent, (event) => {
        expect(Event.isTerminal(event)).toBe((Event.terminalTypes as ReadonlyArray<string>).includes(event.type))
      })
    )
  })
})
