/**
 * Running a program to its end: the kernel's one run step, used by one-shot executions (on a
 * created or claimed sandbox) and session calls (on an exec of the supervisor). "Where does the
 * deadline kill it?" has one answer: `runToCompletion` below, through its target's `atDeadline`.
 *
 * The supervisor's payload is fed in the background (a program that never reads its stdin cannot
 * block us); the supervisor's report (kernel/SupervisedRun.ts: only frames carrying the run's key)
 * is raced against the engine's exit report, and both against the host-side deadline, which is
 * the authority: nothing inside the sandbox can outlive it. The report saves waiting for the
 * engine; the engine's report still decides when the supervisor cannot speak (killed, OOM).
 * A report of a failed setup or a tampered channel is a ContainerFailed, never a result; so is a
 * run killed from outside the SDK (the engine stopping, docker kill), whatever it reported.
 *
 * Exactly one terminal event per run (`withTerminalEvent`): ContainerExited | ExecutionTimedOut
 * from here, ExecutionFailed on a typed failure, ExecutionInterrupted on interruption.
 */
import { Clock, Deferred, Effect, Fiber, Option, type Scope } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import { ContainerFailed, type SandboxError } from "../Errors.js"
import type { ExitStatus } from "../SandboxRuntime.js"
import { LIMIT } from "../RunnerProtocolTable.js"
import { type CollectedOutcome, type ExecutionResult, toExecutionResult } from "../ExecutionResult.js"
import type { SupervisedRun, SupervisorReport } from "./SupervisedRun.js"
import type { ToolChannel } from "./ToolChannel.js"

/** What one run happens on: a one-shot sandbox's PID 1, or a session call's exec. */
export interface RunTarget<E> {
  readonly containerName: string
  /** "run" (a one-shot sandbox) or "call" (a session call): only the words of its errors differ. */
  readonly kind: "run" | "call"
  /** The supervisor's stdin. */
  readonly write: (data: Uint8Array) => Effect.Effect<void, SandboxError>
  readonly end: Effect.Effect<void, SandboxError>
  /** The engine's report that the supervisor's process ended. */
  readonly exit: Effect.Effect<ExitStatus, SandboxError>
  /** After the engine reported the end first: the output delivered to its end (the report may be among the last bytes). */
  readonly drained: Effect.Effect<void>
  /** End what runs now (a refused report); never fails. */
  readonly kill: Effect.Effect<void>
  /** The deadline passed: end everything the run started; the exit code to report. */
  readonly atDeadline: (run: SupervisedRun) => Effect.Effect<number, E>
  /** The supervisor reported the end: a kill from outside the SDK the engine saw (besides a signal the supervisor reported). */
  readonly outsideKill: Effect.Effect<Option.Option<string>>
  /** An exit code of 137: the OOM killer's doing? `reported`: the supervisor said so (the sandbox may still be ending). */
  readonly oomKilled: (reported: boolean, untilDeadlineMs: number) => Effect.Effect<boolean, SandboxError>
}

export interface Completion {
  readonly exitCode: number
  readonly timedOut: boolean
  readonly oomKilled: boolean
  /** The supervisor reported the end (the sandbox ends by itself right after). */
  readonly reported: boolean
  readonly startedAtMs: number
  readonly finishedAtMs: number
  /** When the deadline passes (ms since the epoch): whatever follows the run is bounded by it. */
  readonly deadlineAtMs: number
  /** With `collect`: the files the run sent back, and whether all of them came. */
  readonly collected?: CollectedOutcome | undefined
  /** With tools: the calls dispatched to a handler. */
  readonly toolCallsMade?: number | undefined
}

const OUTPUT_DRAIN_TIMEOUT = "3 seconds"

/** The result of a run that ended or timed out: its completion and what the supervisor relayed. */
export const resultOf = (
  executionId: string,
  containerName: string,
  done: Completion,
  run: SupervisedRun
): ExecutionResult =>
  toExecutionResult({
    executionId,
    containerName,
    exitCode: done.exitCode,
    timedOut: done.timedOut,
    oomKilled: done.oomKilled,
    stdout: run.stdout,
    stderr: run.stderr,
    startedAtMs: done.startedAtMs,
    finishedAtMs: done.finishedAtMs,
    collected: done.collected,
    toolCallsMade: done.toolCallsMade
  })

const polled = (run: SupervisedRun): Effect.Effect<Option.Option<SupervisorReport>> =>
  Deferred.poll(run.report).pipe(
    Effect.flatMap((o) => (Option.isSome(o) ? Effect.asSome(o.value) : Effect.succeedNone))
  )

/**
 * Feed `payload`, race the report, the engine and the deadline, and record the terminal event of a
 * run that ended (ContainerExited) or timed out (ExecutionTimedOut).
 */
