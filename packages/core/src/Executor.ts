/**
 * The Executor service: turns an `execute_code` request into exactly one
 * single-use sandbox, supervised as a fiber owned by the executor's scope.
 *
 * One execution, as data flows:
 *   validate -> take a slot -> ExecutionRequested
 *   create (the only acquire step) -> ContainerCreated (durable before start)
 *   attach + arm exit -> start -> ContainerStarted -> write program to stdin
 *   exit | deadline (kill) -> ContainerExited | ExecutionTimedOut
 *   remove (every path, by the scope's finalizer) -> ContainerDestroyed
 *
 * Closing the executor's scope interrupts every running execution (their
 * finalizers remove the containers) and then waits for background removals,
 * so `close()` resolves only when every container is gone.
 */
import { Context, Deferred, Effect, Exit, Fiber, FiberRef, FiberMap, FiberSet, Layer, Metric, Option, Ref, Scope, Stream } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type EventEnvelope, Journal, type JournalError, type JournalEvent } from "@hermes-sandbox/events"
import { ContainerFailed, ExecutorClosed, type InvalidRequest, QueueFull, type SandboxError } from "./Errors.js"
import { type ExecuteRequest, type ExecutionPlan, planExecution } from "./ExecutionRequest.js"
import { type ExecutionResult, toExecutionResult } from "./ExecutionResult.js"
import { type ExecutorOptions, resolveExecutorConfig, type ResolvedExecutorConfig } from "./ExecutorConfig.js"
import { ContainerNamePrefix, Label, ProjectName } from "./Labels.js"
import { makePublisher } from "./internal/publisher.js"
import * as ProcessIdentity from "./ProcessIdentity.js"
import { encodeRunnerPayload, preloadedCommand } from "./RunnerProtocol.js"
import { makeSupervisedRun } from "./internal/supervisedRun.js"
import { sweep } from "./Sweep.js"
import { type AttachedIO, type ExitStatus, type SandboxCreated, SandboxRuntime, type SandboxSpec } from "./SandboxRuntime.js"
import * as Removals from "./internal/removals.js"
import * as WarmPool from "./WarmPool.js"
import type { Language } from "./Language.js"
import { startRecorded } from "./internal/startRecorded.js"

export type ExecuteError = InvalidRequest | SandboxError | QueueFull | ExecutorClosed | JournalError

export interface ExecutorStats {
  /** Executions running (their result not yet returned). */
  readonly inFlight: number
  /** Executions whose result was returned and whose sandbox is being removed (they still hold a slot). */
  readonly removing: number
  readonly queued: number
  /** Warm-pool sandboxes ready to be claimed, per language (empty without a pool). */
  readonly warm: Readonly<Record<string, number>>
}

/** Per-call hooks: output as it arrives (the result still carries the capped copy). */
export interface ExecuteOptions {
  readonly onStdout?: (chunk: Uint8Array) => void
  readonly onStderr?: (chunk: Uint8Array) => void
  /** Called with the execution's id (its journal stream) once it is requested, before any container exists. */
  readonly onExecutionId?: (executionId: string) => void
  /** Why the caller interrupted it (an AbortSignal's reason), for the journal's ExecutionInterrupted. */
  readonly interruptReason?: () => string | undefined
}

export type DestroyReason = "completed" | "timeout" | "interrupted" | "failed"

export class Executor extends Context.Tag("@hermes-sandbox/core/Executor")<
  Executor,
  {
    readonly executorId: string
    readonly config: ResolvedExecutorConfig
    readonly executeCode: (request: ExecuteRequest, options?: ExecuteOptions) => Effect.Effect<ExecutionResult, ExecuteError>
    /** This executor's events, each delivered after its append committed, from subscription on. */
    readonly events: Stream.Stream<EventEnvelope>
    /**
     * The same, as a synchronous callback: registered the moment this returns, so
     * nothing appended afterwards is missed (the RxJS bridge uses it). Returns the unsubscribe.
     */
    readonly unsafeSubscribe: (listener: (event: EventEnvelope) => void) => () => void
    readonly stats: Effect.Effect<ExecutorStats>
    /** Completes when no execution is running and no removal is pending. */
    readonly idle: Effect.Effect<void>
  }
>() {}

