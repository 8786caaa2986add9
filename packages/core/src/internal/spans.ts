/**
 * The executor's and sessions' spans (Tracing.ts says which, and their attributes): made only when
 * a tracer other than Effect's built-in one is in effect, so that without one nothing is made.
 *
 * An execution's phase spans come from the one projection of its phases (Metrics.ts, through
 * `addPhaseObserver`), made with the journal's timestamps under the execution's span as each phase
 * is measured; the outcome attribute comes from the same place (its terminal event).
 */
import { Cause, Context, Effect, Exit, Option, type Scope, type Tracer } from "effect"
import { MAX_TRACKED, type ExecutionOutcome, type PhaseObserver, type SandboxMetrics } from "../Metrics.js"
import { ATTRIBUTE, boundAttribute, isBuiltinTracer, SpanName } from "../Tracing.js"

/** A span of ours and the tracer that made it (for its children with explicit times). */
export interface Traced {
  readonly span: Tracer.Span
  readonly tracer: Tracer.Tracer
}

type Attributes = Readonly<Record<string, string | number | boolean | undefined>>

const bounded = (attributes: Attributes): Record<string, string | number | boolean> => {
  const out: Record<string, string | number | boolean> = {}
  for (const [k, v] of Object.entries(attributes))
    if (v !== undefined) out[k] = typeof v === "string" ? boundAttribute(v) : v
  return out
}

/** Set an attribute on our span, if there is one (string values bounded). */
export const annotate = (traced: Traced | undefined, key: string, value: string | number | boolean): void => {
  traced?.span.attribute(key, typeof value === "string" ? boundAttribute(value) : value)
}

const statusError = (name: string, message: string): Error => {
  const error = new Error(boundAttribute(message))
  error.name = boundAttribute(name)
  // No stack of ours in the span's exception event: its name and message only.
  error.stack = `${error.name}: ${error.message}`
  return error
}

/** Outcomes that end a span with an OK status. */
const OK_OUTCOMES: ReadonlySet<string> = new Set(["ok", "completed"])

/**
 * What a span ends with: a result, or an interruption, whose recorded outcome is not ok as an error
 * named by the outcome (an interrupted execution: "outcome: interrupted", not the OK status
 * @effect/opentelemetry gives an interruption); an interruption with no outcome as it is; a
 * failure as its tag and message, bounded (never the error itself, whose text may carry what the
 * sandbox wrote).
 */
const statusExit = (exit: Exit.Exit<unknown, unknown>, outcome: string | undefined): Exit.Exit<unknown, unknown> => {
  const notOk = outcome !== undefined && !OK_OUTCOMES.has(outcome)
  if (Exit.isFailure(exit)) {
    if (Cause.isInterruptedOnly(exit.cause))
      return notOk ? Exit.fail(statusError("Outcome", `outcome: ${outcome}`)) : exit
    const failure: unknown = Option.getOrUndefined(
      Option.orElse(Cause.failureOption(exit.cause), () => Cause.dieOption(exit.cause))
    )
    const tag = (failure as { readonly _tag?: unknown } | undefined)?._tag
    const message = (failure as { readonly message?: unknown } | undefined)?.message
    return Exit.fail(
      statusError(typeof tag === "string" ? tag : "Error", typeof message === "string" ? message : String(failure))
    )
  }
  return notOk ? Exit.fail(statusError("Outcome", `outcome: ${outcome}`)) : Exit.void
}

/**
 * `body` inside a span named `name` (a child of the caller's span), when a tracer other than
 * Effect's built-in one is in effect; else `body(undefined)` and nothing else. The span ends with
 * `body`'s exit, bounded, or an error status when `outcome` says the result was not ok.
 */
export const spanned = <A, E, R>(
  name: string,
  attributes: Attributes,
  body: (traced: Traced | undefined) => Effect.Effect<A, E, R>,
  outcome?: (span: Tracer.Span) => string | undefined
): Effect.Effect<A, E, R> =>
  Effect.flatMap(isBuiltinTracer, (builtin) =>
    builtin
      ? body(undefined)
      : Effect.flatMap(
          Effect.zip(Effect.tracer, Effect.makeSpan(name, { attributes: bounded(attributes) })),
          ([tracer, span]) =>
            Effect.withParentSpan(body({ span, tracer }), span).pipe(
              Effect.onExit((exit) =>
                Effect.clockWith((clock) =>
                  Effect.sync(() => span.end(clock.unsafeCurrentTimeNanos(), statusExit(exit, outcome?.(span))))
                )
              )
            )
        )
  )

