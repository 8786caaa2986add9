/**
 * The host's half of tool calls (kernel/ToolChannel.ts), with no engine: frames are fed as the
 * supervisor writes them ('t' "<id> <bytes> <name>" then 'a' chunks, 'b' "<id> <bytes> <name>",
 * 'q' "<id>"), replies ("R <id> <status> <n>\n" + payload) are decoded from what the channel
 * writes, events land in a memory journal (so each one is checked against its schema), and time
 * is the TestClock's. The real supervisor and interpreters are test/tools.e2e.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { Deferred, Effect, Either, FastCheck as fc, Fiber, JSONSchema, Option, Schema, TestClock } from "effect"
import { type EventEnvelope, MemoryJournal } from "@hermes-sandbox/events"
import { ArgumentsInFlight } from "../src/kernel/ArgumentsInFlight.js"
import * as ToolChannel from "../src/kernel/ToolChannel.js"
import {
  DEFAULT_TOOL_LIMITS,
  planTools,
  resolveToolLimits,
  type ToolContext,
  type ToolLimits,
  type Tools
} from "@hermes-sandbox/core/Tools"
import type { Language } from "@hermes-sandbox/core/Language"

const EXECUTION_ID = "0190c0de-0000-7000-8000-000000000018"
const enc = new TextEncoder()
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

// --- what the supervisor reads back -------------------------------------------------------------

interface Reply {
  readonly id: number
  readonly status: string
  readonly payload: string
  readonly bytes: number
}

/** One write of the channel is one whole reply: "R <id> <status> <n>\n" + exactly n bytes. */
const decodeReply = (data: Uint8Array): Reply => {
  const buf = Buffer.from(data)
  const nl = buf.indexOf(10)
  const m = nl < 0 ? null : /^R ([1-9][0-9]*) ([012]) (0|[1-9][0-9]*)$/.exec(buf.subarray(0, nl).toString("latin1"))
  if (m === null) throw new Error(`not a tool reply: ${JSON.stringify(buf.toString("latin1").slice(0, 80))}`)
  const payload = buf.subarray(nl + 1)
  if (payload.length !== Number(m[3])) throw new Error(`a reply announcing ${m[3]} bytes carries ${payload.length}`)
  return { id: Number(m[1]), status: m[2]!, payload: payload.toString("utf8"), bytes: payload.length }
}

// --- the harness ----------------------------------------------------------------------------------

interface Seen {
  readonly sequence: number
  readonly type: string
  readonly data: Record<string, unknown>
}

const OUTCOMES = new Set(["ToolCallCompleted", "ToolCallFailed", "ToolCallRefused"])

/** Lets the forked call fibers, their Promises and the woken sleeps run (a macrotask each). */
const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
const drain = Effect.gen(function* () {
  for (let i = 0; i < 6; i++) yield* tick
})

const open = (
  tools: Tools,
  limits: Partial<ToolLimits> = {},
  options: {
    readonly recordArguments?: boolean
    readonly language?: Language
    /** A journal whose append suspends once before it commits (a remote or batching journal). */
    readonly appendSuspends?: boolean
    readonly inFlight?: ArgumentsInFlight
  } = {}
) =>
  Effect.gen(function* () {
    const { journal } = yield* MemoryJournal.make()
    const plan = yield* planTools(tools, resolveToolLimits(limits), options.recordArguments ?? false)
    if (plan === undefined) return yield* Effect.dieMessage("no tools planned")
    const events: Array<Seen> = []
    const channel = yield* ToolChannel.make({
      plan,
      language: options.language ?? "python",
      executionId: EXECUTION_ID,
      ...(options.inFlight === undefined ? {} : { inFlight: options.inFlight }),
      append: (event) =>
        (options.appendSuspends === true ? Effect.yieldNow() : Effect.void).pipe(
          Effect.zipRight(journal.append({ streamId: EXECUTION_ID, events: [event], executorId: "test" })),
          Effect.tap((envelopes: ReadonlyArray<EventEnvelope>) =>
            Effect.sync(() => {
              for (const e of envelopes)
                events.push({ sequence: e.sequence, type: e.type, data: e.data as unknown as Record<string, unknown> })
            })
          ),
          Effect.orDie
        )
    })
    const replies: Array<Reply> = []
    yield* channel.start((data) => Effect.sync(() => void replies.push(decodeReply(data))))

    /** A call as the supervisor relays it: 't' then its arguments in 'a' chunks cut at `cuts`. */
    const call = (
      id: number,
      tool: string,
      args: string | Uint8Array,
      cuts: ReadonlyArray<number> = []
    ): string | undefined => {
      const bytes = typeof args === "string" ? enc.encode(args) : args
      const violation = channel.frame(
        "t",
        Buffer.concat([Buffer.from(`${id} ${bytes.byteLength} `), Buffer.from(tool)])
      )
      if (violation !== undefined) return violation
      const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))]
        .filter((p) => p > 0)
        .sort((a, b) => a - b)
      let from = 0
      for (const p of [...points, bytes.byteLength]) {
        if (p === from) continue
        const v = channel.argumentsChunk(bytes.subarray(from, p))
        if (v !== undefined) return v
        from = p
      }
      return undefined
    }
    const tooLarge = (id: number, tool: string, size: number) =>
      channel.frame("b", Buffer.from(`${id} ${size} ${tool}`))
    const quit = (id: number | string) => channel.frame("q", Buffer.from(String(id)))
    const ofCall = (id: number) => events.filter((e) => e.data.callId === id)
    const outcomeOf = (id: number) => events.filter((e) => e.data.callId === id && OUTCOMES.has(e.type))
    const repliesTo = (id: number) => replies.filter((r) => r.id === id)
    /** Replies by call id (calls are served concurrently: a refusal may overtake an earlier call's result). */
    const byId = () => [...replies].sort((a, b) => a.id - b.id)
    return { channel, plan, events, replies, call, tooLarge, quit, ofCall, outcomeOf, repliesTo, byId }
  })

/** The one call a test makes, served: its events, its reply. */
const callOnce = (tools: Tools, tool: string, args: string, limits: Partial<ToolLimits> = {}) =>
  Effect.gen(function* () {
    const h = yield* open(tools, limits)
    expect(h.call(1, tool, args)).toBeUndefined()
    yield* drain
    return { h, events: h.ofCall(1), replies: h.repliesTo(1) }
  })

const noStack = (text: string) => {
  expect(text).not.toContain("    at ")
  expect(text).not.toMatch(/\.ts:\d+/)
}

const add = {
  description: "Add two numbers",
  parameters: {
    type: "object",
    properties: { a: { type: "number" }, b: { type: "number" } },
    required: ["a", "b"],
    additionalProperties: false
  },
  handler: ({ a, b }: { a: number; b: number }) => a + b
}

// --- 1. each outcome ----------------------------------------------------------------------------

