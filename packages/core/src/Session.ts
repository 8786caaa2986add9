/**
 * Sessions: many commands and code snippets in ONE sandbox, with the working directory and
 * exported variables carried from call to call — the Hermes agent's `container_persistent:
 * false` (one fresh container per agent session) and `true` (one long-lived container, found
 * again after a restart).
 *
 * - A **session** gets a fresh container, is never shared, and is destroyed when closed, when
 *   idle longer than `lifetimeSeconds`, or at `maxLifetimeMs`. Its owner's death is covered
 *   like one-shot containers: owner labels (startup sweep), executor label (watchdog).
 * - A **persistent** sandbox is found again by its labels — profile + fingerprint of image,
 *   limits, mounts and env NAMES (Fingerprint.ts) — so a new process reconnects in
 *   milliseconds. A changed configuration is never served by the old container: it is removed
 *   and replaced (default, journaled) or refused (`onConfigChange: "refuse"`). It carries no
 *   owner/executor labels (it must outlive its process); `close` detaches, `destroy` removes,
 *   and an idle one is removed by the SessionReaper when `lifetimeSeconds` is set — idleness as
 *   the host recorded it (journal, engine), never as the sandbox reports it — and every one at
 *   its maximum lifetime (`maxLifetimeMs`, default 7 days: the `deadline` label).
 *
 * Both are created by the kernel (kernel/Sandbox.ts: same spec path and hardening as one-shot
 * containers, the same removal policy), the supervisor in hold mode as PID 1.
 *
 * Each call is one `exec` of the supervisor running the fixed session shell
 * (internal/sessionShell.ts), given the user's command as an ARGUMENT, on the kernel's run step
 * (kernel/Run.ts); code snippets go through the runner protocol, executed by the same shell. Calls on one session are SERIALIZED (a one-permit semaphore, FIFO), so
 * parallel subagents never interleave `cd`, variables or files. The host-side deadline is the
 * authority: on expiry the call's process tree is killed from inside (`hermes-run --kill`); if
 * it does not end within a grace period, the whole sandbox is killed and the session ends.
 *
 * Layout: session/plan.ts (options -> plan -> spec, labels, fingerprint), session/call.ts (one
 * call on the kernel), session/handle.ts (the handle's lifecycle, calls, idle and lifetime
 * watchers), session/persistent.ts (finding a persistent sandbox again); this module composes them.
 *
 * Environment values (session env, forwarded secrets, per-call env) travel in each call's
 * exec environment only: never in the container's configuration (`docker inspect` shows
 * neither names nor values), never in process arguments, the journal or results, and never
 * in the shell's saved state.
 *
 * File operations (session/files.ts: readFile, writeFile, listFiles, removeFile) take the same
 * lock and the same kernel path as calls, with a framed header that holds the operation instead of
 * a program: the supervisor does it itself, without a shell and without following a symlink.
 *
 * Journal: the session's stream (id = session id) holds SessionOpened | SessionReconnected,
 * ContainerCreated, ContainerStarted, then SessionIdleExpired?, ContainerDestroyed
 * (session-closed | idle-expired), SessionClosed. Each call is its own stream:
 * ExecutionRequested (scope, sessionId) then ContainerExited | ExecutionTimedOut |
 * ExecutionInterrupted | ExecutionFailed. Events are published after they commit.
 */
import { Clock, Context, Effect, FiberSet, Layer, Option, Ref, Schema, Stream } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type EventEnvelope, Journal, type JournalError, type JournalEvent } from "@hermes-sandbox/events"
import { type InvalidRequest, invalidRequest, type SandboxError, type SessionConfigMismatch } from "./Errors.js"
import { SessionEnded } from "./Errors.js"
import {
  ExecutorOnlyOptionsSchema,
  resolveSandboxDefaults,
  type ResolvedSandboxDefaults,
  type SandboxDefaults
} from "./ExecutorConfig.js"
import * as Fingerprint from "./Fingerprint.js"
import * as Ownership from "./internal/ownership.js"
import { makePublisher } from "./internal/publisher.js"
import { Metrics, makeMetrics } from "./Metrics.js"
import * as Removals from "./kernel/Removals.js"
import * as Sandbox from "./kernel/Sandbox.js"
import { ContainerNamePrefix } from "./Labels.js"
import { SUPERVISOR, supervisorFor } from "./RunnerProtocol.js"
import { SandboxRuntime } from "./SandboxRuntime.js"
import * as Schemas from "./Schemas.js"
import { makeHandle, type Session } from "./session/handle.js"
import { findOrCreate } from "./session/persistent.js"
import * as SessionPool from "./session/pool.js"
import {
  fingerprintOf,
  type PersistentOptions,
  persistentLabels,
  resolvePersistent,
  resolvePlan,
  sandboxSpec,
  type SessionOptions,
  sessionLabels,
  type SessionPlan,
  type SessionScope
} from "./session/plan.js"
import * as SessionReaper from "./SessionReaper.js"

