/**
 * The executor's Promise facade over any layer that provides an Executor: createExecutor hands it
 * the Docker layer, createFakeExecutor (./testing) the fake runtime's, so what a test sees of the
 * fake (errors, abort, events$, stats, close) is what the real facade does, by construction.
 */
import { Exit, type Layer, ManagedRuntime } from "effect"
import type { Subscriber } from "rxjs"
// The class alone, not rxjs's index (events/src/Rx.ts says why).
import { Observable } from "rxjs/internal/Observable"
import { ExecutorClosed, type ExecuteRequest, Executor } from "@hermes-sandbox/core"
import type { EventEnvelope, Journal } from "@hermes-sandbox/events"
import type { ExecuteCallOptions, SandboxExecutor } from "../createExecutor.js"
import { runAbortable, squashCause } from "./facadeCall.js"
import { withFacadeLogger } from "./facadeLogger.js"
import { facadeReplay } from "./facadeReplay.js"

export interface ExecutorFacade<R> {
  readonly executor: SandboxExecutor
  /** The built runtime, for a caller that needs more of the layer's services (the fake's control handle). */
  readonly runtime: ManagedRuntime.ManagedRuntime<Executor.Executor | Journal.Journal | R, unknown>
}

/**
 * Build `layer` (with the facades' stderr logger) and wrap its Executor, and its Journal for
 * replay; a failure to build rejects with the typed error.
 */
export const openExecutorFacade = async <R>(
  layer: Layer.Layer<Executor.Executor | Journal.Journal | R, unknown>
): Promise<ExecutorFacade<R>> => {
  const runtime = ManagedRuntime.make(withFacadeLogger(layer))
  const built = await runtime.runPromiseExit(Executor.Executor)
  if (Exit.isFailure(built)) {
    await runtime.dispose()
    throw squashCause(built.cause)
  }
  const executor = built.value
  let closing: Promise<void> | undefined

  const executeCode = async (request: ExecuteRequest, opts: ExecuteCallOptions = {}) => {
    if (closing !== undefined) throw new ExecutorClosed({ message: "the executor is closed" })
    const { signal, ...given } = opts
    return runAbortable(runtime, (hooks) => executor.executeCode(request, hooks), signal, given, {
      noun: "execution",
      closedReason: "the executor was closed",
      cleaned: "its container was removed"
    })
  }

  // Registered synchronously on subscribe, so an execution started right after sees all its events;
  // completed once close() has removed every container (its last events delivered).
  const subscribers = new Set<Subscriber<EventEnvelope>>()
  let completed = false
  const events$ = new Observable<EventEnvelope>((subscriber) => {
    if (completed) return subscriber.complete()
    subscribers.add(subscriber)
    const unsubscribe = executor.unsafeSubscribe((event) => subscriber.next(event))
    return () => {
      subscribers.delete(subscriber)
      unsubscribe()
    }
  })

  const close = () =>
    (closing ??= runtime.dispose().finally(() => {
      completed = true
      for (const s of [...subscribers]) s.complete()
    }))

  return {
    runtime,
    executor: {
      executorId: executor.executorId,
      executeCode,
      events$,
      replay: facadeReplay(
        runtime,
        () => closing !== undefined,
        () =>
          new ExecutorClosed({
            message: "the executor is closed: replay while it is open (its journal closed with it)"
          })
      ),
      stats: () => runtime.runPromise(executor.stats),
      metrics: () => runtime.runPromise(executor.metrics),
      close,
      [Symbol.asyncDispose]: close
    }
  }
}
