/**
 * A session's handle: its lifecycle as one explicit state, its calls (serialized, each with exactly
 * one terminal event) and the watchers that end it (idle expiry, maximum lifetime).
 *
 *   Open --end(reason)--> Ending --cleanup--> Ended(removed?)
 *
 * `Ending` refuses new calls; its cleanup interrupts running and queued calls (each kills its
 * process tree first), removes the sandbox through the kernel's removal policy (kernel/Removals.ts)
 * unless it is a persistent sandbox being detached, and records SessionClosed. A call that had to
 * kill the whole sandbox ends the session from inside itself: its cleanup (which interrupts calls)
 * starts once that call returned (`afterCall`).
 */
import { checkKeepFullOutput } from "../OutputCapture.js"
import { Clock, Deferred, Effect, ExecutionStrategy, Exit, Fiber, FiberSet, Option, Scope } from "effect"
import { v7 as uuidv7 } from "uuid"
import type { JournalError, JournalEvent, JournalService } from "@hermes-sandbox/events"
import type { CellResult } from "../CellResult.js"
import {
  type InvalidRequest,
  invalidRequest,
  type KernelUnavailable,
  type PatchFailed,
  type SandboxError,
  SessionEnded
} from "../Errors.js"
import type { ExecuteOptions } from "../Executor.js"
import type { ExecutionResult } from "../ExecutionResult.js"
import type { ResolvedSandboxDefaults } from "../ExecutorConfig.js"
import type { Removals } from "../kernel/Removals.js"
import { resultOf, withTerminalEvent } from "../kernel/Run.js"
import { type AuditRecorder, auditRecorder, beforeTerminal } from "../internal/auditTrail.js"
import * as ToolChannel from "../kernel/ToolChannel.js"
import type { Language } from "../Language.js"
import type { SandboxCreated, SandboxRuntime } from "../SandboxRuntime.js"
import * as SessionReaper from "../SessionReaper.js"
import { annotate, type SessionOperation, sessionSpans, type Traced } from "../internal/spans.js"
import { outcomeOf } from "../Metrics.js"
import { ATTRIBUTE } from "../Tracing.js"
import {
  type CallDeps,
  type CallInput,
  codeInput,
  commandInput,
  type RunOptions,
  runCall,
  type SessionCodeRequest
} from "./call.js"
import {
  type FileCallOptions,
  type ListFilesResult,
  makeFileOps,
  type ReadFileOptions,
  type ReadFileResult,
  type SessionFileError,
  type WriteFileOptions,
  type WriteFileResult
} from "./files.js"
import { type CellOptions, type CellRequest, cellInput, runCell } from "./cell.js"
import {
  makeEditOps,
  type PatchFileResult,
  type PatchSpec,
  type SearchFilesOptions,
  type SearchFilesResult
} from "./edit.js"
import type { SessionPlan, SessionScope } from "./plan.js"
import { makePythonKernel } from "./pythonKernel.js"
import { type BackgroundProcess, makeBackground, type ProcessStatus, type SpawnOptions } from "./background.js"

export interface SessionResult extends ExecutionResult {
  readonly sessionId: string
}

export type SessionCallError = InvalidRequest | SandboxError | SessionEnded | JournalError

