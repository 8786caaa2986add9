/**
 * A session's Python kernel on the host (docs/design/kernel.md §2, §6, §9): its state, its one
 * long-lived exec of `hermes-run --kernel python`, the kernel's frames (KernelFrameDecoder) and how a
 * kernel ends. Cells are session/cell.ts.
 *
 *   None --start--> Ready{generation, kernelId, pid, start} --(G | violation | exec ended | restart)--> None
 *
 * Generation = exec: a kernel that died, was killed or restarted is never used again; the next cell
 * starts a new exec. What the host believes about the kernel's state comes from that identity, never
 * from the kernel: an unrequested loss (a crash at idle, a kill at an interrupt, a violation) leaves
 * `stateLost` pending on the handle until a result carrying it has been returned.
 *
 * How a kernel ends: its supervisor frames 'G' (it killed the domain) and exits; the host closes the
 * exec's stdin (the supervisor's signal to end) and waits KILL_GRACE for the exec. An exec that does
 * not end (its supervisor killed or stopped by the domain, which shares its uid) is killed from
 * inside as a timed-out call is (session/call.ts runKillers: every process started since the
 * kernel), then through the engine (ExecProcess.kill); if neither clears it, the sandbox is killed
 * and the session ends.
 */
import { Clock, Deferred, Effect, Exit, FiberSet, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { v7 as uuidv7 } from "uuid"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import type { CellCapture } from "../CellCapture.js"
import type { ToolFrames } from "../kernel/ToolChannel.js"
import { LateOutput } from "../CellCapture.js"
import type { CellOutput } from "../CellResult.js"
import { ContainerFailed, KernelUnavailable, type SandboxError } from "../Errors.js"
import { SESSION_LOCK } from "../internal/sessionShell.js"
import { OutputCapture } from "../OutputCapture.js"
import {
  type CellEnded,
  encodeKernelHeader,
  encodeRestartCommand,
  KernelFrameDecoder,
  type KernelGone,
  type KernelReady,
  makeRunKey
} from "../RunnerProtocol.js"
import { RUNNER_MODES } from "../RunnerProtocolTable.js"
import type { ExecProcess } from "../SandboxRuntime.js"
import { type CallDeps, KILL_GRACE, runKillers } from "./call.js"

/** A cell's hooks: its output as it arrives. Exceptions thrown by them are the caller's own. */
export interface CellHooks {
  readonly onStdout?: ((chunk: Uint8Array) => void) | undefined
  readonly onStderr?: ((chunk: Uint8Array) => void) | undefined
  readonly onDisplay?: ((display: CellOutput) => void) | undefined
}

/** The cell the kernel runs now: where its frames go. */
export interface CellSink {
  readonly cellId: string
  readonly capture: CellCapture
  readonly hooks: CellHooks
  /** 'Z'. */
  readonly ended: Deferred.Deferred<CellEnded>
  /** The cell's tool channel, if it was given tools: its frames go there. */
  readonly tools: ToolFrames | undefined
  lateOutput: { readonly bytes: number; readonly text: string; readonly truncated: boolean } | undefined
}

/** Why a kernel's channel ended. */
export type KernelEnd =
  | { readonly _tag: "Gone"; readonly gone: KernelGone }
  | { readonly _tag: "Violation"; readonly reason: string }
  /** 'E' before 'g': the kernel never became ready. */
  | { readonly _tag: "SetupFailed"; readonly message: string }
  /** The exec ended (or broke) without 'G': its supervisor was killed, or the engine lost it. */
  | { readonly _tag: "ChannelEnded" }

export interface LiveKernel {
  readonly kernelId: string
  readonly generation: number
  readonly proc: ExecProcess
  readonly decoder: KernelFrameDecoder
  readonly identity: KernelReady
  /** Completed once the kernel's channel ended, whatever the reason (first one wins). */
  readonly end: Deferred.Deferred<KernelEnd>
  /** The host's execution count in this generation. */
  executionCount: number
  current: CellSink | undefined
  /** Set once some path took charge of the kernel's end (journaled it, tore the exec down). */
  endHandled: boolean
  /** The supervisor's 'E' message after 'g' (its 'G' follows). */
  readonly failure: () => string | undefined
  /** The lock's holder while a sent cell waits for it ('w'), until it is held ('l'). */
  readonly lockWait: () => string | undefined
  /** When it was made (this host's clock): the engine's OOM kills since then are its life's. */
  readonly startedAtMs: number
  /** The engine's word on an OOM kill during its life, asked once at an unexplained SIGKILL (see `lost`). */
  engineOom: boolean | undefined
}

export type KernelStartError = KernelUnavailable | ContainerFailed | SandboxError | JournalError

export interface PythonKernelDeps extends CallDeps {
  readonly sessionId: string
  /** Journal an event in the session's stream. */
  readonly append: (event: JournalEvent) => Effect.Effect<void, JournalError>
  readonly appendQuietly: (event: JournalEvent) => Effect.Effect<void>
  /** Where the kernel's watchers run (the session's end interrupts them). */
  readonly background: FiberSet.FiberSet<unknown, unknown>
  /** Runs `effect` under the session's lock (a kernel's end at idle is handled there). */
  readonly atIdle: (effect: Effect.Effect<void>) => Effect.Effect<void>
}

export type KernelLossReason = "timeout" | "interrupted" | "crashed"

export interface PythonKernel {
  /** The live kernel, or a new one (started: true); a dead one is handled (journaled, torn down) first. */
  readonly ensure: Effect.Effect<{ readonly kernel: LiveKernel; readonly started: boolean }, KernelStartError>
  /** An unrequested loss of `kernel`: journaled, torn down, and `stateLost` pending. */
  readonly lost: (
    kernel: LiveKernel,
    reason: KernelLossReason,
    cellId: string | undefined
  ) => Effect.Effect<{ readonly oomKilled: boolean; readonly signal: number | undefined }>
  /** `restartKernel()`: the kernel ends (if one lives); the next cell starts a new one, without stateLost. */
  readonly restart: Effect.Effect<void, JournalError>
  /** Is a loss pending (not yet returned in a result)? */
  readonly pendingLoss: () => boolean
  /** A result said the pending loss (a cell that did not lose the kernel itself returned). */
  readonly lossReturned: () => void
  /** The session ends: the kernel is asked to end (its supervisor kills the domain). */
  readonly shutdown: Effect.Effect<void>
}

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

export const makePythonKernel = (deps: PythonKernelDeps): PythonKernel => {
  const { plan, runtime, container, supervisor } = deps
  const settings = plan.kernel
  let live: LiveKernel | undefined
  let generation = 0
  let pendingLoss = false
  /** Records the supervisor skipped between cells: counted in the next cell's displaysOmitted. */
  const late = new LateOutput()
  let lateSkipped: Array<{ bytes: number }> = []

  /**
   * Asks a kernel's supervisor to end: the end of its stdin or, where the runtime cannot end an
   * exec's stdin (Kubernetes), the restart command, on which it kills the domain and exits too.
   */
  const askToEnd = (proc: ExecProcess) =>
    (runtime.stdinEnds === false ? proc.write(encodeRestartCommand()) : proc.end).pipe(Effect.ignore)

  /** The exec ends: asked to, KILL_GRACE for it; else killed from inside, then the engine, then the sandbox. */
  const teardown = (kernel: LiveKernel) =>
    Effect.gen(function* () {
      yield* askToEnd(kernel.proc)
      // Interruptible waits: `lost` runs uninterruptibly, and a timeout cannot cut an uninterruptible wait.
      const exited = (exec: ExecProcess) =>
        Effect.interruptible(exec.exit).pipe(
          Effect.either,
          Effect.timeoutTo({ duration: KILL_GRACE, onSuccess: () => true, onTimeout: () => false })
        )
      if (yield* exited(kernel.proc)) return yield* kernel.proc.detach
      const said = { value: "the killer did not end within its bound" }
      const cleared = yield* runKillers(
        deps,
        kernel.identity,
        "since",
        kernel.proc.kill.pipe(Effect.ignore),
        said,
        "the kernel's supervisor"
      )
      yield* kernel.proc.kill.pipe(Effect.ignore)
      const ended = yield* exited(kernel.proc)
      yield* kernel.proc.detach
      if (ended || (Option.isSome(cleared) && cleared.value)) return
      yield* runtime.kill(container).pipe(Effect.ignore)
      yield* Effect.logWarning(
        `${container.name}: a session's kernel could not be ended inside (${said.value}); the sandbox was killed`
      )
      yield* deps.sandboxKilled("a session's kernel could not be ended inside; the sandbox was killed")
    })

  const lost = (
    kernel: LiveKernel,
    reason: KernelLossReason,
    cellId: string | undefined
  ): Effect.Effect<{ readonly oomKilled: boolean; readonly signal: number | undefined }> =>
    Effect.gen(function* () {
      const end = Option.getOrUndefined(yield* Deferred.poll(kernel.end))
      const endExit = end === undefined ? undefined : yield* end
      const gone = endExit?._tag === "Gone" ? endExit.gone : undefined
      // A SIGKILL the supervisor did not send and its cgroup counter does not call an OOM: the engine
      // may know better. Under gVisor the counter is the Sentry's own, and the host's OOM killer can
      // take the kernel's ptrace stub and leave the sandbox running (SECURITY.md, Kernels: the OOM row).
      if (gone?.oomKilled !== true && gone?.signal === 9 && reason === "crashed" && kernel.engineOom === undefined)
        kernel.engineOom = yield* runtime.oomKillsSince(container, kernel.startedAtMs)
      const oomKilled = gone?.oomKilled === true || kernel.engineOom === true
      const outcome = {
        oomKilled,
        signal: gone === undefined || gone.signal === 0 ? undefined : gone.signal
      }
      if (kernel.endHandled) return outcome
      kernel.endHandled = true
      if (live === kernel) live = undefined
      pendingLoss = true
      yield* deps.appendQuietly({
        type: "KernelRestarted",
        data: {
          kernelId: kernel.kernelId,
          generation: kernel.generation,
          reason,
          ...(outcome.signal === undefined ? {} : { signal: outcome.signal }),
          ...(gone?.oomKilled === undefined && !oomKilled ? {} : { oomKilled }),
          ...(cellId === undefined ? {} : { cellId })
        }
      })
      yield* teardown(kernel)
      return outcome
    }).pipe(Effect.uninterruptible)

  /** A kernel's end while no cell runs: handled under the lock (unless a cell or `ensure` took it). */
  const watchIdle = (kernel: LiveKernel) =>
    Deferred.await(kernel.end).pipe(
      Effect.zipRight(
        deps.atIdle(
          Effect.suspend(() => (kernel.endHandled ? Effect.void : Effect.asVoid(lost(kernel, "crashed", undefined))))
        )
      )
    )

  const start: Effect.Effect<LiveKernel, KernelStartError> = Effect.gen(function* () {
    const key = makeRunKey()
    const kernelId = uuidv7()
    const ready = yield* Deferred.make<KernelReady>()
    const end = yield* Deferred.make<KernelEnd>()
    const diagnostics = new OutputCapture(8192)
    let failure: string | undefined
    let lockWait: string | undefined
    // Filled once the kernel is ready: frames before then have no cell to go to.
    let kernel: LiveKernel | undefined
    const finish = (e: KernelEnd) => Deferred.unsafeDone(end, Exit.succeed(e))
    const sink = () => kernel?.current
    const decoder = new KernelFrameDecoder(key, settings.maxBundleBytes, {
      ready: (r) => Deferred.unsafeDone(ready, Exit.succeed(r)),
      cellStarted: (_cellId, idleBytes) => {
        const s = sink()
        if (s === undefined) return
        s.lateOutput = late.take(idleBytes)
        for (const skipped of lateSkipped) s.capture.skipped(skipped.bytes, "late")
        lateSkipped = []
      },
      stdout: (c) => {
        const s = sink()
        if (s === undefined) return
        s.capture.stdout.push(c)
        s.hooks.onStdout?.(c)
      },
      stderr: (c) => {
        const s = sink()
        if (s === undefined) return
        s.capture.stderr.push(c)
        s.hooks.onStderr?.(c)
      },
      dropped: (stream, total) => {
        const s = sink()
        if (s !== undefined) (stream === "o" ? s.capture.stdout : s.capture.stderr).countAtLeast(total)
      },
      record: (kind, json) => {
        const s = sink()
        if (s === undefined) return
        const output = s.capture.record(kind, json)
        if (output !== undefined && kind === "D") s.hooks.onDisplay?.(output)
      },
      skipped: (_kind, bytes, reason) => {
        const s = sink()
        if (reason === "late" || s === undefined) lateSkipped.push({ bytes })
        else s.capture.skipped(bytes, reason)
      },
      cellEnded: (e) => {
        const s = sink()
        if (s === undefined) return
        s.capture.stdout.countAtLeast(e.stdoutBytes)
        s.capture.stderr.countAtLeast(e.stderrBytes)
        Deferred.unsafeDone(s.ended, Exit.succeed(e))
      },
      late: late.push,
      gone: (gone) => finish({ _tag: "Gone", gone }),
      lockWait: (holder) => void (lockWait = holder),
      locked: () => void (lockWait = undefined),
      setupFailed: (message) => {
        failure = message
        if (kernel === undefined) finish({ _tag: "SetupFailed", message })
      },
      toolFrame: (type, bytes) => {
        const tools = sink()?.tools
        return tools === undefined ? `a tool call frame '${type}' in a cell given no tools` : tools.frame(type, bytes)
      },
      toolArguments: (chunk) => {
        const tools = sink()?.tools
        return tools === undefined ? "tool call arguments in a cell given no tools" : tools.argumentsChunk(chunk)
      },
      violation: (reason) => finish({ _tag: "Violation", reason })
    })
    // The session's variables and secrets, in the exec's environment only (as a call's).
    const env = {
      ...plan.env,
      ...Object.fromEntries(Object.entries(plan.secretEnv).map(([k, v]) => [k, Redacted.value(v)]))
    }
    const startedAt = yield* Clock.currentTimeMillis
    const proc = yield* runtime
      .exec(
        container,
        { command: [supervisor, RUNNER_MODES.kernel.arg, "python"], env, stdin: true },
        { stdout: decoder.push, stderr: diagnostics.push, requires: ["kernel"] }
      )
      .pipe(
        Effect.mapError((e) =>
          // Refused before the process existed: the image's supervisor lacks the feature.
          e._tag === "ContainerFailed" && e.reason === "protocol"
            ? new KernelUnavailable({ sessionId: deps.sessionId, image: plan.image, message: e.message })
            : e
        )
      )
    // The exec's end without 'G' (or after it: then this changes nothing).
    // Interruptible even when started from an uninterruptible region (forks inherit it): the
    // session's end interrupts its watchers.
    yield* FiberSet.run(
      deps.background,
      Effect.interruptible(
        proc.exit.pipe(
          Effect.either,
          Effect.flatMap(() => Deferred.succeed(end, { _tag: "ChannelEnded" }))
        )
      )
    )
    const header = encodeKernelHeader({
      key,
      capBytes: plan.outputLimitBytes,
      lock: SESSION_LOCK,
      killLeftovers: !plan.keepBackgroundProcesses,
      display: {
        bundleBytes: settings.maxBundleBytes,
        count: settings.maxDisplays,
        totalBytes: settings.maxDisplayBytes
      },
      graceMs: settings.interruptGraceMs,
      preload: settings.preload
    })
    const outcome = yield* proc.write(header).pipe(
      Effect.zipRight(
        Effect.raceFirst(
          // Interruptible waits: a race must interrupt its loser, whatever the caller's region.
          Effect.map(Effect.interruptible(Deferred.await(ready)), (r) => ({ _tag: "Ready" as const, r })),
          Effect.map(Effect.interruptible(Deferred.await(end)), (e) => ({ _tag: "Ended" as const, e }))
        )
      ),
      Effect.timeoutTo({
        duration: settings.startTimeoutMs,
        onSuccess: (o) => o,
        onTimeout: () => ({ _tag: "Timeout" as const })
      }),
      Effect.catchAll(() => Effect.succeed({ _tag: "Ended" as const, e: { _tag: "ChannelEnded" } as KernelEnd }))
    )
    if (outcome._tag !== "Ready") {
      yield* askToEnd(proc)
      yield* proc.kill.pipe(Effect.ignore)
      yield* proc.detach
      const base = { operation: "kernel start", containerName: container.name }
      if (outcome._tag === "Timeout")
        return yield* new ContainerFailed({
          ...base,
          reason: "setup",
          message: `the session's Python kernel was not ready within ${settings.startTimeoutMs} ms (kernel.startTimeoutMs; preload: ${settings.preload.join(" ") || "none"})`
        })
      const e = outcome.e
      if (e._tag === "Violation")
        return yield* new ContainerFailed({
          ...base,
          reason: "protocol",
          message: `the kernel's channel carried what its supervisor did not write: ${e.reason}`
        })
      if (e._tag === "SetupFailed") {
        // One kernel per sandbox: another process's kernel holds it (its supervisor's word).
        if (e.message.startsWith("kernel-held"))
          return yield* new ContainerFailed({ ...base, reason: "kernel-held", message: e.message })
        return yield* new KernelUnavailable({
          sessionId: deps.sessionId,
          image: plan.image,
          message: `the session's Python kernel could not start in ${plan.image}: ${e.message}`
        })
      }
      const said = diagnostics.text().trim()
      return yield* new ContainerFailed({
        ...base,
        reason: "setup",
        message: `the kernel's supervisor ended before the kernel was ready${said === "" ? "" : `: ${said}`}`
      })
    }
    generation += 1
    const startedAtMs = yield* Clock.currentTimeMillis
    const made: LiveKernel = {
      kernelId,
      generation,
      proc,
      decoder,
      identity: outcome.r,
      end,
      executionCount: 0,
      current: undefined,
      endHandled: false,
      failure: () => failure,
      lockWait: () => lockWait,
      startedAtMs,
      engineOom: undefined
    }
    kernel = made
    live = made
    const readyAt = yield* Clock.currentTimeMillis
    yield* FiberSet.run(deps.background, Effect.interruptible(watchIdle(made)))
    yield* deps.append({
      type: "KernelStarted",
      data: {
        kernelId,
        generation,
        language: "python",
        startMs: readyAt - startedAt,
        preload: [...settings.preload],
        preloadFailed: [...outcome.r.preloadFailed]
      }
    })
    return made
  })

  const ensure = Effect.gen(function* () {
    const current = live
    if (current !== undefined) {
      if (!(yield* Deferred.isDone(current.end))) return { kernel: current, started: false }
      // It ended at idle and nobody took charge yet.
      yield* lost(current, "crashed", undefined)
    }
    return { kernel: yield* start, started: true }
  })

  const restart = Effect.gen(function* () {
    const kernel = live
    if (kernel !== undefined && !kernel.endHandled) {
      kernel.endHandled = true
      live = undefined
      // The supervisor kills the domain, frames 'G' requested and exits; teardown waits for it.
      yield* kernel.proc.write(encodeRestartCommand()).pipe(Effect.ignore)
      yield* Effect.interruptible(Deferred.await(kernel.end)).pipe(Effect.timeout(KILL_GRACE), Effect.ignore)
      yield* teardown(kernel)
      yield* deps.append({
        type: "KernelRestarted",
        data: { kernelId: kernel.kernelId, generation: kernel.generation, reason: "requested" }
      })
    }
    // The caller asked for a fresh state: nothing lost to report.
    pendingLoss = false
  })

  const shutdown = Effect.suspend(() => {
    const kernel = live
    live = undefined
    if (kernel === undefined || kernel.endHandled) return Effect.void
    kernel.endHandled = true
    return askToEnd(kernel.proc).pipe(Effect.zipRight(kernel.proc.detach))
  })

  return {
    ensure,
    lost,
    restart,
    pendingLoss: () => pendingLoss,
    lossReturned: () => void (pendingLoss = false),
    shutdown
  }
}
