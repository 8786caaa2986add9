/**
 * The executor on the fake runtime, where only the fake can show it: fault injection, TestClock
 * precision, gauges, the fake warm pool. The behaviours both sides share are one contract,
 * test/support/executorContract.ts, run here on the fake (test/executor-contract.fake.test.ts)
 * and on the engine (test/executor-contract.docker.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Metric, Ref, Scope, Stream, TestClock } from "effect"
import { Executor, type ExecutorOptions } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, MemoryJournal, Projection } from "@hermes-sandbox/events"

const setup = (options: ExecutorOptions = {}) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      Executor.layer({ awaitRemoval: true, ...options }).pipe(
        Layer.provideMerge(FakeRuntime.layer()),
        Layer.provideMerge(MemoryJournal.layer())
      ),
      scope
    )
    return { scope, context }
  })

const withExecutor = <A, E>(
  options: ExecutorOptions,
  f: (ctx: {
    executor: Executor.Executor["Type"]
    control: FakeRuntimeControl["Type"]
    journal: Journal.Journal["Type"]
    close: Effect.Effect<void>
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const { context, scope } = yield* setup(options)
    const executor = yield* Effect.provide(Executor.Executor, context)
    const control = yield* Effect.provide(FakeRuntimeControl, context)
    const journal = yield* Effect.provide(Journal.Journal, context)
    return yield* f({ executor, control, journal, close: Scope.close(scope, Exit.void) }).pipe(
      Effect.ensuring(Scope.close(scope, Exit.void))
    )
  })

describe("Executor (fake runtime)", () => {
  // What a deadline does (kill, 137, output so far, ExecutionTimedOut, removal) is in the contract.
  it.effect(
    "the host-side deadline fires exactly timeoutMs after the start, not a millisecond earlier (TestClock)",
    () =>
      withExecutor({ timeoutMs: 5_000 }, ({ executor }) =>
        Effect.gen(function* () {
          const fiber = yield* Effect.fork(
            executor.executeCode({ language: "python", code: fakeProgram({ hang: true, stdout: "partial" }) })
          )
          yield* TestClock.adjust("4999 millis")
          expect(fiber.unsafePoll()).toBeNull()
          yield* TestClock.adjust("1 millis")
          expect(yield* Fiber.join(fiber)).toMatchObject({ timedOut: true, exitCode: 137 })
        })
      )
  )

  it.effect(
    "an interruption while the engine is still answering the start records the sandbox as started (it ran)",
    () =>
      withExecutor({}, ({ control, executor, journal }) =>
        Effect.gen(function* () {
          yield* Ref.set(control.faults, { startAnswerDelayMs: 500 })
          const fiber = yield* Effect.fork(
            executor.executeCode({ language: "python", code: fakeProgram({ hang: true }) })
          )
          yield* Effect.yieldNow()
          // The sandbox is running (its program could already be printing); the start call has not answered.
          while (!(yield* control.alive).some((s) => s.status === "running")) yield* TestClock.adjust("1 millis")
          const interrupted = yield* Effect.fork(Fiber.interrupt(fiber))
          yield* TestClock.adjust("500 millis")
          yield* Fiber.join(interrupted)
          expect(yield* control.alive).toEqual([])
          const all = [...(yield* journal.read().pipe(Stream.runCollect))]
          expect(all.map((e) => e.type)).toEqual([
            "ExecutionRequested",
            "ContainerCreated",
            "ContainerStarted",
            "ExecutionInterrupted",
            "ContainerDestroyed"
          ])
        })
      )
  )

  it.effect("a create failure is a typed error recorded as ExecutionFailed; no container remains", () =>
    withExecutor({}, ({ control, executor, journal }) =>
      Effect.gen(function* () {
        yield* Ref.set(control.faults, { createFails: true })
        const error = yield* Effect.flip(executor.executeCode({ language: "python", code: fakeProgram({}) }))
        expect(error._tag).toBe("ContainerFailed")
        const all = [...(yield* journal.read().pipe(Stream.runCollect))].map((e) => e.type)
        expect(all).toEqual(["ExecutionRequested", "ExecutionFailed"])
      })
    )
  )

  it.effect("a start failure removes the created container and closes the lifecycle", () =>
    withExecutor({}, ({ control, executor, journal }) =>
      Effect.gen(function* () {
        yield* Ref.set(control.faults, { startFails: true })
        const error = yield* Effect.flip(executor.executeCode({ language: "python", code: fakeProgram({}) }))
        expect(error._tag).toBe("ContainerFailed")
        expect(yield* control.alive).toEqual([])
        const all = [...(yield* journal.read().pipe(Stream.runCollect))].map((e) => e.type)
        expect(all).toEqual(["ExecutionRequested", "ContainerCreated", "ExecutionFailed", "ContainerDestroyed"])
      })
    )
  )

  it.effect(
    "the in-flight and queued gauges follow the stats, with the metric labels in effect where the executor was built",
    () =>
      Effect.gen(function* () {
        const tag = `gauges-${Math.random().toString(36).slice(2)}`
        const gauge = (name: string) =>
          Metric.value(Metric.gauge(name).pipe(Metric.tagged("test", tag))).pipe(Effect.map((s) => s.value))
        const inFlight = gauge("hermes_sandbox_in_flight")
        const queued = gauge("hermes_sandbox_queued")
        yield* withExecutor({ maxConcurrency: 1 }, ({ control, executor }) =>
          Effect.gen(function* () {
            const first = yield* Effect.fork(
              executor.executeCode({ language: "python", code: fakeProgram({ sleepMs: 1000 }) })
            )
            while ((yield* control.alive).length < 1) yield* TestClock.adjust("1 millis")
            const second = yield* Effect.fork(
              executor.executeCode({ language: "python", code: fakeProgram({ sleepMs: 1000 }) })
            )
            while ((yield* executor.stats).queued < 1) yield* Effect.yieldNow()
            expect([yield* inFlight, yield* queued]).toEqual([1, 1])
            yield* TestClock.adjust("1 second")
            yield* Fiber.join(first)
            while ((yield* control.alive).length < 1) yield* TestClock.adjust("1 millis")
            expect([yield* inFlight, yield* queued]).toEqual([1, 0])
            yield* TestClock.adjust("1 second")
            yield* Fiber.join(second)
            expect([yield* inFlight, yield* queued]).toEqual([0, 0])
          })
        ).pipe(Effect.tagMetrics("test", tag))
      })
  )

  it.effect("with whenQueueFull: wait, callers beyond the queue wait instead of failing", () =>
    withExecutor({ maxConcurrency: 1, maxQueue: 0, whenQueueFull: "wait" }, ({ executor }) =>
      Effect.gen(function* () {
        const fibers = yield* Effect.forEach([1, 2, 3], (i) =>
          Effect.fork(
            executor.executeCode({ language: "python", code: fakeProgram({ sleepMs: 10, stdout: String(i) }) })
          )
        )
        for (let i = 0; i < 10; i++) yield* TestClock.adjust("10 millis")
        const results = yield* Effect.forEach(fibers, Fiber.join)
        expect(results.map((r) => r.stdout)).toEqual(["1", "2", "3"])
      })
    )
  )

  it.live("warm pool: claims pre-started sandboxes once each, records the claim, refills and drains on close", () =>
    withExecutor({ warmPool: { size: 2, languages: ["python"] } }, ({ close, control, executor }) =>
      Effect.gen(function* () {
        // Everything the executor commits (pool streams included), kept past the journal's close.
        const all: Array<EventEnvelope> = []
        executor.unsafeSubscribe((e) => all.push(e))
        while ((yield* control.alive).filter((a) => a.status === "running").length < 2) yield* Effect.sleep("5 millis")
        // The stats say how many are ready (the pool registers a sandbox right after its start).
        while (((yield* executor.stats).warm["python"] ?? 0) < 2) yield* Effect.sleep("5 millis")
        expect((yield* executor.stats).warm).toEqual({ python: 2 })
        const results = yield* Effect.forEach([1, 2, 3], (i) =>
          executor.executeCode({ language: "python", code: fakeProgram({ stdout: String(i) }) })
        )
        expect(results.map((r) => r.stdout)).toEqual(["1", "2", "3"])
        // Never the same container twice.
        expect(new Set(results.map((r) => r.containerName)).size).toBe(3)
        const first = all.filter((e) => e.streamId === results[0]!.executionId).map((e) => e.type)
        expect(first).toEqual(["ExecutionRequested", "ContainerClaimed", "ContainerExited", "ContainerDestroyed"])
        // A request asking for other limits takes the cold path.
        const cold = yield* executor.executeCode({ language: "python", code: fakeProgram({}), memory: "64m" })
        expect(cold.containerName).toBe(`hermes-sandbox-${cold.executionId}`)
        // So does one whose timeout is longer than the executor's: a pooled sandbox's deadline label
        // was computed from the executor's timeout, and another process's sweep would take it mid-run.
        const longer = yield* executor.executeCode({
          language: "python",
          code: fakeProgram({}),
          timeoutMs: executor.config.timeoutMs + 600_000
        })
        expect(longer.containerName).toBe(`hermes-sandbox-${longer.executionId}`)
        const shorter = yield* executor.executeCode({ language: "python", code: fakeProgram({}), timeoutMs: 1_000 })
        expect(shorter.containerName).not.toBe(`hermes-sandbox-${shorter.executionId}`)
        // warmPoolOnly: what the pool fits runs as before; anything else is refused before it is recorded or created.
        const requested = () => all.filter((e) => e.type === "ExecutionRequested").length
        const before = requested()
        for (const request of [
          { memory: "64m" },
          { timeoutMs: executor.config.timeoutMs + 1 },
          { env: { A: "1" } },
          { image: "other:1" },
          { language: "javascript" }
        ]) {
          const refused = yield* Effect.flip(
            executor.executeCode({ language: "python", code: fakeProgram({}), ...request }, { warmPoolOnly: true })
          )
          expect(refused._tag === "InvalidRequest" && refused.field).toBe("warmPool")
        }
        // Nothing recorded, so nothing created (an execution's create follows its ExecutionRequested).
        expect(requested()).toBe(before)
        const fits = yield* executor.executeCode({ language: "python", code: fakeProgram({}) }, { warmPoolOnly: true })
        expect(fits.exitCode).toBe(0)
        yield* close
        expect(yield* control.alive).toEqual([])
        const states = Projection.project(all)
        for (const state of states.values()) expect(Projection.isClosed(state)).toBe(true)
        expect(all.some((e) => e.type === "ContainerDestroyed" && e.data.reason === "pool-drained")).toBe(true)
      })
    )
  )
  it.effect(
    "a create that got no answer and lands later (a frozen engine thawing) is found and removed: cold path and warm pool",
    () =>
      withExecutor({ warmPool: { size: 1, languages: ["python"] } }, ({ control, executor, close }) =>
        Effect.gen(function* () {
          const poolReady = Effect.gen(function* () {
            while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("10 millis")
          })
          yield* poolReady
          const [pooled] = yield* control.alive
          // Every create from now on: no answer, the sandbox appears 3 s later (after the removal by name found nothing).
          yield* Ref.update(control.faults, (f) => ({ ...f, createUnanswered: { landsAfterMs: 3_000 } }))
          const cold = yield* Effect.exit(executor.executeCode({ language: "javascript", code: fakeProgram({}) }))
          expect(Exit.isFailure(cold) && JSON.stringify(cold.cause)).toContain("DockerUnavailable")
          // The warm one is claimed; its refill gets no answer either.
          yield* executor.executeCode({ language: "python", code: fakeProgram({}) })
          for (let i = 0; i < 20; i++) yield* TestClock.adjust("100 millis")
          yield* Ref.update(control.faults, (f) => {
            const { createUnanswered: _, ...rest } = f
            return rest
          })
          // They land 3 s after each create; the rechecks find and remove them: what stays alive is
          // the one sandbox the refilled pool holds (the claimed one is gone with its execution).
          for (let i = 0; i < 300; i++) yield* TestClock.adjust("100 millis")
          const alive = yield* control.alive
          expect(alive.map((a) => a.name)).not.toContain(pooled!.name)
          expect(alive).toHaveLength(1)
          expect((yield* executor.stats).warm).toEqual({ python: 1 })
          // The rechecks still waiting are cut short by the close (which makes one last attempt), not awaited.
          yield* close
          expect(yield* control.alive).toEqual([])
        })
      )
  )

  it.effect(
    "warm pool: a pooled sandbox killed by an engine crash is removed once the engine is back, even after a long outage",
    () =>
      withExecutor({ warmPool: { size: 1, languages: ["python"] } }, ({ control, executor }) =>
        Effect.gen(function* () {
          const all: Array<EventEnvelope> = []
          executor.unsafeSubscribe((e) => all.push(e))
          while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("10 millis")
          const [first] = yield* control.alive
          yield* control.crashEngine
          // Down for 20 s: longer than a few quick retries (the pool used to give up after ~3 s,
          // leaving the dead sandbox until close).
          for (let i = 0; i < 200; i++) yield* TestClock.adjust("100 millis")
          yield* Ref.update(control.faults, (f) => ({ ...f, engineDown: false }))
          for (let i = 0; i < 100 && (yield* control.alive).some((a) => a.name === first!.name); i++)
            yield* TestClock.adjust("100 millis")
          expect((yield* control.alive).map((a) => a.name)).not.toContain(first!.name)
          expect(
            all.some(
              (e) =>
                e.type === "ContainerDestroyed" &&
                e.data.containerName === first!.name &&
                e.data.reason === "pool-recycled"
            )
          ).toBe(true)
          // And the pool refills.
          for (let i = 0; i < 100 && ((yield* executor.stats).warm["python"] ?? 0) < 1; i++)
            yield* TestClock.adjust("100 millis")
          expect((yield* executor.stats).warm).toEqual({ python: 1 })
        })
      )
  )
})
