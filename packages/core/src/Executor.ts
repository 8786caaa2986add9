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
import {
  Clock,
  Context,
  Effect,
  Exit,
  Fiber,
  FiberRef,
  FiberMap,
  FiberSet,
  Layer,
  Metric,
  Option,
  Ref,
  Scope,
  Stream
} from "effect"
import { v7 as uuidv7 } from "uuid"
import { type EventEnvelope, Journal, type JournalError, type JournalEvent } from "@hermes-sandbox/events"
import { ExecutorClosed, type InvalidRequest, invalidRequest, QueueFull, type SandboxError } from "./Errors.js"
import { checkKeepFullOutput } from "./OutputCapture.js"
import { type ExecuteRequest, type ExecutionPlan, planExecution } from "./ExecutionRequest.js"
import type { ExecutionResult } from "./ExecutionResult.js"
import { type ExecutorOptions, resolveExecutorConfig, type ResolvedExecutorConfig } from "./ExecutorConfig.js"
import { ContainerNamePrefix, DEADLINE_MARGIN_S, deadlineLabel, Label, ownerLabels, ProjectName } from "./Labels.js"
import * as Ownership from "./internal/ownership.js"
import { makePublisher } from "./internal/publisher.js"
import { annotate, makeExecutionSpans, spanned, type Traced } from "./internal/spans.js"
import { type AuditRecorder, auditRecorder, beforeTerminal } from "./internal/auditTrail.js"
import { Metrics, makeMetrics } from "./Metrics.js"
import { encodeRunnerPayloadFor, preloadedCommand } from "./RunnerProtocol.js"
import { makeSupervisedRun } from "./kernel/SupervisedRun.js"
import { boundedWait, resultOf, runToCompletion, withTerminalEvent } from "./kernel/Run.js"
import * as Sandbox from "./kernel/Sandbox.js"
import { type SandboxCreated, SandboxRuntime, type SandboxSpec } from "./SandboxRuntime.js"
import * as Removals from "./kernel/Removals.js"
import * as ToolChannel from "./kernel/ToolChannel.js"
import * as WarmPool from "./WarmPool.js"
import { ATTRIBUTE, SpanName } from "./Tracing.js"
import { type Language, Languages } from "./Language.js"

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
  /** The caller's labels, recorded in the run's ExecutionRequested (e.g. which client and tool asked). */
  readonly tags?: Readonly<Record<string, string>>
  /**
   * Run only a request the warm pool's configuration fits (the test that decides whether an
   * execution may claim a warm sandbox); any other fails with InvalidRequest (field "warmPool")
   * before anything is recorded or created. The CLI's daemon uses it to hand such a request back.
   */
  readonly warmPoolOnly?: boolean
  /**
   * Keep each stream's whole output, up to this many bytes (`true`: 10 MiB,
   * DEFAULT_KEPT_OUTPUT_BYTES), besides the result's stdout and stderr, which stay within
   * `outputLimitBytes`: a result whose stream was cut carries the kept text as `fullOutput`, so the
   * end of a long output (where errors usually are) is not lost. Costs the host up to twice this
   * in memory while the run lasts. Sessions' `run` and `runCode` take it too.
   */
  readonly keepFullOutput?: boolean | number
}

export type DestroyReason = "completed" | "timeout" | "interrupted" | "failed"

export class Executor extends Context.Tag("@hermes-sandbox/core/Executor")<
  Executor,
  {
    readonly executorId: string
    readonly config: ResolvedExecutorConfig
    readonly executeCode: (
      request: ExecuteRequest,
      options?: ExecuteOptions
    ) => Effect.Effect<ExecutionResult, ExecuteError>
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
    /**
     * The Prometheus metrics of this executor (and of the sessions service sharing its `Metrics`),
     * in the text exposition format (`Metrics.CONTENT_TYPE`): a registry of its own (Metrics.ts).
     */
    readonly metrics: Effect.Effect<string>
  }
>() {}

/** After the supervisor reported the program's end, how long its own exit may take before the removal forces it. */
const EXIT_BEFORE_REMOVAL_TIMEOUT_MS = 2_000
/** After a kill, how long the engine may take to report the exit. */
const KILL_EXIT_TIMEOUT = "15 seconds"
const KILL_EXIT_TIMEOUT_MS = 15_000

// The same names as the Prometheus registry's gauges (Metrics.ts), which read the same counters.
const inFlightGauge = Metric.gauge("hermes_sandbox_in_flight")
const queuedGauge = Metric.gauge("hermes_sandbox_queued")

