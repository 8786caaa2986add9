/**
 * The Promise facades' one bridge from an Effect call to a Promise (executors and sessions alike):
 * a typed error comes out as itself, an AbortSignal interrupts the call, and an interrupted call
 * rejects with ExecutionAborted naming its execution (its journal stream), whose
 * ExecutionInterrupted event keeps the abort's reason.
 */
import { Cause, Effect, Exit, type ManagedRuntime, Option } from "effect"
import { ExecutionAborted, type ExecuteOptions } from "@hermes-sandbox/core"
import { activeParentSpan } from "@hermes-sandbox/core/Tracing"

/** Turn an Effect failure into the typed error itself (not a FiberFailure wrapper). */
export const squashCause = (cause: Cause.Cause<unknown>): unknown => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return failure.value
  return Cause.squash(cause)
}

/** An AbortSignal's reason as text: an Error's message, or the value itself. */
export const abortReason = (signal: AbortSignal): string => {
  const r: unknown = signal.reason
  if (r === undefined) return "aborted"
  if (r instanceof Error)
    return r.name === "TimeoutError" || r.name === "AbortError" ? `${r.name}: ${r.message}` : r.message
  return String(r)
}

export interface CallWording {
  /** "execution" or "call", in messages. */
  readonly noun: string
  /** Why it was interrupted without an abort (the facade was closed). */
  readonly closedReason: string
  /** What the interruption left behind, e.g. "its container was removed". */
  readonly cleaned: string
}

/** Run one call; `make` gets the hooks that learn its execution id and give the journal the abort's reason. */
export const runAbortable = async <A, R>(
  runtime: ManagedRuntime.ManagedRuntime<R, unknown>,
  make: (hooks: ExecuteOptions) => Effect.Effect<A, unknown, R>,
  signal: AbortSignal | undefined,
  given: ExecuteOptions,
  wording: CallWording
): Promise<A> => {
  if (signal?.aborted) {
    throw new ExecutionAborted({
      executionId: "",
      reason: abortReason(signal),
      message: `aborted before it started (no ${wording.noun} was requested)`
    })
  }
  let executionId = ""
  const hooks: ExecuteOptions = {
    ...given,
    onExecutionId: (id) => {
      executionId = id
      given.onExecutionId?.(id)
    },
    interruptReason: () => (signal?.aborted ? abortReason(signal) : undefined)
  }
  // The caller's active OpenTelemetry span, read now (before anything awaits), parents the call's spans.
  const parent = activeParentSpan()
  const call = make(hooks)
  const exit = await runtime.runPromiseExit(
    parent === undefined ? call : Effect.withParentSpan(call, parent),
    signal ? { signal } : undefined
  )
  if (Exit.isSuccess(exit)) return exit.value
  if (Cause.isInterruptedOnly(exit.cause)) {
    const reason = signal?.aborted ? abortReason(signal) : wording.closedReason
    // A file operation has no execution id (it is not journaled as an execution).
    throw new ExecutionAborted({
      executionId,
      reason,
      message: `${wording.noun}${executionId === "" ? "" : ` ${executionId}`} aborted: ${reason}; ${wording.cleaned}`
    })
  }
  throw squashCause(exit.cause)
}