export type { RunOptions, SessionCodeRequest } from "./session/call.js"
export type { Session, SessionCallError, SessionCellError, SessionResult, SessionStatus } from "./session/handle.js"
export type { CellHooks, CellOptions, CellRequest } from "./session/cell.js"
export type {
  BackgroundProcess,
  ProcessOutput,
  ProcessSignal,
  ProcessStatus,
  SpawnOptions
} from "./session/background.js"
export { PROCESS_SIGNALS } from "./session/background.js"
export type { BackgroundOptions, BackgroundSettings } from "./session/plan.js"
export { DEFAULT_BACKGROUND } from "./session/plan.js"
export type {
  FileCallOptions,
  FileEntry,
  ListFilesResult,
  ReadFileOptions,
  ReadFileResult,
  SessionFileError,
  WriteFileOptions,
  WriteFileResult
} from "./session/files.js"
export type {
  PatchDiff,
  PatchFileResult,
  PatchReplace,
  PatchSpec,
  SearchFilesOptions,
  SearchFilesResult,
  SearchMatch
} from "./session/edit.js"
export {
  DEFAULT_SEARCH_RESULTS,
  MAX_MATCH_TEXT_BYTES,
  MAX_PATCH_BYTES,
  MAX_SEARCH_OUTPUT_BYTES,
  MAX_SEARCH_RESULTS
} from "./session/edit.js"
export {
  DEFAULT_FILE_MODE,
  DEFAULT_READ_LIMIT_BYTES,
  MAX_READ_LIMIT_BYTES,
  MAX_WRITE_BYTES,
  resolveSandboxPath,
  WRITABLE_ROOTS
} from "./session/files.js"
export { IDLE_COMMAND } from "./session/plan.js"
/** Where a session's shell keeps its state in the sandbox (cwd, exported variables): not the user's files. */
export { SESSION_STATE_DIR } from "./internal/sessionShell.js"
export type { KernelOptions, PersistentOptions, SessionMount, SessionOptions, SessionScope } from "./session/plan.js"
export type { SessionPoolOptions } from "./session/pool.js"
export { DEFAULT_POOL_IDLE_TTL_MS } from "./session/pool.js"

/** The sessions service's own options, beyond the sandbox defaults. */
const SessionsOnlyOptionsSchema = Schema.Struct({
  /** Default image of session sandboxes. Default: the python image (bash, python3, the runner). */
  sessionImage: Schema.optionalWith(Schemas.Image, { default: () => DEFAULT_SESSION_IMAGE }),
  /** How code snippets are run (reads a RunnerProtocol payload on stdin). Default: the supervisor in plain mode (/opt/hermes/hermes-run). */
  runner: Schema.optional(Schema.Array(Schema.String).annotations({ message: () => "an argv: an array of strings" })),
  /** Remove idle persistent sandboxes nobody holds when the service starts (in the background). Default true. */
  reapOnStart: Schema.optional(Schemas.Flag),
  /** Sessions opened ahead of demand, their kernels started: an `open` of the same options claims one (session/pool.ts). */
  pool: Schema.optional(SessionPool.SessionPoolOptionsSchema)
})
const decodeSessionsOnlyOptions = Schemas.decoderFor(SessionsOnlyOptionsSchema, "options")

/** The sessions service's options: the sandbox defaults (no scheduling: sessions have no queue, slots or pool). */
export interface SessionsOptions
  extends SandboxDefaults,
    Omit<Schemas.Input<typeof SessionsOnlyOptionsSchema>, "pool"> {
  /** Sessions opened ahead of demand, their kernels started: an `open` of the same options claims one. */
  readonly pool?: SessionPool.SessionPoolOptions
}

export type SessionOpenError = InvalidRequest | SandboxError | SessionConfigMismatch | SessionEnded | JournalError

