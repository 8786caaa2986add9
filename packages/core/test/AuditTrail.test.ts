/**
 * The audit trail (`recordCode: true`, issue 31 item 4) on the fake runtime: off by default (the
 * journal keeps the code's size and sha256 only); on, each run's code right after its request and
 * the head of its output right before its terminal event, for one-shot runs, session calls and
 * kernel cells; bounded whatever the program is or prints (a 10 MiB program, a flood, binary
 * output), and counted against a run's journal budget when it has tools.
 */
import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { Effect, Stream } from "effect"
import { fakeCell, fakeProgram } from "@hermes-sandbox/core/testing"
import type { Event, EventEnvelope, Journal } from "@hermes-sandbox/events"
import { checkLifecycle } from "@hermes-sandbox/events/Projection"
import { headText, RECORDED_CODE_BYTES, RECORDED_OUTPUT_BYTES } from "../src/internal/auditTrail.js"
import { settle, withFakeExecutor } from "./support/fakeExecutor.js"
import { withFakeSessions } from "./support/fakeSessions.js"

const all = (journal: Journal.Journal["Type"]) =>
  journal.read().pipe(
    Stream.runCollect,
    Effect.map((c) => [...c])
  )
const ofType = <T extends "CodeRecorded" | "OutputRecorded">(events: ReadonlyArray<EventEnvelope>, type: T) =>
  events.filter((e): e is Extract<EventEnvelope, { type: T }> => e.type === type)
const types = (events: ReadonlyArray<EventEnvelope>) => events.map((e) => e.type)
const utf8 = (text: string) => Buffer.byteLength(text, "utf8")

/** The stored form survives JSON and is well-formed text (no lone surrogate, no NUL). */
const expectStorable = (event: EventEnvelope) => {
  const json = JSON.stringify(event)
  expect(JSON.parse(json)).toEqual(event)
  for (const value of Object.values(event.data))
    if (typeof value === "string") {
      // No lone surrogate: UTF-8 encoding would replace it.
      expect(Buffer.from(value, "utf8").toString("utf8")).toBe(value)
      expect(value).not.toContain("\0")
    }
}