/** After the exit, how long to wait for the output streams to finish delivering. */
const OUTPUT_DRAIN_TIMEOUT = "3 seconds"
/** After the supervisor reported the program's end, how long its own exit may take before the removal forces it. */
const EXIT_BEFORE_REMOVAL_TIMEOUT_MS = 2_000
/** After a kill, how long the engine may take to report the exit. */
const KILL_EXIT_TIMEOUT = "15 seconds"
const KILL_EXIT_TIMEOUT_MS = 15_000

/**
 * Wait for `effect` at most `ms`, from a finalizer: the wait runs in a child fiber that the bound
 * can interrupt (a finalizer itself is uninterruptible, so `Effect.timeout` there would wait for
 * the effect however long it takes), while the finalizer stays uninterruptible (so closing the
 * executor cannot cut the removal that follows it). The OOM check after a report uses it too.
 */
const boundedWait = (effect: Effect.Effect<void>, ms: number): Effect.Effect<void> =>
  Effect.gen(function*() {
    // Not Effect.raceFirst: raced from an uninterruptible fiber that is being interrupted, it ends
    // with the interruption and the rest of the finalizer (the removal) would never run.
    const done = yield* Deferred.make<void>()
    const settle = Deferred.succeed(done, undefined)
    const waiter = yield* Effect.forkDaemon(Effect.interruptible(effect).pipe(Effect.zipRight(settle)))
    const timer = yield* Effect.forkDaemon(Effect.interruptible(Effect.sleep(ms)).pipe(Effect.zipRight(settle)))
    yield* Deferred.await(done)
    yield* Fiber.interruptFork(waiter)
    yield* Fiber.interruptFork(timer)
  })

const inFlightGauge = Metric.gauge("hermes_sandbox_executions_in_flight")
const queuedGauge = Metric.gauge("hermes_sandbox_executions_queued")

/** Epoch-seconds deadline label: after this the container is certainly garbage (timeout + a generous margin). */
const deadlineLabel = (timeoutMs: number) => String(Math.ceil((Date.now() + timeoutMs) / 1000) + 300)