export class Sessions extends Context.Tag("@hermes-sandbox/core/Sessions")<
  Sessions,
  {
    readonly executorId: string
    readonly config: ResolvedSandboxDefaults
    /** A fresh sandbox for one session; ends with the Sessions service at the latest. */
    readonly open: (options?: SessionOptions) => Effect.Effect<Session, SessionOpenError>
    /** The profile's persistent sandbox: reconnected when its fingerprint matches, else created. */
    readonly openPersistent: (options?: PersistentOptions) => Effect.Effect<Session, SessionOpenError>
    /** Sessions waiting in the pool, ready to be claimed (0 without a `pool`). */
    readonly poolReady: Effect.Effect<number>
    /** Sessions' events, each delivered after its append committed, from subscription on. */
    readonly events: Stream.Stream<EventEnvelope>
    readonly unsafeSubscribe: (listener: (event: EventEnvelope) => void) => () => void
    /**
     * Remove persistent sandboxes nobody here holds that are idle longer than their limit (by the
     * host's records: this service's journal, the engine's creation time) or past their maximum
     * lifetime (SessionReaper). One the journal has no record of counts as idle since its creation.
     */
    readonly reap: Effect.Effect<SessionReaper.ReapReport, SandboxError>
    /**
     * The Prometheus metrics of this service in the text exposition format (`Metrics.CONTENT_TYPE`):
     * the registry it shares with the executor of the same layer (ExecutorWithSessions: the
     * executor's `metrics` say the same), else one of its own (docs/observability.md).
     */
    readonly metrics: Effect.Effect<string>
  }
>() {}

/** A session closed with its Scope (Effect users). */
export const scoped = (options?: SessionOptions) =>
  Effect.acquireRelease(
    Effect.flatMap(Sessions, (s) => s.open(options)),
    (session) => session.close
  )

export const DEFAULT_SESSION_IMAGE = "hermes-sandbox/python:latest"
/** Code snippets: the supervisor in plain mode (inside a call's supervisor), which execs the interpreter. */
export const DEFAULT_RUNNER: ReadonlyArray<string> = [SUPERVISOR]

interface Registered {
  readonly containerName: string
  /** End it as the service closes: a session is destroyed, a persistent sandbox detached. */
  readonly shutdown: Effect.Effect<void>
}

/** Options only an executor reads: a session service refuses them rather than ignoring them. */
const EXECUTOR_ONLY = Object.keys(ExecutorOnlyOptionsSchema.fields)
const refuseExecutorOnly = (options: SessionsOptions): Effect.Effect<void, InvalidRequest> => {
  const given = EXECUTOR_ONLY.find((k) => (options as Record<string, unknown>)[k] !== undefined)
  return given === undefined
    ? Effect.void
    : Effect.fail(
        invalidRequest(
          given,
          (options as Record<string, unknown>)[given],
          "nothing: it is an executor option (createExecutor); sessions run one call at a time per session"
        )
      )
}