export const make = (options: ExecutorOptions = {}) =>
  Effect.gen(function* () {
    const config = yield* resolveExecutorConfig(options)
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const executorId = options.executorId ?? uuidv7()
    // The registry the layer shares with its sessions service, else one of this executor's own.
    const metrics = Option.getOrElse(yield* Effect.serviceOption(Metrics), makeMetrics)
    // The ownership lease first (released last, once every container is gone), then the startup sweep.
    yield* Ownership.start(executorId, options, "", metrics.leakedRemoved)

    // Append, then publish only what was committed (internal/publisher.ts).
    const { append, events, unsafeSubscribe } = makePublisher(journal, executorId, metrics)
    // Each execution's span follows its phases from the same projection as the metrics (Tracing.ts).
    const spans = yield* makeExecutionSpans(metrics)
    // Finalizers run in reverse order: first refuse new work, then interrupt
    // running executions (their scopes remove containers inline), then wait for
    // background removals (uninterruptible, so "interrupting" them awaits them),
    // then stop the slow retries of removals that outlasted their first minute
    // and give each of those a last attempt (kernel/Removals.ts).
    const { destroy, removeUnanswered } = yield* Removals.make({
      runtime,
      append: (streamId, event) => append(streamId, event)
    })
    const removals = yield* FiberSet.make<void, never>()
    const executions = yield* FiberMap.make<string, ExecutionResult, ExecuteError>()
    const closed = yield* Ref.make(false)
    yield* Effect.addFinalizer(() => Ref.set(closed, true))

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
        Effect.gen(function* () {
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
    const specFor = (
      input: SpecInput,
      executionId: string,
      containerName: string,
      extraLabels: Record<string, string> = {}
    ): SandboxSpec => ({
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
        // After this the container is certainly garbage: its lifetime and a generous margin.
        [Label.deadline]: deadlineLabel(input.lifetimeMs, DEADLINE_MARGIN_S),
        ...ownerLabels(),
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

    const poolOptions = options.warmPool
    const pool =
      poolOptions === undefined
        ? undefined
        : yield* WarmPool.make({
            options: poolOptions,
            append: (streamId, ...events) => append(streamId, ...events),
            specFor: (language, poolStreamId, containerName) =>
              specFor(
                {
                  language,
                  image: config.languages[language].image,
                  // The interpreter waits ready in the sandbox, its modules imported, so a claim
                  // costs no interpreter start and no import of those.
                  command: preloadedCommand(config.languages[language].command, language, poolOptions.preload?.python),
                  env: config.env,
                  memoryBytes: config.memoryBytes,
                  nanoCpus: config.nanoCpus,
                  pidsLimit: config.pidsLimit,
                  lifetimeMs: WarmPool.idleTtlMs(poolOptions) + 60_000 + config.timeoutMs
                },
                poolStreamId,
                containerName,
                { [Label.pool]: "true" }
              )
          })

    const pooledLanguages: ReadonlyArray<Language> = poolOptions?.languages ?? Languages
    /** Only a request that asks for exactly the pool's configuration (a language it keeps warm) may take a warm sandbox. */
    const poolEligible = (plan: ExecutionPlan, request: ExecuteRequest) =>
      pool !== undefined &&
      pooledLanguages.includes(plan.language) &&
      request.env === undefined &&
      request.image === undefined &&
      plan.timeoutMs <= config.timeoutMs &&
      plan.memoryBytes === config.memoryBytes &&
      plan.nanoCpus === config.nanoCpus &&
      plan.pidsLimit === config.pidsLimit

    const kernel = { runtime, append }

    const runExecution = (
      plan: ExecutionPlan,
      executionId: string,
      containerName: string,
      scope: Scope.Scope,
      hooks: ExecuteOptions,
      eligible: boolean,
      recorder: AuditRecorder | undefined
    ) =>
      Effect.gen(function* () {
        let destroyReason: DestroyReason = "failed"
        const interruptReason = Effect.map(Ref.get(closed), (isClosed) => {
          const asked = hooks.interruptReason?.()
          return isClosed
            ? "executor closed"
            : asked === undefined
              ? "interrupted by the caller"
              : `interrupted by the caller: ${asked}`
        })
        // The code's tool calls, served while it runs and settled before the terminal event.
        const tools =
          plan.tools === undefined
            ? undefined
            : yield* ToolChannel.make({
                plan: plan.tools,
                language: plan.language,
                executionId,
                append: (event) => append(executionId, event),
                reserve: recorder?.reserve
              }).pipe(Scope.extend(scope))
        const body = (record: (event: JournalEvent) => Effect.Effect<void, JournalError>) =>
          Effect.gen(function* () {
            yield* takeSlot(scope)
            metrics.slotTaken(executionId, yield* Clock.currentTimeMillis)
            const run = yield* makeSupervisedRun(plan.outputLimitBytes, hooks, plan.collect, undefined, tools)
            recorder?.captures(run.stdout, run.stderr)
            // What the removal waits for first (see `reported` below). Interruptible and bounded by the
            // deadline: the removal runs in a finalizer, where nothing else could cut it short.
            let beforeRemoval: Effect.Effect<void> = Effect.void
            const own = (c: SandboxCreated) =>
              Scope.addFinalizer(
                scope,
                Effect.suspend(() => beforeRemoval.pipe(Effect.zipRight(destroy(executionId, c, destroyReason))))
              )

            // A warm sandbox (already created and started, its supervisor waiting for this one program) or a fresh one.
            const warm =
              pool !== undefined && eligible
                ? yield* Sandbox.claim(kernel, {
                    streamId: executionId,
                    take: pool.claim(plan.language),
                    own,
                    receiver: run.receiver
                  })
                : Option.none<Sandbox.StartedSandbox>()
            const sandbox = Option.isSome(warm)
              ? warm.value
              : yield* Sandbox.createStarted(kernel, {
                  streamId: executionId,
                  spec: specFor({ ...plan, lifetimeMs: plan.timeoutMs }, executionId, containerName),
                  own,
                  receiver: run.receiver,
                  // In the background, so the caller gets the error now; close() still waits for it.
                  unanswered: (name) => FiberSet.run(removals, removeUnanswered(name)).pipe(Effect.asVoid)
                })
            const { container, io } = sandbox

            // The deadline counts from the start, or from the claim for a warm sandbox.
            const done = yield* runToCompletion({
              target: {
                containerName: container.name,
                kind: "run",
                write: io.write,
                end: io.end,
                exit: sandbox.exit,
                drained: io.closed,
                kill: sandbox.kill.pipe(Effect.ignore),
                atDeadline: () =>
                  Effect.sync(() => void (destroyReason = "timeout")).pipe(
                    Effect.zipRight(sandbox.kill),
                    Effect.zipRight(
                      sandbox.exit.pipe(
                        Effect.map((s) => s.exitCode),
                        Effect.timeoutTo({ duration: KILL_EXIT_TIMEOUT, onSuccess: (c) => c, onTimeout: () => 137 })
                      )
                    )
                  ),
                outsideKill: runtime.outsideKill(container),
                // The OOM killer chose the program; the engine knows only once the sandbox has exited
                // (after a report the supervisor exits right after it). Best effort, never past the deadline.
                oomKilled: (reported, untilDeadlineMs) =>
                  reported
                    ? boundedWait(io.closed, Math.min(untilDeadlineMs, KILL_EXIT_TIMEOUT_MS)).pipe(
                        Effect.zipRight(runtime.inspect(container)),
                        Effect.map((s) => s.oomKilled),
                        Effect.orElseSucceed(() => false)
                      )
                    : Effect.map(runtime.inspect(container), (s) => s.oomKilled)
              },
              run,
              payload: encodeRunnerPayloadFor(runtime, {
                key: run.key,
                capBytes: run.capBytes,
                language: plan.language,
                code: plan.code,
                files: plan.files,
                collect: plan.collect,
                tools: tools?.header,
                stdin: plan.stdin
              }),
              timeoutMs: plan.timeoutMs,
              record,
              append: (event) =>
                Effect.suspend(() => {
                  // ArtifactsCollected: the run's collect phase began with the files' first frame.
                  if (event.type === "ArtifactsCollected") metrics.collectBegan(executionId, run.collectBeganAt())
                  return append(executionId, event).pipe(Effect.asVoid)
                }),
              tools
            }).pipe(Scope.extend(scope))
            if (!done.timedOut) destroyReason = "completed"
            if (done.reported && !done.timedOut) {
              // The supervisor exits right after its report, which ends the sandbox: the (background)
              // removal lets it, which costs the engine less than force-removing a running container.
              // Bounded by EXIT_BEFORE_REMOVAL_TIMEOUT and by the deadline, then the removal forces it.
              beforeRemoval = Effect.flatMap(Clock.currentTimeMillis, (now) =>
                boundedWait(io.closed, Math.min(Math.max(0, done.deadlineAtMs - now), EXIT_BEFORE_REMOVAL_TIMEOUT_MS))
              )
            }
            return resultOf(executionId, container.name, done, run)
          })
        return yield* withTerminalEvent(
          (event) => append(executionId, event),
          interruptReason,
          body,
          beforeTerminal(tools, recorder)
        ).pipe(
          Effect.onInterrupt(() => Effect.sync(() => void (destroyReason = "interrupted"))),
          Effect.tapError(() => Effect.sync(() => void (destroyReason = "failed")))
        )
      })

    const executeCode = (
      request: ExecuteRequest,
      hooks: ExecuteOptions = {}
    ): Effect.Effect<ExecutionResult, ExecuteError> =>
      spanned(
        SpanName.execute,
        { [ATTRIBUTE.executorId]: executorId },
        (traced) => executeTraced(request, hooks, traced),
        spans.outcome
      )

    const executeTraced = (
      request: ExecuteRequest,
      hooks: ExecuteOptions,
      traced: Traced | undefined
    ): Effect.Effect<ExecutionResult, ExecuteError> =>
      Effect.gen(function* () {
        if (yield* Ref.get(closed)) return yield* new ExecutorClosed({ message: "the executor is closed" })
        const plan = yield* planExecution(request, config)
        annotate(traced, ATTRIBUTE.language, plan.language)
        yield* checkKeepFullOutput(hooks.keepFullOutput)
        const eligible = poolEligible(plan, request)
        if (hooks.warmPoolOnly === true && !eligible)
          return yield* invalidRequest(
            "warmPool",
            pool === undefined ? "no warm pool" : "a request outside the pool's configuration",
            "a request the warm pool fits: a language it keeps warm, no env or image, the pool's limits, a timeout within the executor's"
          )
        const executionId = uuidv7()
        const containerName = `${ContainerNamePrefix}${executionId}`
        hooks.onExecutionId?.(executionId)
        if (traced !== undefined) {
          annotate(traced, ATTRIBUTE.executionId, executionId)
          // A warm sandbox has its own name: the result's, below.
          if (!eligible) annotate(traced, ATTRIBUTE.containerName, containerName)
          spans.track(executionId, traced)
        }
        // recordCode: the code with the request (one append), the output's head before the terminal event.
        const recorder = auditRecorder(config.recordCode, plan.code, (event) => append(executionId, event))
        const supervised = Effect.gen(function* () {
          yield* append(
            executionId,
            {
              type: "ExecutionRequested",
              data: {
                language: plan.language,
                image: plan.image,
                codeBytes: plan.code.byteLength,
                codeSha256: plan.codeSha256,
                stdinBytes: plan.stdin.byteLength,
                fileCount: plan.files.length,
                timeoutMs: plan.timeoutMs,
                limits: {
                  memoryBytes: plan.memoryBytes,
                  nanoCpus: plan.nanoCpus,
                  pidsLimit: plan.pidsLimit,
                  outputLimitBytes: plan.outputLimitBytes
                },
                network: config.network,
                runtime: config.runtime ?? "runc",
                scope: "oneShot",
                ...(hooks.tags === undefined ? {} : { tags: hooks.tags })
              }
            },
            ...(recorder === undefined ? [] : [recorder.code])
          )
          const scope = yield* Scope.make()
          return yield* runExecution(plan, executionId, containerName, scope, hooks, eligible, recorder).pipe(
            Effect.onExit((exit) =>
              Exit.isSuccess(exit) && !config.awaitRemoval
                ? // Removal off the caller's critical path, still tracked: close() waits for it.
                  Effect.sync(() => void removing++).pipe(
                    Effect.zipRight(
                      FiberSet.run(
                        removals,
                        Scope.close(scope, exit).pipe(
                          Effect.ensuring(Effect.sync(() => void removing--)),
                          Effect.uninterruptible
                        )
                      )
                    ),
                    Effect.asVoid,
                    Effect.uninterruptible
                  )
                : Scope.close(scope, exit)
            )
          )
        })
        const fiber = yield* FiberMap.run(executions, executionId, supervised)
        // Interrupting the caller interrupts the execution and waits until its container is gone.
        const result = yield* Fiber.join(fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
        annotate(traced, ATTRIBUTE.containerName, result.containerName)
        return result
      })

    // Read at each scrape, never kept up on the hot path.
    const unregister = metrics.addLiveState(
      Effect.map(pool === undefined ? Effect.succeed({}) : pool.ready, (poolReady) => ({
        inFlight: counters.inFlight,
        queued: counters.queued,
        poolReady
      }))
    )
    yield* Effect.addFinalizer(() => Effect.sync(unregister))

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
      idle,
      metrics: metrics.text
    })
  })

/** The executor as a layer; its scope is the executor's lifetime. */
export const layer = (
  options: ExecutorOptions = {}
): Layer.Layer<Executor, InvalidRequest, SandboxRuntime | Journal.Journal> => Layer.scoped(Executor, make(options))