describe("the audit trail (recordCode)", () => {
  it.effect("off by default: no code or output in the journal, only the code's size and sha256", () =>
    withFakeExecutor({}, ({ executor, journal }) =>
      Effect.gen(function* () {
        const code = fakeProgram({ stdout: "secret-output\n" })
        yield* settle(executor.executeCode({ language: "python", code }))
        const events = yield* all(journal)
        expect(types(events)).not.toContain("CodeRecorded")
        expect(types(events)).not.toContain("OutputRecorded")
        const requested = events.find((e) => e.type === "ExecutionRequested") as Event.EnvelopeOf<"ExecutionRequested">
        expect(requested.data.codeSha256).toBe(createHash("sha256").update(code).digest("hex"))
        expect(JSON.stringify(events)).not.toContain("secret-output")
        expect(executor.config.recordCode).toBe(false)
      })
    )
  )

  it.effect("on: the code right after the request, the output's head right before the terminal event", () =>
    withFakeExecutor({ recordCode: true }, ({ executor, journal }) =>
      Effect.gen(function* () {
        const code = fakeProgram({ stdout: "hello €\n", stderr: "warn\n", exitCode: 3 })
        const result = yield* settle(executor.executeCode({ language: "python", code }))
        expect(result._tag).toBe("Right")
        const events = yield* all(journal)
        expect(types(events)).toEqual([
          "ExecutionRequested",
          "CodeRecorded",
          "ContainerCreated",
          "ContainerStarted",
          "OutputRecorded",
          "ContainerExited",
          "ContainerDestroyed"
        ])
        expect(events[1]!.data).toEqual({ code, codeBytes: utf8(code), truncated: false })
        expect(events[4]!.data).toEqual({
          stdout: "hello €\n",
          stderr: "warn\n",
          stdoutBytes: utf8("hello €\n"),
          stderrBytes: 5,
          truncated: false
        })
        // The code and the request are one append: neither is journaled alone.
        expect(events[1]!.sequence).toBe(events[0]!.sequence + 1)
        expect(checkLifecycle(events)).toEqual([])
      })
    )
  )

  it.effect("a 10 MiB program is recorded as its first 64 KiB, cut at a character; codeBytes is the whole", () =>
    withFakeExecutor({ recordCode: true, maxCodeBytes: 16 * 1024 * 1024 }, ({ executor, journal }) =>
      Effect.gen(function* () {
        // 3-byte characters from an offset that makes the 64 KiB boundary fall inside one.
        const code = `${fakeProgram({ stdout: "ok\n" })}#${"€".repeat((10 * 1024 * 1024) / 3)}`
        yield* settle(executor.executeCode({ language: "python", code }))
        const [recorded] = ofType(yield* all(journal), "CodeRecorded")
        expect(recorded?.data.codeBytes).toBe(utf8(code))
        expect(recorded?.data.codeBytes).toBeGreaterThan(10 * 1024 * 1024 - 3)
        expect(recorded?.data.truncated).toBe(true)
        const head = recorded!.data.code
        expect(utf8(head)).toBeLessThanOrEqual(RECORDED_CODE_BYTES)
        expect(utf8(head)).toBeGreaterThan(RECORDED_CODE_BYTES - 3)
        expect(code.startsWith(head)).toBe(true)
        expect(head.endsWith("€")).toBe(true)
        expectStorable(recorded!)
      })
    )
  )

  it.effect("a flood of output is recorded as 16 KiB of each stream; the counts are what was written", () =>
    withFakeExecutor({ recordCode: true, maxCodeBytes: 8 * 1024 * 1024 }, ({ executor, journal }) =>
      Effect.gen(function* () {
        // 3 MiB written; the result keeps 1 MiB (outputLimitBytes), the rest is counted.
        const flood = "x".repeat(3 * 1024 * 1024)
        yield* settle(
          executor.executeCode({ language: "bash", code: fakeProgram({ stdout: flood, stderr: "é".repeat(20_000) }) })
        )
        const [output] = ofType(yield* all(journal), "OutputRecorded")
        expect(output?.data.stdout.length).toBe(RECORDED_OUTPUT_BYTES)
        expect(output?.data.stdout).toMatch(/^x+$/)
        expect(output?.data.stdoutBytes).toBe(flood.length)
        // 2-byte characters: 8,192 of them fill the bound exactly.
        expect(output?.data.stderr.length).toBe(RECORDED_OUTPUT_BYTES / 2)
        expect(output?.data.stderr).toMatch(/^é+$/)
        expect(output?.data.stderrBytes).toBe(40_000)
        expect(output?.data.truncated).toBe(true)
        expect(utf8(JSON.stringify(output?.data))).toBeLessThan(2 * RECORDED_OUTPUT_BYTES + 200)
      })
    )
  )

  it.effect("binary and invalid UTF-8 output is recorded as well-formed text that stays valid JSON", () =>
    withFakeExecutor({ recordCode: true }, ({ executor, journal }) =>
      Effect.gen(function* () {
        const bytes = Buffer.alloc(40_000)
        for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919 + 13) % 256
        // A NUL, a lone continuation byte, a truncated sequence, an overlong encoding.
        const bad = Buffer.from([0x00, 0x80, 0xe2, 0x82, 0x41, 0xc0, 0xaf, 0xed, 0xa0, 0x80])
        const stdoutBase64 = Buffer.concat([bad, bytes]).toString("base64")
        yield* settle(executor.executeCode({ language: "bash", code: fakeProgram({ stdoutBase64 }) }))
        const [output] = ofType(yield* all(journal), "OutputRecorded")
        expect(output?.data.stdoutBytes).toBe(bad.length + bytes.length)
        expect(output?.data.truncated).toBe(true)
        expect(utf8(output!.data.stdout)).toBeLessThanOrEqual(RECORDED_OUTPUT_BYTES)
        expect(output!.data.stdout.startsWith("\uFFFD\uFFFD")).toBe(true)
        expectStorable(output!)
      })
    )
  )

  it.effect("a run that times out records what it printed before its ExecutionTimedOut", () =>
    withFakeExecutor({ recordCode: true }, ({ executor, journal }) =>
      Effect.gen(function* () {
        yield* settle(
          executor.executeCode({
            language: "bash",
            code: fakeProgram({ stdout: "tick\n", hang: true }),
            timeoutMs: 1000
          })
        )
        const events = yield* all(journal)
        const at = types(events).indexOf("ExecutionTimedOut")
        expect(events[at - 1]?.type).toBe("OutputRecorded")
        expect(events[at - 1]?.data).toMatchObject({ stdout: "tick\n", truncated: false })
        expect(checkLifecycle(events)).toEqual([])
      })
    )
  )

  it.effect("with tools, the recording takes its share of the run's journal budget first", () =>
    Effect.gen(function* () {
      const request = {
        language: "python",
        code: fakeProgram({ toolCalls: [{ tool: "add", args: { a: 1, b: 2 } }] }),
        tools: { add: { handler: ({ a, b }: { a: number; b: number }) => a + b } },
        // Room for one call (its request and its outcome's reserve, ~26 KB), not for that and the recording (~197 KB).
        toolLimits: { maxJournalBytes: 200_000 }
      }
      const run = (recordCode: boolean) =>
        withFakeExecutor({ recordCode }, ({ executor, journal }) =>
          Effect.gen(function* () {
            const result = yield* settle(executor.executeCode(request))
            return { result, events: yield* all(journal) }
          })
        )
      const without = yield* run(false)
      expect(without.result._tag).toBe("Right")
      expect(types(without.events)).toContain("ToolCallCompleted")
      const withRecording = yield* run(true)
      expect(withRecording.result._tag).toBe("Left")
      expect(withRecording.result).toMatchObject({ left: { _tag: "ContainerFailed", reason: "journal-budget" } })
      // The recording itself is there, before the terminal event.
      const at = types(withRecording.events).indexOf("ExecutionFailed")
      expect(types(withRecording.events).slice(0, 2)).toEqual(["ExecutionRequested", "CodeRecorded"])
      expect(withRecording.events[at - 1]?.type).toBe("OutputRecorded")
      expect(checkLifecycle(withRecording.events)).toEqual([])
    })
  )

  it.effect("a session's calls (run, runCode) and its kernel's cells are recorded, a cell's with its id", () =>
    withFakeSessions(
      ({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const command = fakeProgram({ stdout: "hi\n" })
          const ran = yield* s.run(command)
          const call = yield* events(ran.executionId)
          expect(types(call)).toEqual(["ExecutionRequested", "CodeRecorded", "OutputRecorded", "ContainerExited"])
          expect(call[1]?.data).toEqual({ code: command, codeBytes: utf8(command), truncated: false })
          expect(call[2]?.data).toMatchObject({ stdout: "hi\n", stderr: "", truncated: false })

          const snippet = fakeProgram({ stdout: "snippet\n" })
          const coded = yield* s.runCode({ language: "python", code: snippet })
          const snippetEvents = yield* events(coded.executionId)
          expect(ofType(snippetEvents, "CodeRecorded")[0]?.data.code).toBe(snippet)
          expect(ofType(snippetEvents, "OutputRecorded")[0]?.data.stdout).toBe("snippet\n")

          const cellCode = fakeCell({ print: "cell out\n" }, { stderr: "cell err\n" })
          const cell = yield* s.runCell({ code: cellCode })
          const stream = yield* events(s.sessionId)
          const mine = stream.filter((e) => (e.data as { cellId?: string }).cellId === cell.cellId)
          expect(types(mine)).toEqual(["CodeRecorded", "OutputRecorded", "CellExecuted"])
          expect(mine[0]?.data).toEqual({
            cellId: cell.cellId,
            code: cellCode,
            codeBytes: utf8(cellCode),
            truncated: false
          })
          expect(mine[1]?.data).toMatchObject({ cellId: cell.cellId, stdout: "cell out\n", stderr: "cell err\n" })
          expect(checkLifecycle(stream)).toEqual([])
        }),
      { recordCode: true }
    )
  )

  it.effect("a session service without recordCode records nothing of its calls and cells", () =>
    withFakeSessions(({ events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        const ran = yield* s.run(fakeProgram({ stdout: "hi\n" }))
        const cell = yield* s.runCell({ code: fakeCell({ print: "x" }) })
        const seen = [...(yield* events(ran.executionId)), ...(yield* events(s.sessionId))]
        expect(cell.status).toBe("ok")
        expect(types(seen).filter((t) => t === "CodeRecorded" || t === "OutputRecorded")).toEqual([])
      })
    )
  )
})

describe("headText", () => {
  it("cuts at a character boundary within the bound, and decodes invalid bytes and NUL as U+FFFD", () => {
    const euro = Buffer.from("€€€", "utf8")
    expect(headText(euro, 9)).toEqual({ text: "€€€", cut: false })
    expect(headText(euro, 8)).toEqual({ text: "€€", cut: true })
    expect(headText(euro, 2)).toEqual({ text: "", cut: true })
    // An invalid byte decodes to 3 bytes of U+FFFD: the text is cut again to stay within the bound.
    const invalid = Buffer.alloc(10, 0xff)
    const head = headText(invalid, 10)
    expect(head).toEqual({ text: "\uFFFD".repeat(3), cut: true })
    expect(headText(Buffer.from([0x61, 0x00, 0x62]), 16)).toEqual({ text: "a\uFFFDb", cut: false })
  })
})