export const runToCompletion = <E>(input: {
  readonly target: RunTarget<E>
  readonly run: SupervisedRun
  readonly payload: Uint8Array
  readonly timeoutMs: number
  readonly record: (event: JournalEvent) => Effect.Effect<void, JournalError>
  /** Records an event that is not the terminal one (ArtifactsCollected, before it). */
  readonly append?: ((event: JournalEvent) => Effect.Effect<void, JournalError>) | undefined
  /** The run's tool calls (its stdin then stays open for the replies; `settle` is withTerminalEvent's). */
  readonly tools?: ToolChannel | undefined
}): Effect.Effect<Completion, E | ContainerFailed | SandboxError | JournalError, Scope.Scope> =>
  Effect.gen(function* () {
    const { target, run, timeoutMs } = input
    const name = target.containerName
    const startedAtMs = yield* Clock.currentTimeMillis
    const deadlineAtMs = startedAtMs + timeoutMs
    const untilDeadline = Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, deadlineAtMs - now))

    if (input.tools !== undefined) {
      // The replies go to the supervisor's stdin after the header: it stays open until the run ends.
      yield* input.tools.start(target.write)
      yield* target.write(input.payload).pipe(Effect.ignore, Effect.forkScoped)
    } else {
      yield* target.write(input.payload).pipe(Effect.zipRight(target.end), Effect.ignore, Effect.forkScoped)
    }

    const refuse = (reason: "setup" | "protocol", message: string) =>
      target.kill.pipe(
        Effect.zipRight(
          new ContainerFailed({
            operation: reason === "setup" ? "setup" : target.kind === "run" ? "report" : "session call",
            containerName: name,
            reason,
            message
          })
        )
      )
    // (A request that needs more than the image's supervisor can do never gets here: the runtime
    // refused it before anything was created, from the image's RUNNER_FEATURES_LABEL.)
    const refuseReport = (report: SupervisorReport) =>
      report._tag === "SetupFailed"
        ? refuse(
            "setup",
            target.kind === "run"
              ? `the sandbox ${name} could not be set up, so the program never ran: ${report.message}`
              : `the call in ${name} could not be set up, so it never ran: ${report.message}`
          )
        : report._tag === "Violation"
          ? refuse(
              "protocol",
              `the report channel of ${target.kind === "run" ? "" : "a call in "}${name} carried bytes its supervisor did not write (${report.reason}); nothing it reported was used`
            )
          : Effect.void

    // raceFirst: the first to end, a failure included (the engine gone is an answer too).
    const reportOrExit = Effect.raceFirst(
      target.exit.pipe(Effect.map((s) => ({ _tag: "Engine" as const, exitCode: s.exitCode }))),
      Deferred.await(run.report)
    )
    // A run with tools also ends when they flood; one without races nothing more (a race against
    // Effect.never cost two fibers and an interruption per execution: ~0.2 ms, BENCHMARKS.md).
    const ended = yield* (
      input.tools === undefined
        ? reportOrExit
        : Effect.raceFirst(
            reportOrExit,
            Deferred.await(input.tools.flooded).pipe(
              Effect.map((flooded) => ({ _tag: "Flooded" as const, ...flooded }))
            )
          )
    ).pipe(Effect.timeoutTo({ duration: timeoutMs, onSuccess: Option.some, onTimeout: Option.none }))

    let exitCode: number
    let timedOut = false
    let oomKilled = false
    let reported = false
    if (Option.isNone(ended)) {
      timedOut = true
      exitCode = yield* target.atDeadline(run)
    } else if (ended.value._tag === "Flooded") {
      return yield* target.kill.pipe(
        Effect.zipRight(
          new ContainerFailed({
            operation: "tool call",
            containerName: name,
            reason: ended.value.reason,
            message: `${name}: ${ended.value.message}`
          })
        )
      )
    } else if (ended.value._tag === "Exited") {
      reported = true
      exitCode = ended.value.exit.exitCode
      // The supervisor reports before the engine's verdict: a sandbox killed from outside (an
      // engine stopping, docker kill) did not produce a result, whatever was reported.
      const signalled = ended.value.exit.outsideSignal
      const outside = signalled > 0 ? Option.some(String(signalled)) : yield* target.outsideKill
      if (Option.isSome(outside)) {
        return yield* new ContainerFailed({
          operation: "wait",
          containerName: name,
          reason: "killed-externally",
          message:
            `${name} was killed from outside the SDK (signal ${outside.value}) while the program ran; the exit code it ` +
            `then reported (${exitCode}) is not its result: the engine is stopping or restarting, or someone ran docker stop/kill`
        })
      }
      if (exitCode === 137) oomKilled = yield* target.oomKilled(true, yield* untilDeadline)
    } else if (ended.value._tag === "Engine") {
      // The engine saw the end first: the report may be among the last bytes (it is the result then).
      yield* target.drained.pipe(Effect.timeout(OUTPUT_DRAIN_TIMEOUT), Effect.ignore)
      const late = yield* polled(run)
      if (Option.isSome(late)) yield* refuseReport(late.value)
      if (
        Option.isNone(late) &&
        (ended.value.exitCode === LIMIT.protocolErrorExit || ended.value.exitCode === LIMIT.interpreterMissingExit) &&
        run.diagnostics() !== ""
      ) {
        // The supervisor refused before it could frame anything (a malformed header: an SDK or image mismatch).
        return yield* refuse("protocol", `the supervisor in ${name} refused the ${target.kind}: ${run.diagnostics()}`)
      }
      reported = Option.isSome(late)
      exitCode = Option.isSome(late) && late.value._tag === "Exited" ? late.value.exit.exitCode : ended.value.exitCode
      // Only a SIGKILL we did not send can be the OOM killer; ask only then.
      if (exitCode === 137) oomKilled = yield* target.oomKilled(false, yield* untilDeadline)
    } else {
      return yield* refuseReport(ended.value).pipe(
        Effect.zipRight(Effect.die("unreachable: a report that is neither an exit nor a refusal"))
      )
    }
    const finishedAtMs = yield* Clock.currentTimeMillis
    const durationMs = finishedAtMs - startedAtMs
    // The files came before the report: all of them if it came (and the deadline did not cut in).
    const collected = run.files?.outcome({ complete: reported && !timedOut, timedOut })
    if (collected !== undefined && input.append !== undefined) {
      yield* input.append({
        type: "ArtifactsCollected",
        data: {
          files: collected.files.map(({ path, size, sha256, mime }) => ({ path, size, sha256, mime })),
          skipped: collected.skippedFiles.map(({ path, size, skipped }) => ({ path, size, reason: skipped })),
          ...(collected.skippedFilesOmitted === undefined ? {} : { skippedOmitted: collected.skippedFilesOmitted }),
          truncated: collected.filesTruncated,
          status: collected.collection.status,
          ...(collected.collection.reason === undefined ? {} : { reason: collected.collection.reason })
        }
      })
    }
    yield* input.record(
      timedOut
        ? { type: "ExecutionTimedOut", data: { timeoutMs, durationMs } }
        : { type: "ContainerExited", data: { exitCode, oomKilled, durationMs } }
    )
    return {
      exitCode,
      timedOut,
      oomKilled,
      reported,
      startedAtMs,
      finishedAtMs,
      deadlineAtMs,
      collected,
      toolCallsMade: input.tools?.callsMade()
    }
  })