describe("ToolChannel: each outcome", () => {
  it.scoped(
    "a result: status 0 with the result as JSON, ToolCallRequested (size and sha256 of the raw bytes, no arguments) then ToolCallCompleted",
    () =>
      Effect.gen(function* () {
        const contexts: Array<ToolContext> = []
        const tools: Tools = {
          add: {
            ...add,
            handler: (args: { a: number; b: number }, context: ToolContext) => (
              contexts.push(context), add.handler(args)
            )
          },
          obj: { handler: () => ({ list: [1, "two", null], nested: { ok: true } }) },
          nothing: { handler: () => undefined }
        }
        const h = yield* open(tools)
        const args = `{"a": 1, "b": 2}`
        expect(h.call(1, "add", args, [3, 9])).toBeUndefined()
        expect(h.call(2, "obj", "{}")).toBeUndefined()
        expect(h.call(3, "nothing", "{}")).toBeUndefined()
        yield* drain
        expect(h.repliesTo(1)).toEqual([{ id: 1, status: "0", payload: "3", bytes: 1 }])
        expect(JSON.parse(h.repliesTo(2)[0]!.payload)).toEqual({ list: [1, "two", null], nested: { ok: true } })
        expect(h.repliesTo(2)[0]!.status).toBe("0")
        // undefined is JSON null (a Python None), not an empty reply
        expect(h.repliesTo(3)).toEqual([{ id: 3, status: "0", payload: "null", bytes: 4 }])
        expect(h.ofCall(1).map((e) => [e.type, e.data])).toEqual([
          [
            "ToolCallRequested",
            {
              callId: 1,
              tool: "add",
              argumentBytes: enc.encode(args).byteLength,
              argumentsSha256: sha256(enc.encode(args))
            }
          ],
          ["ToolCallCompleted", { callId: 1, tool: "add", durationMs: 0, resultBytes: 1 }]
        ])
        expect(contexts).toHaveLength(1)
        expect(contexts[0]).toMatchObject({ executionId: EXECUTION_ID, callId: 1, tool: "add" })
        expect(contexts[0]!.signal.aborted).toBe(false)
        expect(h.channel.callsMade()).toBe(3)
      })
  )

  it.scoped(
    "recordArguments: ToolCallRequested carries the parsed arguments, or the text of arguments that are not JSON",
    () =>
      Effect.gen(function* () {
        const h = yield* open({ add }, {}, { recordArguments: true })
        h.call(1, "add", `{"a":1,"b":2}`)
        h.call(2, "add", `{"a":`)
        yield* drain
        expect(h.ofCall(1)[0]!.data.arguments).toEqual({ a: 1, b: 2 })
        expect(h.ofCall(2)[0]!.data.arguments).toBe(`{"a":`)
      })
  )

  class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

  const failing: ReadonlyArray<readonly [string, (args: unknown, context: ToolContext) => unknown, string]> = [
    [
      "a throw",
      () => {
        throw new Error("boom from the host")
      },
      "boom from the host"
    ],
    [
      "a thrown string",
      () => {
        throw "just words"
      },
      "just words"
    ],
    [
      "an async function that throws",
      async () => {
        await Promise.resolve()
        throw new TypeError("async boom")
      },
      "async boom"
    ],
    ["a Promise rejection", () => Promise.reject(new Error("rejected")), "rejected"],
    [
      "a rejection with an object carrying a message and a stack",
      () => Promise.reject({ message: "plain object", stack: "Error: x\n    at secret (/host/path.ts:1:1)" }),
      "plain object"
    ],
    ["an Effect failure", () => Effect.fail(new Error("effect failed")), "effect failed"],
    ["an Effect failure with a tagged error", () => new NotFound({ message: "no such record" }), "no such record"],
    [
      "an Effect failure with a string, after a flatMap",
      () => Effect.flatMap(Effect.succeed(1), () => Effect.fail("failed as a string")),
      "failed as a string"
    ],
    ["an Effect defect", () => Effect.die(new RangeError("a defect")), "a defect"],
    ["an Effect defect by dieMessage", () => Effect.dieMessage("died with a message"), "died with a message"],
    [
      "an Effect that throws inside sync",
      () =>
        Effect.sync(() => {
          throw new Error("thrown inside Effect.sync")
        }),
      "thrown inside Effect.sync"
    ],
    [
      "an Error without a message",
      () => {
        throw new Error("")
      },
      "the tool failed without a message"
    ]
  ]

  for (const [what, handler, message] of failing) {
    it.scoped(`${what}: status 1 with the message only (never a stack), ToolCallFailed error`, () =>
      Effect.gen(function* () {
        const { events, replies, h } = yield* callOnce({ t: { handler } }, "t", "{}")
        expect(replies).toEqual([{ id: 1, status: "1", payload: message, bytes: enc.encode(message).byteLength }])
        noStack(replies[0]!.payload)
        expect(events.map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed"])
        expect(events[1]!.data).toEqual({ callId: 1, tool: "t", durationMs: 0, reason: "error", message })
        // A tool error was a call made: it counts.
        expect(h.channel.callsMade()).toBe(1)
      })
    )
  }

  it.scoped("a very long message is cut, still without a stack", () =>
    Effect.gen(function* () {
      const { replies } = yield* callOnce(
        { t: { handler: () => Promise.reject(new Error("y".repeat(20_000))) } },
        "t",
        "{}"
      )
      expect(replies[0]!.status).toBe("1")
      expect(replies[0]!.payload.startsWith("y".repeat(8192))).toBe(true)
      expect(replies[0]!.payload).toContain("message cut at 8192 characters")
    })
  )

  it.scoped(
    "an Effect handler that ends interrupted by itself is answered (status 1) — the code is not left waiting while the run goes on",
    () =>
      Effect.gen(function* () {
        const { events, replies } = yield* callOnce({ t: { handler: () => Effect.interrupt } }, "t", "{}")
        expect(replies.map((r) => r.status)).toEqual(["1"])
        expect(events.map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed"])
        expect(events[1]!.data.reason).toBe("error")
      })
  )

  const refused: ReadonlyArray<readonly [string, string, string, string, string]> = [
    [
      "an unknown tool",
      "nope",
      `{"a":1,"b":2}`,
      "unknown-tool",
      `no tool named "nope" is available to this run (tools: add)`
    ],
    ["invalid JSON", "add", `{"a": 1,`, "invalid-arguments", "the arguments of add are not JSON"],
    ["no arguments at all", "add", "", "invalid-arguments", "the arguments of add are not JSON"],
    ["an array", "add", `[1, 2]`, "invalid-arguments", "the arguments of add must be one JSON object"],
    ["a number", "add", `3`, "invalid-arguments", "the arguments of add must be one JSON object"],
    ["null", "add", `null`, "invalid-arguments", "the arguments of add must be one JSON object"],
    ["a string", "add", `"a"`, "invalid-arguments", "the arguments of add must be one JSON object"],
    ["a schema violation (draft-07)", "add", `{"a": "1", "c": 0}`, "invalid-arguments", "invalid arguments for add: "]
  ]

  for (const [what, tool, args, reason, message] of refused) {
    it.scoped(`${what}: status 2, ToolCallRefused ${reason}, no handler, not counted`, () =>
      Effect.gen(function* () {
        let invoked = 0
        const { events, replies, h } = yield* callOnce(
          { add: { ...add, handler: (a: { a: number; b: number }) => (invoked++, add.handler(a)) } },
          tool,
          args
        )
        expect(replies).toHaveLength(1)
        expect(replies[0]!.status).toBe("2")
        expect(replies[0]!.payload.startsWith(message)).toBe(true)
        expect(events.map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallRefused"])
        expect(events[1]!.data).toEqual({ callId: 1, tool, reason, message: replies[0]!.payload })
        expect(invoked).toBe(0)
        expect(h.channel.callsMade()).toBe(0)
      })
    )
  }

  it.scoped("a draft-07 schema violation names each invalid argument", () =>
    Effect.gen(function* () {
      const { replies } = yield* callOnce({ add }, "add", `{"a": "1", "c": 0}`)
      expect(replies[0]!.payload).toContain("arguments.a must be number")
      expect(replies[0]!.payload).toContain("must have required property 'b'")
      expect(replies[0]!.payload).toContain("must NOT have additional properties")
    })
  )

  it.scoped(
    "JSON Schema dialects: an explicit draft-07 $schema (tuple items) and a 2020-12 $schema (prefixItems, items: false) are each read as theirs",
    () =>
      Effect.gen(function* () {
        const seen: Array<unknown> = []
        const h = yield* open({
          pair07: {
            parameters: {
              $schema: "http://json-schema.org/draft-07/schema#",
              type: "object",
              properties: {
                pair: { type: "array", items: [{ type: "string" }, { type: "number" }], additionalItems: false }
              },
              required: ["pair"]
            },
            handler: (args: unknown) => (seen.push(args), "ok")
          },
          pair2020: {
            parameters: {
              $schema: "https://json-schema.org/draft/2020-12/schema",
              type: "object",
              // In 2020-12 `items: false` forbids items past prefixItems; read as draft-07 it would forbid every item.
              properties: {
                pair: { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false }
              },
              required: ["pair"]
            },
            handler: (args: unknown) => (seen.push(args), "ok")
          }
        })
        let id = 0
        const cases: Array<readonly [string, string, string]> = []
        for (const tool of ["pair07", "pair2020"]) {
          cases.push(
            [tool, `{"pair": ["a", 1]}`, "0"],
            [tool, `{"pair": ["a", 1, 2]}`, "2"],
            [tool, `{"pair": [1, "a"]}`, "2"],
            [tool, `{}`, "2"]
          )
        }
        for (const [tool, args] of cases) expect(h.call(++id, tool, args)).toBeUndefined()
        yield* drain
        expect(h.byId().map((r) => r.status)).toEqual(cases.map((c) => c[2]))
        expect(seen).toEqual([{ pair: ["a", 1] }, { pair: ["a", 1] }])
      })
  )

  it.scoped(
    "the budget: past maxCalls a valid call is refused budget-exhausted; refusals do not count against it, tool errors do",
    () =>
      Effect.gen(function* () {
        let invoked = 0
        const h = yield* open(
          {
            add: { ...add, handler: (a: { a: number; b: number }) => (invoked++, add.handler(a)) },
            bad: { handler: () => (invoked++, Promise.reject(new Error("no"))) }
          },
          { maxCalls: 2 }
        )
        h.call(1, "nope", "{}") // refused: not counted
        h.call(2, "add", `{"a":1}`) // refused: not counted
        h.call(3, "bad", "{}") // a tool error: counted
        h.call(4, "add", `{"a":1,"b":1}`) // counted: the budget is now spent
        h.call(5, "add", `{"a":1,"b":1}`)
        h.call(6, "bad", "{}")
        yield* drain
        expect(h.byId().map((r) => [r.id, r.status])).toEqual([
          [1, "2"],
          [2, "2"],
          [3, "1"],
          [4, "0"],
          [5, "2"],
          [6, "2"]
        ])
        expect(h.outcomeOf(5)[0]!.data).toMatchObject({ reason: "budget-exhausted" })
        expect(h.repliesTo(5)[0]!.payload).toBe(
          "tool call limit reached (2 calls per execution); no more tool calls are served in this run"
        )
        expect(h.outcomeOf(6)[0]!.data).toMatchObject({ reason: "budget-exhausted" })
        expect(invoked).toBe(2)
        expect(h.channel.callsMade()).toBe(2)
      })
  )

  it.scoped(
    "the journal budget (events): a call the budget has no room for, with its outcome, is not recorded or served, and the run is ended (journal-budget)",
    () =>
      Effect.gen(function* () {
        const h = yield* open({ add }, { maxJournalEvents: 6 })
        for (let id = 1; id <= 5; id++) h.call(id, "add", `{"a":${id},"b":1}`)
        yield* drain
        // Three calls fit, with their outcomes: 6 events. The fourth ends the run; nothing of it or after it is written.
        for (const id of [1, 2, 3])
          expect(h.ofCall(id).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallCompleted"])
        expect(h.events).toHaveLength(6)
        expect(h.byId().map((r) => r.id)).toEqual([1, 2, 3])
        const ended = yield* Deferred.poll(h.channel.flooded)
        expect(Option.isSome(ended)).toBe(true)
        const why = yield* Option.getOrThrow(ended)
        expect(why).toMatchObject({
          reason: "journal-budget",
          message: expect.stringContaining("(6 events, 16777216 bytes: maxJournalEvents, maxJournalBytes; 6 events and")
        })
      })
  )

  it.scoped(
    "the journal budget (bytes): recorded arguments count; a refusal's message is within the reserve; the run ends before the journal passes maxJournalBytes",
    () =>
      Effect.gen(function* () {
        const big = { handler: () => "ok", parameters: { type: "object" } }
        const budget = 300_000
        const h = yield* open(
          { big },
          { maxJournalBytes: budget, maxArgumentBytes: 200_000 },
          { recordArguments: true }
        )
        const args = JSON.stringify({ pad: "x".repeat(100_000) })
        for (let id = 1; id <= 4; id++) h.call(id, "big", args)
        yield* drain
        const written = h.events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0)
        expect(written).toBeLessThanOrEqual(budget)
        expect(h.events.filter((e) => e.type === "ToolCallRequested").length).toBe(2)
        for (const id of [1, 2]) expect(h.outcomeOf(id)).toHaveLength(1)
        expect((yield* Option.getOrThrow(yield* Deferred.poll(h.channel.flooded))).reason).toBe("journal-budget")
      })
  )

  it.scoped(
    "the host's bound on arguments in flight over all runs: a call past it is refused host-busy, its bytes not kept; served calls give their share back",
    () =>
      Effect.gen(function* () {
        const inFlight = new ArgumentsInFlight(100)
        let release: (() => void) | undefined
        const slow = { handler: () => new Promise((resolve) => (release = () => resolve("done"))) }
        const a = yield* open({ slow, add }, {}, { inFlight })
        const b = yield* open({ slow, add }, {}, { inFlight }) // another run on the same host
        const sixty = JSON.stringify({ pad: "x".repeat(50) })
        expect(sixty.length).toBe(60)
        a.call(1, "slow", sixty)
        yield* drain
        expect(inFlight.bytes).toBe(60) // held while its handler runs
        b.call(1, "add", sixty)
        yield* drain
        expect(b.outcomeOf(1)[0]!.data).toMatchObject({
          reason: "host-busy",
          message: expect.stringContaining("(at most 100); this call of 60 bytes was not taken")
        })
        expect(b.repliesTo(1)[0]!.status).toBe("2")
        expect(inFlight.bytes).toBe(60)
        release!()
        yield* drain
        expect(a.repliesTo(1)[0]!.status).toBe("0")
        expect(inFlight.bytes).toBe(0)
        b.call(2, "add", `{"a":1,"b":2}`)
        yield* drain
        expect(b.repliesTo(2)[0]!).toMatchObject({ status: "0", payload: "3" })
        expect(inFlight.bytes).toBe(0)
        // A run that ends with a call's arguments half arrived gives that share back too.
        a.channel.frame("t", Buffer.from(`2 60 add`))
        a.channel.argumentsChunk(enc.encode(sixty.slice(0, 10)))
        expect(inFlight.bytes).toBe(60)
        yield* a.channel.settle
        expect(inFlight.bytes).toBe(0)
      })
  )

  it.scoped(
    "a call larger than maxArgumentBytes ('b'): status 2 arguments-too-large, ToolCallRequested with its size and no argumentsSha256; a 'b' within the limit is a violation",
    () =>
      Effect.gen(function* () {
        let invoked = 0
        const h = yield* open({ add: { ...add, handler: () => invoked++ } }, { maxArgumentBytes: 1000 })
        expect(h.tooLarge(1, "add", 5000)).toBeUndefined()
        // even for an unknown tool: its bytes were never read, so nothing else is known
        expect(h.tooLarge(2, "nope", 1001)).toBeUndefined()
        yield* drain
        expect(h.ofCall(1).map((e) => [e.type, e.data])).toEqual([
          ["ToolCallRequested", { callId: 1, tool: "add", argumentBytes: 5000 }],
          [
            "ToolCallRefused",
            {
              callId: 1,
              tool: "add",
              reason: "arguments-too-large",
              message: "the arguments of 5000 bytes exceed the limit of 1000 bytes (maxArgumentBytes)"
            }
          ]
        ])
        expect("argumentsSha256" in h.ofCall(1)[0]!.data).toBe(false)
        expect(h.outcomeOf(2)[0]!.data.reason).toBe("arguments-too-large")
        expect(h.replies.map((r) => [r.id, r.status])).toEqual([
          [1, "2"],
          [2, "2"]
        ])
        expect(invoked).toBe(0)
        expect(h.channel.callsMade()).toBe(0)
        expect(h.tooLarge(3, "add", 1000)).toMatch(/refused as too large at 1000 bytes/)
      })
  )

  it.scoped(
    "a 't' whose arguments are past maxArgumentBytes (the supervisor's request bound leaves room for the name) is refused arguments-too-large, not served",
    () =>
      Effect.gen(function* () {
        let invoked = 0
        const h = yield* open({ echo: { handler: (args: unknown) => (invoked++, args) } }, { maxArgumentBytes: 100 })
        // The supervisor forwards as 't' any request up to maxArgumentBytes + 64 bytes, name and newline included.
        const args = JSON.stringify({ pad: "p".repeat(100) })
        expect(args.length).toBeGreaterThan(100)
        expect(4 + 1 + args.length).toBeLessThanOrEqual(h.channel.header.maxRequestBytes)
        expect(h.call(1, "echo", args)).toBeUndefined()
        yield* drain
        expect(h.repliesTo(1).map((r) => r.status)).toEqual(["2"])
        expect(h.outcomeOf(1)[0]!.data.reason).toBe("arguments-too-large")
        expect(invoked).toBe(0)
      })
  )

  it.scoped(
    "a result past maxResultBytes: status 1 result-too-large; a result of exactly maxResultBytes is served",
    () =>
      Effect.gen(function* () {
        const h = yield* open({ text: { handler: ({ n }: { n: number }) => "x".repeat(n) } }, { maxResultBytes: 12 })
        h.call(1, "text", `{"n": 10}`) // "xxxxxxxxxx" with its quotes: 12 bytes
        h.call(2, "text", `{"n": 11}`)
        yield* drain
        expect(h.repliesTo(1)).toEqual([{ id: 1, status: "0", payload: `"${"x".repeat(10)}"`, bytes: 12 }])
        const message = "the result of text (13 bytes) exceeds the limit of 12 bytes (maxResultBytes)"
        expect(h.repliesTo(2)).toEqual([{ id: 2, status: "1", payload: message, bytes: message.length }])
        expect(h.outcomeOf(2)[0]!.data).toMatchObject({ reason: "result-too-large", message })
        expect(h.outcomeOf(1)[0]!.data).toMatchObject({ resultBytes: 12 })
      })
  )

  it.scoped("a result that is not JSON (a BigInt, a cycle, a throwing toJSON): status 1 error, naming the tool", () =>
    Effect.gen(function* () {
      const cycle: Record<string, unknown> = { a: 1 }
      cycle.self = cycle
      const h = yield* open({
        big: { handler: () => ({ n: 10n }) },
        cyclic: { handler: () => Promise.resolve(cycle) },
        tojson: {
          handler: () =>
            Effect.succeed({
              toJSON: () => {
                throw new Error("cannot serialise")
              }
            })
        }
      })
      h.call(1, "big", "{}")
      h.call(2, "cyclic", "{}")
      h.call(3, "tojson", "{}")
      yield* drain
      expect(h.byId().map((r) => [r.id, r.status])).toEqual([
        [1, "1"],
        [2, "1"],
        [3, "1"]
      ])
      expect(h.repliesTo(1)[0]!.payload).toMatch(/^the result of big is not JSON \(.*BigInt/)
      expect(h.repliesTo(2)[0]!.payload).toMatch(/^the result of cyclic is not JSON \(.*circular/i)
      expect(h.repliesTo(3)[0]!.payload).toBe("the result of tojson is not JSON (cannot serialise)")
      for (const r of h.replies) noStack(r.payload)
      for (const id of [1, 2, 3]) expect(h.outcomeOf(id)[0]!.data.reason).toBe("error")
    })
  )

  it.scoped("the header tells the supervisor the bounds and carries the generated module", () =>
    Effect.gen(function* () {
      const h = yield* open({ add }, { maxInFlight: 3, maxArgumentBytes: 1000, maxResultBytes: 50 })
      expect(h.channel.header.maxInFlight).toBe(3)
      expect(h.channel.header.maxRequestBytes).toBe(1065) // a 64-byte name and its newline besides the arguments
      // room for a message even when results are small
      expect(h.channel.header.maxReplyBytes).toBeGreaterThanOrEqual(4 * 8192)
      expect(h.channel.header.modules.map(([path]) => path)).toEqual(["hermes_tools.py"])
      expect(Buffer.from(h.channel.header.modules[0]![1]).toString("utf8")).toContain("def add(")
    })
  )
})

// --- 2. Effect Schema parameters --------------------------------------------------------------------

describe("ToolChannel: Effect Schema parameters", () => {
  const Params = Schema.Struct({
    n: Schema.NumberFromString,
    tags: Schema.optional(Schema.Array(Schema.Trim))
  })

  it.scoped(
    "the handler gets the decoded value (transformations applied); an excess property is refused, as the advertised schema (additionalProperties: false) says",
    () =>
      Effect.gen(function* () {
        const seen: Array<unknown> = []
        const h = yield* open({
          inc: { parameters: Params, handler: (args: typeof Params.Type) => (seen.push(args), args.n + 1) }
        })
        h.call(1, "inc", `{"n": "41", "tags": ["  a ", "b  "]}`)
        h.call(2, "inc", `{"n": "41", "extra": true}`)
        yield* drain
        expect(seen).toEqual([{ n: 41, tags: ["a", "b"] }])
        expect(h.repliesTo(1)).toEqual([{ id: 1, status: "0", payload: "42", bytes: 2 }])
        expect(h.repliesTo(2)[0]?.status).toBe("2")
        expect(h.repliesTo(2)[0]?.payload).toContain("extra")
      })
  )

  it.scoped("a decode failure is a refusal (invalid-arguments) naming the first problem and its path, bounded", () =>
    Effect.gen(function* () {
      let invoked = 0
      const h = yield* open({ inc: { parameters: Params, handler: () => invoked++ } })
      const bad = { n: "abc", tags: [1] }
      h.call(1, "inc", JSON.stringify(bad))
      yield* drain
      const [reply] = h.repliesTo(1)
      expect(reply).toMatchObject({ id: 1, status: "2" })
      expect(reply!.payload).toMatch(/^invalid arguments for inc: arguments\.n: .*abc/)
      expect(h.outcomeOf(1)[0]!.data).toMatchObject({ reason: "invalid-arguments", message: reply!.payload })
      expect(invoked).toBe(0)
    })
  )

  it.effect(
    "the advertised JSON Schema is JSONSchema.make of the parameters (the encoded side: what the code sends)",
    () =>
      Effect.gen(function* () {
        const plan = yield* planTools(
          { inc: { description: "Increment", parameters: Params, handler: () => 0 } },
          DEFAULT_TOOL_LIMITS
        )
        const spec = plan!.tools.get("inc")!.spec
        expect(spec).toEqual({ name: "inc", description: "Increment", parameters: JSONSchema.make(Params) })
        expect(spec.parameters).toMatchObject({
          type: "object",
          required: ["n"],
          $defs: { NumberFromString: { type: "string" } }
        })
      })
  )

  it.scoped("a schema JSON Schema cannot express: advertised as any object, still checked here", () =>
    Effect.gen(function* () {
      const Opaque = Schema.declare((u: unknown): u is string => typeof u === "string" && u.startsWith("ok"))
      const S = Schema.Struct({ v: Opaque })
      expect(() => JSONSchema.make(S)).toThrow()
      const h = yield* open({ o: { parameters: S, handler: ({ v }: { v: string }) => v.length } })
      expect(h.plan.tools.get("o")!.spec.parameters).toEqual({ type: "object" })
      h.call(1, "o", `{"v": "okay"}`)
      h.call(2, "o", `{"v": "nope"}`)
      yield* drain
      expect(h.byId().map((r) => [r.id, r.status, r.payload.slice(0, 25)])).toEqual([
        [1, "0", "4"],
        [2, "2", "invalid arguments for o: "]
      ])
    })
  )
})

// --- 3. Effect handlers and the per-call timeout ------------------------------------------------------

describe("ToolChannel: Effect handlers and callTimeoutMs", () => {
  it.scoped("an Effect returned by the handler runs (on the TestClock): its result, its duration", () =>
    Effect.gen(function* () {
      const h = yield* open(
        { slow: { handler: ({ ms }: { ms: number }) => Effect.as(Effect.sleep(ms), { slept: ms }) } },
        { callTimeoutMs: 5000 }
      )
      h.call(1, "slow", `{"ms": 1000}`)
      yield* drain
      expect(h.replies).toEqual([])
      yield* TestClock.adjust(999)
      yield* drain
      expect(h.replies).toEqual([])
      yield* TestClock.adjust(1)
      yield* drain
      expect(h.repliesTo(1)).toEqual([{ id: 1, status: "0", payload: `{"slept":1000}`, bytes: 14 }])
      expect(h.outcomeOf(1)[0]!.data).toEqual({ callId: 1, tool: "slow", durationMs: 1000, resultBytes: 14 })
    })
  )

  it.scoped(
    "past callTimeoutMs an Effect handler is interrupted: ToolCallFailed timed-out, status 1, the signal aborted",
    () =>
      Effect.gen(function* () {
        let signal: AbortSignal | undefined
        let interrupted = false
        const h = yield* open(
          {
            hang: {
              handler: (_: unknown, context: ToolContext) => {
                signal = context.signal
                return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void (interrupted = true))))
              }
            }
          },
          { callTimeoutMs: 100 }
        )
        h.call(1, "hang", "{}")
        yield* drain
        yield* TestClock.adjust(99)
        yield* drain
        expect(h.replies).toEqual([])
        expect(signal!.aborted).toBe(false)
        expect(interrupted).toBe(false)
        yield* TestClock.adjust(1)
        yield* drain
        expect(interrupted).toBe(true)
        expect(signal!.aborted).toBe(true)
        const message = "hang did not answer within 100 ms (callTimeoutMs)"
        expect(String(signal!.reason)).toBe(message)
        expect(h.repliesTo(1)).toEqual([{ id: 1, status: "1", payload: message, bytes: message.length }])
        expect(h.ofCall(1).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed"])
        expect(h.outcomeOf(1)[0]!.data).toEqual({
          callId: 1,
          tool: "hang",
          durationMs: 100,
          reason: "timed-out",
          message
        })
        expect(h.channel.callsMade()).toBe(1)
      })
  )

  it.scoped("past callTimeoutMs a Promise handler that never settles: its signal's abort event fires, status 1", () =>
    Effect.gen(function* () {
      const aborted: Array<unknown> = []
      const h = yield* open(
        {
          hang: {
            handler: (_: unknown, { signal }: ToolContext) =>
              new Promise(() => signal.addEventListener("abort", () => aborted.push(signal.reason)))
          }
        },
        { callTimeoutMs: 50 }
      )
      h.call(1, "hang", "{}")
      yield* drain
      yield* TestClock.adjust(50)
      yield* drain
      expect(aborted).toEqual(["hang did not answer within 50 ms (callTimeoutMs)"])
      expect(h.repliesTo(1).map((r) => r.status)).toEqual(["1"])
      expect(h.outcomeOf(1)[0]!.data.reason).toBe("timed-out")
    })
  )

  it.scoped("each call has its own timeout: a fast call beside a hanging one is answered at once", () =>
    Effect.gen(function* () {
      const h = yield* open(
        {
          hang: { handler: () => Effect.never },
          quick: { handler: () => Effect.as(Effect.sleep(10), "q") }
        },
        { callTimeoutMs: 100 }
      )
      h.call(1, "hang", "{}")
      yield* TestClock.adjust(60)
      h.call(2, "quick", "{}")
      yield* drain
      yield* TestClock.adjust(10)
      yield* drain
      expect(h.replies.map((r) => [r.id, r.status])).toEqual([[2, "0"]])
      yield* TestClock.adjust(30)
      yield* drain
      expect(h.replies.map((r) => [r.id, r.status])).toEqual([
        [2, "0"],
        [1, "1"]
      ])
      expect(h.outcomeOf(1)[0]!.data).toMatchObject({ reason: "timed-out", durationMs: 100 })
    })
  )
})

// --- 4. 'q': the caller went away ---------------------------------------------------------------------

describe("ToolChannel: 'q', the caller went away", () => {
  it.scoped(
    "during a call: the handler's signal aborted, the Effect interrupted, ToolCallFailed cancelled, no reply",
    () =>
      Effect.gen(function* () {
        let signal: AbortSignal | undefined
        let interrupted = false
        const h = yield* open({
          hang: {
            handler: (_: unknown, context: ToolContext) => {
              signal = context.signal
              return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void (interrupted = true))))
            }
          }
        })
        h.call(1, "hang", "{}")
        yield* drain
        yield* TestClock.adjust(7)
        expect(h.quit(1)).toBeUndefined()
        yield* drain
        expect(signal!.aborted).toBe(true)
        expect(String(signal!.reason)).toBe("the caller went away before the call was answered")
        expect(interrupted).toBe(true)
        expect(h.replies).toEqual([])
        expect(h.ofCall(1).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed"])
        expect(h.outcomeOf(1)[0]!.data).toEqual({
          callId: 1,
          tool: "hang",
          durationMs: 7,
          reason: "cancelled",
          message: "the caller went away before the call was answered"
        })
        // a repeated 'q', or one for a call already answered, is no violation and changes nothing
        expect(h.quit(1)).toBeUndefined()
        yield* h.channel.settle
        yield* drain
        expect(h.ofCall(1)).toHaveLength(2)
        expect(h.channel.callsMade()).toBe(1)
      })
  )

  it.scoped("a Promise handler: its abort event fires; a 'q' for an answered call changes nothing", () =>
    Effect.gen(function* () {
      const aborted: Array<unknown> = []
      const h = yield* open({
        hang: {
          handler: (_: unknown, { signal }: ToolContext) =>
            new Promise(() => signal.addEventListener("abort", () => aborted.push(signal.reason)))
        },
        add
      })
      h.call(1, "add", `{"a":1,"b":1}`)
      h.call(2, "hang", "{}")
      yield* drain
      expect(h.quit(1)).toBeUndefined()
      expect(h.quit(2)).toBeUndefined()
      yield* drain
      expect(aborted).toEqual(["the caller went away before the call was answered"])
      expect(h.replies.map((r) => r.id)).toEqual([1])
      expect(h.outcomeOf(1).map((e) => e.type)).toEqual(["ToolCallCompleted"])
      expect(h.outcomeOf(2).map((e) => [e.type, e.data.reason])).toEqual([["ToolCallFailed", "cancelled"]])
    })
  )
})

// --- 5. settle ------------------------------------------------------------------------------------------

describe("ToolChannel: settle", () => {
  it.scoped(
    "every call in flight gets ToolCallFailed cancelled before settle returns, its signal aborted; no reply; later calls are ignored",
    () =>
      Effect.gen(function* () {
        const signals: Array<AbortSignal> = []
        let invoked = 0
        const track = (context: ToolContext) => (invoked++, signals.push(context.signal))
        const h = yield* open(
          {
            effect: { handler: (_: unknown, c: ToolContext) => (track(c), Effect.never) },
            promise: { handler: (_: unknown, c: ToolContext) => (track(c), new Promise(() => {})) },
            sleepy: { handler: (_: unknown, c: ToolContext) => (track(c), Effect.sleep(1_000_000)) },
            add
          },
          { callTimeoutMs: 10_000_000 }
        )
        h.call(1, "effect", "{}")
        h.call(2, "promise", "{}")
        h.call(3, "add", `{"a":2,"b":2}`)
        h.call(4, "sleepy", "{}")
        yield* drain
        yield* TestClock.adjust(5)
        expect(h.replies.map((r) => r.id)).toEqual([3])
        yield* h.channel.settle
        // no drain: the outcomes are in the journal when settle returns
        for (const id of [1, 2, 4]) {
          expect(h.ofCall(id).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed"])
          expect(h.outcomeOf(id)[0]!.data).toMatchObject({
            reason: "cancelled",
            durationMs: 5,
            message: "the run ended before the call was answered"
          })
        }
        expect(h.ofCall(3).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallCompleted"])
        expect(signals.every((s) => s.aborted)).toBe(true)
        expect(signals).toHaveLength(3)
        expect(h.replies.map((r) => r.id)).toEqual([3])
        const before = h.events.length
        // after settle: a call is taken as a frame (no violation) but never served nor journaled
        expect(h.call(5, "add", `{"a":1,"b":1}`)).toBeUndefined()
        expect(h.tooLarge(6, "add", 10_000_000)).toBeUndefined()
        yield* drain
        yield* TestClock.adjust(10_000_000)
        yield* drain
        expect(h.events).toHaveLength(before)
        expect(h.replies.map((r) => r.id)).toEqual([3])
        expect(invoked).toBe(3)
        expect(h.channel.callsMade()).toBe(4)
        // settle again: nothing more
        yield* h.channel.settle
        expect(h.events).toHaveLength(before)
      })
  )

  it.scoped("a call whose arguments were still arriving at settle is never served", () =>
    Effect.gen(function* () {
      let invoked = 0
      const h = yield* open({ add: { ...add, handler: () => invoked++ } })
      expect(h.channel.frame("t", Buffer.from("1 13 add"))).toBeUndefined()
      expect(h.channel.argumentsChunk(enc.encode(`{"a":1,`))).toBeUndefined()
      yield* h.channel.settle
      expect(h.channel.argumentsChunk(enc.encode(`"b":1}`))).toBeUndefined()
      yield* drain
      expect(h.events).toEqual([])
      expect(invoked).toBe(0)
    })
  )

  it.scoped("closing the channel's scope settles it", () =>
    Effect.gen(function* () {
      let signal: AbortSignal | undefined
      const events: Array<string> = []
      const { journal } = yield* MemoryJournal.make()
      const plan = (yield* planTools(
        { hang: { handler: (_: unknown, c: ToolContext) => ((signal = c.signal), Effect.never) } },
        DEFAULT_TOOL_LIMITS
      ))!
      yield* Effect.scoped(
        Effect.gen(function* () {
          const channel = yield* ToolChannel.make({
            plan,
            language: "bash",
            executionId: EXECUTION_ID,
            append: (event) =>
              journal.append({ streamId: EXECUTION_ID, events: [event], executorId: "test" }).pipe(
                Effect.tap(() => Effect.sync(() => void events.push(event.type))),
                Effect.orDie
              )
          })
          yield* channel.start(() => Effect.void)
          channel.frame("t", Buffer.from("1 2 hang"))
          channel.argumentsChunk(enc.encode("{}"))
          yield* drain
        })
      )
      expect(events).toEqual(["ToolCallRequested", "ToolCallFailed"])
      expect(signal!.aborted).toBe(true)
    })
  )
})

// While a call is between its frame and its handler (ToolCallRequested being appended, or the
// fiber yielding on its op budget), it is uninterruptible; an interruption then must still reach
// the handler once it starts, or settle (and so the terminal event and the sandbox's removal)
// waits for the handler's own end, up to callTimeoutMs.
describe("ToolChannel: an interruption that arrives before the handler starts", () => {
  const hanging = () => {
    const seen: { signal?: AbortSignal } = {}
    const tools: Tools = { hang: { handler: (_: unknown, c: ToolContext) => ((seen.signal = c.signal), Effect.never) } }
    return { seen, tools }
  }

  it.scoped("settle while ToolCallRequested is being appended: settle returns at once, the call cancelled", () =>
    Effect.gen(function* () {
      const { seen, tools } = hanging()
      const h = yield* open(tools, { callTimeoutMs: 60_000 }, { appendSuspends: true })
      // However this test ends, the clock then runs out, so no fiber is left waiting on it.
      yield* Effect.addFinalizer(() => TestClock.adjust(120_000))
      expect(h.call(1, "hang", "{}")).toBeUndefined()
      const settling = yield* Effect.fork(h.channel.settle)
      yield* drain
      expect(Option.isSome(yield* Fiber.poll(settling))).toBe(true)
      expect(h.outcomeOf(1).map((e) => [e.type, e.data.reason])).toEqual([["ToolCallFailed", "cancelled"]])
      expect(seen.signal === undefined || seen.signal.aborted).toBe(true)
    })
  )

  it.scoped(
    "a 'q' while ToolCallRequested is being appended: the call is cancelled, not served until its timeout",
    () =>
      Effect.gen(function* () {
        const { seen, tools } = hanging()
        const h = yield* open(tools, { callTimeoutMs: 60_000 }, { appendSuspends: true })
        yield* Effect.addFinalizer(() => TestClock.adjust(120_000))
        expect(h.call(1, "hang", "{}")).toBeUndefined()
        expect(h.quit(1)).toBeUndefined()
        yield* drain
        expect(h.outcomeOf(1).map((e) => [e.type, e.data.reason])).toEqual([["ToolCallFailed", "cancelled"]])
        expect(seen.signal === undefined || seen.signal.aborted).toBe(true)
      })
  )

  it.scoped("with that journal, a call served normally is unaffected", () =>
    Effect.gen(function* () {
      const h = yield* open({ add }, {}, { appendSuspends: true })
      h.call(1, "add", `{"a":2,"b":3}`)
      yield* drain
      expect(h.repliesTo(1)).toEqual([{ id: 1, status: "0", payload: "5", bytes: 1 }])
      expect(h.ofCall(1).map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallCompleted"])
    })
  )
})

// --- 6. protocol violations -----------------------------------------------------------------------------

describe("ToolChannel: what is not the supervisor's is a violation", () => {
  const violation = (
    feed: (h: Effect.Effect.Success<ReturnType<typeof open>>) => string | undefined,
    expected: RegExp
  ) =>
    Effect.gen(function* () {
      const h = yield* open({ add }, { maxArgumentBytes: 1000 })
      const got = feed(h)
      expect(got).toMatch(expected)
    })

  it.scoped("an 'a' without a 't'", () =>
    violation((h) => h.channel.argumentsChunk(enc.encode("{}")), /^tool call arguments outside a call$/)
  )
  it.scoped("an 'a' after a call's arguments were complete", () =>
    violation(
      (h) => h.call(1, "add", `{"a":1,"b":2}`) ?? h.channel.argumentsChunk(enc.encode(" ")),
      /^tool call arguments outside a call$/
    )
  )
  it.scoped("an 'a' after a call with no arguments", () =>
    violation(
      (h) => h.call(1, "add", "") ?? h.channel.argumentsChunk(enc.encode("{}")),
      /^tool call arguments outside a call$/
    )
  )
  it.scoped("bytes past the count announced, in one chunk", () =>
    violation(
      (h) =>
        h.channel.frame("t", Buffer.from("1 3 add")) ??
        h.channel.argumentsChunk(enc.encode("{} ")) ??
        h.channel.argumentsChunk(enc.encode("x")),
      /^tool call arguments outside a call$/
    )
  )
  it.scoped("bytes past the count announced, in a chunk that crosses it", () =>
    violation(
      (h) =>
        h.channel.frame("t", Buffer.from("1 3 add")) ??
        h.channel.argumentsChunk(enc.encode("{}")) ??
        h.channel.argumentsChunk(enc.encode("  ")),
      /^call 1's arguments run past the 3 bytes announced$/
    )
  )
  it.scoped("a first 't' whose id is not 1", () =>
    violation((h) => h.call(2, "add", "{}"), /^tool call 2 after call 0$/)
  )
  it.scoped("a 't' repeating the last id", () =>
    violation((h) => h.call(1, "add", "{}") ?? h.call(1, "add", "{}"), /^tool call 1 after call 1$/)
  )
  it.scoped("a 't' skipping an id", () =>
    violation((h) => h.call(1, "add", "{}") ?? h.call(3, "add", "{}"), /^tool call 3 after call 1$/)
  )
  it.scoped("a 'b' whose id is not last+1", () =>
    violation((h) => h.tooLarge(1, "add", 5000) ?? h.tooLarge(1, "add", 5000), /^tool call 1 after call 1$/)
  )
  it.scoped("a 't' announcing more than the supervisor may send", () =>
    violation((h) => h.channel.frame("t", Buffer.from("1 1066 add")), /^call 1 announces 1066 bytes of arguments$/)
  )

  for (const head of [
    "",
    "1",
    "1 ",
    "1 2",
    "1 2add",
    "0 2 add",
    "01 2 add",
    "1 02 add",
    "1 -2 add",
    "-1 2 add",
    "1  2 add",
    " 1 2 add",
    "x 2 add",
    "1 x add",
    "12345678901 2 add",
    "1 2\nadd"
  ]) {
    it.scoped(`a malformed head ${JSON.stringify(head)} ('t' and 'b')`, () =>
      Effect.gen(function* () {
        const h = yield* open({ add })
        expect(h.channel.frame("t", Buffer.from(head))).toMatch(/^a tool call frame 't' that is not the supervisor's$/)
        expect(h.channel.frame("b", Buffer.from(head))).toMatch(/^a tool call frame 'b' that is not the supervisor's$/)
        expect(h.events).toEqual([])
      })
    )
  }

  for (const q of ["1", "5", "0", "", "abc", "1 ", "01", "-1", "1\n"]) {
    it.scoped(`a 'q' for no call seen: ${JSON.stringify(q)}`, () =>
      Effect.gen(function* () {
        const h = yield* open({ add })
        expect(h.quit(q)).toMatch(/^a 'q' frame for no call/)
      })
    )
  }

  it.scoped("a 'q' past the last id seen", () =>
    violation((h) => h.call(1, "add", `{"a":1,"b":1}`) ?? h.quit(2), /^a 'q' frame for no call \("2"\)$/)
  )

  it.scoped("a 't' (or 'b') inside another call's arguments", () =>
    Effect.gen(function* () {
      const h = yield* open({ add })
      expect(h.channel.frame("t", Buffer.from("1 10 add"))).toBeUndefined()
      expect(h.channel.argumentsChunk(enc.encode(`{"a"`))).toBeUndefined()
      expect(h.channel.frame("t", Buffer.from("2 0 add"))).toBe("a tool call frame 't' inside call 1's arguments")
      expect(h.channel.frame("b", Buffer.from("2 99999999 add"))).toBe(
        "a tool call frame 'b' inside call 1's arguments"
      )
      expect(h.events).toEqual([])
    })
  )
})

// --- 7. a property over generated sequences of calls -----------------------------------------------------

type Mode = "ok" | "big" | "fail" | "throw" | "reject" | "die" | "hang" | "promise"
const MODES: ReadonlyArray<Mode> = ["ok", "big", "fail", "throw", "reject", "die", "hang", "promise"]
type ArgsKind = "valid" | "badjson" | "array" | "schema" | "empty" | "oversize"
// Delays and timeouts never coincide, so which of a handler's sleep and its timeout ends first is defined.
const DELAYS = [0, 10, 20, 50, 150] as const
const TIMEOUTS = [30, 100, 1000] as const
const MAX_RESULT = 64

type Cmd =
  | {
      readonly _tag: "call"
      readonly tool: string
      readonly args: ArgsKind
      readonly mode: Mode
      readonly delay: number
      readonly cuts: ReadonlyArray<number>
    }
  | { readonly _tag: "advance"; readonly ms: number }
  | { readonly _tag: "quit"; readonly pick: number }

const arbCmd: fc.Arbitrary<Cmd> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("call" as const),
      tool: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom("work", "typed") },
        { weight: 1, arbitrary: fc.constantFrom("nope", "x".repeat(70)) }
      ),
      args: fc.oneof(
        { weight: 6, arbitrary: fc.constant<ArgsKind>("valid") },
        { weight: 1, arbitrary: fc.constantFrom<ArgsKind>("badjson", "array", "schema", "empty", "oversize") }
      ),
      mode: fc.oneof(
        { weight: 2, arbitrary: fc.constantFrom<Mode>("ok", "promise") },
        { weight: 3, arbitrary: fc.constantFrom(...MODES) }
      ),
      delay: fc.constantFrom(...DELAYS),
      cuts: fc.array(fc.nat(64), { maxLength: 3 })
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("advance" as const),
      ms: fc.constantFrom(1, 5, 10, 25, 40, 100, 200, 1000)
    })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("quit" as const), pick: fc.nat() }) }
)

