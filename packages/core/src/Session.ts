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
 * Both are created through the same SandboxSpec path as one-shot containers (same hardening),
 * the main process being `sleep infinity` under the engine's init instead of the runner.
 *
 * Each call is one `exec` of the fixed session shell (internal/sessionShell.ts) given the
 * user's command as an ARGUMENT; code snippets go through the runner protocol, executed by
 * the same shell. Calls on one session are SERIALIZED (a one-permit semaphore, FIFO), so
 * parallel subagents never interleave `cd`, variables or files. The host-side deadline is the
 * authority: on expiry the call's process tree is killed from inside (ExecProcess.kill); if it
 * does not end within a grace period, the whole sandbox is killed and the session ends.
 *
 * Environment values (session env, forwarded secrets, per-call env) travel in each call's
 * exec environment only: never in the container's configuration (`docker inspect` shows
 * neither names nor values), never in process arguments, the journal or results, and never
 * in the shell's saved state.
 *
 * Journal: the session's stream (id = session id) holds SessionOpened | SessionReconnected,
 * ContainerCreated, ContainerStarted, then SessionIdleExpired?, ContainerDestroyed
 * (session-closed | idle-expired), SessionClosed. Each call is its own stream:
 * ExecutionRequested (scope, sessionId) then ContainerExited | ExecutionTimedOut |
 * ExecutionInterrupted | ExecutionFailed. Events are published after they commit.
 */
import { Clock, Context, Deferred, Effect, ExecutionStrategy, Exit, Fiber, FiberSet, Layer, Option, Redacted, Ref, Schedule, Scope, Stream } from "effect"
import { createHash } from "node:crypto"
import { v7 as uuidv7 } from "uuid"
import { type EventEnvelope, Journal, type JournalError, type JournalEvent } from "@hermes-sandbox/events"
import { ContainerFailed, type InvalidRequest, invalidRequest, type SandboxError, SessionConfigMismatch, SessionEnded } from "./Errors.js"
import type { ExecuteOptions } from "./Executor.js"
import { planExecution } from "./ExecutionRequest.js"
import { type ExecutionResult, toExecutionResult } from "./ExecutionResult.js"
import { check, type ExecutorOptions, resolveExecutorConfig, type ResolvedExecutorConfig } from "./ExecutorConfig.js"
import * as Fingerprint from "./Fingerprint.js"
import { makePublisher } from "./internal/publisher.js"
import { SESSION_LOCK, SESSION_STATE_DIR, sessionInvocation } from "./internal/sessionShell.js"
import { ContainerNamePrefix, Label, ProjectName } from "./Labels.js"
import * as ProcessIdentity from "./ProcessIdentity.js"
import { encodeRunnerPayload, SUPERVISOR, supervisorFor } from "./RunnerProtocol.js"
import { makeSupervisedRun } from "./internal/supervisedRun.js"
import { mountDanger } from "./Mounts.js"
import { type ExecProcess, type SandboxLimits, SandboxRuntime, type SandboxSpec } from "./SandboxRuntime.js"
import * as SessionReaper from "./SessionReaper.js"
import { sweep } from "./Sweep.js"
import { startRecorded } from "./internal/startRecorded.js"

export type SessionScope = "session" | "persistent"

export interface SessionMount {
  readonly hostPath: string
  readonly containerPath: string
  /** Read-only unless "rw". */
  readonly mode?: "ro" | "rw"
}

export interface SessionOptions {
  /** Image of the sandbox. It needs bash; code snippets need the runner. Default: the Sessions' image. */
  readonly image?: string
  /** Variables for every call (exec environment; not in the container's configuration). */
  readonly env?: Readonly<Record<string, string>>
  /** Forwarded variables (Hermes `docker_forward_env`): like `env`, and their values are never printed. */
  readonly secretEnv?: Readonly<Record<string, Redacted.Redacted<string>>>
  /** Bind mounts, read-only unless mode "rw". The Docker socket and "/" are refused unless allowDangerousMounts. */
  readonly mounts?: ReadonlyArray<SessionMount>
  readonly allowDangerousMounts?: boolean
  /** Working directory of the first call. Default /workspace. */
  readonly workingDir?: string
  /** Idle seconds after which the sandbox is destroyed (Hermes `lifetime_seconds`). Default: never. */
  readonly lifetimeSeconds?: number
  /**
   * Hard cap on the sandbox's life, counted from its creation, whatever it does. Session: default
   * and at most 24 h. Persistent: default 7 days, at most 366 days; recorded as its `deadline`
   * label when it is created (reopening with another value does not move it), past which the
   * startup sweep, the reaper and its holder remove it (SessionReaper).
   */
  readonly maxLifetimeMs?: number
  /** Default per-call deadline. Default: the Sessions' timeoutMs. */
  readonly timeoutMs?: number
  readonly memory?: number | string
  readonly cpus?: number
  readonly pidsLimit?: number
  readonly network?: boolean
  readonly outputLimitBytes?: number
  /**
   * Let processes a call leaves running (`server &`, daemons) live on into later calls. Default
   * false: each call starts by ending every process earlier calls left in the sandbox, and ends
   * those it left itself, so no call can read, alter or wedge another (one process-free trust
   * domain per call; files and the saved cwd/env carry over). With true, the Hermes agent's
   * background jobs work, and a leftover can read a later call's environment, memory and output
   * (same uid, no Yama) — but never forge its exit code or its end (docs/sessions.md).
   */
  readonly keepBackgroundProcesses?: boolean
}

export interface PersistentOptions extends SessionOptions {
  /** Which persistent sandbox (Hermes profile). Default "default". */
  readonly profile?: string
  /** When the profile's sandbox was made with another configuration. Default "replace". */
  readonly onConfigChange?: "replace" | "refuse"
}

export interface SessionsOptions extends ExecutorOptions {
  /** Default image of session sandboxes. Default: the python image (bash, python3, the runner). */
  readonly sessionImage?: string
  /** How code snippets are run (reads a RunnerProtocol payload on stdin). Default: the supervisor in plain mode (/opt/hermes/hermes-run). */
  readonly runner?: ReadonlyArray<string>
  /** Remove idle persistent sandboxes nobody holds when the service starts (in the background). Default true. */
  readonly reapOnStart?: boolean
}

export interface RunOptions extends ExecuteOptions {
  readonly stdin?: string
  /** Variables for this call only (they win over exported ones and are not carried). */
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
}

