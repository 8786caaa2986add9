/**
 * Owning a sandbox: the kernel's one acquire step, used by one-shot executions, the warm pool and
 * sessions. "Where is a container created?" has one answer: `create` below.
 *
 * A sandbox is created, OWNED (the caller's removal registered) and RECORDED (`ContainerCreated`,
 * durable before start) in one uninterruptible step: an interruption in between would either orphan
 * a container or destroy (and record destroying) one the journal never saw created. Then it is
 * attached and its exit armed (both before start, see SandboxRuntime) and started together with its
 * `ContainerStarted` record. A warm-pool claim is the same step with `ContainerClaimed`.
 *
 * The result is one started-sandbox handle, the shape of @effect/platform's
 * `CommandExecutor.start -> Process` and of testcontainers' started container.
 */
import { Effect, Option } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import type { SandboxError } from "../Errors.js"
import type {
  AttachedIO,
  ExitStatus,
  OutputReceiver,
  SandboxCreated,
  SandboxRef,
  SandboxRuntime,
  SandboxSpec
} from "../SandboxRuntime.js"
import { commandFeatures, RUNNER_FEATURES, type RunnerFeature, withFeatures } from "../RunnerProtocol.js"

/** A sandbox that runs, attached, with its exit armed. */
export interface StartedSandbox {
  readonly container: SandboxCreated
  /** The supervisor's stdin, and the end of its output streams (`closed`). */
  readonly io: AttachedIO
  /** The engine's exit report (armed before start; can be awaited again after a kill). */
  readonly exit: Effect.Effect<ExitStatus, SandboxError>
  /** SIGKILL the whole sandbox. */
  readonly kill: Effect.Effect<void, SandboxError>
}

/** A started sandbox waiting in the warm pool for its one program. */
export interface WarmSandbox extends StartedSandbox {
  readonly poolStreamId: string
  /** Where output goes once claimed (before: discarded — the supervisor writes nothing before its program). */
  readonly bind: (receiver: OutputReceiver) => void
}

export interface KernelDeps {
  readonly runtime: SandboxRuntime["Type"]
  readonly append: (streamId: string, event: JournalEvent) => Effect.Effect<unknown, JournalError>
}

export interface CreateInput {
  /** The journal stream that records this sandbox's life. */
  readonly streamId: string
  readonly spec: SandboxSpec
  /** Register the removal (a scope finalizer, the pool's set, the session's handle); runs inside the step. */
  readonly own: (container: SandboxCreated) => Effect.Effect<void>
  /** Made ahead of demand by the warm pool (recorded as such). */
  readonly pooled?: boolean
  /** A warm-pool sandbox's: when it is recycled unless claimed (ms since the epoch), for ContainerCreated. */
  readonly deadline?: number
  /** What the run the sandbox is made for needs of its supervisor (added to SandboxSpec.requires). */
  readonly requires?: ReadonlyArray<RunnerFeature> | undefined
  /**
   * The create got no answer (the engine died, the call timed out): it may still have created the
   * container, which nothing would own. Called with its name; the caller removes it by name.
   */
  readonly unanswered?: (name: string) => Effect.Effect<void>
}

/**
 * What the image's supervisor must be able to do for a sandbox made with this input: what the spec
 * and the run say, what its command asks (`--preload`), and for a warm-pool sandbox every feature,
 * since any request may claim it. The runtime refuses the create when the image lacks one.
 */
const required = (input: CreateInput): SandboxSpec => {
  const requires = withFeatures(
    withFeatures(input.spec.requires, input.requires),
    withFeatures(commandFeatures(input.spec.command), input.pooled === true ? RUNNER_FEATURES : [])
  )
  return requires.length === 0 ? input.spec : { ...input.spec, requires }
}

/** Create, own and record `ContainerCreated`, in one uninterruptible step. */
export const create = (
  deps: KernelDeps,
  input: CreateInput
): Effect.Effect<SandboxCreated, SandboxError | JournalError> =>
  deps.runtime.create(required(input)).pipe(
    Effect.tap(input.own),
    Effect.tap((c) =>
      deps.append(input.streamId, {
        type: "ContainerCreated",
        data: {
          containerName: c.name,
          containerId: c.id,
          imageId: c.imageId,
          ...(input.pooled === true ? { pooled: true } : {}),
          ...(input.deadline === undefined ? {} : { deadline: input.deadline })
        }
      })
    ),
    Effect.tapErrorTag("DockerUnavailable", () =>
      input.unanswered === undefined ? Effect.void : input.unanswered(input.spec.name)
    ),
    Effect.uninterruptible
  )

/**
 * Start it and record `ContainerStarted` in one uninterruptible step (bounded by the start call's
 * own deadline): the program may print before the engine answers the start, so an interruption in
 * between would record as never started a sandbox that ran.
 */
export const startRecorded = (
  deps: KernelDeps,
  streamId: string,
  container: SandboxRef
): Effect.Effect<void, SandboxError | JournalError> =>
  deps.runtime
    .start(container)
    .pipe(
      Effect.zipRight(deps.append(streamId, { type: "ContainerStarted", data: { containerId: container.id } })),
      Effect.uninterruptible
    )

/** Attach and arm the exit (both before start), then start and record. */
export const start = (
  deps: KernelDeps,
  streamId: string,
  container: SandboxCreated,
  receiver: OutputReceiver
): Effect.Effect<StartedSandbox, SandboxError | JournalError> =>
  Effect.gen(function* () {
    const io = yield* deps.runtime.attach(container, receiver)
    const exit = yield* deps.runtime.armExit(container)
    yield* startRecorded(deps, streamId, container)
    return { container, io, exit, kill: deps.runtime.kill(container) }
  })

/**
 * Create (owned, recorded) and start: a fresh one-shot sandbox, for the run whose streams
 * `receiver` takes (what that run needs of the supervisor is required of the image).
 */
export const createStarted = (deps: KernelDeps, input: CreateInput & { readonly receiver: OutputReceiver }) =>
  Effect.flatMap(create(deps, { ...input, requires: input.receiver.requires }), (container) =>
    start(deps, input.streamId, container, input.receiver)
  )

/**
 * Claim a warm sandbox, own it and record `ContainerClaimed` in one uninterruptible step, like a
 * create; then route its output to `receiver`. None when the pool has none ready.
 */
export const claim = (
  deps: KernelDeps,
  input: {
    readonly streamId: string
    readonly take: Effect.Effect<Option.Option<WarmSandbox>>
    readonly own: (container: SandboxCreated) => Effect.Effect<void>
    readonly receiver: OutputReceiver
  }
): Effect.Effect<Option.Option<StartedSandbox>, JournalError> =>
  input.take.pipe(
    Effect.tap((warm) =>
      Option.isNone(warm)
        ? Effect.void
        : input.own(warm.value.container).pipe(
            Effect.zipRight(
              deps.append(input.streamId, {
                type: "ContainerClaimed",
                data: {
                  containerName: warm.value.container.name,
                  containerId: warm.value.container.id,
                  poolStreamId: warm.value.poolStreamId
                }
              })
            ),
            Effect.zipRight(Effect.sync(() => warm.value.bind(input.receiver)))
          )
    ),
    Effect.uninterruptible
  )