const behave = (mode: Mode, delay: number, callId: number): unknown => {
  switch (mode) {
    case "ok":
      return Effect.as(Effect.sleep(delay), { ok: callId })
    case "big":
      return Effect.as(Effect.sleep(delay), "x".repeat(MAX_RESULT * 2))
    case "fail":
      return Effect.zipRight(Effect.sleep(delay), Effect.fail(new Error(`fail ${callId}`)))
    case "throw":
      throw new Error(`throw ${callId}`)
    case "reject":
      return Promise.reject(new Error(`reject ${callId}`))
    case "die":
      return Effect.die(new Error(`die ${callId}`))
    case "hang":
      return Effect.never
    case "promise":
      return Promise.resolve([callId])
  }
}

interface Expected {
  readonly type: "ToolCallCompleted" | "ToolCallFailed" | "ToolCallRefused"
  readonly reason?: string
  readonly message?: string
  readonly durationMs?: number
}

describe("ToolChannel: a property over generated runs", () => {
  it.scoped.prop(
    "every call gets exactly one outcome before settle returns; handler invocations = toolCallsMade = Completed + Failed <= maxCalls; one reply with the matching status per outcome but cancelled; refusals never invoke a handler; outcomes as modelled",
    {
      cmds: fc.array(arbCmd, { minLength: 1, maxLength: 40, size: "medium" }),
      maxCalls: fc.integer({ min: 1, max: 12 }),
      maxInFlight: fc.integer({ min: 1, max: 4 }),
      callTimeoutMs: fc.constantFrom(...TIMEOUTS),
      maxArgumentBytes: fc.constantFrom(64, 128)
    },
    ({ callTimeoutMs, cmds, maxArgumentBytes, maxCalls, maxInFlight }) =>
      Effect.gen(function* () {
        const invoked = new Map<number, AbortSignal>()
        const handler = ({ delay, mode }: { mode: Mode; delay: number }, context: ToolContext) => {
          if (invoked.has(context.callId)) throw new Error(`call ${context.callId} invoked twice`)
          invoked.set(context.callId, context.signal)
          return behave(mode, delay, context.callId)
        }
        const h = yield* open(
          {
            work: {
              parameters: {
                type: "object",
                properties: { mode: { enum: MODES }, delay: { type: "integer", minimum: 0 } },
                required: ["mode", "delay"]
              },
              handler
            },
            typed: {
              parameters: Schema.Struct({
                mode: Schema.Literal(...MODES),
                delay: Schema.Int.pipe(Schema.nonNegative())
              }),
              handler
            }
          },
          { maxCalls, maxInFlight, callTimeoutMs, maxArgumentBytes, maxResultBytes: MAX_RESULT }
        )

        // The model: what each call must end as, and when.
        let now = 0
        let lastId = 0
        let dispatched = 0
        const expected = new Map<number, Expected & { readonly at: number }>()
        const quitAt = new Map<number, number>()
        const outstanding = () => [...expected.keys()].filter((id) => h.outcomeOf(id).length === 0)

        for (const cmd of cmds) {
          if (cmd._tag === "advance") {
            yield* TestClock.adjust(cmd.ms)
            now += cmd.ms
          } else if (cmd._tag === "quit") {
            const open = outstanding()
            if (open.length === 0) continue
            const id = open[cmd.pick % open.length]!
            expect(h.quit(id)).toBeUndefined()
            quitAt.set(id, now)
          } else {
            // The supervisor takes at most maxInFlight calls at once: the others wait in the sandbox.
            if (outstanding().length >= maxInFlight) continue
            const id = ++lastId
            const known = cmd.tool === "work" || cmd.tool === "typed"
            const valid = JSON.stringify({ mode: cmd.mode, delay: cmd.delay })
            const text = {
              valid,
              badjson: `{"mode":`,
              array: `[1,2]`,
              schema: `{"mode":"zzz","delay":-1}`,
              empty: "",
              oversize: ""
            }[cmd.args]
            const refusal = (reason: string): Expected & { at: number } => ({
              type: "ToolCallRefused",
              reason,
              at: now
            })
            let e: Expected & { at: number }
            if (cmd.args === "oversize") e = refusal("arguments-too-large")
            else if (!known) e = refusal("unknown-tool")
            else if (cmd.args !== "valid") e = refusal("invalid-arguments")
            else if (dispatched >= maxCalls) e = refusal("budget-exhausted")
            else {
              dispatched++
              const timedOut = {
                type: "ToolCallFailed",
                reason: "timed-out",
                durationMs: callTimeoutMs,
                at: now + callTimeoutMs
              } as const
              const delayed = (ok: Expected) =>
                cmd.delay < callTimeoutMs ? { ...ok, durationMs: cmd.delay, at: now + cmd.delay } : timedOut
              e =
                cmd.mode === "ok"
                  ? delayed({ type: "ToolCallCompleted" })
                  : cmd.mode === "big"
                    ? delayed({ type: "ToolCallFailed", reason: "result-too-large" })
                    : cmd.mode === "fail"
                      ? delayed({ type: "ToolCallFailed", reason: "error", message: `fail ${id}` })
                      : cmd.mode === "hang"
                        ? timedOut
                        : cmd.mode === "promise"
                          ? { type: "ToolCallCompleted", durationMs: 0, at: now }
                          : {
                              type: "ToolCallFailed",
                              reason: "error",
                              message: `${cmd.mode} ${id}`,
                              durationMs: 0,
                              at: now
                            }
            }
            expected.set(id, e)
            const violation =
              cmd.args === "oversize"
                ? h.tooLarge(id, cmd.tool, maxArgumentBytes + 65)
                : h.call(id, cmd.tool, text, cmd.cuts)
            expect(violation).toBeUndefined()
          }
          yield* drain
        }
        const endedAt = now
        yield* h.channel.settle

        // Right as settle returns: every call requested has exactly one outcome, after its request.
        const requested = h.events.filter((e) => e.type === "ToolCallRequested")
        expect(requested.map((e) => e.data.callId)).toEqual([...expected.keys()])
        for (const r of requested) {
          const id = r.data.callId as number
          const outcomes = h.outcomeOf(id)
          expect(outcomes).toHaveLength(1)
          expect(outcomes[0]!.sequence).toBeGreaterThan(r.sequence)
        }
        const completed = h.events.filter((e) => e.type === "ToolCallCompleted").length
        const failed = h.events.filter((e) => e.type === "ToolCallFailed").length
        expect(invoked.size).toBe(h.channel.callsMade())
        expect(h.channel.callsMade()).toBe(completed + failed)
        expect(h.channel.callsMade()).toBeLessThanOrEqual(maxCalls)
        expect(h.channel.callsMade()).toBe(dispatched)

        for (const [id, want] of expected) {
          const got = h.outcomeOf(id)[0]!
          const replies = h.repliesTo(id)
          // What the model says, unless the call was cancelled first (its caller gone, or the run's end).
          const quit = quitAt.get(id)
          const cancelled = want.type !== "ToolCallRefused" && (quit !== undefined ? quit < want.at : want.at > endedAt)
          if (cancelled) {
            expect([got.type, got.data.reason, got.data.message]).toEqual([
              "ToolCallFailed",
              "cancelled",
              quit !== undefined
                ? "the caller went away before the call was answered"
                : "the run ended before the call was answered"
            ])
            expect(replies).toEqual([])
            expect(invoked.get(id)?.aborted).toBe(true)
            continue
          }
          expect(got.type).toBe(want.type)
          if (want.reason !== undefined) expect(got.data.reason).toBe(want.reason)
          if (want.message !== undefined) expect(got.data.message).toBe(want.message)
          if (want.durationMs !== undefined) expect(got.data.durationMs).toBe(want.durationMs)
          expect(replies).toHaveLength(1)
          const status = got.type === "ToolCallCompleted" ? "0" : got.type === "ToolCallFailed" ? "1" : "2"
          expect(replies[0]!.status).toBe(status)
          if (got.type === "ToolCallCompleted") expect(replies[0]!.bytes).toBe(got.data.resultBytes)
          else expect(replies[0]!.payload).toBe(got.data.message)
          if (got.type === "ToolCallRefused") expect(invoked.has(id)).toBe(false)
          else expect(invoked.has(id)).toBe(true)
          if (got.data.reason === "timed-out") expect(invoked.get(id)!.aborted).toBe(true)
        }
        // Nothing answered that was never asked, nor anything twice.
        expect(new Set(h.replies.map((r) => r.id)).size).toBe(h.replies.length)
        for (const r of h.replies) expect(expected.has(r.id)).toBe(true)

        // After settle: a further call is neither journaled nor served.
        const before = h.events.length
        expect(h.call(lastId + 1, "work", JSON.stringify({ mode: "ok", delay: 0 }))).toBeUndefined()
        yield* drain
        expect(h.events).toHaveLength(before)
        expect(invoked.has(lastId + 1)).toBe(false)
      }),
    { fastCheck: { numRuns: 100 } }
  )
})