/** What `runCell` fails with (a cell's own failure, timeout or crash is a result, not an error). */
export type SessionCellError = SessionCallError | KernelUnavailable

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
  readonly run: (
    command: string | ReadonlyArray<string>,
    options?: RunOptions
  ) => Effect.Effect<SessionResult, SessionCallError>
  /** A code snippet through the runner, in the session's current directory and environment. */
  readonly runCode: (
    request: SessionCodeRequest,
    options?: ExecuteOptions
  ) => Effect.Effect<SessionResult, SessionCallError>
  // File operations (session/files.ts), serialized with the calls; done by the sandbox's supervisor,
  // never through a shell. Paths: absolute under /workspace or /tmp, or relative to /workspace (not
  // to the shell's working directory); a symlink is never followed.
  /** Bytes of a regular file: from `offset` (default 0), at most `limit` (default 8 MiB, at most 64 MiB). */
  readonly readFile: (path: string, options?: ReadFileOptions) => Effect.Effect<ReadFileResult, SessionFileError>
  /** Create or replace a regular file (missing parent directories made, 0755), at most 64 MiB. */
  readonly writeFile: (
    path: string,
    content: string | Uint8Array,
    options?: WriteFileOptions
  ) => Effect.Effect<WriteFileResult, SessionFileError>
  /** A directory's entries (default /workspace), sorted, at most 10,000. */
  readonly listFiles: (dir?: string, options?: FileCallOptions) => Effect.Effect<ListFilesResult, SessionFileError>
  /** Remove a file, a symlink (itself) or an empty directory. */
  readonly removeFile: (path: string, options?: FileCallOptions) => Effect.Effect<void, SessionFileError>
  /**
   * Edit a text file in place (session/edit.ts): `{ oldString, newString, replaceAll? }` (exact; the
   * old text must occur once unless replaceAll) or `{ diff }` (a unified diff). Read, replaced on the
   * host and written back in ONE serialized operation; at most 8 MiB. PatchFailed says why not.
   */
  readonly patchFile: (
    path: string,
    patch: PatchSpec,
    options?: FileCallOptions
  ) => Effect.Effect<PatchFileResult, SessionFileError | PatchFailed>
  /** Lines matching a regular expression (grep -E), or files whose name matches a glob (find); bounded. */
  readonly searchFiles: (options: SearchFilesOptions) => Effect.Effect<SearchFilesResult, SessionFileError>
  /**
   * A cell of Python on the session's kernel (started by the first cell, or at open with
   * `kernel.eager`): imports, variables and threads persist from cell to cell. Serialized with the
   * calls and file operations; files and the working directory at the kernel's start are the
   * session's. docs/design/kernel.md; SECURITY.md, Kernels: cells as one trust domain.
   */
  readonly runCell: (request: CellRequest, options?: CellOptions) => Effect.Effect<CellResult, SessionCellError>
  /** End the kernel (its state with it); the next cell starts a new one, without `stateLost`. */
  readonly restartKernel: Effect.Effect<void, SessionCallError>
  /**
   * Start a shell command in the background (session/background.ts): it lives across calls until
   * killed or the session ends; its output is kept as a head and a tail. While one runs, calls and
   * the kernel share its trust domain (as with `keepBackgroundProcesses`; SECURITY.md). Not for
   * persistent sandboxes.
   */
  readonly spawn: (command: string, options?: SpawnOptions) => Effect.Effect<BackgroundProcess, SessionCallError>
  /** The background processes: running ones, and the latest ended ones. */
  readonly processes: Effect.Effect<ReadonlyArray<ProcessStatus>>
  /** A background process by its id, if still tracked. */
  readonly process: (id: string) => Effect.Effect<Option.Option<BackgroundProcess>>
  /** Session: destroy the sandbox. Persistent: detach, leaving it for the next process. Idempotent. */
  readonly close: Effect.Effect<void>
  /** Destroy the sandbox (persistent too). Idempotent. */
  readonly destroy: Effect.Effect<void>
  readonly status: Effect.Effect<SessionStatus>
}

type HandleState =
  | { readonly _tag: "Open" }
  | { readonly _tag: "Ending"; readonly reason: string; readonly afterCall: boolean }
  | { readonly _tag: "Ended"; readonly reason: string; readonly removed: boolean }

/** What a handle needs of the Sessions service. */
export interface HandleDeps {
  readonly runtime: SandboxRuntime["Type"]
  readonly journal: JournalService
  readonly config: ResolvedSandboxDefaults
  readonly supervisor: string
  readonly runner: ReadonlyArray<string>
  readonly serviceScope: Scope.Scope
  /** Cleanups and watchers run here; the service's close waits for them. */
  readonly background: FiberSet.FiberSet<unknown, unknown>
  readonly removals: Removals
  readonly append: (streamId: string, ...events: ReadonlyArray<JournalEvent>) => Effect.Effect<void, JournalError>
  /** For bookkeeping on paths that must not fail (cleanup): a journal failure is logged. */
  readonly appendQuietly: (streamId: string, ...events: ReadonlyArray<JournalEvent>) => Effect.Effect<void>
  /** The handle is gone (its cleanup ran). */
  readonly forget: (sessionId: string) => void
}

