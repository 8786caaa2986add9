/**
 * The executor's OpenTelemetry spans (Tracing.ts) on the fake runtime, through @effect/opentelemetry's
 * tracer over an in-memory exporter: names, nesting under the caller's Effect span, the phase spans
 * (from the metrics' projection), attributes, tool call spans, outcomes and statuses, and the bounds
 * on what the sandbox controls; a session's operations (calls, cells, file operations), each one
 * `hermes_sandbox.session_call` naming its operation.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Resource from "@effect/opentelemetry/Resource"
import * as EffectOtel from "@effect/opentelemetry/Tracer"
import { SpanStatusCode } from "@opentelemetry/api"
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Effect, Fiber, Layer, TestClock } from "effect"
import { Executor, type ExecutorOptions, Tracing } from "@hermes-sandbox/core"
import { fakeCell, fakeProgram } from "@hermes-sandbox/core/testing"
import { spanned } from "../src/internal/spans.js"
import { settle, withFakeExecutor } from "./support/fakeExecutor.js"
import { withFakeSessions } from "./support/fakeSessions.js"

const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
const TracerLive = EffectOtel.layer.pipe(
  Layer.provide(Layer.succeed(EffectOtel.OtelTracerProvider, provider)),
  Layer.provide(Resource.layer({ serviceName: "tracing-test" }))
)

const withExecutor = <A, E>(
  options: ExecutorOptions,
  f: (executor: Executor.Executor["Type"]) => Effect.Effect<A, E>
) =>
  Effect.sync(() => exporter.reset()).pipe(
    Effect.zipRight(withFakeExecutor(options, ({ executor }) => f(executor))),
    Effect.provide(TracerLive)
  )

const spans = (): ReadonlyArray<ReadableSpan> => exporter.getFinishedSpans()
const named = (name: string) => spans().filter((s) => s.name === name)
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId
const only = <T>(xs: ReadonlyArray<T>): T => {
  expect(xs.length).toBe(1)
  return xs[0] as T
}

describe("OpenTelemetry traces (fake runtime)", () => {
  it.effect("one execute span under the caller's span, its phases as children, with the execution's attributes", () =>
    withExecutor({}, (executor) =>
      Effect.gen(function* () {
        const result = yield* settle(
          Effect.withSpan(executor.executeCode({ language: "python", code: fakeProgram({ stdout: "hi\n" }) }), "caller")
        )
        const r = result._tag === "Right" ? result.right : expect.unreachable(String(result.left))
        const caller = only(named("caller"))
        const execute = only(named(Tracing.SpanName.execute))
        expect(parentOf(execute)).toBe(caller.spanContext().spanId)
        expect(execute.spanContext().traceId).toBe(caller.spanContext().traceId)
        expect(execute.attributes).toMatchObject({
          [Tracing.ATTRIBUTE.executionId]: r.executionId,
          [Tracing.ATTRIBUTE.containerName]: r.containerName,
          [Tracing.ATTRIBUTE.language]: "python",
          [Tracing.ATTRIBUTE.outcome]: "ok",
          [Tracing.ATTRIBUTE.executorId]: executor.executorId
        })
        expect(execute.status.code).toBe(SpanStatusCode.OK)
        const phases = spans().filter((s) => s.name.startsWith(Tracing.SpanName.phasePrefix))
        expect(phases.map((s) => s.name).sort()).toEqual(
          ["queue", "create", "start", "run", "removal"].map((p) => `${Tracing.SpanName.phasePrefix}${p}`).sort()
        )
        for (const p of phases) {
          expect(parentOf(p)).toBe(execute.spanContext().spanId)
          expect(p.attributes[Tracing.ATTRIBUTE.phase]).toBe(p.name.slice(Tracing.SpanName.phasePrefix.length))
          expect(p.attributes[Tracing.ATTRIBUTE.executionId]).toBe(r.executionId)
        }
      })
    )
  )

  it.effect(
    "a timeout, an error exit, an interrupted run and a refused request end with an error status and their outcome",
    () =>
      withExecutor({}, (executor) =>
        Effect.gen(function* () {
          yield* settle(executor.executeCode({ language: "bash", code: fakeProgram({ hang: true }), timeoutMs: 1_000 }))
          yield* settle(executor.executeCode({ language: "javascript", code: fakeProgram({ exitCode: 3 }) }))
          // A request the caller got wrong, its error's text long: the status carries it, bounded.
          yield* settle(executor.executeCode({ language: "z".repeat(5_000) as "bash", code: "x" }))
          // The caller interrupts a run: its outcome, and an error status (not the OK of an interruption).
          const running = yield* Effect.fork(
            executor.executeCode({ language: "python", code: fakeProgram({ hang: true }), timeoutMs: 60_000 })
          )
          yield* TestClock.adjust("100 millis")
          yield* Fiber.interrupt(running)
          const [timedOut, failed, refused, interrupted] = named(Tracing.SpanName.execute)
          expect(interrupted?.attributes[Tracing.ATTRIBUTE.outcome]).toBe("interrupted")
          expect(interrupted?.status.code).toBe(SpanStatusCode.ERROR)
          expect(timedOut?.attributes[Tracing.ATTRIBUTE.outcome]).toBe("timeout")
          expect(timedOut?.status.code).toBe(SpanStatusCode.ERROR)
          expect(failed?.attributes[Tracing.ATTRIBUTE.outcome]).toBe("error")
          expect(failed?.status.code).toBe(SpanStatusCode.ERROR)
          // Refused before anything was recorded: no outcome, the error in the status.
          expect(refused?.attributes[Tracing.ATTRIBUTE.outcome]).toBeUndefined()
          expect(refused?.status.code).toBe(SpanStatusCode.ERROR)
          expect(refused?.status.message).toMatch(/language/)
          expect(refused?.status.message?.length).toBeLessThanOrEqual(Tracing.MAX_ATTRIBUTE_CHARS)
        })
      )
  )

  it.effect(
    "a span per tool call under the execution; a name the sandbox chose is 'other'; every string attribute is bounded",
    () =>
      withExecutor({}, (executor) =>
        Effect.gen(function* () {
          const longName = `t${"x".repeat(63)}` // the longest name a tool may have
          const chosen = `sandbox_${"y".repeat(10_000)}`
          yield* settle(
            executor.executeCode({
              language: "python",
              code: fakeProgram({
                toolCalls: [
                  { tool: "add", args: { a: 1, b: 2 } },
                  { tool: longName, args: {} },
                  { tool: chosen, args: {} }
                ]
              }),
              tools: {
                add: { handler: ({ a, b }: { a: number; b: number }) => a + b },
                [longName]: { handler: () => "ok" }
              }
            })
          )
          const execute = only(named(Tracing.SpanName.execute))
          const calls = named(Tracing.SpanName.toolCall)
          expect(calls.length).toBe(3)
          for (const c of calls) expect(parentOf(c)).toBe(execute.spanContext().spanId)
          const byTool = Object.fromEntries(
            calls.map((c) => [c.attributes[Tracing.ATTRIBUTE.tool], c.attributes[Tracing.ATTRIBUTE.outcome]])
          )
          expect(byTool).toEqual({
            add: "completed",
            [longName]: "completed",
            other: "refused"
          })
          expect(calls.find((c) => c.attributes[Tracing.ATTRIBUTE.tool] === "other")?.status.code).toBe(
            SpanStatusCode.ERROR
          )
          // Nothing of the sandbox's 10,000-character name, and no string attribute past the bound.
          for (const s of spans()) {
            for (const v of Object.values(s.attributes)) {
              if (typeof v === "string") {
                expect(v.length).toBeLessThanOrEqual(Tracing.MAX_ATTRIBUTE_CHARS)
                expect(v).not.toContain("yyyyyyyy")
              }
            }
            expect((s.status.message ?? "").length).toBeLessThanOrEqual(Tracing.MAX_ATTRIBUTE_CHARS)
          }
        })
      )
  )

  it.effect(
    "a session's calls, cells and file operations: one session_call span each under the caller's, naming its operation, with its outcome",
    () =>
      Effect.sync(() => exporter.reset()).pipe(
        Effect.zipRight(
          withFakeSessions(({ sessions }) =>
            Effect.gen(function* () {
              const s = yield* sessions.open()
              const work = Effect.gen(function* () {
                const run = yield* s.run(fakeProgram({ stdout: "hi\n" }))
                const code = yield* s.runCode({ language: "python", code: fakeProgram({ exitCode: 2 }) })
                const cell = yield* s.runCell({
                  code: fakeCell({ toolCall: { tool: "add", args: { a: 1, b: 2 } } }, { print: "done" }),
                  tools: { add: { handler: ({ a, b }: { a: number; b: number }) => a + b } }
                })
                const raised = yield* s.runCell({ code: fakeCell({ raise: { name: "ValueError", value: "no" } }) })
                yield* s.writeFile("a.txt", "one\n")
                yield* s.patchFile("a.txt", { oldString: "one", newString: "two" })
                yield* s.readFile("a.txt")
                yield* s.listFiles()
                yield* s.removeFile("a.txt")
                const missing = yield* Effect.flip(s.readFile("a.txt"))
                return { run, code, cell, raised, missing }
              })
              const r = yield* Effect.withSpan(work, "caller")
              const caller = only(named("caller"))
              const calls = named(Tracing.SpanName.sessionCall)
              const ops = calls.map((c) => c.attributes[Tracing.ATTRIBUTE.operation])
              expect(ops).toEqual([
                "run",
                "run_code",
                "cell",
                "cell",
                "write_file",
                "patch_file",
                "read_file",
                "list_files",
                "remove_file",
                "read_file"
              ])
              for (const c of calls) {
                expect(parentOf(c)).toBe(caller.spanContext().spanId)
                expect(c.attributes[Tracing.ATTRIBUTE.sessionId]).toBe(s.sessionId)
                expect(c.attributes[Tracing.ATTRIBUTE.containerName]).toBe(s.containerName)
              }
              const [run, code, cell, raised] = calls as [ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan]
              const files = calls.slice(4)
              expect(run.attributes).toMatchObject({
                [Tracing.ATTRIBUTE.executionId]: r.run.executionId,
                [Tracing.ATTRIBUTE.language]: "bash",
                [Tracing.ATTRIBUTE.outcome]: "ok"
              })
              expect(run.status.code).toBe(SpanStatusCode.OK)
              expect(code.attributes).toMatchObject({
                [Tracing.ATTRIBUTE.executionId]: r.code.executionId,
                [Tracing.ATTRIBUTE.language]: "python",
                [Tracing.ATTRIBUTE.outcome]: "error"
              })
              expect(code.status.code).toBe(SpanStatusCode.ERROR)
              // A cell: its id and status; its tool call a child of it.
              expect(r.cell.status).toBe("ok")
              expect(cell.attributes).toMatchObject({
                [Tracing.ATTRIBUTE.cellId]: r.cell.cellId,
                [Tracing.ATTRIBUTE.language]: "python",
                [Tracing.ATTRIBUTE.outcome]: "ok"
              })
              const toolCall = only(named(Tracing.SpanName.toolCall))
              expect(parentOf(toolCall)).toBe(cell.spanContext().spanId)
              expect(toolCall.attributes[Tracing.ATTRIBUTE.tool]).toBe("add")
              expect(r.raised.status).toBe("error")
              expect(raised.attributes[Tracing.ATTRIBUTE.outcome]).toBe("error")
              expect(raised.status.code).toBe(SpanStatusCode.ERROR)
              // File operations: ok, and a failure as its tag with no outcome.
              const last = files.pop() as ReadableSpan
              for (const f of files) {
                expect(f.attributes[Tracing.ATTRIBUTE.outcome]).toBe("ok")
                expect(f.status.code).toBe(SpanStatusCode.OK)
              }
              expect(r.missing._tag).toBe("FileNotFound")
              expect(last.attributes[Tracing.ATTRIBUTE.outcome]).toBeUndefined()
              expect(last.status.code).toBe(SpanStatusCode.ERROR)
              expect(last.events.find((e) => e.name === "exception")?.attributes?.["exception.type"]).toBe(
                "FileNotFound"
              )
            })
          )
        ),
        Effect.provide(TracerLive)
      )
  )

  it.effect("with Effect's built-in tracer (no tracer provided) no span is made; with one, it is", () =>
    Effect.gen(function* () {
      const probe = spanned("probe", {}, (traced) => Effect.succeed(traced !== undefined))
      expect(yield* Tracing.isBuiltinTracer).toBe(true)
      expect(yield* probe).toBe(false)
      expect(yield* probe.pipe(Effect.provide(TracerLive))).toBe(true)
    })
  )
})