// --- 8. planTools -----------------------------------------------------------------------------------------

describe("planTools", () => {
  const handler = () => 1
  const fieldOf = (tools: unknown, field?: string) =>
    planTools(tools as Tools, DEFAULT_TOOL_LIMITS, false, field).pipe(
      Effect.flip,
      Effect.map((e) => e.field)
    )

  it.effect("no tools, or none given: no plan", () =>
    Effect.gen(function* () {
      expect(yield* planTools(undefined, DEFAULT_TOOL_LIMITS)).toBeUndefined()
      expect(yield* planTools({}, DEFAULT_TOOL_LIMITS)).toBeUndefined()
    })
  )

  it.effect("tools that are not an object: InvalidRequest on the field itself", () =>
    Effect.gen(function* () {
      for (const v of [null, [], "add", 1]) expect(yield* fieldOf(v)).toBe("tools")
      expect(yield* fieldOf([], "defaults.tools")).toBe("defaults.tools")
    })
  )

  for (const name of [
    "class",
    "def",
    "import",
    "None",
    "lambda",
    "await",
    "function",
    "delete",
    "typeof",
    "call_tool",
    "callTool",
    "ToolError",
    "ToolRefused",
    "then",
    "__proto__",
    "__all__",
    "__esModule",
    "1abc",
    "a-b",
    "a b",
    "é",
    "",
    "a".repeat(65),
    "a.b"
  ]) {
    it.effect(
      `an invalid or reserved name ${JSON.stringify(name.length > 20 ? `${name.slice(0, 10)}…` : name)}: InvalidRequest tools.<name>`,
      () =>
        Effect.gen(function* () {
          const tools = Object.defineProperty({}, name, { value: { handler }, enumerable: true })
          const error = yield* planTools(tools, DEFAULT_TOOL_LIMITS).pipe(Effect.flip)
          expect(error._tag).toBe("InvalidRequest")
          expect(error.field).toBe(`tools.${name}`)
        })
    )
  }

  it.effect("names that are fine: letters, digits, _, up to 64", () =>
    Effect.gen(function* () {
      const names = ["a", "_x", "web_search", "A1", "a".repeat(64), "class_", "Class"]
      const plan = yield* planTools(Object.fromEntries(names.map((n) => [n, { handler }])), DEFAULT_TOOL_LIMITS)
      expect([...plan!.tools.keys()]).toEqual(names)
    })
  )

  it.effect("a tool that is not an object with a handler function: InvalidRequest tools.<name>", () =>
    Effect.gen(function* () {
      for (const tool of [null, 1, "f", handler, {}, { handler: "f" }, { handler: {} }, { description: "x" }]) {
        expect(yield* fieldOf({ t: tool })).toBe("tools.t")
      }
      expect(yield* fieldOf({ t: { handler: 1 } }, "executor.tools")).toBe("executor.tools.t")
    })
  )

  it.effect("a description that is not a string: tools.<name>.description", () =>
    Effect.gen(function* () {
      expect(yield* fieldOf({ t: { handler, description: 5 } })).toBe("tools.t.description")
    })
  )

  it.effect("parameters that are no schema, or a JSON Schema that does not compile: tools.<name>.parameters", () =>
    Effect.gen(function* () {
      for (const parameters of [
        5,
        "object",
        [],
        true,
        { type: "nope" },
        { type: "object", properties: { a: { type: 12 } } },
        { $ref: "#/definitions/missing" },
        { type: "object", required: "a" }
      ]) {
        expect(yield* fieldOf({ t: { handler, parameters } })).toBe("tools.t.parameters")
      }
      expect(yield* fieldOf({ t: { handler, parameters: 5 } }, "defaults.tools")).toBe("defaults.tools.t.parameters")
      const error = yield* planTools({ t: { handler, parameters: { type: "nope" } } }, DEFAULT_TOOL_LIMITS).pipe(
        Effect.flip
      )
      expect(error.message).toContain("a valid JSON Schema")
    })
  )

  it.effect(
    "the cache: the same Tool object gets the same planned tool (one compiled check); another object, or another name, its own",
    () =>
      Effect.gen(function* () {
        const tool = { parameters: { type: "object", properties: { a: { type: "number" } } }, handler }
        const a = (yield* planTools({ t: tool }, DEFAULT_TOOL_LIMITS))!.tools.get("t")!
        const b = (yield* planTools({ t: tool }, { ...DEFAULT_TOOL_LIMITS, maxCalls: 3 }))!.tools.get("t")!
        expect(b).toBe(a)
        expect(b.check).toBe(a.check)
        const c = (yield* planTools({ t: { ...tool } }, DEFAULT_TOOL_LIMITS))!.tools.get("t")!
        expect(c.check).not.toBe(a.check)
        const renamed = (yield* planTools({ u: tool }, DEFAULT_TOOL_LIMITS))!.tools.get("u")!
        expect(renamed.name).toBe("u")
        expect(renamed.spec.name).toBe("u")
        // the check still works the same way
        expect(Either.isRight(c.check({ a: 1 }))).toBe(true)
        expect(Either.isLeft(a.check({ a: "1" }))).toBe(true)
      })
  )

  it.effect(
    "a JSON Schema with an $id, given again as a new object (a request's tools written inline), still plans",
    () =>
      Effect.gen(function* () {
        const schema = () => ({
          $id: "https://example.com/hermes-sandbox-test/add.json",
          type: "object",
          properties: { a: { type: "number" } }
        })
        yield* planTools({ add: { parameters: schema(), handler } }, DEFAULT_TOOL_LIMITS)
        const again = yield* planTools({ add: { parameters: schema(), handler } }, DEFAULT_TOOL_LIMITS).pipe(
          Effect.either
        )
        expect(Either.isRight(again) ? "planned" : again.left.message).toBe("planned")
      })
  )

  it.effect(
    "a JSON Schema's defaults are filled in for arguments the code left out (properties and items); a given argument is kept, and still checked",
    () =>
      Effect.gen(function* () {
        const parameters = {
          type: "object",
          properties: {
            query: { type: "string" },
            limit: { type: "integer", minimum: 1, default: 5 },
            filters: {
              type: "array",
              items: { type: "object", properties: { lang: { type: "string", default: "en" } } }
            }
          },
          required: ["query"]
        }
        const plan = (yield* planTools({ search: { parameters, handler } }, DEFAULT_TOOL_LIMITS))!
        const check = plan.tools.get("search")!.check
        expect(check({ query: "q" })).toEqual(Either.right({ query: "q", limit: 5 }))
        expect(check({ query: "q", limit: 2, filters: [{}, { lang: "de" }] })).toEqual(
          Either.right({ query: "q", limit: 2, filters: [{ lang: "en" }, { lang: "de" }] })
        )
        expect(Either.isLeft(check({ query: "q", limit: 0 }))).toBe(true)
        expect(Either.isLeft(check({ limit: 3 }))).toBe(true)
        // Hostile arguments: a handler that mutates a filled-in default does not change the next call's
        // (each call gets a fresh copy), and a "__proto__" key the code sends pollutes nothing.
        const withObject = (yield* planTools(
          {
            t: { parameters: { type: "object", properties: { opts: { type: "object", default: { a: 1 } } } }, handler }
          },
          DEFAULT_TOOL_LIMITS
        ))!.tools.get("t")!.check
        const first = Either.getOrThrow(withObject({})) as { opts: { a: number } }
        first.opts.a = 2
        expect(withObject({})).toEqual(Either.right({ opts: { a: 1 } }))
        const forged = JSON.parse('{"__proto__": {"polluted": true}}') as unknown
        expect(Either.isRight(withObject(forged))).toBe(true)
        expect(({} as Record<string, unknown>).polluted).toBeUndefined()
      })
  )
})