export interface HandleInput {
  readonly sessionId: string
  readonly scope: SessionScope
  readonly container: SandboxCreated
  readonly plan: SessionPlan
  readonly fingerprint: string
  readonly reconnected: boolean
  readonly replaced: ReadonlyArray<string>
  /** Persistent: its deadline (ms, from the label); the handle ends and removes it then. */
  readonly deadlineMs?: number | undefined
}

/** A handle as the Sessions service holds it. */
export interface MadeHandle {
  readonly session: Session
  /** End it as the service closes: a session is destroyed, a persistent sandbox detached. */
  readonly shutdown: Effect.Effect<void>
  /** Done when the eager kernel (`kernel.eager`) has started or failed to; at once without one. */
  readonly kernelSettled: Effect.Effect<void>
  /** Handed to a caller by the session pool: its idle time counts from now, its calls carry these tags (session/pool.ts). */
  readonly claimed: (tags: SessionPlan["tags"]) => Effect.Effect<void>
  /** End and remove it for this reason (the pool's "pool-recycled", "pool-drained"). */
  readonly retire: (reason: string) => Effect.Effect<void>
}

export const makeHandle = (deps: HandleDeps, h: HandleInput): Effect.Effect<MadeHandle> =>
  Effect.gen(function* () {
    const { container, plan, sessionId } = h
    const lock = yield* Effect.makeSemaphore(1)
    const cleaned = yield* Deferred.make<void>()
    let state: HandleState = { _tag: "Open" }
    let pending = 0
    let lastActivityMs = yield* Clock.currentTimeMillis
    /** The caller's labels on every call's ExecutionRequested: the plan's, or the claimer's (pool). */
    let tags = plan.tags
    const openedAtMs = lastActivityMs
    const callScope = yield* Scope.fork(deps.serviceScope, ExecutionStrategy.sequential)
    // Calls and file operations: the session's end interrupts every one of them.
    const calls = yield* FiberSet.make<unknown, unknown>().pipe(Scope.extend(callScope))
    let watchers: Fiber.RuntimeFiber<unknown, unknown> | undefined

    /** Open -> Ending (the first reason wins); true if this call ended it. */
    const end = (reason: string, afterCall = false) =>
      Effect.sync(() => {
        if (state._tag !== "Open") return false
        state = { _tag: "Ending", reason, afterCall }
        return true
      })
    const endReason = () => (state._tag === "Open" ? undefined : state.reason)

    const destroyed = (reason: "idle-expired" | "session-closed") =>
      deps.removals.destroy(sessionId, container, reason).pipe(
        Effect.zipRight(
          Effect.sync(() => {
            if (state._tag === "Ended") state = { ...state, removed: true }
          })
        )
      )

    const cleanup = (reason: string, remove: boolean, idleMs?: number) =>
      Effect.gen(function* () {
        // Running and queued calls are interrupted (each kills its process tree first).
        yield* Scope.close(callScope, Exit.void)
        if (watchers !== undefined) yield* Fiber.interrupt(watchers)
        if (idleMs !== undefined)
          yield* deps.appendQuietly(sessionId, { type: "SessionIdleExpired", data: { sessionId, idleMs } })
        state = { _tag: "Ended", reason, removed: false }
        if (remove) yield* destroyed(idleMs !== undefined ? "idle-expired" : "session-closed")
        yield* deps.appendQuietly(sessionId, { type: "SessionClosed", data: { sessionId, reason } })
        deps.forget(sessionId)
      }).pipe(Effect.ensuring(Deferred.succeed(cleaned, undefined)), Effect.uninterruptible)

    /** End from anywhere (a call, a watcher): the cleanup runs in the background, never in the caller's fiber. */
    const endInBackground = (reason: string, remove: boolean, idleMs?: number) =>
      end(reason).pipe(
        Effect.flatMap((won) =>
          won ? FiberSet.run(deps.background, cleanup(reason, remove, idleMs)).pipe(Effect.asVoid) : Effect.void
        )
      )

    const endAndWait = (reason: string, remove: boolean) =>
      Effect.gen(function* () {
        if (yield* end(reason)) yield* FiberSet.run(deps.background, cleanup(reason, remove))
        yield* Deferred.await(cleaned)
        // Ended earlier without removal (persistent detach): destroy now.
        if (remove && state._tag === "Ended" && !state.removed) yield* destroyed("session-closed")
      })

    const endedError = (reason: string) =>
      new SessionEnded({ sessionId, reason, message: `session ${sessionId} has ended (${reason}); open a new one` })
    const refuseWhenEnded = Effect.suspend(() => {
      const reason = endReason()
      return reason === undefined ? Effect.void : Effect.fail(endedError(reason))
    })

    // While a background process lives, calls keep leftovers: killing them would kill its processes.
    let backgroundLive = () => 0
    const callDeps: CallDeps = {
      runtime: deps.runtime,
      container,
      get plan() {
        return backgroundLive() > 0 && !plan.keepBackgroundProcesses ? { ...plan, keepBackgroundProcesses: true } : plan
      },
      supervisor: deps.supervisor,
      // The session ends now (no new call starts); its cleanup waits until this call returned.
      sandboxKilled: (reason: string) => Effect.asVoid(end(reason, true))
    }

    const runLocked = (
      input: CallInput,
      executionId: string,
      hooks: ExecuteOptions,
      record: (event: JournalEvent) => Effect.Effect<void, JournalError>,
      tools: ToolChannel.ToolChannel | undefined,
      recorder: AuditRecorder | undefined
    ) =>
      Effect.gen(function* () {
        yield* refuseWhenEnded
        lastActivityMs = yield* Clock.currentTimeMillis
        const { done, run } = yield* runCall(callDeps, input, hooks, record, tools, recorder)
        lastActivityMs = yield* Clock.currentTimeMillis
        const result: SessionResult = { ...resultOf(executionId, container.name, done, run), sessionId }
        return result
      }).pipe(Effect.scoped)

    // Every operation of the session is a span (internal/spans.ts: one helper for all of them).
    const sessionSpan = sessionSpans(sessionId, container.name)
    const traced =
      <Args extends ReadonlyArray<unknown>, A, E>(
        operation: SessionOperation,
        f: (...args: Args) => Effect.Effect<A, E>
      ) =>
      (...args: Args): Effect.Effect<A, E> =>
        sessionSpan(operation, () => f(...args))

    const call = (
      input: CallInput,
      hooks: ExecuteOptions,
      traced: Traced | undefined
    ): Effect.Effect<SessionResult, SessionCallError> =>
      Effect.gen(function* () {
        annotate(traced, ATTRIBUTE.language, input.language)
        yield* refuseWhenEnded
        pending++
        return yield* callAccepted(input, hooks, traced).pipe(Effect.ensuring(Effect.sync(() => void pending--)))
      })

    const callAccepted = (
      input: CallInput,
      hooks: ExecuteOptions,
      traced: Traced | undefined
    ): Effect.Effect<SessionResult, SessionCallError> =>
      Effect.gen(function* () {
        const executionId = uuidv7()
        hooks.onExecutionId?.(executionId)
        annotate(traced, ATTRIBUTE.executionId, executionId)
        // recordCode: the call's code with its request (one append), its output's head before its end.
        const recorder = auditRecorder(deps.config.recordCode, input.code, (event) => deps.append(executionId, event))
        yield* deps.append(
          executionId,
          {
            type: "ExecutionRequested",
            data: {
              language: input.language,
              image: plan.image,
              codeBytes: input.codeBytes,
              codeSha256: input.codeSha256,
              stdinBytes: input.stdin.byteLength,
              fileCount: input.fileCount,
              timeoutMs: input.timeoutMs,
              limits: {
                memoryBytes: plan.limits.memoryBytes,
                nanoCpus: plan.limits.nanoCpus,
                pidsLimit: plan.limits.pidsLimit,
                outputLimitBytes: input.outputLimitBytes
              },
              network: plan.network,
              runtime: deps.config.runtime ?? "runc",
              scope: h.scope,
              sessionId,
              ...(tags === undefined && hooks.tags === undefined ? {} : { tags: { ...tags, ...hooks.tags } })
            }
          },
          ...(recorder === undefined ? [] : [recorder.code])
        )
        const interruptReason = Effect.sync(() => {
          const asked = hooks.interruptReason?.()
          return asked === undefined
            ? "interrupted (caller, or the session ended)"
            : `interrupted by the caller: ${asked}`
        })
        return yield* inCallSet(
          Effect.scoped(
            Effect.gen(function* () {
              // runCode's tool calls: served while the call runs, settled before its terminal event.
              const tools =
                input.tools === undefined
                  ? undefined
                  : yield* ToolChannel.make({
                      plan: input.tools,
                      language: input.language as Language,
                      executionId,
                      append: (event) => deps.append(executionId, event),
                      reserve: recorder?.reserve
                    })
              return yield* withTerminalEvent(
                (event) =>
                  deps.append(executionId, event).pipe(
                    Effect.tap(() => {
                      const outcome = outcomeOf(event)
                      if (outcome !== undefined) annotate(traced, ATTRIBUTE.outcome, outcome)
                    })
                  ),
                interruptReason,
                (record) => lock.withPermits(1)(runLocked(input, executionId, hooks, record, tools, recorder)),
                beforeTerminal(tools, recorder)
              )
            })
          )
        )
      })

    /**
     * One accepted call or file operation, run in the session's call set: the session's end
     * interrupts it (and it fails with SessionEnded then); one that ended the session from inside
     * (it killed the sandbox) starts the cleanup once it returned.
     */
    const inCallSet = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | SessionEnded> =>
      Effect.gen(function* () {
        const supervised = effect.pipe(
          Effect.ensuring(
            Effect.suspend(() => {
              if (state._tag !== "Ending" || !state.afterCall) return Effect.void
              const reason = state.reason
              state = { _tag: "Ending", reason, afterCall: false }
              return FiberSet.run(deps.background, cleanup(reason, true)).pipe(Effect.asVoid)
            })
          )
        )
        const fiber = yield* FiberSet.run(calls, supervised).pipe(
          Effect.catchAllDefect(() => Effect.fail(endedError("closing")))
        )
        return yield* Fiber.join(fiber).pipe(
          Effect.onInterrupt(() => Fiber.interrupt(fiber)),
          Effect.catchAllCause((cause) =>
            Effect.suspend((): Effect.Effect<never, E | SessionEnded> => {
              const reason = endReason()
              return reason !== undefined ? Effect.fail(endedError(reason)) : Effect.failCause(cause)
            })
          )
        )
      })

    /** A file operation: accepted like a call, under the same lock (FIFO with the calls), counted as activity. */
    const serialized = <A, E>(
      body: (deps: CallDeps) => Effect.Effect<A, E, Scope.Scope>
    ): Effect.Effect<A, E | SessionEnded> =>
      Effect.gen(function* () {
        yield* refuseWhenEnded
        pending++
        const locked = lock.withPermits(1)(
          Effect.gen(function* () {
            yield* refuseWhenEnded
            lastActivityMs = yield* Clock.currentTimeMillis
            return yield* body(callDeps)
          }).pipe(
            Effect.scoped,
            Effect.ensuring(
              Effect.flatMap(Clock.currentTimeMillis, (t) => Effect.sync(() => void (lastActivityMs = t)))
            )
          )
        )
        return yield* inCallSet(locked).pipe(Effect.ensuring(Effect.sync(() => void pending--)))
      })
    const background = makeBackground({
      call: callDeps,
      config: deps.config,
      settings: plan.background,
      append: (event) => deps.append(sessionId, event),
      appendQuietly: (event) => deps.appendQuietly(sessionId, event),
      fibers: calls,
      serialized
    })
    backgroundLive = background.live
    const spawn = (command: string, o?: SpawnOptions) =>
      h.scope === "persistent"
        ? Effect.fail(
            invalidRequest(
              "spawn",
              "a persistent sandbox",
              "sessions only: a persistent sandbox outlives this handle, and its background processes would too"
            )
          )
        : background.spawn(command, o)
    const fileOps = makeFileOps(plan.timeoutMs, serialized)
    const editOps = makeEditOps(plan.timeoutMs, serialized)

    // The session's Python kernel: cells are serialized like calls (the same lock, FIFO).
    const pythonKernel = makePythonKernel({
      ...callDeps,
      sessionId,
      append: (event) => deps.append(sessionId, event),
      appendQuietly: (event) => deps.appendQuietly(sessionId, event),
      background: calls,
      atIdle: (effect) => lock.withPermits(1)(effect)
    })
    // The session's end asks the kernel to end: its supervisor kills the domain.
    yield* Scope.addFinalizer(callScope, pythonKernel.shutdown)
    const cellDeps = {
      sessionId,
      containerName: container.name,
      plan,
      kernel: pythonKernel,
      append: (event: JournalEvent) => deps.append(sessionId, event)
    }
    const runCellOn = (request: CellRequest, o: CellOptions = {}) =>
      sessionSpan("cell", (traced) => {
        annotate(traced, ATTRIBUTE.language, "python")
        return Effect.flatMap(cellInput(plan, deps.config, request), (input) =>
          serialized(() => runCell(cellDeps, input, o))
        ).pipe(
          Effect.tap((result) => {
            annotate(traced, ATTRIBUTE.cellId, result.cellId)
            annotate(traced, ATTRIBUTE.outcome, result.status)
          })
        )
      })
    const restartKernel = sessionSpan("restart_kernel", () => serialized(() => pythonKernel.restart))
    let kernelSettled: Effect.Effect<void> = Effect.void
    if (plan.kernel.eager) {
      // Started now, under the lock: the first cell waits for it. A failure is the first cell's to
      // say. Interruptible although forked from the (uninterruptible) open.
      const starting = yield* FiberSet.run(
        calls,
        serialized(() => Effect.asVoid(pythonKernel.ensure)).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning(`session ${sessionId}: the eager kernel did not start`, cause)
          ),
          Effect.interruptible
        )
      )
      kernelSettled = Effect.asVoid(Fiber.await(starting))
    }

    const run = (command: string | ReadonlyArray<string>, o: RunOptions = {}) =>
      sessionSpan("run", (traced) =>
        commandInput(plan, deps.config, command, o).pipe(
          Effect.zipLeft(checkKeepFullOutput(o.keepFullOutput)),
          Effect.flatMap((input) => call(input, o, traced))
        )
      )
    const runCode = (request: SessionCodeRequest, hooks: ExecuteOptions = {}) =>
      sessionSpan("run_code", (traced) =>
        codeInput(plan, deps.config, deps.runner, request).pipe(
          Effect.zipLeft(checkKeepFullOutput(hooks.keepFullOutput)),
          Effect.flatMap((input) => call(input, hooks, traced))
        )
      )

    // Timers longer than ~24.8 days count as "never" in Effect's clock: sleep in steps of a day.
    const sleepChunked = (ms: number) => Effect.sleep(Math.min(ms, 86400_000))
    /** Persistent: the latest use other processes' handles and calls recorded in this journal (see SessionReaper). */
    const recordedByOthers = SessionReaper.journalActivity(deps.journal, [{ sessionId, createdAtMs: openedAtMs }]).pipe(
      Effect.map((m) => {
        const a = m.get(sessionId)
        return a === undefined ? undefined : Math.max(a.lastMs, a.busyUntilMs ?? -Infinity)
      }),
      Effect.catchAllCause(() => Effect.succeed(undefined))
    )
    // Expires the session once no call ran or waited for `lifetimeMs`.
    const idleExpiry = (lifetimeMs: number) =>
      Effect.gen(function* () {
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const waitMs = pending > 0 ? lifetimeMs : lastActivityMs + lifetimeMs - now
          if (waitMs > 0) {
            yield* sleepChunked(waitMs)
            continue
          }
          // Decide under the call lock, so no call starts while the sandbox goes away.
          const expired = yield* lock.withPermits(1)(
            Effect.gen(function* () {
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
              if (yield* end("idle-expired"))
                yield* FiberSet.run(deps.background, cleanup("idle-expired", true, t - lastActivityMs))
              return true
            })
          )
          if (expired) return
        }
      })
    const hardCap = (deadlineMs: number, reason: string) =>
      Effect.gen(function* () {
        while (true) {
          const left = deadlineMs - (yield* Clock.currentTimeMillis)
          if (left <= 0) break
          yield* sleepChunked(left)
        }
        yield* endInBackground(reason, true)
      })
    /**
     * The sandbox's own end, whoever caused it: under gVisor an OOM kills the whole sandbox, and the
     * open execs' streams (a call's, the kernel's) do not end with it, so without this a call or a
     * cell would wait for its deadline and the next one fail "not running". The session ends at
     * once, saying why; a persistent sandbox is detached (its next open starts it again).
     */
    const sandboxExit = Effect.gen(function* () {
      const exit = yield* deps.runtime.armExit(container)
      const ended = yield* Effect.either(exit)
      if (state._tag !== "Open") return
      const inspected = yield* Effect.option(deps.runtime.inspect(container))
      const oom = Option.isSome(inspected) && inspected.value.oomKilled
      const how =
        ended._tag === "Right"
          ? `exit ${ended.right.exitCode}${oom ? ", OOM killed" : ""}`
          : oom
            ? "OOM killed"
            : ended.left.message
      yield* endInBackground(`sandbox exited (${how})`, h.scope === "session")
    }).pipe(
      // Not armed (the engine is away): the calls' own deadlines still hold.
      Effect.catchAllCause((cause) => Effect.logDebug(`session ${sessionId}: its sandbox's exit is not watched`, cause))
    )
    {
      const watching = Effect.all(
        [
          sandboxExit,
          plan.lifetimeMs === undefined ? Effect.never : idleExpiry(plan.lifetimeMs),
          h.scope === "session"
            ? hardCap(openedAtMs + plan.maxLifetimeMs, `max-lifetime (${plan.maxLifetimeMs} ms)`)
            : h.deadlineMs !== undefined
              ? hardCap(h.deadlineMs, `max-lifetime (deadline ${new Date(h.deadlineMs).toISOString()})`)
              : Effect.never
        ],
        { concurrency: "unbounded", discard: true }
      )
      // Interruptible although forked from the (uninterruptible) open: cleanup interrupts it.
      watchers = yield* FiberSet.run(deps.background, Effect.interruptible(watching))
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
      readFile: traced("read_file", fileOps.readFile),
      writeFile: traced("write_file", fileOps.writeFile),
      listFiles: traced("list_files", fileOps.listFiles),
      removeFile: traced("remove_file", fileOps.removeFile),
      patchFile: traced("patch_file", editOps.patchFile),
      searchFiles: traced("search_files", editOps.searchFiles),
      runCell: runCellOn,
      restartKernel,
      spawn: traced("spawn", spawn),
      processes: background.processes,
      process: (id) => Effect.sync(() => Option.fromNullable(background.process(id))),
      close: endAndWait(h.scope === "session" ? "closed" : "detached", h.scope === "session"),
      destroy: endAndWait("destroyed", true),
      status: Effect.sync(() => ({ open: state._tag === "Open", endReason: endReason(), pending }))
    }
    return {
      session,
      shutdown: endAndWait(h.scope === "session" ? "service closed" : "detached", h.scope === "session"),
      kernelSettled,
      claimed: (claimerTags) =>
        Effect.flatMap(Clock.currentTimeMillis, (t) =>
          Effect.sync(() => {
            lastActivityMs = t
            tags = claimerTags
          })
        ),
      retire: (reason) => endAndWait(reason, true)
    }
  })
