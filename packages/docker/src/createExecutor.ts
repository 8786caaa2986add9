/**
 * The Promise facade, for users who do not use Effect:
 *
 *   await using executor = await createExecutor({ timeoutMs: 10_000 })
 *   const r = await executor.executeCode({ language: "python", code: "print(6*7)" })
 *
 * Errors are the SDK's typed error classes (check `error._tag` or `instanceof`),
 * never Effect's wrappers. An AbortSignal cancels an execution and removes its container.
 */
import { Exit, Layer, ManagedRuntime } from "effect"
import { Observable, type Subscriber } from "rxjs"
import { ExecutorClosed, type ExecuteOptions, type ExecuteRequest, type ExecutionResult, Executor, type ExecutorStats } from "@hermes-sandbox/core"
import type { EventEnvelope } from "@hermes-sandbox/events"
import * as DockerExecutor from "./DockerExecutor.js"
import { executorOptionsFromHermes, type HermesConfigSource } from "./HermesOptions.js"
import { type FacadeJournal, facadeJournalLayer } from "./internal/facadeJournal.js"
import { runAbortable, squashCause } from "./internal/facadeCall.js"
import { withFacadeLogger } from "./internal/facadeLogger.js"

export interface CreateExecutorOptions extends DockerExecutor.DockerExecutorOptions {
  /**
   * Where lifecycle events are recorded: "memory" (default for the library: the last 10,000
   * events), { maxEvents } (in memory, that many), "default" (the SQLite journal at the default
   * path, as the CLI uses) or { path } of a SQLite file (everything, durably).
   */
  readonly journal?: FacadeJournal
  /**
   * Apply the Hermes agent's `terminal:` configuration (true = ~/.hermes/config.yaml and TERMINAL_*)
   * under these options: image, limits, timeout, network, env and forwarded variables. A config
   * with docker_volumes is refused here (one-shot executions take no mounts): use createSession.
   */
  readonly hermesConfig?: HermesConfigSource
}

export interface ExecuteCallOptions extends ExecuteOptions {
  /** Cancels the execution; its container is removed before the promise rejects with ExecutionAborted. */
  readonly signal?: AbortSignal
}

export interface SandboxExecutor extends AsyncDisposable {
  readonly executorId: string
  executeCode(request: ExecuteRequest, options?: ExecuteCallOptions): Promise<ExecutionResult>
  /** Live lifecycle events (committed to the journal first). */
  readonly events$: Observable<EventEnvelope>
  stats(): Promise<ExecutorStats>
  /** Interrupts running executions and resolves once every container is removed. Idempotent. */
  close(): Promise<void>
}


export { abortReason, squashCause } from "./internal/facadeCall.js"

export const createExecutor = async (explicit: CreateExecutorOptions = {}): Promise<SandboxExecutor> => {
  const options = explicit.hermesConfig === undefined ? explicit : { ...executorOptionsFromHermes(explicit.hermesConfig), ...explicit }
  const layer = DockerExecutor.layer(options).pipe(Layer.provide(facadeJournalLayer(options.journal)))
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
    executorId: executor.executorId,
    executeCode,
    events$,
    stats: () => runtime.runPromise(executor.stats),
    close,
    [Symbol.asyncDispose]: close
  }
}