export interface SessionCodeRequest {
  readonly language: string
  readonly code: string
  readonly stdin?: string
  /** Written into the session's current directory before the program runs. */
  readonly files?: Readonly<Record<string, string | Uint8Array>>
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
  readonly outputLimitBytes?: number
}

export interface SessionResult extends ExecutionResult {
  readonly sessionId: string
}

export type SessionOpenError = InvalidRequest | SandboxError | SessionConfigMismatch | SessionEnded | JournalError
export type SessionCallError = InvalidRequest | SandboxError | SessionEnded | JournalError

export interface SessionStatus {
  readonly open: boolean
  /** Why it ended ("closed", "idle-expired", "detached", ...). */
  readonly endReason: string | undefined
  /** Calls accepted and not finished (running or queued). */
  readonly pending: number
}

export interface Session {
  readonly sessionId: string
  readonly scope: SessionScope
  readonly containerName: string
  readonly fingerprint: string
  /** Persistent: an existing sandbox was found (and possibly restarted) instead of created. */
  readonly reconnected: boolean
  /** Persistent: containers of this profile removed because their configuration differed. */
  readonly replaced: ReadonlyArray<string>
  /** A shell command (string, run by bash: `cd`, `export`, pipes...) or an argv run as is. */
  readonly run: (command: string | ReadonlyArray<string>, options?: RunOptions) => Effect.Effect<SessionResult, SessionCallError>
  /** A code snippet through the runner, in the session's current directory and environment. */
  readonly runCode: (request: SessionCodeRequest, options?: ExecuteOptions) => Effect.Effect<SessionResult, SessionCallError>
  /** Session: destroy the sandbox. Persistent: detach, leaving it for the next process. Idempotent. */
  readonly close: Effect.Effect<void>
  /** Destroy the sandbox (persistent too). Idempotent. */
  readonly destroy: Effect.Effect<void>
  readonly status: Effect.Effect<SessionStatus>
}

export class Sessions extends Context.Tag("@hermes-sandbox/core/Sessions")<
  Sessions,
  {
    readonly executorId: string
    readonly config: ResolvedExecutorConfig
    /** A fresh sandbox for one session; ends with the Sessions service at the latest. */
    readonly open: (options?: SessionOptions) => Effect.Effect<Session, SessionOpenError>
    /** The profile's persistent sandbox: reconnected when its fingerprint matches, else created. */
    readonly openPersistent: (options?: PersistentOptions) => Effect.Effect<Session, SessionOpenError>
    /** Sessions' events, each delivered after its append committed, from subscription on. */
    readonly events: Stream.Stream<EventEnvelope>
    readonly unsafeSubscribe: (listener: (event: EventEnvelope) => void) => () => void
    /**
     * Remove persistent sandboxes nobody here holds that are idle longer than their limit (by the
     * host's records: this service's journal, the engine's creation time) or past their maximum
     * lifetime (SessionReaper). One the journal has no record of counts as idle since its creation.
     */
    readonly reap: Effect.Effect<SessionReaper.ReapReport, SandboxError>
  }
>() {}

/** A session closed with its Scope (Effect users). */
export const scoped = (options?: SessionOptions) =>
  Effect.acquireRelease(Effect.flatMap(Sessions, (s) => s.open(options)), (session) => session.close)

export const DEFAULT_SESSION_IMAGE = "hermes-sandbox/python:latest"
/** Code snippets: the supervisor in plain mode (inside a call's supervisor), which execs the interpreter. */
export const DEFAULT_RUNNER: ReadonlyArray<string> = [SUPERVISOR]
/** The sandbox's main process, PID 1: the supervisor holding it open, reaping orphans, until removed. */
export const IDLE_COMMAND: ReadonlyArray<string> = [SUPERVISOR, "--hold"]
const DEFAULT_MAX_LIFETIME_MS = 24 * 3600_000
/** After a kill, how long the call's process may take to end before the whole sandbox is killed. */
const KILL_GRACE = "5 seconds"
const REMOVE_ATTEMPT_TIMEOUT = "20 seconds"
const PROFILE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const encoder = new TextEncoder()

interface SessionPlan {
  readonly image: string
  readonly env: Readonly<Record<string, string>>
  readonly secretEnv: Readonly<Record<string, Redacted.Redacted<string>>>
  readonly mounts: SandboxSpec["mounts"]
  readonly workingDir: string
  readonly limits: SandboxLimits
  readonly network: boolean
  readonly timeoutMs: number
  readonly outputLimitBytes: number
  readonly lifetimeMs: number | undefined
  readonly maxLifetimeMs: number
  readonly keepBackgroundProcesses: boolean
}


interface CallInput {
  readonly language: string
  readonly mode: "eval" | "argv" | "runner"
  readonly args: ReadonlyArray<string>
  readonly stdin: Uint8Array
  readonly codeBytes: number
  readonly codeSha256: string
  readonly fileCount: number
  readonly timeoutMs: number
  readonly outputLimitBytes: number
  readonly env: Readonly<Record<string, string>>
}

interface Registered {
  readonly sessionId: string
  readonly containerName: string
  readonly scope: SessionScope
  /** End it as the service closes: a session is destroyed, a persistent sandbox detached. */
  readonly shutdown: Effect.Effect<void>
}