export const make = (options: ExecutorOptions = {}) =>
  Effect.gen(function*() {
    const config = yield* resolveExecutorConfig(options)
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const executorId = options.executorId ?? uuidv7()

    // Append, then publish only what was committed (internal/publisher.ts).
    const { append, events, unsafeSubscribe } = makePublisher(journal, executorId)
    // Finalizers run in reverse order: first refuse new work, then interrupt
    // running executions (their scopes remove containers inline), then wait for
    // background removals (uninterruptible, so "interrupting" them awaits them),
    // then stop the slow retries of removals that outlasted their first minute
    // and give each of those a last attempt (internal/removals.ts).
    const { destroy, removeUnrecorded } = yield* Removals.make({ runtime, append: (streamId, event) => append(streamId, event) })
    const removals = yield* FiberSet.make<void, never>()
    const executions = yield* FiberMap.make<string, ExecutionResult, ExecuteError>()
    const closed = yield* Ref.make(false)
    yield* Effect.addFinalizer(() => Ref.set(closed, true))

    if (options.sweepOnStart !== false) {
      // Orphans of dead owners are removed and their lifecycles closed before we add our own.
      yield* sweep({ executorId }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("startup sweep failed; continuing", cause))
      )
    }

    const slots = yield* Effect.makeSemaphore(config.maxConcurrency)
    // A plain variable and direct gauge updates rather than a Ref and Metric.set: this runs four
    // times per execution, and the combinators cost ~0.5 ms of CPU per execution under load
    // (BENCHMARKS.md). The metric labels in effect where the executor is built apply.
    let counters = { inFlight: 0, queued: 0 }
    // Results returned, removal pending: counted in inFlight's slots until removed, reported apart.
    let removing = 0
    const metricLabels = yield* FiberRef.get(FiberRef.currentMetricLabels)
    const publishStats = (f: (s: typeof counters) => typeof counters) =>
      Effect.sync(() => {
        counters = f(counters)
        inFlightGauge.unsafeUpdate(counters.inFlight, metricLabels)
        queuedGauge.unsafeUpdate(counters.queued, metricLabels)
        return counters
      })

    /**
     * Take a slot, FIFO among waiters, and register its release on the scope.
     * Waiting stays interruptible (abort while queued), the hand-over does not.
     */
    const takeSlot = (scope: Scope.Scope) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const before = counters
          const mustWait = before.inFlight >= config.maxConcurrency
          if (mustWait && before.queued >= config.maxQueue && config.whenQueueFull === "fail") {
            return yield* new QueueFull({
              inFlight: before.inFlight,
              queued: before.queued,
              maxQueue: config.maxQueue,
              message: `the executor's queue is full (${before.queued} waiting, ${before.inFlight} running, maxQueue ${config.maxQueue})`
            })
          }
          yield* publishStats((s) => ({ ...s, queued: s.queued + 1 }))
          yield* restore(slots.take(1)).pipe(Effect.onExit(() => publishStats((s) => ({ ...s, queued: s.queued - 1 }))))
          yield* publishStats((s) => ({ ...s, inFlight: s.inFlight + 1 }))
          yield* Scope.addFinalizer(
            scope,
            slots.release(1).pipe(Effect.zipRight(publishStats((s) => ({ ...s, inFlight: s.inFlight - 1 }))))
          )
        })
      )

    interface SpecInput {
      readonly language: Language
      readonly image: string
      readonly command: ReadonlyArray<string>
      readonly env: Readonly<Record<string, string>>
      readonly memoryBytes: number
      readonly nanoCpus: number
      readonly pidsLimit: number
      /** How long the container may legitimately live; its deadline label adds a margin. */
      readonly lifetimeMs: number
    }
    const specFor = (input: SpecInput, executionId: string, containerName: string, extraLabels: Record<string, string> = {}): SandboxSpec => ({
      name: containerName,
      image: input.image,
      command: input.command,
      env: input.env,
      workingDir: config.workingDir,
      user: config.user,
      labels: {
        [Label.project]: ProjectName,
        [Label.executor]: executorId,
        [Label.execution]: executionId,
        [Label.deadline]: deadlineLabel(input.lifetimeMs),
        [Label.ownerPid]: String(ProcessIdentity.self.pid),
        [Label.ownerHost]: ProcessIdentity.self.host,
        [Label.ownerStarted]: ProcessIdentity.self.started,
        [Label.language]: input.language,
        [Label.scope]: "oneShot",
        ...extraLabels
      },
      limits: {
        memoryBytes: input.memoryBytes,
        nanoCpus: input.nanoCpus,
        pidsLimit: input.pidsLimit,
        tmpBytes: config.tmpBytes,
        workspaceBytes: config.workspaceBytes,
        diskBytes: config.diskBytes
      },
      network: config.network,
      openStdin: true,
      capAdd: config.capAdd,
      runtime: config.runtime,
      mounts: []
    })

    const pool = options.warmPool === undefined ? undefined : yield* WarmPool.make({
      options: options.warmPool,
      append: (streamId, ...events) => append(streamId, ...events),
      specFor: (language, poolStreamId, containerName) =>
        specFor(
          {
            language,
            image: config.languages[language].image,
            // The interpreter waits ready in the sandbox, so a claim costs no interpreter start.
            command: preloadedCommand(config.languages[language].command, language),
            env: config.env,
            memoryBytes: config.memoryBytes,
            nanoCpus: config.nanoCpus,
            pidsLimit: config.pidsLimit,
            lifetimeMs: (options.warmPool?.idleTtlMs ?? 300_000) + 60_000 + config.timeoutMs
          },
          poolStreamId,
          containerName,
          { [Label.pool]: "true" }
        )
    })

    /** Only a request that asks for exactly the pool's configuration may take a warm sandbox. */
    const poolEligible = (plan: ExecutionPlan, request: ExecuteRequest) =>
      pool !== undefined && request.env === undefined && request.image === undefined && plan.timeoutMs <= config.timeoutMs &&
      plan.memoryBytes === config.memoryBytes && plan.nanoCpus === config.nanoCpus && plan.pidsLimit === config.pidsLimit

    /**
     * A create that got no answer (the engine died, the call timed out) may still have created the
     * container, which nothing else would remove while this process lives: remove it by name,
     * retrying like `destroy`. No event: the journal never saw it created.
     */
    const removeUnconfirmed = (containerName: string) => removeUnrecorded({ id: containerName, name: containerName })

    const runExecution = (plan: ExecutionPlan, executionId: string, containerName: string, scope: Scope.Scope, hooks: ExecuteOptions, eligible: boolean) =>
      Effect.gen(function*() {
        const terminal = yield* Ref.make(false)
        // Terminal only once the append committed: a failed append (the journal refused the event)
        // leaves room for the ExecutionFailed that the error path records, never an open lifecycle.
        const recordTerminal = (event: JournalEvent) =>
          Ref.get(terminal).pipe(Effect.flatMap((done) => done ? Effect.void : append(executionId, event).pipe(Effect.zipRight(Ref.set(terminal, true)))))
        const destroyReason = yield* Ref.make<DestroyReason>("failed")

        const body = Effect.gen(function*() {
          yield* takeSlot(scope)
          // The supervisor in the sandbox reports the program's end in a frame only it can write
          // (internal/supervisedRun.ts), which saves waiting for the engine's exit report; the
          // engine's report still counts when the supervisor cannot speak (killed, OOM), and the
          // deadline bounds both.
          const run = yield* makeSupervisedRun(plan.outputLimitBytes, hooks)
          const { stdout, stderr } = run
          const receiver = run.receiver
          let deadlineAtMs = Number.POSITIVE_INFINITY
          // What the removal waits for first (see the supervisor-reported end below). Interruptible and
          // bounded by the deadline: the removal runs in a finalizer, where nothing else could cut it short.
          let beforeRemoval: Effect.Effect<void> = Effect.void
          const removeOnRelease = (c: SandboxCreated) =>
            Scope.addFinalizer(
              scope,
              Effect.suspend(() => beforeRemoval).pipe(Effect.zipRight(Ref.get(destroyReason)), Effect.flatMap((r) => destroy(executionId, c, r)))
            )

          // Claimed, owned and recorded in one uninterruptible step (as for a create below): an
          // interruption in between could neither orphan the sandbox nor destroy an unrecorded claim.
          const warm = pool !== undefined && eligible
            ? yield* pool.claim(plan.language).pipe(
              Effect.tap((w) =>
                Option.isSome(w)
                  ? removeOnRelease(w.value.container).pipe(
                    Effect.zipRight(append(executionId, {
                      type: "ContainerClaimed",
                      data: { containerName: w.value.container.name, containerId: w.value.container.id, poolStreamId: w.value.poolStreamId }
                    }))
                  )
                  : Effect.void
              ),
              Effect.uninterruptible
            )
            : Option.none<WarmPool.WarmSandbox>()
          let container: SandboxCreated
          let io: AttachedIO
          let awaitExit: Effect.Effect<ExitStatus, SandboxError>
          if (Option.isSome(warm)) {
            // Already created and started, its runner waiting for this one program.
            container = warm.value.container
            warm.value.bind(receiver)
            io = warm.value.io
            awaitExit = warm.value.awaitExit
          } else {
            // Acquire holds only the create; the release removes the container on every path.
            // Created, owned and recorded in one uninterruptible step: an interruption in between would
            // destroy (and record destroying) a container the journal never saw created.
            container = yield* runtime.create(specFor({ ...plan, lifetimeMs: plan.timeoutMs }, executionId, containerName)).pipe(
              Effect.tap(removeOnRelease),
              Effect.tap((c) =>
                append(executionId, {
                  type: "ContainerCreated",
                  data: { containerName: c.name, containerId: c.id, imageId: c.imageId }
                })
              ),
              // In the background, so the caller gets the error now; close() still waits for it.
              Effect.tapErrorTag("DockerUnavailable", () => FiberSet.run(removals, removeUnconfirmed(containerName))),
              Effect.uninterruptible
            )
            io = yield* runtime.attach(container, receiver)
            awaitExit = yield* runtime.armExit(container)
            yield* startRecorded(runtime, container, (event) => append(executionId, event))
          }
          // The deadline counts from the start, or from the claim for a warm sandbox.
          const startedAtMs = Date.now()
          deadlineAtMs = startedAtMs + plan.timeoutMs
          const untilDeadline = () => Math.max(0, deadlineAtMs - Date.now())

          // Feed the program in the background: a program that never reads its stdin must not block us.
          const payload = encodeRunnerPayload({
            key: run.key,
            capBytes: plan.outputLimitBytes,
            language: plan.language,
            code: plan.code,
            files: plan.files,
            stdin: plan.stdin
          })
          yield* io.write(payload).pipe(Effect.zipRight(io.end), Effect.ignore, Effect.forkIn(scope))

          // The host-side deadline is the authority: nothing inside the sandbox can outlive it.
          const exited = yield* Effect.raceFirst(
            awaitExit.pipe(Effect.map((s) => ({ _tag: "Engine" as const, exitCode: s.exitCode }))),
            Deferred.await(run.report)
          ).pipe(Effect.timeoutTo({ duration: plan.timeoutMs, onSuccess: Option.some, onTimeout: Option.none }))
          const refuse = (reason: "setup" | "protocol", message: string) =>
            Effect.gen(function*() {
              yield* runtime.kill(container).pipe(Effect.ignore)
              return yield* new ContainerFailed({ operation: reason === "setup" ? "setup" : "report", containerName: container.name, reason, message })
            })
          let exitCode: number
          let timedOut = false
          let oomKilled = false
          if (Option.isNone(exited)) {
            timedOut = true
            yield* Ref.set(destroyReason, "timeout")
            yield* runtime.kill(container)
            exitCode = yield* awaitExit.pipe(
              Effect.map((s) => s.exitCode),
              Effect.timeoutTo({ duration: KILL_EXIT_TIMEOUT, onSuccess: (c) => c, onTimeout: () => 137 })
            )
          } else if (exited.value._tag === "SetupFailed") {
            return yield* refuse("setup", `the sandbox ${container.name} could not be set up, so the program never ran: ${exited.value.message}`)
          } else if (exited.value._tag === "Violation") {
            return yield* refuse("protocol", `the report channel of ${container.name} carried bytes its supervisor did not write (${exited.value.reason}); nothing it reported was used`)
          } else if (exited.value._tag === "Exited") {
            exitCode = exited.value.exit.exitCode
            // The supervisor reports before the engine's verdict: a sandbox killed from outside (an
            // engine stopping, docker kill) did not produce a result, whatever was reported.
            const signalled = exited.value.exit.outsideSignal
            const outside = signalled > 0 ? Option.some(String(signalled)) : yield* runtime.outsideKill(container)
            if (Option.isSome(outside)) {
              return yield* new ContainerFailed({
                operation: "wait",
                containerName: container.name,
                message: `${container.name} was killed from outside the SDK (signal ${outside.value}) while the program ran; the exit code it ` +
                  `then reported (${exitCode}) is not its result: the engine is stopping or restarting, or someone ran docker stop/kill`
              })
            }
            if (exitCode === 137) {
              // The OOM killer chose the program; the engine knows only once the sandbox has exited
              // (the supervisor exits right after its report). Best effort, and never past the deadline.
              oomKilled = yield* boundedWait(io.closed, Math.min(untilDeadline(), KILL_EXIT_TIMEOUT_MS)).pipe(
                Effect.zipRight(runtime.inspect(container)),
                Effect.map((s) => s.oomKilled),
                Effect.orElseSucceed(() => false)
              )
            }
            yield* Ref.set(destroyReason, "completed")
            // The supervisor exits right after its report, which ends the sandbox: the (background)
            // removal lets it, which costs the engine less than force-removing a running container.
            // Bounded by EXIT_BEFORE_REMOVAL_TIMEOUT and by the deadline, then the removal forces it.
            beforeRemoval = Effect.suspend(() => boundedWait(io.closed, Math.min(untilDeadline(), EXIT_BEFORE_REMOVAL_TIMEOUT_MS)))
          } else {
            // The engine saw the exit first: the streams end once the output is delivered, and the
            // supervisor's report may be among the last bytes (it is the program's result then).
            yield* io.closed.pipe(Effect.timeout(OUTPUT_DRAIN_TIMEOUT), Effect.ignore)
            const late = yield* Deferred.poll(run.report).pipe(Effect.flatMap((o) => Option.isSome(o) ? Effect.asSome(o.value) : Effect.succeedNone))
            if (Option.isSome(late) && late.value._tag === "SetupFailed") {
              return yield* refuse("setup", `the sandbox ${container.name} could not be set up, so the program never ran: ${late.value.message}`)
            }
            if (Option.isSome(late) && late.value._tag === "Violation") {
              return yield* refuse("protocol", `the report channel of ${container.name} carried bytes its supervisor did not write (${late.value.reason}); nothing it reported was used`)
            }
            exitCode = Option.isSome(late) && late.value._tag === "Exited" ? late.value.exit.exitCode : exited.value.exitCode
            if (Option.isNone(late) && (exitCode === 126 || exitCode === 127) && run.diagnostics() !== "") {
              // The supervisor refused before it could frame anything (a malformed header: an SDK or image mismatch).
              return yield* refuse("protocol", `the supervisor in ${container.name} refused the run: ${run.diagnostics()}`)
            }
            // Only a SIGKILL we did not send can be the OOM killer; inspect only then.
            if (exitCode === 137) oomKilled = (yield* runtime.inspect(container)).oomKilled
            yield* Ref.set(destroyReason, "completed")
          }
          const finishedAtMs = Date.now()
          const durationMs = finishedAtMs - startedAtMs
          yield* recordTerminal(
            timedOut
              ? { type: "ExecutionTimedOut", data: { timeoutMs: plan.timeoutMs, durationMs } }
              : { type: "ContainerExited", data: { exitCode, oomKilled, durationMs } }
          )
          return toExecutionResult({ executionId, containerName: container.name, exitCode, timedOut, oomKilled, stdout, stderr, startedAtMs, finishedAtMs })
        })

        return yield* body.pipe(
          Effect.onInterrupt(() =>
            Effect.gen(function*() {
              yield* Ref.set(destroyReason, "interrupted")
              const asked = hooks.interruptReason?.()
              const reason = (yield* Ref.get(closed)) ? "executor closed" : asked === undefined ? "interrupted by the caller" : `interrupted by the caller: ${asked}`
              yield* recordTerminal({ type: "ExecutionInterrupted", data: { reason } }).pipe(Effect.ignore)
            })
          ),
          Effect.tapError((error) =>
            Ref.set(destroyReason, "failed").pipe(
              Effect.zipRight(recordTerminal({ type: "ExecutionFailed", data: { errorTag: error._tag, message: error.message } })),
              Effect.ignore
            )
          )
        )
      })

    const executeCode = (request: ExecuteRequest, hooks: ExecuteOptions = {}): Effect.Effect<ExecutionResult, ExecuteError> =>
      Effect.gen(function*() {
        if (yield* Ref.get(closed)) return yield* new ExecutorClosed({ message: "the executor is closed" })
        const plan = yield* planExecution(request, config)
        const executionId = uuidv7()
        const containerName = `${ContainerNamePrefix}${executionId}`
        hooks.onExecutionId?.(executionId)
        const supervised = Effect.gen(function*() {
          yield* append(executionId, {
            type: "ExecutionRequested",
            data: {
              language: plan.language,
              image: plan.image,
              codeBytes: plan.code.byteLength,
              codeSha256: plan.codeSha256,
              stdinBytes: plan.stdin.byteLength,
              fileCount: plan.files.length,
              timeoutMs: plan.timeoutMs,
              limits: { memoryBytes: plan.memoryBytes, nanoCpus: plan.nanoCpus, pidsLimit: plan.pidsLimit, outputLimitBytes: plan.outputLimitBytes },
              network: config.network,
              runtime: config.runtime ?? "runc",
              scope: "oneShot"
            }
          })
          const scope = yield* Scope.make()
          return yield* runExecution(plan, executionId, containerName, scope, hooks, poolEligible(plan, request)).pipe(
            Effect.onExit((exit) =>
              Exit.isSuccess(exit) && !config.awaitRemoval
                // Removal off the caller's critical path, still tracked: close() waits for it.
                ? Effect.sync(() => void removing++).pipe(
                  Effect.zipRight(FiberSet.run(removals, Scope.close(scope, exit).pipe(Effect.ensuring(Effect.sync(() => void removing--)), Effect.uninterruptible))),
                  Effect.asVoid,
                  Effect.uninterruptible
                )
                : Scope.close(scope, exit)
            )
          )
        })
        const fiber = yield* FiberMap.run(executions, executionId, supervised)
        // Interrupting the caller interrupts the execution and waits until its container is gone.
        return yield* Fiber.join(fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
      })

    // An execution's removal is handed to `removals` before its fiber leaves `executions`.
    const idle = FiberMap.awaitEmpty(executions).pipe(Effect.ignore, Effect.zipRight(FiberSet.awaitEmpty(removals)))

    return Executor.of({
      executorId,
      config,
      executeCode,
      events,
      unsafeSubscribe,
      stats: Effect.map(pool === undefined ? Effect.succeed({}) : pool.ready, (warm) => ({
        inFlight: counters.inFlight - removing,
        removing,
        queued: counters.queued,
        warm
      })),
      idle
    })
  })

/** The executor as a layer; its scope is the executor's lifetime. */
export const layer = (options: ExecutorOptions = {}): Layer.Layer<Executor, InvalidRequest, SandboxRuntime | Journal.Journal> =>
  Layer.scoped(Executor, make(options))