const NS_PER_MS = BigInt(1_000_000)
const nanos = (ms: number) => BigInt(Math.round(ms)) * NS_PER_MS
const max = (a: bigint, b: bigint) => (a > b ? a : b)

/** Executions' spans, following their phases and outcomes (from one `Metrics`' projection). */
export interface ExecutionSpans {
  /** From now on the execution's phases become children of `traced`, its outcome an attribute of it. */
  readonly track: (executionId: string, traced: Traced) => void
  /** The outcome recorded for a span tracked here (its terminal event's). */
  readonly outcome: (span: Tracer.Span) => ExecutionOutcome | undefined
}

interface Entry {
  readonly traced: Traced
  /** A sandbox was made or claimed: its removal, the last phase, is still to come. */
  acquired: boolean
}

/**
 * Registered with `metrics` on the first execution tracked (never without a tracer), unregistered
 * with the scope. At most MAX_TRACKED executions followed (the oldest dropped past it).
 */
export const makeExecutionSpans = (metrics: SandboxMetrics): Effect.Effect<ExecutionSpans, never, Scope.Scope> =>
  Effect.gen(function* () {
    const tracked = new Map<string, Entry>()
    const outcomes = new WeakMap<Tracer.Span, ExecutionOutcome>()
    const observer: PhaseObserver = {
      phase: (executionId, phase, fromMs, toMs) => {
        const entry = tracked.get(executionId)
        if (entry === undefined) return
        const { span, tracer } = entry.traced
        // The journal's milliseconds, within the execution's span where they start.
        const start = max(nanos(fromMs), span.status.startTime)
        const child = tracer.span(
          `${SpanName.phasePrefix}${phase}`,
          Option.some(span),
          Context.empty(),
          [],
          start,
          "internal"
        )
        child.attribute(ATTRIBUTE.phase, phase)
        child.attribute(ATTRIBUTE.executionId, executionId)
        child.end(max(nanos(toMs), start), Exit.void)
        if (phase === "create" || phase === "claim") entry.acquired = true
        if (phase === "removal") tracked.delete(executionId)
      },
      ended: (executionId, outcome) => {
        const entry = tracked.get(executionId)
        if (entry === undefined) return
        entry.traced.span.attribute(ATTRIBUTE.outcome, outcome)
        outcomes.set(entry.traced.span, outcome)
        if (!entry.acquired) tracked.delete(executionId)
      }
    }
    let unregister: (() => void) | undefined
    yield* Effect.addFinalizer(() => Effect.sync(() => unregister?.()))
    return {
      track: (executionId, traced) => {
        unregister ??= metrics.addPhaseObserver(observer)
        if (tracked.size >= MAX_TRACKED) {
          const oldest = tracked.keys().next()
          if (oldest.done !== true) tracked.delete(oldest.value)
        }
        tracked.set(executionId, { traced, acquired: false })
      },
      outcome: (span) => outcomes.get(span)
    }
  })

/** The session operations a `hermes_sandbox.session_call` span names (its `hermes_sandbox.operation`). */
export type SessionOperation =
  | "run"
  | "run_code"
  | "cell"
  | "read_file"
  | "write_file"
  | "list_files"
  | "remove_file"
  | "patch_file"
  | "search_files"
  | "restart_kernel"
  | "spawn"

/**
 * The one way a session's operations are traced (session/handle.ts): `hermes_sandbox.session_call`
 * naming the operation, with the session's id and container; its outcome is what the operation
 * annotated (a call's terminal event, a cell's status), else `ok` once it succeeded; a failure ends
 * it with an error status (its tag and bounded message).
 */
export const sessionSpans =
  (sessionId: string, containerName: string) =>
  <A, E>(operation: SessionOperation, body: (traced: Traced | undefined) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    spanned(
      SpanName.sessionCall,
      { [ATTRIBUTE.sessionId]: sessionId, [ATTRIBUTE.containerName]: containerName, [ATTRIBUTE.operation]: operation },
      (traced) =>
        traced === undefined
          ? body(undefined)
          : Effect.tap(body(traced), () => {
              if (!traced.span.attributes.has(ATTRIBUTE.outcome)) annotate(traced, ATTRIBUTE.outcome, "ok")
            }),
      (span) => span.attributes.get(ATTRIBUTE.outcome) as string | undefined
    )
