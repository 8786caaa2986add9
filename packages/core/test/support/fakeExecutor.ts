/** An executor over a fresh fake engine and memory journal, for one case; everything ends with it. */
import { Effect, Exit, Fiber, Layer, Scope, TestClock } from "effect"
import { Executor, type ExecutorOptions } from "@hermes-sandbox/core"
import { FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"

export interface FakeExecutorContext {
  readonly executor: Executor.Executor["Type"]
  readonly control: FakeRuntimeControl["Type"]
  readonly journal: Journal.Journal["Type"]
}

/** `journal`: another journal's layer than a memory one (a PostgreSQL journal in the journal tier). */
export const withFakeExecutor = <A, E>(
  options: ExecutorOptions,
  f: (ctx: FakeExecutorContext) => Effect.Effect<A, E>,
  journal: Layer.Layer<Journal.Journal, unknown> = MemoryJournal.layer()
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      Executor.layer({ awaitRemoval: true, ...options }).pipe(
        Layer.provideMerge(FakeRuntime.layer()),
        Layer.provideMerge(journal)
      ),
      scope
    ).pipe(Effect.orDie)
    const executor = yield* Effect.provide(Executor.Executor, context)
    const control = yield* Effect.provide(FakeRuntimeControl, context)
    const events = yield* Effect.provide(Journal.Journal, context)
    return yield* f({ executor, control, journal: events }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

/** Run to its end, the TestClock moved along (the fake's sleeps and the deadline); its outcome as an Either. */
export const settle = <A, E>(run: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(Effect.either(run))
    while (fiber.unsafePoll() === null) yield* TestClock.adjust("100 millis")
    return yield* Fiber.join(fiber)
  })

/** Host tools for a mix of tool calls: `add` answers, `boom` fails. */
export const addAndBoom = {
  add: { handler: ({ a, b }: { a: number; b: number }) => a + b },
  boom: {
    handler: () => {
      throw new Error("boom")
    }
  }
}
