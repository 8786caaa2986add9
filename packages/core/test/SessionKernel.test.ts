/**
 * A session's Python kernel on the fake runtime, where only the fake can show it: a kernel that
 * dies under a cell or at idle, a supervisor killed or stopped by the domain, a forged frame, an
 * image without the kernel, preload failures, the record bounds, a cell whose caller went away, and
 * requests refused before anything runs. What both worlds share is in the sessions contract
 * (test/support/sessionContract.ts, cells).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { CellLineage } from "@hermes-sandbox/core"
import { RUNNER_FEATURES_LABEL, RUNNER_PROTOCOL_LABEL } from "@hermes-sandbox/core/RunnerProtocol"
import { type FakeCellStep, fakeCell } from "@hermes-sandbox/core/testing"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { withFakeSessions } from "./support/fakeSessions.js"
import { checkLifecycle } from "@hermes-sandbox/events/Projection"

const cell = (...steps: ReadonlyArray<FakeCellStep>) => ({ code: fakeCell(...steps) })

const withSessions = withFakeSessions

const restarts = (events: ReadonlyArray<EventEnvelope>) =>
  events.flatMap((e) => (e.type === "KernelRestarted" ? [e.data] : []))

describe("a session's kernel (fake runtime)", () => {
  it.effect(
    "a kernel killed by OOM under a cell: crashed, oomKilled, stateLost; the session lives on in a new kernel",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          yield* s.runCell(cell({ set: { a: "1" } }))
          const died = yield* s.runCell(cell({ print: "big\n" }, { die: { oom: true } }))
          expect(died).toMatchObject({ status: "crashed", oomKilled: true, stateLost: true, stdout: "big\n" })
          const next = yield* s.runCell(cell({ get: "a" }))
          expect(next).toMatchObject({ status: "error", stateLost: true, kernel: { generation: 2, started: true } })
          expect(restarts(yield* events(s.sessionId))).toEqual([
            expect.objectContaining({ reason: "crashed", oomKilled: true, cellId: died.cellId, generation: 1 })
          ])
          expect((yield* s.status).open).toBe(true)
        })
      )
  )

  it.effect(
    "a kernel that dies at idle (a leftover thread) is journaled on arrival, and the next result says stateLost",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const first = yield* s.runCell(
            cell({ set: { a: "1" } }, { doneThenBusy: true }, { sleep: 1000 }, { die: {} })
          )
          expect(first).toMatchObject({ status: "ok", stateLost: false })
          yield* TestClock.adjust("2 seconds")
          expect(restarts(yield* events(s.sessionId))).toEqual([
            expect.objectContaining({ reason: "crashed", generation: 1, signal: 9 })
          ])
          const next = yield* s.runCell(cell({ get: "a" }))
          expect(next).toMatchObject({ stateLost: true, kernel: { generation: 2 } })
          expect(next.error?.name).toBe("NameError")
          expect(yield* s.runCell(cell({ print: "x" }))).toMatchObject({ stateLost: false })
        })
      )
  )

  it.effect(
    "done, then busy: the cell ends as the kernel said; what it prints afterwards is the next cell's lateOutput",
    () =>
      withSessions(({ sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const first = yield* s.runCell(
            cell({ print: "mine\n" }, { doneThenBusy: true }, { sleep: 100 }, { print: "later\n" })
          )
          expect(first).toMatchObject({ status: "ok", stdout: "mine\n" })
          yield* TestClock.adjust("1 second")
          const next = yield* s.runCell(cell({ print: "next\n" }))
          expect(next).toMatchObject({ stdout: "next\n", lateOutput: { text: "later\n", bytes: 6 } })
        })
      )
  )

  it.effect(
    "a supervisor killed by the domain (its exec ends without 'G'): crashed, stateLost; the next cell runs",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const gone = yield* s.runCell(cell({ print: "x" }, { killSupervisor: true }))
          expect(gone).toMatchObject({ status: "crashed", stateLost: true })
          expect(restarts(yield* events(s.sessionId))).toEqual([expect.objectContaining({ reason: "crashed" })])
          expect(yield* s.runCell(cell({ print: "ok" }))).toMatchObject({ status: "ok", stateLost: true })
        })
      )
  )

  it.effect(
    "a supervisor stopped by the domain: the deadline's interrupt goes unanswered, the host ends the kernel itself",
    () =>
      withSessions(({ control, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const running = yield* Effect.fork(s.runCell({ ...cell({ stopSupervisor: true }), timeoutMs: 1000 }))
          // The deadline, the grace (2 s) and the host's own (5 s), then the exec's end (5 s) and the killer.
          for (let i = 0; i < 30 && (yield* Fiber.poll(running))._tag === "None"; i++)
            yield* TestClock.adjust("1 second")
          expect(yield* Fiber.join(running)).toMatchObject({ status: "timeout", stateLost: true })
          expect(yield* s.runCell(cell({ print: "ok" }))).toMatchObject({ status: "ok", kernel: { generation: 2 } })
          expect((yield* control.alive).length).toBe(1)
          expect((yield* s.status).open).toBe(true)
        })
      )
  )

  it.effect("a forged frame is ContainerFailed protocol, the kernel is killed and the session lives on", () =>
    withSessions(({ events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        const error = yield* Effect.flip(s.runCell(cell({ forgeFrame: true })))
        expect(error).toMatchObject({ _tag: "ContainerFailed", reason: "protocol" })
        expect(restarts(yield* events(s.sessionId))).toEqual([expect.objectContaining({ reason: "crashed" })])
        expect(yield* s.runCell(cell({ print: "ok" }))).toMatchObject({ status: "ok", stateLost: true })
      })
    )
  )

  it.effect("an image without the kernel: KernelUnavailable naming it; calls still run", () =>
    withSessions(
      ({ sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open({ image: "old/python:1" })
          const error = yield* Effect.flip(s.runCell(cell({ print: "x" })))
          expect(error._tag).toBe("KernelUnavailable")
          expect(error.message).toContain("old/python:1")
          expect(error.message).toContain("kernel")
          expect((yield* s.run("echo fine")).exitCode).toBe(0)
        }),
      {},
      {
        imageLabels: {
          "old/python:1": { [RUNNER_PROTOCOL_LABEL]: "2", [RUNNER_FEATURES_LABEL]: "collect,fileops,preload,tools" }
        }
      }
    )
  )

  it.effect("eager: the kernel starts at open; preload failures are journaled in KernelStarted", () =>
    withSessions(({ events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open({ kernel: { eager: true, preload: ["pandas", "nosuch.module"] } })
        yield* TestClock.adjust("10 millis")
        const started = (yield* events(s.sessionId)).flatMap((e) => (e.type === "KernelStarted" ? [e.data] : []))
        expect(started).toEqual([
          expect.objectContaining({
            generation: 1,
            preload: ["pandas", "nosuch.module"],
            preloadFailed: ["nosuch.module"]
          })
        ])
        expect(yield* s.runCell(cell({ print: "x" }))).toMatchObject({ kernel: { started: false, generation: 1 } })
      })
    )
  )

  it.effect("the display bounds reach the kernel's supervisor and are checked again on the host", () =>
    withSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open({ kernel: { maxDisplays: 2, maxBundleBytes: 200 } })
        const steps: Array<FakeCellStep> = Array.from({ length: 5 }, (_, i) => ({ display: { "text/plain": `d${i}` } }))
        const r = yield* s.runCell(cell(...steps, { display: { "text/plain": "x".repeat(500) } }))
        expect(r.displays.map((d) => d.data["text/plain"])).toEqual(["d0", "d1"])
        expect(r.displaysOmitted).toMatchObject({ count: 4, reasons: { count: 3, "too-large": 1 } })
        // What the supervisor forwards is checked again: an image that is not one is dropped.
        const bad = yield* s.runCell(
          cell({ rawRecord: { kind: "D", text: '{"data":{"image/png":"PHN2Zz4=","text/plain":"fig"},"metadata":{}}' } })
        )
        expect(bad.displays[0]!.data).toEqual({ "text/plain": "fig" })
        expect(bad.displaysOmitted.reasons).toEqual({ invalid: 1 })
      })
    )
  )

  it.effect(
    "a cell whose caller went away: the kernel is ended (journaled interrupted), the next result says stateLost",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          const running = yield* Effect.fork(s.runCell(cell({ sleep: 60_000 })))
          yield* TestClock.adjust("100 millis")
          yield* Fiber.interrupt(running)
          expect(restarts(yield* events(s.sessionId))).toEqual([expect.objectContaining({ reason: "interrupted" })])
          expect(yield* s.runCell(cell({ print: "x" }))).toMatchObject({ stateLost: true, kernel: { generation: 2 } })
        })
      )
  )

  it.effect(
    "refused before anything runs: code that is not a string, a tool the modules cannot bind, a deadline out of range",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          for (const bad of [
            { code: 1 },
            { code: "x", tools: { "not a name": { handler: () => 1 } } },
            { code: "x", timeoutMs: -1 }
          ]) {
            const e = yield* Effect.flip(s.runCell(bad as never))
            expect(e._tag).toBe("InvalidRequest")
          }
          expect((yield* events(s.sessionId)).map((e) => e.type)).not.toContain("KernelStarted")
        })
      )
  )

  it.effect("closing the session ends the kernel; its stream is a valid session lifecycle", () =>
    withSessions(({ control, events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        yield* s.runCell(cell({ print: "x" }))
        yield* s.restartKernel
        yield* s.runCell(cell({ result: { "text/plain": "1" } }))
        yield* s.close
        expect(yield* control.alive).toEqual([])
        const stream = yield* events(s.sessionId)
        expect(checkLifecycle(stream)).toEqual([])
        expect(stream.map((e) => e.type)).toEqual([
          "SessionOpened",
          "ContainerCreated",
          "ContainerStarted",
          "KernelStarted",
          "CellExecuted",
          "KernelRestarted",
          "KernelStarted",
          "CellExecuted",
          "ContainerDestroyed",
          "SessionClosed"
        ])
        expect((yield* Effect.flip(s.runCell(cell({ print: "x" }))))._tag).toBe("SessionEnded")
      })
    )
  )

  it.effect(
    "a cell's tool call still in flight at its end is cancelled and journaled (cellId) before its CellExecuted",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open({ kernel: { interruptGraceMs: 500 } })
          const never = { handler: () => new Promise<number>(() => {}) }
          const running = yield* Effect.fork(
            s.runCell({ ...cell({ toolCall: { tool: "wait" } }), timeoutMs: 1000, tools: { wait: never } })
          )
          for (let i = 0; i < 20 && (yield* Fiber.poll(running))._tag === "None"; i++)
            yield* TestClock.adjust("1 second")
          const r = yield* Fiber.join(running)
          // The wait on the socket ends with the interrupt's KeyboardInterrupt: the state is kept.
          expect(r).toMatchObject({ status: "timeout", stateLost: false, toolCallsMade: 1 })
          expect(r.error?.name).toBe("KeyboardInterrupt")
          const stream = yield* events(s.sessionId)
          const tail = stream.filter((e) => e.type.startsWith("ToolCall") || e.type === "CellExecuted")
          expect(tail.map((e) => e.type)).toEqual(["ToolCallRequested", "ToolCallFailed", "CellExecuted"])
          expect(tail[1]!.data).toMatchObject({ cellId: r.cellId, reason: "cancelled" })
          expect(checkLifecycle(stream)).toEqual([])
          // A cell given no tools has no channel: its calls get the modules' answer, never the host.
          const bare = yield* s.runCell(cell({ toolCall: { tool: "wait" } }))
          expect(bare).toMatchObject({ status: "ok", toolCallsMade: 0 })
          expect(bare.stdout).toContain("no tool channel")
        })
      )
  )

  it.effect(
    "a flood of refused tool calls from a cell ends it as a run's: ContainerFailed tool-calls; the kernel answered, so its state is kept",
    () =>
      withSessions(({ sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          yield* s.runCell(cell({ set: { kept: "yes" } }))
          const add = { handler: ({ a, b }: { a: number; b: number }) => a + b }
          const flood: Array<FakeCellStep> = Array.from({ length: 1100 }, () => ({ toolCall: { tool: "nosuch" } }))
          const running = yield* Effect.fork(
            Effect.flip(s.runCell({ ...cell(...flood, { sleep: 60_000 }), tools: { add } }))
          )
          for (let i = 0; i < 20 && (yield* Fiber.poll(running))._tag === "None"; i++)
            yield* TestClock.adjust("1 second")
          const error = yield* Fiber.join(running)
          expect(error).toMatchObject({ _tag: "ContainerFailed", reason: "tool-calls" })
          expect(yield* s.runCell(cell({ get: "kept" }))).toMatchObject({ stdout: "yes\n", stateLost: false })
        })
      )
  )
})

/** What the session's journal said of each cell: its CellExecuted's stateLost, in order. */
const journaledLoss = (events: ReadonlyArray<EventEnvelope>) =>
  events.flatMap((e) => (e.type === "CellExecuted" ? [e.data.stateLost] : []))