export const make = (options: SessionsOptions = {}) =>
  Effect.gen(function*() {
    const config = yield* resolveExecutorConfig(options)
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const executorId = options.executorId ?? uuidv7()
    const defaultImage = yield* check.image("sessionImage", options.sessionImage ?? DEFAULT_SESSION_IMAGE)
    // The supervisor binary this runtime can load (gVisor needs the readable copy).
    const supervisor = supervisorFor(config.runtime)
    const runner = options.runner ?? DEFAULT_RUNNER.map((a) => a === SUPERVISOR ? supervisor : a)
    const serviceScope = yield* Effect.scope
    const closed = yield* Ref.make(false)

    // Append, then publish only what was committed (internal/publisher.ts).
    const { append, events, unsafeSubscribe } = makePublisher(journal, executorId)
    /** For bookkeeping on paths that must not fail (cleanup): a journal failure is logged. */
    const appendQuietly = (streamId: string, ...evs: ReadonlyArray<JournalEvent>) =>
      append(streamId, ...evs).pipe(Effect.catchAllCause((cause) => Effect.logWarning(`session journal append failed (${streamId})`, cause)), Effect.asVoid)

    // Cleanups and reapers run here; the service's close waits for them.
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

    if (options.sweepOnStart !== false) {
      yield* sweep({ executorId }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("session startup sweep failed; continuing", cause)))
    }

    const reapWith = (unrecorded: SessionReaper.Unrecorded) =>
      persistentLock.withPermits(1)(
        SessionReaper.reapIdle({
          skip: (name) => [...registry.values()].some((r) => r.containerName === name),
          append: (streamId, ...evs) => appendQuietly(streamId, ...evs),
          journal,
          unrecorded
        })
      ).pipe(Effect.provideService(SandboxRuntime, runtime))
    // Asked for: a sandbox this journal has no record of counts as idle since its creation. At
    // start-up (every facade does it) such a one is left alone: another process may be using it.
    const reap = reapWith("engine-time")
    if (options.reapOnStart !== false) {
      yield* FiberSet.run(background, reapWith("keep").pipe(Effect.catchAllCause((cause) => Effect.logWarning("session reaper failed; continuing", cause)), Effect.interruptible))
    }

    const resolvePlan = (o: SessionOptions, scope: SessionScope): Effect.Effect<SessionPlan, InvalidRequest> =>
      Effect.gen(function*() {
        const image = o.image === undefined ? defaultImage : yield* check.image("image", o.image)
        const env = yield* check.env("env", { ...config.env, ...(o.env ?? {}) })
        const secretEnv: Record<string, Redacted.Redacted<string>> = {}
        for (const [name, value] of Object.entries(o.secretEnv ?? {})) {
          if (!ENV_NAME.test(name)) return yield* Effect.fail(invalidRequest(`secretEnv.${name}`, name, "a variable name matching [A-Za-z_][A-Za-z0-9_]*"))
          if (!Redacted.isRedacted(value)) return yield* Effect.fail(invalidRequest(`secretEnv.${name}`, "(not Redacted)", "a Redacted value (Redacted.make)"))
          secretEnv[name] = value
        }
        {
          // The same bounds as env (NUL bytes, string and total sizes), the values never echoed.
          const revealed = Object.fromEntries(Object.entries(secretEnv).map(([k, v]) => [k, Redacted.value(v)]))
          const checked = yield* Effect.either(check.env("secretEnv", revealed, env))
          if (checked._tag === "Left") return yield* Effect.fail(invalidRequest(checked.left.field, "(redacted)", checked.left.allowed))
        }
        const mounts: Array<SandboxSpec["mounts"][number]> = []
        for (const [i, m] of (o.mounts ?? []).entries()) {
          if (typeof m.hostPath !== "string" || !m.hostPath.startsWith("/")) return yield* Effect.fail(invalidRequest(`mounts[${i}].hostPath`, m.hostPath, "an absolute host path"))
          if (typeof m.containerPath !== "string" || !m.containerPath.startsWith("/") || m.containerPath === "/") {
            return yield* Effect.fail(invalidRequest(`mounts[${i}].containerPath`, m.containerPath, "an absolute container path other than /"))
          }
          if (m.mode !== undefined && m.mode !== "ro" && m.mode !== "rw") return yield* Effect.fail(invalidRequest(`mounts[${i}].mode`, m.mode, `"ro" (default) or "rw"`))
          const danger = mountDanger(m.hostPath)
          if (danger !== undefined && o.allowDangerousMounts !== true) {
            return yield* Effect.fail(invalidRequest(`mounts[${i}].hostPath`, m.hostPath, `a path that does not hand over the host (${danger}); pass allowDangerousMounts: true to force it`))
          }
          if (mounts.some((x) => x.containerPath === m.containerPath)) return yield* Effect.fail(invalidRequest(`mounts[${i}].containerPath`, m.containerPath, "a container path mounted once"))
          mounts.push({ hostPath: m.hostPath, containerPath: m.containerPath, mode: m.mode ?? "ro" })
        }
        const workingDir = o.workingDir ?? config.workingDir
        if (!workingDir.startsWith("/")) return yield* Effect.fail(invalidRequest("workingDir", workingDir, "an absolute path"))
        const lifetimeMs = o.lifetimeSeconds === undefined ? undefined : (yield* check.positiveInt("lifetimeSeconds", o.lifetimeSeconds, 366 * 86400)) * 1000
        return {
          image,
          env,
          secretEnv,
          mounts,
          workingDir,
          limits: {
            memoryBytes: o.memory === undefined ? config.memoryBytes : yield* check.memory("memory", o.memory),
            nanoCpus: o.cpus === undefined ? config.nanoCpus : yield* check.cpus("cpus", o.cpus),
            pidsLimit: o.pidsLimit === undefined ? config.pidsLimit : yield* check.positiveInt("pidsLimit", o.pidsLimit, 1 << 22),
            tmpBytes: config.tmpBytes,
            workspaceBytes: config.workspaceBytes,
            diskBytes: config.diskBytes
          },
          network: o.network ?? config.network,
          timeoutMs: o.timeoutMs === undefined ? config.timeoutMs : yield* check.timeoutMs("timeoutMs", o.timeoutMs),
          outputLimitBytes: o.outputLimitBytes === undefined ? config.outputLimitBytes : yield* check.positiveInt("outputLimitBytes", o.outputLimitBytes, 1024 * 1024 * 1024),
          lifetimeMs,
          maxLifetimeMs: scope === "persistent"
            ? o.maxLifetimeMs === undefined ? SessionReaper.DEFAULT_PERSISTENT_MAX_LIFETIME_MS : yield* check.positiveInt("maxLifetimeMs", o.maxLifetimeMs, SessionReaper.MAX_PERSISTENT_LIFETIME_MS)
            : o.maxLifetimeMs === undefined ? DEFAULT_MAX_LIFETIME_MS : yield* check.timeoutMs("maxLifetimeMs", o.maxLifetimeMs),
          keepBackgroundProcesses: o.keepBackgroundProcesses === undefined ? false : o.keepBackgroundProcesses === true
            ? true
            : o.keepBackgroundProcesses === false ? false : yield* Effect.fail(invalidRequest("keepBackgroundProcesses", o.keepBackgroundProcesses, "true or false"))
        }
      })

    const fingerprintOf = (plan: SessionPlan, imageId: string) => {
      const canonical = Fingerprint.canonical({
        image: plan.image,
        imageId,
        limits: plan.limits,
        mounts: plan.mounts,
        envNames: [...Object.keys(plan.env), ...Object.keys(plan.secretEnv)],
        network: plan.network,
        runtime: config.runtime,
        capAdd: config.capAdd,
        user: config.user,
        workingDir: plan.workingDir
      })
      return { canonical, fingerprint: Fingerprint.fingerprintOf(canonical) }
    }

    const specFor = (plan: SessionPlan, name: string, labels: Record<string, string>): SandboxSpec => ({
      name,
      image: plan.image,
      command: IDLE_COMMAND.map((a) => a === SUPERVISOR ? supervisor : a),
      // Nothing of the session's env: values travel with each call's exec.
      env: {},
      workingDir: plan.workingDir,
      user: config.user,
      labels,
      limits: plan.limits,
      network: plan.network,
      openStdin: false,
      capAdd: config.capAdd,
      runtime: config.runtime,
      mounts: plan.mounts
    })

    const removeContainer = (container: { readonly id: string; readonly name: string }) =>
      runtime.remove(container).pipe(
        Effect.timeoutFail({
          duration: REMOVE_ATTEMPT_TIMEOUT,
          onTimeout: () => new ContainerFailed({ operation: "remove", containerName: container.name, message: `remove ${container.name}: no answer within ${REMOVE_ATTEMPT_TIMEOUT}` })
        }),
        Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.either(Schedule.spaced("2 seconds")), Schedule.upTo("60 seconds")))
      )

    /** Create and start; on any failure the container is removed and the stream closed. */
    const createStarted = (sessionId: string, spec: SandboxSpec) =>
      Effect.gen(function*() {
        const container = yield* runtime.create(spec)
        const started = Effect.gen(function*() {
          yield* append(sessionId, { type: "ContainerCreated", data: { containerName: container.name, containerId: container.id, imageId: container.imageId } })
          yield* startRecorded(runtime, container, (event) => append(sessionId, event))
          return container
        })
        return yield* started.pipe(
          Effect.tapErrorCause(() =>
            removeContainer(container).pipe(
              Effect.zipRight(appendQuietly(sessionId, { type: "ContainerDestroyed", data: { containerName: container.name, containerId: container.id, reason: "failed" } })),
              Effect.ignore
            )
          )
        )
      }).pipe(Effect.uninterruptible)

    interface HandleInput {
      readonly sessionId: string
      readonly scope: SessionScope
      readonly container: { readonly id: string; readonly name: string; readonly imageId: string }
      readonly plan: SessionPlan
      readonly fingerprint: string
      readonly reconnected: boolean
      readonly replaced: ReadonlyArray<string>
      /** Persistent: its deadline (ms, from the label); the handle ends and removes it then. */
      readonly deadlineMs?: number | undefined
    }

    const makeHandle = (h: HandleInput) =>
      Effect.gen(function*() {
        const { container, plan, sessionId } = h
        const lock = yield* Effect.makeSemaphore(1)
        const ended = yield* Ref.make<Option.Option<string>>(Option.none())
        const cleaned = yield* Deferred.make<void>()
        let removed = false
        let pending = 0
        let lastActivityMs = yield* Clock.currentTimeMillis
        const openedAtMs = lastActivityMs
        const callScope = yield* Scope.fork(serviceScope, ExecutionStrategy.sequential)
        const calls = yield* FiberSet.make<SessionResult, SessionCallError>().pipe(Scope.extend(callScope))
        let reaperFiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
        /** Set by a call that ended the session: the cleanup (which interrupts calls) starts once it returned. */
        let cleanupAfterCall: string | undefined

        /** Marks the session ended (first reason wins); true if this call ended it. */
        const markEnded = (reason: string) =>
          Ref.modify(ended, (current) => Option.isSome(current) ? [false, current] as const : [true, Option.some(reason)] as const)

        const cleanup = (reason: string, remove: boolean, idleMs?: number) =>
          Effect.gen(function*() {
            // Running and queued calls are interrupted (each kills its process tree first).
            yield* Scope.close(callScope, Exit.void)
            if (reaperFiber !== undefined) yield* Fiber.interrupt(reaperFiber)
            if (idleMs !== undefined) yield* appendQuietly(sessionId, { type: "SessionIdleExpired", data: { sessionId, idleMs } })
            if (remove && !removed) {
              const outcome = yield* Effect.either(removeContainer(container))
              if (outcome._tag === "Right") {
                removed = true
                yield* appendQuietly(sessionId, {
                  type: "ContainerDestroyed",
                  data: { containerName: container.name, containerId: container.id, reason: idleMs !== undefined ? "idle-expired" : "session-closed" }
                })
              } else {
                yield* Effect.logWarning(`could not remove ${container.name}; the sweep/reaper will`, outcome.left)
              }
            }
            yield* appendQuietly(sessionId, { type: "SessionClosed", data: { sessionId, reason } })
            registry.delete(sessionId)
          }).pipe(Effect.ensuring(Deferred.succeed(cleaned, undefined)), Effect.uninterruptible)

        /** End from anywhere (a call, the reaper): the cleanup runs in the background, never in the caller's fiber. */
        const endInBackground = (reason: string, remove: boolean, idleMs?: number) =>
          markEnded(reason).pipe(Effect.flatMap((won) => won ? FiberSet.run(background, cleanup(reason, remove, idleMs)).pipe(Effect.asVoid) : Effect.void))

        const endAndWait = (reason: string, remove: boolean) =>
          Effect.gen(function*() {
            const won = yield* markEnded(reason)
            if (won) yield* FiberSet.run(background, cleanup(reason, remove))
            yield* Deferred.await(cleaned)
            if (remove && !removed) {
              // Ended earlier without removal (persistent detach): destroy now.
              yield* removeContainer(container).pipe(
                Effect.zipRight(Effect.sync(() => {
                  removed = true
                })),
                Effect.zipRight(appendQuietly(sessionId, { type: "ContainerDestroyed", data: { containerName: container.name, containerId: container.id, reason: "session-closed" } })),
                Effect.catchAllCause((cause) => Effect.logWarning(`could not remove ${container.name}`, cause))
              )
            }
          })

        const endedError = (reason: string) =>
          new SessionEnded({ sessionId, reason, message: `session ${sessionId} has ended (${reason}); open a new one` })

        const runCall = (input: CallInput, executionId: string, hooks: ExecuteOptions) =>
          Effect.gen(function*() {
            const reason = yield* Ref.get(ended)
            if (Option.isSome(reason)) return yield* endedError(reason.value)
            lastActivityMs = yield* Clock.currentTimeMillis
            // The call's supervisor (framed argv mode) takes the session lock, relays the shell's output
            // in frames and reports its exit: nothing left in the sandbox by an earlier call can forge it.
            const sup = yield* makeSupervisedRun(input.outputLimitBytes, hooks)
            const { stdout, stderr } = sup
            const shell = sessionInvocation({ stateDir: SESSION_STATE_DIR, keep: Object.keys(input.env), mode: input.mode, args: input.args })
            const payload = encodeRunnerPayload({
              key: sup.key,
              capBytes: input.outputLimitBytes,
              lock: SESSION_LOCK,
              killLeftovers: !plan.keepBackgroundProcesses,
              args: shell,
              stdin: input.stdin
            })
            const startedAtMs = Date.now()
            const proc: ExecProcess = yield* Effect.acquireRelease(
              runtime.exec(container, { command: [supervisor], env: input.env, stdin: true }, sup.receiver),
              (p, exit) => (exit._tag === "Failure" ? p.kill.pipe(Effect.ignore) : Effect.void).pipe(Effect.zipRight(p.detach))
            )
            // Feed stdin in the background: a command that never reads it must not block us.
            yield* proc.write(payload).pipe(Effect.zipRight(proc.end), Effect.ignore, Effect.forkScoped)
            const finished = yield* Effect.raceFirst(
              Deferred.await(sup.report),
              proc.exit.pipe(Effect.map((s) => ({ _tag: "Engine" as const, exitCode: s.exitCode })))
            ).pipe(Effect.timeoutTo({ duration: input.timeoutMs, onSuccess: Option.some, onTimeout: Option.none }))
            const refuse = (reason: "setup" | "protocol" | "session-locked", message: string) =>
              proc.kill.pipe(Effect.ignore, Effect.zipRight(new ContainerFailed({ operation: reason === "setup" ? "setup" : "session call", containerName: container.name, reason, message })))
            let exitCode: number
            let timedOut = false
            let oomKilled = false
            if (Option.isNone(finished)) {
              const holder = sup.lockWait()
              if (holder !== undefined) {
                // Never ran: the lock stayed held for the whole deadline (by another handle's call, or by a
                // process left behind that holds it). Said as such, never as the command's own timeout.
                const [pid, ...cmd] = holder.split(" ")
                return yield* refuse(
                  "session-locked",
                  `the session lock in ${container.name} was held for the whole deadline (${input.timeoutMs} ms) by process ${pid} (${cmd.join(" ").trim() || "unknown command"}); ` +
                    `the command never ran. Another handle's call is still running, or a process left in the sandbox holds ${SESSION_LOCK}: end it, or destroy the session`
                )
              }
              timedOut = true
              // Everything the call started dies now, escapees (setsid, double fork, env -i) included: every
              // process started since the call began (all of them but PID 1 when leftovers are not kept).
              const started = sup.started()
              const killer = started === undefined
                ? Option.none<ExecProcess>()
                : yield* runtime.exec(
                  container,
                  { command: [supervisor, "--kill", String(started.pid), started.start, plan.keepBackgroundProcesses ? "since" : "all"], env: {}, stdin: false },
                  { stdout: () => {}, stderr: () => {} }
                ).pipe(Effect.option)
              // Before the program started (no 'p' frame), its supervisor's own process tree is the call.
              if (Option.isNone(killer)) yield* proc.kill.pipe(Effect.ignore)
              // The call's supervisor reports once its child died, or the exec ends.
              const afterKill = yield* Effect.raceFirst(Deferred.await(sup.report), proc.exit).pipe(
                Effect.timeoutTo({ duration: KILL_GRACE, onSuccess: Option.some, onTimeout: Option.none }),
                Effect.either,
                Effect.ensuring(Option.isSome(killer) ? killer.value.detach : Effect.void)
              )
              if (afterKill._tag === "Left" || Option.isNone(afterKill.right)) {
                // Something in the sandbox outlived the kill: only killing the sandbox is sure. The
                // session ends now (no new call starts); its cleanup waits until this call returned.
                yield* runtime.kill(container).pipe(Effect.ignore)
                const reason = "a timed-out command could not be killed inside; the sandbox was killed"
                if (yield* markEnded(reason)) cleanupAfterCall = reason
              }
              exitCode = 137
            } else {
              // The exec ended before the report: the report may be among the last bytes.
              const report = finished.value._tag === "Engine"
                ? yield* Deferred.poll(sup.report).pipe(Effect.flatMap((o) => Option.isSome(o) ? Effect.asSome(o.value) : Effect.succeedNone))
                : Option.some(finished.value)
              if (Option.isSome(report) && report.value._tag === "SetupFailed") {
                return yield* refuse("setup", `the call in ${container.name} could not be set up, so it never ran: ${report.value.message}`)
              }
              if (Option.isSome(report) && report.value._tag === "Violation") {
                return yield* refuse("protocol", `the report channel of a call in ${container.name} carried bytes its supervisor did not write (${report.value.reason}); nothing it reported was used`)
              }
              if (Option.isNone(report)) {
                const diagnostics = sup.diagnostics()
                if (diagnostics !== "" && finished.value._tag === "Engine" && (finished.value.exitCode === 126 || finished.value.exitCode === 127)) {
                  return yield* refuse("protocol", `the supervisor in ${container.name} refused the call: ${diagnostics}`)
                }
              }
              exitCode = Option.isSome(report) && report.value._tag === "Exited"
                ? report.value.exit.exitCode
                : finished.value._tag === "Engine" ? finished.value.exitCode : 1
              if (exitCode === 137) {
                oomKilled = (yield* runtime.inspect(container).pipe(Effect.option)).pipe(Option.map((s) => s.oomKilled), Option.getOrElse(() => false))
              }
            }
            const finishedAtMs = Date.now()
            lastActivityMs = yield* Clock.currentTimeMillis
            const durationMs = finishedAtMs - startedAtMs
            yield* append(
              executionId,
              timedOut
                ? { type: "ExecutionTimedOut", data: { timeoutMs: input.timeoutMs, durationMs } }
                : { type: "ContainerExited", data: { exitCode, oomKilled, durationMs } }
            )
            const result: SessionResult = {
              ...toExecutionResult({ executionId, containerName: container.name, exitCode, timedOut, oomKilled, stdout, stderr, startedAtMs, finishedAtMs }),
              sessionId
            }
            return result
          }).pipe(Effect.scoped)

        const call = (input: CallInput, hooks: ExecuteOptions): Effect.Effect<SessionResult, SessionCallError> =>
          Effect.gen(function*() {
            const reason = yield* Ref.get(ended)
            if (Option.isSome(reason)) return yield* endedError(reason.value)
            pending++
            return yield* callAccepted(input, hooks).pipe(Effect.ensuring(Effect.sync(() => void pending--)))
          })

        const callAccepted = (input: CallInput, hooks: ExecuteOptions): Effect.Effect<SessionResult, SessionCallError> =>
          Effect.gen(function*() {
            const executionId = uuidv7()
            hooks.onExecutionId?.(executionId)
            yield* append(executionId, {
              type: "ExecutionRequested",
              data: {
                language: input.language,
                image: plan.image,
                codeBytes: input.codeBytes,
                codeSha256: input.codeSha256,
                stdinBytes: input.stdin.byteLength,
                fileCount: input.fileCount,
                timeoutMs: input.timeoutMs,
                limits: { memoryBytes: plan.limits.memoryBytes, nanoCpus: plan.limits.nanoCpus, pidsLimit: plan.limits.pidsLimit, outputLimitBytes: input.outputLimitBytes },
                network: plan.network,
                runtime: config.runtime ?? "runc",
                scope: h.scope,
                sessionId
              }
            })
            let terminal = false
            const supervised = lock.withPermits(1)(runCall(input, executionId, hooks).pipe(Effect.tap(() => Effect.sync(() => void (terminal = true))))).pipe(
              Effect.onInterrupt(() =>
                terminal ? Effect.void : Effect.suspend(() => {
                  const asked = hooks.interruptReason?.()
                  const reason = asked === undefined ? "interrupted (caller, or the session ended)" : `interrupted by the caller: ${asked}`
                  return appendQuietly(executionId, { type: "ExecutionInterrupted", data: { reason } })
                })
              ),
              Effect.tapError((error) =>
                terminal ? Effect.void : appendQuietly(executionId, { type: "ExecutionFailed", data: { errorTag: error._tag, message: error.message } })
              ),
              Effect.ensuring(
                Effect.suspend(() => {
                  const reason = cleanupAfterCall
                  if (reason === undefined) return Effect.void
                  cleanupAfterCall = undefined
                  return FiberSet.run(background, cleanup(reason, true)).pipe(Effect.asVoid)
                })
              )
            )
            const fiber = yield* FiberSet.run(calls, supervised).pipe(
              Effect.catchAllDefect(() => Effect.fail(endedError("closing")))
            )
            return yield* Fiber.join(fiber).pipe(
              Effect.onInterrupt(() => Fiber.interrupt(fiber)),
              Effect.catchAllCause((cause) => Effect.flatMap(Ref.get(ended), (r) => Option.isSome(r) ? Effect.fail(endedError(r.value)) : Effect.failCause(cause)))
            )
          })

        const callEnv = (extra: Readonly<Record<string, string>> | undefined) =>
          Effect.gen(function*() {
            const secrets = Object.fromEntries(Object.entries(plan.secretEnv).map(([k, v]) => [k, Redacted.value(v)]))
            // Checked with what it is merged over: the kernel's bound is on the call's whole environment.
            const perCall = extra === undefined ? {} : yield* check.env("env", extra, { ...plan.env, ...secrets })
            return { ...plan.env, ...secrets, ...perCall }
          })

        const run = (command: string | ReadonlyArray<string>, o: RunOptions = {}) =>
          Effect.gen(function*() {
            const argv = typeof command === "string" ? undefined : command
            if (argv !== undefined && (argv.length === 0 || argv.some((a) => typeof a !== "string" || a.includes("\0")))) {
              return yield* Effect.fail(invalidRequest("command", argv, "a non-empty argv of strings without NUL bytes, or a shell command string"))
            }
            if (typeof command === "string" && (command.trim() === "" || command.includes("\0"))) {
              return yield* Effect.fail(invalidRequest("command", command, "a non-empty shell command without NUL bytes"))
            }
            const text = typeof command === "string" ? command : JSON.stringify(command)
            const bytes = encoder.encode(text)
            if (bytes.byteLength > config.maxCodeBytes) return yield* Effect.fail(invalidRequest("command", `${bytes.byteLength} bytes`, `at most ${config.maxCodeBytes} bytes (maxCodeBytes)`))
            if (o.stdin !== undefined && typeof o.stdin !== "string") return yield* Effect.fail(invalidRequest("stdin", o.stdin, "a string"))
            return yield* call(
              {
                language: "bash",
                mode: argv === undefined ? "eval" : "argv",
                args: argv === undefined ? [command as string] : argv,
                stdin: o.stdin === undefined ? new Uint8Array(0) : encoder.encode(o.stdin),
                codeBytes: bytes.byteLength,
                codeSha256: createHash("sha256").update(bytes).digest("hex"),
                fileCount: 0,
                timeoutMs: o.timeoutMs === undefined ? plan.timeoutMs : yield* check.timeoutMs("timeoutMs", o.timeoutMs),
                outputLimitBytes: plan.outputLimitBytes,
                env: yield* callEnv(o.env)
              },
              o
            )
          })

        const runCode = (request: SessionCodeRequest, hooks: ExecuteOptions = {}) =>
          Effect.gen(function*() {
            for (const field of ["memory", "cpus", "pidsLimit", "image"] as const) {
              if ((request as unknown as Record<string, unknown>)[field] !== undefined) {
                return yield* Effect.fail(invalidRequest(field, (request as unknown as Record<string, unknown>)[field], "nothing per call in a session: set it when opening the session"))
              }
            }
            const p = yield* planExecution(
              {
                language: request.language,
                code: request.code,
                ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
                ...(request.files === undefined ? {} : { files: request.files }),
                ...(request.outputLimitBytes === undefined ? {} : { outputLimitBytes: request.outputLimitBytes }),
                timeoutMs: request.timeoutMs ?? plan.timeoutMs
              },
              config,
              // Its files land in the session's current directory, which may be a larger mount.
              { checkSandboxSizes: false }
            )
            return yield* call(
              {
                language: p.language,
                mode: "runner",
                args: runner,
                stdin: encodeRunnerPayload({ language: p.language, code: p.code, files: p.files, stdin: p.stdin }),
                codeBytes: p.code.byteLength,
                codeSha256: p.codeSha256,
                fileCount: p.files.length,
                timeoutMs: p.timeoutMs,
                outputLimitBytes: request.outputLimitBytes === undefined ? plan.outputLimitBytes : p.outputLimitBytes,
                env: yield* callEnv(request.env)
              },
              hooks
            )
          })

        // Timers longer than ~24.8 days count as "never" in Effect's clock: sleep in steps of a day.
        const sleepChunked = (ms: number) => Effect.sleep(Math.min(ms, 86400_000))
        /** Persistent: the latest use other processes' handles and calls recorded in this journal (see SessionReaper). */
        const recordedByOthers = SessionReaper.journalActivity(journal, [{ sessionId, createdAtMs: openedAtMs }]).pipe(
          Effect.map((m) => {
            const a = m.get(sessionId)
            return a === undefined ? undefined : Math.max(a.lastMs, a.busyUntilMs ?? -Infinity)
          }),
          Effect.catchAllCause(() => Effect.succeed(undefined))
        )
        // The idle reaper: expires the session once no call ran or waited for `lifetimeMs`.
        const idleReaper = (lifetimeMs: number) =>
          Effect.gen(function*() {
            while (true) {
              const now = yield* Clock.currentTimeMillis
              const waitMs = pending > 0 ? lifetimeMs : lastActivityMs + lifetimeMs - now
              if (waitMs > 0) {
                yield* sleepChunked(waitMs)
                continue
              }
              // Decide under the call lock, so no call starts while the sandbox goes away.
              const expired = yield* lock.withPermits(1)(
                Effect.gen(function*() {
                  const t = yield* Clock.currentTimeMillis
                  if (pending > 0 || t - lastActivityMs < lifetimeMs) return false
                  if (h.scope === "persistent") {
                    // Other processes may hold it too: their calls count as activity (host records only).
                    const seen = yield* recordedByOthers
                    if (seen !== undefined && seen > lastActivityMs && t - seen < lifetimeMs) {
                      lastActivityMs = seen
                      return false
                    }
                  }
                  const won = yield* markEnded("idle-expired")
                  if (won) yield* FiberSet.run(background, cleanup("idle-expired", true, t - lastActivityMs))
                  return true
                })
              )
              if (expired) return
            }
          })
        const hardCap = (deadlineMs: number, reason: string) =>
          Effect.gen(function*() {
            while (true) {
              const left = deadlineMs - (yield* Clock.currentTimeMillis)
              if (left <= 0) break
              yield* sleepChunked(left)
            }
            yield* endInBackground(reason, true)
          })
        if (plan.lifetimeMs !== undefined || h.scope === "session" || h.deadlineMs !== undefined) {
          const watchers = Effect.all(
            [
              plan.lifetimeMs === undefined ? Effect.never : idleReaper(plan.lifetimeMs),
              h.scope === "session"
                ? hardCap(openedAtMs + plan.maxLifetimeMs, `max-lifetime (${plan.maxLifetimeMs} ms)`)
                : h.deadlineMs !== undefined
                ? hardCap(h.deadlineMs, `max-lifetime (deadline ${new Date(h.deadlineMs).toISOString()})`)
                : Effect.never
            ],
            { concurrency: "unbounded", discard: true }
          )
          // Interruptible although forked from the (uninterruptible) open: cleanup interrupts it.
          reaperFiber = yield* FiberSet.run(background, Effect.interruptible(watchers))
        }

        const session: Session = {
          sessionId,
          scope: h.scope,
          containerName: container.name,
          fingerprint: h.fingerprint,
          reconnected: h.reconnected,
          replaced: h.replaced,
          run,
          runCode,
          close: endAndWait(h.scope === "session" ? "closed" : "detached", h.scope === "session"),
          destroy: endAndWait("destroyed", true),
          status: Effect.map(Ref.get(ended), (r) => ({ open: Option.isNone(r), endReason: Option.getOrUndefined(r), pending }))
        }
        registry.set(sessionId, {
          sessionId,
          containerName: container.name,
          scope: h.scope,
          shutdown: endAndWait(h.scope === "session" ? "service closed" : "detached", h.scope === "session")
        })
        return session
      })

    const refuseWhenClosed = Effect.flatMap(Ref.get(closed), (c) =>
      c ? Effect.fail(new SessionEnded({ sessionId: "", reason: "service closed", message: "the sessions service is closed" })) : Effect.void)

    const open = (o: SessionOptions = {}): Effect.Effect<Session, SessionOpenError> =>
      Effect.gen(function*() {
        yield* refuseWhenClosed
        const plan = yield* resolvePlan(o, "session")
        const imageId = yield* runtime.resolveImage(plan.image)
        const { canonical, fingerprint } = fingerprintOf(plan, imageId)
        const sessionId = uuidv7()
        const name = `${ContainerNamePrefix}${sessionId}`
        const labels: Record<string, string> = {
          [Label.project]: ProjectName,
          [Label.scope]: "session",
          [Label.session]: sessionId,
          [Label.executor]: executorId,
          [Label.ownerPid]: String(ProcessIdentity.self.pid),
          [Label.ownerHost]: ProcessIdentity.self.host,
          [Label.ownerStarted]: ProcessIdentity.self.started,
          // Hard cap (+ margin): a label cannot move, so it is not the idle deadline (see SessionReaper).
          [Label.deadline]: String(Math.ceil((Date.now() + plan.maxLifetimeMs) / 1000) + 300),
          [Label.fingerprint]: fingerprint,
          [Label.fingerprintSpec]: canonical,
          ...(plan.lifetimeMs === undefined ? {} : { [Label.idleSeconds]: String(plan.lifetimeMs / 1000) })
        }
        yield* append(sessionId, { type: "SessionOpened", data: { sessionId, scope: "session", containerName: name } })
        const container = yield* createStarted(sessionId, specFor(plan, name, labels)).pipe(
          Effect.tapError((e) => appendQuietly(sessionId, { type: "SessionClosed", data: { sessionId, reason: `failed to start: ${e._tag}` } }))
        )
        return yield* makeHandle({ sessionId, scope: "session", container, plan, fingerprint, reconnected: false, replaced: [] })
      }).pipe(Effect.uninterruptible)

    const openPersistent = (o: PersistentOptions = {}): Effect.Effect<Session, SessionOpenError> =>
      Effect.gen(function*() {
        yield* refuseWhenClosed
        const profile = o.profile ?? "default"
        if (!PROFILE.test(profile)) return yield* Effect.fail(invalidRequest("profile", profile, "1-63 characters [A-Za-z0-9_.-], starting with a letter or digit"))
        const policy = o.onConfigChange ?? "replace"
        if (policy !== "replace" && policy !== "refuse") return yield* Effect.fail(invalidRequest("onConfigChange", policy, `"replace" or "refuse"`))
        const plan = yield* resolvePlan(o, "persistent")
        const imageId = yield* runtime.resolveImage(plan.image)
        const { canonical, fingerprint } = fingerprintOf(plan, imageId)
        const sessionId = Fingerprint.persistentId(profile, fingerprint)
        const name = `${ContainerNamePrefix}${sessionId}`
        const labels: Record<string, string> = {
          [Label.project]: ProjectName,
          [Label.scope]: "persistent",
          [Label.session]: sessionId,
          [Label.profile]: profile,
          [Label.fingerprint]: fingerprint,
          [Label.fingerprintSpec]: canonical,
          // The maximum lifetime, fixed at create (labels cannot move): the sweep and the reaper remove it past it.
          [Label.deadline]: String(Math.ceil(((yield* Clock.currentTimeMillis) + plan.maxLifetimeMs) / 1000)),
          ...(plan.lifetimeMs === undefined ? {} : { [Label.idleSeconds]: String(plan.lifetimeMs / 1000) })
        }
        const handle = (
          container: { readonly id: string; readonly name: string; readonly imageId: string },
          reconnected: boolean,
          replaced: ReadonlyArray<string>,
          deadlineMs: number | undefined
        ) => makeHandle({ sessionId, scope: "persistent", container, plan, fingerprint, reconnected, replaced, deadlineMs })

        return yield* persistentLock.withPermits(1)(
          Effect.gen(function*() {
            const held = registry.get(sessionId)
            if (held !== undefined) {
              return yield* Effect.fail(invalidRequest("profile", profile, "a profile not already open in this process (close the other handle first)"))
            }
            const found = yield* runtime.list({ [Label.project]: ProjectName, [Label.scope]: "persistent", [Label.profile]: profile })
            const others = found.filter((c) => c.labels[Label.fingerprint] !== fingerprint)
            if (others.length > 0 && policy === "refuse") {
              const first = others[0]!
              const diff = Fingerprint.differences(first.labels[Label.fingerprintSpec], canonical)
              return yield* new SessionConfigMismatch({
                profile,
                containerName: first.name,
                differences: diff,
                message: `the persistent sandbox ${first.name} of profile ${JSON.stringify(profile)} was made with another configuration (${diff.join("; ")}); ` +
                  `destroy it, or open with onConfigChange: "replace"`
              })
            }
            const replaced: Array<string> = []
            for (const old of others) {
              const oldId = old.labels[Label.session] ?? old.name.slice(ContainerNamePrefix.length)
              const diff = Fingerprint.differences(old.labels[Label.fingerprintSpec], canonical)
              yield* Effect.logWarning(`persistent sandbox ${old.name} (profile ${profile}) was made with another configuration; replacing it: ${diff.join("; ")}`)
              yield* removeContainer(old)
              yield* appendQuietly(oldId, { type: "ContainerDestroyed", data: { containerName: old.name, containerId: old.id, reason: "session-closed" } })
              yield* appendQuietly(oldId, { type: "SessionClosed", data: { sessionId: oldId, reason: `configuration changed: ${diff.join("; ")}` } })
              replaced.push(old.name)
            }
            const reconnect = (c: { readonly id: string; readonly name: string; readonly status: string; readonly labels: Readonly<Record<string, string>>; readonly createdAt: number }) =>
              Effect.gen(function*() {
                if (c.status === "exited" || c.status === "created") {
                  // The engine restarted (or the sandbox was stopped): its tmpfs state is gone, its identity is not.
                  yield* runtime.start(c)
                } else if (c.status !== "running") {
                  return Option.none()
                }
                yield* append(sessionId, { type: "SessionReconnected", data: { sessionId, containerName: c.name } })
                return Option.some(yield* handle({ id: c.id, name: c.name, imageId }, true, replaced, SessionReaper.deadlineOf(c.labels, c.createdAt)))
              })
            const match = found.find((c) => c.labels[Label.fingerprint] === fingerprint)
            if (match !== undefined) {
              // Past its maximum lifetime it is not served again: removed, and a new one made.
              const matchDeadline = SessionReaper.deadlineOf(match.labels, match.createdAt)
              const expired = matchDeadline !== undefined && (yield* Clock.currentTimeMillis) > matchDeadline
              const again = expired ? Option.none() : yield* reconnect(match)
              if (Option.isSome(again)) return again.value
              yield* removeContainer(match)
              if (expired) {
                yield* appendQuietly(
                  sessionId,
                  { type: "ContainerDestroyed", data: { containerName: match.name, containerId: match.id, reason: "orphan-reaped" } },
                  { type: "SessionClosed", data: { sessionId, reason: "max-lifetime passed" } }
                )
              }
            }
            yield* append(sessionId, { type: "SessionOpened", data: { sessionId, scope: "persistent", containerName: name } })
            const created = yield* createStarted(sessionId, specFor(plan, name, labels)).pipe(Effect.either)
            if (created._tag === "Right") return yield* handle(created.right, false, replaced, SessionReaper.deadlineOf(labels, 0))
            // Another process created it a moment ago: take that one.
            if (created.left._tag === "ContainerFailed" && created.left.statusCode === 409) {
              const raced = (yield* runtime.list({ [Label.project]: ProjectName, [Label.session]: sessionId }))[0]
              if (raced !== undefined) {
                const again = yield* reconnect(raced)
                if (Option.isSome(again)) return again.value
              }
            }
            return yield* Effect.fail(created.left)
          })
        )
      }).pipe(Effect.uninterruptible)

    return Sessions.of({ executorId, config, open, openPersistent, events, unsafeSubscribe, reap })
  })

/** The sessions service as a layer; its scope is the service's lifetime (open sessions end with it). */
export const layer = (options: SessionsOptions = {}): Layer.Layer<Sessions, InvalidRequest, SandboxRuntime | Journal.Journal> =>
  Layer.scoped(Sessions, make(options))