export const make = (options: SessionsOptions = {}) =>
  Effect.gen(function* () {
    yield* refuseExecutorOnly(options)
    const config = yield* resolveSandboxDefaults(options)
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const executorId = options.executorId ?? uuidv7()
    const own = yield* decodeSessionsOnlyOptions("", options)
    const defaultImage = own.sessionImage
    // The supervisor binary this runtime can load (gVisor needs the readable copy).
    const supervisor = supervisorFor(config.runtime)
    const runner = own.runner ?? DEFAULT_RUNNER.map((a) => (a === SUPERVISOR ? supervisor : a))
    const serviceScope = yield* Effect.scope
    const closed = yield* Ref.make(false)
    // The registry shared with the executor of the same layer (ExecutorWithSessions), else one of its own.
    const metrics = Option.getOrElse(yield* Effect.serviceOption(Metrics), makeMetrics)
    // The ownership lease first (released last, once every session sandbox is gone), then the startup sweep.
    yield* Ownership.start(executorId, options, "session ", metrics.leakedRemoved)

    // Append, then publish only what was committed (internal/publisher.ts).
    const { append: publish, events, unsafeSubscribe } = makePublisher(journal, executorId, metrics)
    const append = (streamId: string, ...evs: ReadonlyArray<JournalEvent>) => Effect.asVoid(publish(streamId, ...evs))
    const appendQuietly = (streamId: string, ...evs: ReadonlyArray<JournalEvent>) =>
      publish(streamId, ...evs).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning(`session journal append failed (${streamId})`, cause)),
        Effect.asVoid
      )

    // The kernel's removal policy, made first: its stragglers get their last attempt after every
    // session ended (finalizers run in reverse).
    const removals = yield* Removals.make({
      runtime,
      append: (streamId, event) => appendQuietly(streamId, event),
      logPrefix: "sessions: "
    })
    const kernel = { runtime, append }
    const background = yield* FiberSet.make<unknown, unknown>()
    const registry = new Map<string, Registered>()
    /** Persistent lookups and the reaper's decisions do not interleave. */
    const persistentLock = yield* Effect.makeSemaphore(1)

    // Finalizers run in reverse: first refuse new sessions, then end every open one.
    yield* Effect.addFinalizer(() =>
      Ref.set(closed, true).pipe(
        Effect.zipRight(Effect.forEach([...registry.values()], (r) => r.shutdown, { concurrency: 8, discard: true }))
      )
    )

    const reapWith = (unrecorded: SessionReaper.Unrecorded) =>
      persistentLock
        .withPermits(1)(
          SessionReaper.reapIdle({
            skip: (name) => [...registry.values()].some((r) => r.containerName === name),
            append: (streamId, ...evs) => appendQuietly(streamId, ...evs),
            journal,
            unrecorded
          })
        )
        .pipe(Effect.provideService(SandboxRuntime, runtime))
    // Asked for: a sandbox this journal has no record of counts as idle since its creation. At
    // start-up (every facade does it) such a one is left alone: another process may be using it.
    const reap = reapWith("engine-time")
    if (options.reapOnStart !== false) {
      yield* FiberSet.run(
        background,
        reapWith("keep").pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("session reaper failed; continuing", cause)),
          Effect.interruptible
        )
      )
    }

    const handleDeps = {
      runtime,
      journal,
      config,
      supervisor,
      runner,
      serviceScope,
      background,
      removals,
      append,
      appendQuietly,
      forget: (sessionId: string) => void registry.delete(sessionId)
    }
    const handle = (input: Parameters<typeof makeHandle>[1]) =>
      Effect.tap(makeHandle(handleDeps, input), ({ session, shutdown }) =>
        Effect.sync(() => registry.set(input.sessionId, { containerName: session.containerName, shutdown }))
      )

    /** Create (owned by the kernel's removal policy: a failure after the create removes it) and start. */
    const createStarted = (sessionId: string, plan: SessionPlan, name: string, labels: Record<string, string>) =>
      Effect.gen(function* () {
        let created: Sandbox.StartedSandbox["container"] | undefined
        return yield* Sandbox.create(kernel, {
          streamId: sessionId,
          spec: sandboxSpec(plan, name, labels, config, supervisor),
          own: (c) => Effect.sync(() => void (created = c)),
          // Every session sandbox's name is new (its session id): removing it by name cannot hit another.
          unanswered: (unansweredName) =>
            FiberSet.run(background, removals.removeUnanswered(unansweredName)).pipe(Effect.asVoid)
        }).pipe(
          Effect.tap((c) => Sandbox.startRecorded(kernel, sessionId, c)),
          Effect.tapErrorCause(() =>
            created === undefined ? Effect.void : removals.destroy(sessionId, created, "failed")
          )
        )
      }).pipe(Effect.uninterruptible)

    const refuseWhenClosed = Effect.flatMap(Ref.get(closed), (c) =>
      c
        ? Effect.fail(
            new SessionEnded({ sessionId: "", reason: "service closed", message: "the sessions service is closed" })
          )
        : Effect.void
    )

    /** A new session sandbox for this plan, with its handle. */
    const openFresh = (plan: SessionPlan, fp: ReturnType<typeof fingerprintOf>) =>
      Effect.gen(function* () {
        const sessionId = uuidv7()
        const name = `${ContainerNamePrefix}${sessionId}`
        yield* append(sessionId, {
          type: "SessionOpened",
          data: {
            sessionId,
            scope: "session",
            containerName: name,
            ...(plan.tags === undefined ? {} : { tags: plan.tags }),
            // Its hard cap (handle.ts counts it from a moment later: this is at most it), its idle limit.
            deadline: (yield* Clock.currentTimeMillis) + plan.maxLifetimeMs,
            ...(plan.lifetimeMs === undefined ? {} : { idleMs: plan.lifetimeMs })
          }
        })
        const container = yield* createStarted(
          sessionId,
          plan,
          name,
          sessionLabels(plan, sessionId, executorId, fp)
        ).pipe(
          Effect.tapError((e) =>
            appendQuietly(sessionId, {
              type: "SessionClosed",
              data: { sessionId, reason: `failed to start: ${e._tag}` }
            })
          )
        )
        return yield* handle({
          sessionId,
          scope: "session",
          container,
          plan,
          fingerprint: fp.fingerprint,
          reconnected: false,
          replaced: []
        })
      })

    const pool =
      own.pool === undefined
        ? undefined
        : yield* Effect.gen(function* () {
            const given = options.pool?.session ?? {}
            const base = yield* resolvePlan(given, "session", config, defaultImage, runtime.engine)
            const plan: SessionPlan = { ...base, kernel: { ...base.kernel, eager: own.pool?.kernel ?? true } }
            return yield* SessionPool.make({
              size: own.pool!.size,
              idleTtlMs: own.pool!.idleTtlMs ?? SessionPool.DEFAULT_POOL_IDLE_TTL_MS,
              plan,
              open: Effect.gen(function* () {
                yield* refuseWhenClosed
                const fp = fingerprintOf(plan, yield* runtime.resolveImage(plan.image), config)
                return { made: yield* openFresh(plan, fp), fingerprint: fp.fingerprint }
              }).pipe(Effect.uninterruptible),
              append,
              run: (effect) => Effect.asVoid(FiberSet.run(background, effect))
            })
          })

    const open = (o: SessionOptions = {}): Effect.Effect<Session, SessionOpenError> =>
      Effect.gen(function* () {
        yield* refuseWhenClosed
        const plan = yield* resolvePlan(o, "session", config, defaultImage, runtime.engine)
        const fp = fingerprintOf(plan, yield* runtime.resolveImage(plan.image), config)
        if (pool !== undefined) {
          const claimed = yield* pool.claim(plan, fp.fingerprint)
          if (Option.isSome(claimed)) return claimed.value.session
        }
        return (yield* openFresh(plan, fp)).session
      }).pipe(Effect.uninterruptible)

    const openPersistent = (o: PersistentOptions = {}): Effect.Effect<Session, SessionOpenError> =>
      Effect.gen(function* () {
        yield* refuseWhenClosed
        const { policy, profile } = yield* resolvePersistent(o)
        const plan = yield* resolvePlan(o, "persistent", config, defaultImage, runtime.engine)
        const imageId = yield* runtime.resolveImage(plan.image)
        const fp = fingerprintOf(plan, imageId, config)
        const sessionId = Fingerprint.persistentId(profile, fp.fingerprint)
        const labels = persistentLabels(plan, sessionId, profile, fp, yield* Clock.currentTimeMillis)
        const scope: SessionScope = "persistent"
        return yield* persistentLock.withPermits(1)(
          findOrCreate(
            { runtime, removals, append, appendQuietly, held: (id) => registry.has(id) },
            {
              profile,
              policy,
              sessionId,
              fingerprint: fp,
              imageId,
              tags: plan.tags,
              idleMs: plan.lifetimeMs,
              create: createStarted(sessionId, plan, `${ContainerNamePrefix}${sessionId}`, labels),
              newDeadlineMs: SessionReaper.deadlineOf(labels, 0),
              handle: (container, reconnected, replaced, deadlineMs) =>
                Effect.map(
                  handle({
                    sessionId,
                    scope,
                    container,
                    plan,
                    fingerprint: fp.fingerprint,
                    reconnected,
                    replaced,
                    deadlineMs
                  }),
                  (made) => made.session
                )
            }
          )
        )
      }).pipe(Effect.uninterruptible)

    const poolReady = pool?.ready ?? Effect.succeed(0)
    const unregister = metrics.addLiveState(Effect.sync(() => ({ sessionsOpen: registry.size })))
    yield* Effect.addFinalizer(() => Effect.sync(unregister))
    return Sessions.of({
      executorId,
      config,
      open,
      openPersistent,
      poolReady,
      events,
      unsafeSubscribe,
      reap,
      metrics: metrics.text
    })
  })

/** The sessions service as a layer; its scope is the service's lifetime (open sessions end with it). */
export const layer = (
  options: SessionsOptions = {}
): Layer.Layer<Sessions, InvalidRequest, SandboxRuntime | Journal.Journal> => Layer.scoped(Sessions, make(options))