describe("a loss the session cannot see: stateLostBefore, CellLineage (fake runtime)", () => {
  it.effect("a cell told its earlier state is gone says stateLost, and its CellExecuted records the same", () =>
    withSessions(({ events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        const told = yield* s.runCell(cell({ print: "x" }), { stateLostBefore: true })
        expect(told).toMatchObject({ status: "ok", stateLost: true })
        expect(yield* s.runCell(cell({ print: "y" }))).toMatchObject({ stateLost: false })
        expect(journaledLoss(yield* events(s.sessionId))).toEqual([true, false])
      })
    )
  )

  it.effect(
    "a lineage's first cell in another session says stateLost, result and journal alike, once; a cell that failed told nothing; restartKernel and forget clear it",
    () =>
      withSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const cells = CellLineage.make()
          const first = yield* sessions.open()
          yield* cells.runCell(first, cell({ set: { a: "1" } }))
          expect(yield* cells.runCell(first, cell({ get: "a" }))).toMatchObject({ stdout: "1\n", stateLost: false })
          // The caller's sandbox is replaced (a reopen after an idle expiry): a new session, a fresh kernel.
          yield* first.close
          const second = yield* sessions.open()
          expect(cells.replaced(second.sessionId)).toBe(true)
          // Refused before it ran: no result told the caller, so the loss is still to be said.
          const refused = yield* Effect.flip(cells.runCell(second, { code: 42 as unknown as string }))
          expect(refused._tag).toBe("InvalidRequest")
          // Two cells sent together: the first says the loss, the second ran after it in the same kernel.
          const [lost, after] = yield* Effect.all(
            [cells.runCell(second, cell({ get: "a" })), cells.runCell(second, cell({ set: { b: "2" } }))],
            { concurrency: "unbounded" }
          )
          expect(lost).toMatchObject({ status: "error", stateLost: true, executionCount: 1 })
          expect(lost.error?.name).toBe("NameError")
          expect(after).toMatchObject({ status: "ok", stateLost: false })
          expect(journaledLoss(yield* events(second.sessionId))).toEqual([true, false])
          expect(journaledLoss(yield* events(first.sessionId))).toEqual([false, false])

          // A restart on request, then a new sandbox: the caller asked for a fresh state, nothing to report.
          yield* cells.restartKernel(second)
          yield* second.close
          const third = yield* sessions.open()
          expect(yield* cells.runCell(third, cell({ print: "x" }))).toMatchObject({ stateLost: false })
          // A new sandbox on request (MCP's reset_session): the same.
          cells.forget()
          yield* third.close
          const fourth = yield* sessions.open()
          expect(yield* cells.runCell(fourth, cell({ print: "x" }))).toMatchObject({ stateLost: false })
          expect(journaledLoss(yield* events(fourth.sessionId))).toEqual([false])
        })
      )
  )
})
