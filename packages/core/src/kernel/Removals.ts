/**
 * How a sandbox is removed and its end recorded: the one removal policy of the kernel, shared by
 * the executor (an execution's sandbox), the warm pool (an unclaimed one) and sessions.
 *
 * A removal retries while the engine is away (about a minute, the caller waits); then it is not
 * given up while its owner lives: retried every 10 s in the background, and once more when the
 * owner closes. Past that, the watchdog and the next startup sweep reap the container (the sweep
 * records its end as orphan-reaped). `ContainerDestroyed` is appended only once the engine
 * confirmed the removal, exactly once.
 */
import { Effect, FiberSet, Schedule, type Scope } from "effect"
import type { JournalEvent } from "@hermes-sandbox/events"
import { ContainerFailed, type SandboxError } from "../Errors.js"
import type { SandboxRef, SandboxRuntime } from "../SandboxRuntime.js"

/** Why a sandbox was destroyed, as ContainerDestroyed records it. */
type DestroyReason = Extract<JournalEvent, { readonly type: "ContainerDestroyed" }>["data"]["reason"]

/** How long one removal attempt may take before it is retried; the engine usually answers in ~10 ms. */
const REMOVE_ATTEMPT_TIMEOUT = "20 seconds"

/** When an unanswered create's name is looked for again: a request the engine held comes through within seconds of its return. */
const UNANSWERED_RECHECKS = ["5 seconds", "20 seconds", "60 seconds"] as const

/** Retries for a removal the caller waits for: long enough to ride out an engine restart. */
const rideOutEngineRestart = Schedule.exponential("100 millis").pipe(
  Schedule.either(Schedule.spaced("2 seconds")),
  Schedule.upTo("60 seconds")
)

export interface Removals {
  /** Remove the sandbox, then record `ContainerDestroyed` in `streamId`; never fails. */
  readonly destroy: (streamId: string, container: SandboxRef, reason: DestroyReason) => Effect.Effect<void>
  /** Make sure a sandbox the journal never saw does not exist (retried like `destroy`, no event); never fails. */
  readonly removeUnrecorded: (ref: SandboxRef) => Effect.Effect<void>
  /**
   * A create that got no answer: it may have created the sandbox, or may still (a frozen engine runs
   * the request when it thaws, after a removal by name found nothing). Removed by name now, looked
   * for again later in the background, and once more when the owner closes. No event.
   */
  readonly removeUnanswered: (name: string) => Effect.Effect<void>
  /**
   * Remove it now, retried like `destroy`, failing if the engine never confirms: for a caller that
   * cannot go on while it exists (a persistent sandbox replaced under the same name). No event.
   */
  readonly removeNow: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
}

interface Straggler {
  readonly streamId: string
  readonly container: SandboxRef
  readonly reason: DestroyReason
}

/**
 * Removals owned by the current scope. Its close stops the background retries, then gives each
 * straggler a last attempt (the finalizers are registered in that order here, so make this before
 * anything whose own finalizers may still destroy sandboxes).
 */
export const make = (deps: {
  readonly runtime: SandboxRuntime["Type"]
  readonly append: (streamId: string, event: JournalEvent) => Effect.Effect<unknown, unknown>
  /** Log prefix naming the owner, e.g. "warm pool: ". */
  readonly logPrefix?: string
}): Effect.Effect<Removals, never, Scope.Scope> =>
  Effect.gen(function* () {
    const prefix = deps.logPrefix ?? ""
    const stragglers = new Map<string, Straggler>()
    const attempt = (container: SandboxRef) =>
      deps.runtime.remove(container).pipe(
        Effect.timeoutFail({
          duration: REMOVE_ATTEMPT_TIMEOUT,
          onTimeout: () =>
            new ContainerFailed({
              operation: "remove",
              containerName: container.name,
              message: `remove ${container.name}: no answer within ${REMOVE_ATTEMPT_TIMEOUT}`
            })
        })
      )
    const record = (s: Straggler) =>
      deps.append(s.streamId, {
        type: "ContainerDestroyed",
        data: { containerName: s.container.name, containerId: s.container.id, reason: s.reason }
      })

    /** One attempt; once the engine confirms, forgetting it and recording the fact cannot be interrupted apart. */
    const removeStraggler = (s: Straggler) =>
      attempt(s.container).pipe(
        Effect.zipRight(
          Effect.uninterruptible(Effect.suspend(() => (stragglers.delete(s.container.id) ? record(s) : Effect.void)))
        )
      )

    const unanswered = new Set<string>()
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(
        Effect.forEach(
          stragglers.values(),
          (s) =>
            removeStraggler(s).pipe(
              Effect.catchAllCause((cause) =>
                Effect.logWarning(
                  `${prefix}could not remove ${s.container.name}; the watchdog and the sweep will reap it`,
                  cause
                )
              )
            ),
          { concurrency: 8, discard: true }
        ),
        // One attempt each: by now the engine has had every chance to run a create it held.
        Effect.forEach(unanswered, (name) => attempt({ id: name, name }).pipe(Effect.ignore), {
          concurrency: 8,
          discard: true
        })
      )
    )
    // Made after that finalizer, so closed (its retries interrupted) before the last attempts.
    const late = yield* FiberSet.make<void, never>()

    const destroy = (streamId: string, container: SandboxRef, reason: DestroyReason) =>
      attempt(container).pipe(
        Effect.retry(rideOutEngineRestart),
        Effect.zipRight(record({ streamId, container, reason })),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `${prefix}could not remove ${container.name} within a minute; retrying in the background`,
            cause
          ).pipe(
            Effect.zipRight(
              Effect.suspend(() => {
                const straggler = { streamId, container, reason }
                stragglers.set(container.id, straggler)
                // Interruptible: forked from a finalizer or an uninterruptible create, it would inherit
                // that, and the owner's close (which interrupts `late`) would wait for it.
                return FiberSet.run(
                  late,
                  Effect.interruptible(
                    removeStraggler(straggler).pipe(Effect.retry(Schedule.spaced("10 seconds")), Effect.ignore)
                  )
                )
              })
            ),
            Effect.asVoid
          )
        )
      )

    const removeNow = (ref: SandboxRef) => attempt(ref).pipe(Effect.retry(rideOutEngineRestart))

    const removeUnrecorded = (ref: SandboxRef) =>
      removeNow(ref).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`${prefix}could not make sure ${ref.name} does not exist; the sweep will reap it`, cause)
        )
      )

    const removeUnanswered = (name: string) =>
      removeUnrecorded({ id: name, name }).pipe(
        Effect.zipRight(Effect.sync(() => void unanswered.add(name))),
        Effect.zipRight(
          FiberSet.run(
            late,
            Effect.forEach(
              UNANSWERED_RECHECKS,
              (delay) => Effect.sleep(delay).pipe(Effect.zipRight(attempt({ id: name, name }).pipe(Effect.ignore))),
              { discard: true }
            ).pipe(
              Effect.zipRight(Effect.sync(() => void unanswered.delete(name))),
              Effect.interruptible // see the stragglers' retries above
            )
          )
        ),
        Effect.asVoid
      )

    return { destroy, removeUnrecorded, removeNow, removeUnanswered }
  })