describe("ToolChannel: what the code sends is bounded before the host keeps it (hostile review 2)", () => {
  const echo: Tools = { echo: { parameters: Schema.Struct({ q: Schema.String }), handler: (args) => args } }
  const MESSAGE_BOUND = 8192 + 64

  it.scoped(
    "#1: 5,000 excess keys of 86 bytes (455 KB) to an Effect Schema tool: one bounded refusal, in the journal and to the code",
    () =>
      Effect.gen(function* () {
        const h = yield* open(echo)
        const args = Object.fromEntries(
          Array.from({ length: 5_000 }, (_, i) => [`k${String(i).padStart(5, "0")}${"x".repeat(80)}`, 1])
        )
        h.call(1, "echo", JSON.stringify({ q: "a", ...args }))
        yield* drain
        const [reply] = h.repliesTo(1)
        expect(reply!.status).toBe("2")
        expect(reply!.payload.length).toBeLessThan(MESSAGE_BOUND)
        const refused = h.outcomeOf(1)[0]!
        expect(refused.type).toBe("ToolCallRefused")
        expect(String(refused.data.message).length).toBeLessThan(MESSAGE_BOUND)
      })
  )

  it.scoped("#1: a JSON Schema map whose keys are the code's own (5 keys of 150 KB): paths clipped", () =>
    Effect.gen(function* () {
      const h = yield* open({
        m: { parameters: { type: "object", additionalProperties: { type: "string" } }, handler: () => 0 }
      })
      const args = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`${i}${"k".repeat(150_000)}`, 1]))
      expect(h.call(1, "m", JSON.stringify(args))).toBeUndefined()
      yield* drain
      const message = String(h.outcomeOf(1)[0]!.data.message)
      expect(message.length).toBeLessThan(2_000)
      expect(message).toMatch(/^invalid arguments for m: arguments\.0k+… must be string/)
    })
  )

  it.scoped("#1: any refusal message is cut at 8,192 characters", () =>
    Effect.gen(function* () {
      const h = yield* open({
        s: {
          parameters: { type: "object", properties: { q: { type: "string", pattern: `^${"a".repeat(20_000)}$` } } },
          handler: () => 0
        }
      })
      h.call(1, "s", JSON.stringify({ q: "b" }))
      yield* drain
      expect(String(h.outcomeOf(1)[0]!.data.message).length).toBeLessThan(MESSAGE_BOUND)
    })
  )

  it.scoped(
    "#3/#4: arguments nested deeper than 64 or holding more than 100,000 values are refused before they are parsed; a nested call recorded with its arguments gets its record, its outcome and its answer",
    () =>
      Effect.gen(function* () {
        const h = yield* open({ f: { handler: () => "ok" } }, {}, { recordArguments: true })
        h.call(1, "f", `{"a":${"[".repeat(400_000)}${"]".repeat(400_000)}}`)
        h.call(2, "f", `{"a":[${Array.from({ length: 150_000 }, () => "{}").join(",")}]}`)
        h.call(3, "f", `{"a":${"[".repeat(63)}1${"]".repeat(63)}}`)
        yield* drain
        expect(h.repliesTo(1)).toMatchObject([
          { status: "2", payload: "the arguments of f nest deeper than 64 arrays and objects" }
        ])
        expect(h.repliesTo(2)).toMatchObject([
          { status: "2", payload: "the arguments of f hold more than 100000 values" }
        ])
        expect(h.repliesTo(3)).toMatchObject([{ status: "0", payload: '"ok"' }])
        for (const id of [1, 2, 3]) {
          expect(
            h.ofCall(id).map((e) => e.type),
            `call ${id}`
          ).toEqual(["ToolCallRequested", id === 3 ? "ToolCallCompleted" : "ToolCallRefused"])
        }
        // What the journal keeps of a refused call's arguments is their text; of a served one, the value.
        expect(typeof h.ofCall(1)[0]!.data.arguments).toBe("string")
        expect(h.ofCall(3)[0]!.data.arguments).toMatchObject({ a: expect.any(Array) })
      })
  )

  it.scoped("#7: __proto__, constructor and prototype keys never reach a handler, at any depth", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const h = yield* open({ t: { handler: (args) => void seen.push(args) } })
      h.call(
        1,
        "t",
        '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"polluted":true}},"q":1,"nested":{"__proto__":{"x":1},"ok":true},"list":[{"prototype":1,"v":2}]}'
      )
      yield* drain
      expect(h.repliesTo(1)[0]!.status).toBe("0")
      const args = seen[0] as Record<string, unknown>
      expect(Object.keys(args)).toEqual(["q", "nested", "list"])
      expect(Object.keys(args.nested as object)).toEqual(["ok"])
      expect(args.list).toEqual([{ v: 2 }])
      expect(Object.assign({}, args) as Record<string, unknown>).not.toHaveProperty("isAdmin")
      expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    })
  )
})