/**
 * Exactly one terminal event per run: `body` records the end of a run that ended or timed out
 * through `record`; a typed failure records ExecutionFailed, an interruption ExecutionInterrupted
 * (with `interruptReason`). A terminal event counts only once its append committed: a failed
 * append (the journal refused the event) leaves room for the ExecutionFailed that follows.
 * `beforeTerminal` runs before it on every path (the tool calls' settle: their outcomes first).
 */
export const withTerminalEvent = <A, E extends { readonly _tag: string; readonly message: string }, R>(
  append: (event: JournalEvent) => Effect.Effect<unknown, JournalError>,
  interruptReason: Effect.Effect<string>,
  body: (record: (event: JournalEvent) => Effect.Effect<void, JournalError>) => Effect.Effect<A, E, R>,
  beforeTerminal: Effect.Effect<void> = Effect.void
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let terminal = false
    const record = (event: JournalEvent) =>
      terminal
        ? Effect.void
        : beforeTerminal.pipe(
            Effect.zipRight(append(event)),
            Effect.zipRight(Effect.sync(() => void (terminal = true)))
          )
    return body(record).pipe(
      Effect.onInterrupt(() =>
        Effect.flatMap(interruptReason, (reason) => record({ type: "ExecutionInterrupted", data: { reason } })).pipe(
          Effect.ignore
        )
      ),
      Effect.tapError((error) => {
        const reason = (error as { readonly reason?: unknown }).reason
        return record({
          type: "ExecutionFailed",
          data: { errorTag: error._tag, message: error.message, ...(typeof reason === "string" ? { reason } : {}) }
        }).pipe(Effect.ignore)
      })
    )
  })

/**
 * Wait for `effect` at most `ms`, from a finalizer: the wait runs in a child fiber that the bound
 * can interrupt (a finalizer itself is uninterruptible, so `Effect.timeout` there would wait for
 * the effect however long it takes), while the finalizer stays uninterruptible (so closing the
 * executor cannot cut the removal that follows it).
 */
export const boundedWait = (effect: Effect.Effect<void>, ms: number): Effect.Effect<void> =>
  Effect.gen(function* () {
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
