/**
 * Model-based test of the executor on the fake runtime: fast-check generates random
 * interleavings of executions (exit codes, sleeps, hangs, OOM), aborts, the passing of
 * time (TestClock: deadlines, sleeps, removal retries), close, and runtime faults (create
 * fails, start fails, the engine freezes and comes back, the engine crashes). The model and
 * its invariants live in ./support/executorModel.ts; test/chaos/model.docker.test.ts runs the
 * same model, shorter, on the real engine.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Ref, Runtime, Scope, TestClock } from "effect"
import fc from "fast-check"
import { Executor, type ExecutorOptions } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"
import {
  commands,
  finish,
  initialModel,
  initialReal,
  type ModelSystem,
  type ProgramSpec
} from "./support/executorModel.js"

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0))

const fakeSystem = (runtime: Runtime.Runtime<never>, options: ExecutorOptions & { maxConcurrency: number }) =>
  Runtime.runPromise(runtime)(
    Effect.gen(function* () {
      // The journal outlives the executor, so the end-of-run checks can read it.
      const journalScope = yield* Scope.make()
      const journalContext = yield* Layer.buildWithScope(MemoryJournal.layer(), journalScope)
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Executor.layer(options).pipe(
          Layer.provideMerge(FakeRuntime.layer()),
          Layer.provide(Layer.succeedContext(journalContext))
        ),
        scope
      )
      const executor = Context.get(context, Executor.Executor)
      const control = Context.get(context, FakeRuntimeControl)
      const journal = Context.get(journalContext, Journal.Journal)
      const system: ModelSystem = {
        runtime,
        maxConcurrency: options.maxConcurrency,
        executeCode: executor.executeCode,
        stats: executor.stats,
        journal,
        alive: control.alive.pipe(Effect.map((list) => list.map((s) => `${s.name} (${s.status})`))),
        advance: (ms) => TestClock.adjust(`${ms} millis`),
        // Fibers of the fake run on the Effect scheduler: a few macrotask turns let all of them run.
        settle: async () => {
          for (let i = 0; i < 6; i++) await tick()
        },
        close: Scope.close(scope, Exit.void),
        request: (program: ProgramSpec, timeoutMs: number) => ({
          language: "python",
          timeoutMs,
          code:
            program.kind === "hang"
              ? fakeProgram({ hang: true, stdout: program.stdout })
              : program.kind === "oom"
                ? fakeProgram({ oom: true })
                : fakeProgram({ exitCode: program.exitCode, sleepMs: program.sleepMs, stdout: program.stdout })
        }),
        faults: {
          set: (fault, on) => Ref.update(control.faults, (f) => ({ ...f, [fault]: on })),
          crash: control.crashEngine,
          clear: Ref.set(control.faults, {})
        }
      }
      return { system, createdCount: control.createdCount, dispose: Scope.close(journalScope, Exit.void) }
    })
  )

const program: fc.Arbitrary<ProgramSpec> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("exit" as const),
      exitCode: fc.constantFrom(0, 1, 2, 42, 137, 255),
      sleepMs: fc.constantFrom(0, 50, 400, 2_500),
      stdout: fc.constantFrom("", "out\n", "ünï\n")
    })
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("hang" as const), stdout: fc.constantFrom("", "partial") }) },
  { weight: 1, arbitrary: fc.constant({ kind: "oom" as const }) }
)

describe("executor model (fake runtime)", () => {
  it.effect(
    "random executions, aborts, time, faults and close: nothing leaks, every lifecycle closes, results agree with events",
    () =>
      Effect.gen(function* () {
        const runtime = yield* Effect.runtime<never>()
        const t0 = Date.now()
        let runs = 0
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(
              fc.record({
                maxConcurrency: fc.integer({ min: 1, max: 3 }),
                maxQueue: fc.integer({ min: 0, max: 3 }),
                whenQueueFull: fc.constantFrom("fail" as const, "wait" as const),
                awaitRemoval: fc.boolean()
              }),
              commands(
                {
                  program,
                  timeoutMs: fc.constantFrom(300, 1_000, 5_000),
                  advanceMs: fc.constantFrom(1, 60, 350, 1_200, 6_000),
                  faults: true
                },
                30
              ),
              async (options, cmds) => {
                runs++
                const { createdCount, dispose, system } = await fakeSystem(runtime, { ...options, timeoutMs: 1_000 })
                const real = initialReal(system)
                try {
                  await fc.asyncModelRun(() => ({ model: initialModel(), real }), cmds)
                  await finish(real, { createdCount })
                } finally {
                  await Runtime.runPromise(runtime)(dispose)
                }
              }
            ),
            { numRuns: 150, endOnFailure: true }
          )
        )
        console.log(`executor model (fake): ${runs} runs in ${Date.now() - t0} ms`)
        expect(runs).toBeGreaterThanOrEqual(150)
      }),
    300_000
  )
})
