/**
 * How time passes in the behaviour contracts (executorContract, sessionContract): the fake runs
 * under the TestClock, so a 2 s deadline or a 3 s idle lifetime costs nothing; the engine runs on
 * live time. A contract waits only through these helpers, never with a bare sleep or timeout, so
 * the same case runs in both worlds.
 */
import { it, type Vitest } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, type Scope, TestClock } from "effect"

export interface ContractTime {
  /** Runs one case: scoped to the test, under the TestClock or live. */
  readonly it: Vitest.Tester<Scope.Scope>
  /** Lets this much time pass: TestClock.adjust for the fake, a sleep on the engine. */
  readonly pass: (ms: number) => Effect.Effect<void>
}

export const testClockTime: ContractTime = { it: it.scoped, pass: (ms) => TestClock.adjust(Duration.millis(ms)) }
export const liveTime: ContractTime = { it: it.scopedLive, pass: (ms) => Effect.sleep(Duration.millis(ms)) }

/** Lets time pass in steps until `check` holds; dies naming `what` after `withinMs`. */
export const eventually = <E, R>(
  time: ContractTime,
  what: string,
  check: Effect.Effect<boolean, E, R>,
  withinMs = 20_000,
  stepMs = 10
) =>
  Effect.gen(function* () {
    for (let waited = 0; ; waited += stepMs) {
      if (yield* check) return
      if (waited >= withinMs) return yield* Effect.dieMessage(`not within ${withinMs} ms: ${what}`)
      yield* time.pass(stepMs)
    }
  })

/** Joins a fiber, letting time pass while it runs. */
export const joinPassing = <A, E>(time: ContractTime, fiber: Fiber.Fiber<A, E>, stepMs = 50) =>
  Effect.gen(function* () {
    while (Option.isNone(yield* Fiber.poll(fiber))) yield* time.pass(stepMs)
    return yield* Fiber.join(fiber)
  })
