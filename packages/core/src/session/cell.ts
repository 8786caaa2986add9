/**
 * One cell on a session's Python kernel (docs/design/kernel.md §5, §6): validated, sent as a
 * `cell … run` command on the kernel's stdin, its frames gathered (CellCapture), its end decided.
 *
 * The host's clock decides `timeout` and `interrupted`: at the deadline (or when the caller's signal
 * aborts) the host writes `interrupt <cell id>`; the supervisor sends SIGINT to the kernel's process
 * group and keeps the state only if the kernel ends the cell and answers a fresh ping within the
 * grace ('Z' ok|error), else kills the domain ('Z' none, 'G' interrupt-timeout). The host waits the
 * grace plus KILL_GRACE for either; past that, it ends the kernel itself (pythonKernel.ts teardown).
 * Process identity decides `stateLost`: a kernel that ended under the cell, or since the last result
 * returned, is a loss, whatever the kernel printed. The kernel's word decides only ok versus error.
 *
 * The session's stream gets CellExecuted (sizes, digests, MIME types; never code or data) before
 * the result is returned, and KernelRestarted when the kernel was lost (pythonKernel.ts).
 */
import { Clock, Deferred, Effect, Option, type Scope } from "effect"
import { v7 as uuidv7 } from "uuid"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import { CellCapture } from "../CellCapture.js"
import type { CellResult, CellStatus } from "../CellResult.js"
import { ContainerFailed, type InvalidRequest, invalidRequest } from "../Errors.js"
import type { ResolvedSandboxDefaults } from "../ExecutorConfig.js"
import * as ToolChannel from "../kernel/ToolChannel.js"
import { auditRecorder, beforeTerminal } from "../internal/auditTrail.js"
import { type CellEnded, encodeCellCommand, encodeInterruptCommand } from "../RunnerProtocol.js"
import { planTools, resolveToolLimits, type ToolLimits, type ToolPlan, type Tools } from "../Tools.js"
import { KILL_GRACE } from "./call.js"
import { callTimeoutMs, type SessionPlan } from "./plan.js"
import {
  type CellHooks,
  type CellSink,
  type KernelEnd,
  type KernelStartError,
  type LiveKernel,
  type PythonKernel,
  sha256
} from "./pythonKernel.js"

export type { CellHooks } from "./pythonKernel.js"

/** What `runCell` runs. */
export interface CellRequest {
  /** Python source, run by the session's kernel (IPython: the last expression is the result). */
  readonly code: string
  /** The cell's deadline. Default: the session's `timeoutMs`. */
  readonly timeoutMs?: number
  /**
   * Host tools this cell's code may call (`from hermes_tools import name`, as in a one-shot run);
   * replaces the service's `tools`. The cell's calls have their own budget and end with the cell.
   */
  readonly tools?: Tools
  readonly toolLimits?: Partial<ToolLimits>
  /** Record each call's arguments in ToolCallRequested (off by default: they may hold secrets). */
  readonly recordToolArguments?: boolean
}

/** `runCell`'s options: the output as it arrives, and a signal that interrupts the cell. */
export interface CellOptions extends CellHooks {
  /**
   * Interrupts the cell as its deadline would: it ends `interrupted` (its state kept when the kernel
   * stops within the grace, else killed: `stateLost`). The promise resolves with that result.
   */
  readonly signal?: AbortSignal | undefined
  /**
   * The state the caller's earlier cells built up is gone for a reason this session cannot see:
   * they ran in another sandbox, since replaced (a reopen after an idle expiry). The result says
   * `stateLost`, and so does its `CellExecuted`. CellLineage sets it for the facades that reopen.
   */
  readonly stateLostBefore?: boolean | undefined
}

export interface CellInput {
  readonly code: Uint8Array
  readonly codeSha256: string
  readonly timeoutMs: number
  readonly tools: ToolPlan | undefined
  /** Record the cell's code and the head of its output (the service's recordCode). */
  readonly recordCode: boolean
}

const encoder = new TextEncoder()
const KILL_GRACE_MS = 5000

export const cellInput = (
  plan: SessionPlan,
  config: ResolvedSandboxDefaults,
  request: CellRequest
): Effect.Effect<CellInput, InvalidRequest> =>
  Effect.gen(function* () {
    if (request === null || typeof request !== "object")
      return yield* Effect.fail(invalidRequest("request", request, "an object { code, timeoutMs? }"))
    if (typeof request.code !== "string")
      return yield* Effect.fail(invalidRequest("code", request.code, "Python source as a string"))
    const code = encoder.encode(request.code)
    if (code.byteLength > config.maxCodeBytes)
      return yield* Effect.fail(
        invalidRequest("code", `${code.byteLength} bytes`, `at most ${config.maxCodeBytes} bytes (maxCodeBytes)`)
      )
    const tools = yield* planTools(
      request.tools ?? config.tools,
      resolveToolLimits(request.toolLimits, config.toolLimits),
      request.recordToolArguments ?? false
    )
    return {
      code,
      codeSha256: sha256(code),
      timeoutMs: yield* callTimeoutMs(request, plan.timeoutMs),
      tools,
      recordCode: config.recordCode
    }
  })

export interface CellDeps {
  readonly sessionId: string
  readonly containerName: string
  readonly plan: SessionPlan
  readonly kernel: PythonKernel
  readonly append: (event: JournalEvent) => Effect.Effect<void, JournalError>
}

/** Completes once the signal aborts (never without one). */
const abortedBy = (signal: AbortSignal | undefined): Effect.Effect<void> =>
  signal === undefined
    ? Effect.never
    : Effect.async<void>((resume) => {
        if (signal.aborted) return resume(Effect.void)
        const on = () => resume(Effect.void)
        signal.addEventListener("abort", on, { once: true })
        return Effect.sync(() => signal.removeEventListener("abort", on))
      })

const polled = <A>(d: Deferred.Deferred<A>): Effect.Effect<A | undefined> =>
  Effect.flatMap(Deferred.poll(d), (o) => (Option.isNone(o) ? Effect.succeed(undefined) : o.value))

const protocolError = (deps: CellDeps, reason: string) =>
  new ContainerFailed({
    operation: "session cell",
    containerName: deps.containerName,
    reason: "protocol",
    message: `the kernel's channel carried what its supervisor did not write (${reason}); the kernel was killed, the session lives on`
  })

/** One cell, under the session's lock (the caller holds it). */
export const runCell = (
  deps: CellDeps,
  input: CellInput,
  o: CellOptions = {}
): Effect.Effect<CellResult, KernelStartError, Scope.Scope> =>
  Effect.gen(function* () {
    const { kernel: manager, plan } = deps
    const { kernel, started } = yield* manager.ensure
    // A loss before this cell (at idle, under an earlier cell, or with the caller's earlier
    // sandbox): this result says it, and so does the journal.
    const lostBefore = manager.pendingLoss() || o.stateLostBefore === true
    const cellId = uuidv7()
    kernel.executionCount += 1
    const executionCount = kernel.executionCount
    const capture = new CellCapture({
      outputLimitBytes: plan.outputLimitBytes,
      maxBundleBytes: plan.kernel.maxBundleBytes,
      maxDisplays: plan.kernel.maxDisplays,
      maxDisplayBytes: plan.kernel.maxDisplayBytes
    })
    // recordCode: the cell's code now, the head of its output before its CellExecuted (with its id).
    const recorder = auditRecorder(input.recordCode, input.code, deps.append, cellId)
    if (recorder !== undefined) {
      yield* deps.append(recorder.code)
      recorder.captures(capture.stdout, capture.stderr)
    }
    // The cell's tool calls: one channel per cell (its budget, its journal budget), journaled in
    // the session's stream with the cell's id, settled before its CellExecuted.
    const tools =
      input.tools === undefined
        ? undefined
        : yield* ToolChannel.make({
            plan: input.tools,
            language: "python",
            executionId: cellId,
            append: (event) =>
              deps.append(
                event.type === "ToolCallRequested" ||
                  event.type === "ToolCallCompleted" ||
                  event.type === "ToolCallFailed" ||
                  event.type === "ToolCallRefused"
                  ? ({ ...event, data: { ...event.data, cellId } } as JournalEvent)
                  : event
              ),
            reserve: recorder?.reserve
          })
    if (tools !== undefined) yield* tools.start(kernel.proc.write)
    const sink: CellSink = {
      cellId,
      capture,
      hooks: o,
      ended: yield* Deferred.make<CellEnded>(),
      tools,
      lateOutput: undefined
    }
    const sentAt = yield* Clock.currentTimeMillis
    const outcome = yield* Effect.gen(function* () {
      kernel.current = sink
      kernel.decoder.expectCell(cellId)
      const sent = yield* Effect.either(
        kernel.proc.write(encodeCellCommand(cellId, executionCount, input.code, tools?.header))
      )
      const wake =
        sent._tag === "Left"
          ? "gone"
          : yield* Effect.raceAll([
              Effect.as(Deferred.await(sink.ended), "ended" as const),
              Effect.as(Deferred.await(kernel.end), "gone" as const),
              Effect.as(Effect.sleep(input.timeoutMs), "timeout" as const),
              Effect.as(abortedBy(o.signal), "interrupted" as const),
              // Its tool calls flood (refusals, the journal budget): the cell must end, as a run would.
              tools === undefined ? Effect.never : Effect.as(Deferred.await(tools.flooded), "interrupted" as const)
            ]).pipe(
              // A race must interrupt its losers, whatever the caller's region.
              Effect.interruptible
            )
      return yield* decide(deps, kernel, sink, wake, cellId)
    }).pipe(
      // The caller went away mid-cell (the session ends, a fiber interrupted): the kernel cannot be
      // trusted to be idle, so it goes (journaled; the next result says stateLost).
      Effect.onInterrupt(() => Effect.asVoid(manager.lost(kernel, "interrupted", cellId))),
      Effect.ensuring(Effect.sync(() => void (kernel.current = undefined)))
    )
    // Calls still running are cancelled and journaled (ToolCallFailed cancelled) before the cell's end.
    yield* beforeTerminal(tools, recorder)
    if (outcome._tag === "Violation") return yield* Effect.fail(protocolError(deps, outcome.reason))
    // A flood of tool calls ended the cell (interrupted, its state kept if the kernel stopped): the
    // cell fails as a run does, ContainerFailed tool-calls | journal-budget; a lost kernel is journaled.
    const flood = tools === undefined ? undefined : yield* polled(tools.flooded)
    if (flood !== undefined)
      return yield* Effect.fail(
        new ContainerFailed({
          operation: "session cell",
          containerName: deps.containerName,
          reason: flood.reason,
          message: flood.message
        })
      )
    const endedAt = yield* Clock.currentTimeMillis
    const stateLost = outcome.lost || lostBefore
    const journal = capture.journal()
    const result: CellResult = {
      sessionId: deps.sessionId,
      cellId,
      status: outcome.status,
      executionCount,
      stdout: capture.stdout.text(),
      stderr: capture.stderr.text(),
      stdoutBytes: capture.stdout.total,
      stderrBytes: capture.stderr.total,
      stdoutTruncated: capture.stdout.truncated,
      stderrTruncated: capture.stderr.truncated,
      ...(capture.result === undefined ? {} : { result: capture.result }),
      displays: capture.displays,
      displaysOmitted: capture.displaysOmitted,
      ...(capture.error === undefined ? {} : { error: capture.error }),
      stateLost,
      oomKilled: outcome.oomKilled,
      kernel: { id: kernel.kernelId, generation: kernel.generation, started },
      ...(sink.lateOutput === undefined ? {} : { lateOutput: sink.lateOutput }),
      toolCallsMade: tools?.callsMade() ?? 0,
      durationMs: endedAt - sentAt
    }
    yield* deps.append({
      type: "CellExecuted",
      data: {
        cellId,
        kernelId: kernel.kernelId,
        executionCount,
        status: result.status,
        durationMs: result.durationMs,
        timeoutMs: input.timeoutMs,
        codeBytes: input.code.byteLength,
        codeSha256: input.codeSha256,
        stdoutBytes: result.stdoutBytes,
        stderrBytes: result.stderrBytes,
        stdoutTruncated: result.stdoutTruncated,
        stderrTruncated: result.stderrTruncated,
        outputs: journal.outputs.map((x) => ({ kind: x.kind, mime: [...x.mime] })),
        outputsOmitted: journal.outputsOmitted,
        displaysOmitted: result.displaysOmitted.count,
        stateLost,
        oomKilled: result.oomKilled,
        toolCallsMade: result.toolCallsMade
      }
    })
    // An earlier loss is said now (a result carrying it is returned). A loss under this cell is said
    // by this result and again by the next, the first of the new kernel.
    if (!outcome.lost) manager.lossReturned()
    return result
  })

type Decision =
  | { readonly _tag: "Done"; readonly status: CellStatus; readonly lost: boolean; readonly oomKilled: boolean }
  | { readonly _tag: "Violation"; readonly reason: string }

/** What ended the wait decides the cell's status; the kernel's word counts only before the deadline. */
const decide = (
  deps: CellDeps,
  kernel: LiveKernel,
  sink: CellSink,
  wake: "ended" | "gone" | "timeout" | "interrupted",
  cellId: string
): Effect.Effect<Decision> =>
  Effect.gen(function* () {
    const manager = deps.kernel
    const violation = (end: KernelEnd | undefined) => (end?._tag === "Violation" ? end.reason : undefined)
    /** The kernel is gone (or must go): journaled and torn down; a violation is an error, not a result. */
    const loss = (status: CellStatus, reason: "timeout" | "interrupted" | "crashed", silent = false) =>
      Effect.gen(function* () {
        // After 'Z' none the supervisor's 'G' follows: wait for it, for its cause and OOM verdict
        // (not again when the supervisor already let the whole grace pass in silence: stopped or gone).
        if (!silent)
          yield* Effect.interruptible(Deferred.await(kernel.end)).pipe(Effect.timeout(KILL_GRACE), Effect.ignore)
        const bad = violation(yield* polled(kernel.end))
        const { oomKilled } = yield* manager.lost(kernel, bad === undefined ? reason : "crashed", cellId)
        if (bad !== undefined) return { _tag: "Violation" as const, reason: bad }
        return { _tag: "Done" as const, status, lost: true, oomKilled }
      })
    let end = yield* polled(sink.ended)
    const gone = yield* polled(kernel.end)
    if (violation(gone) !== undefined) return yield* loss("crashed", "crashed")
    if (wake === "ended" || wake === "gone") {
      // The kernel's own end of the cell, before the deadline.
      if (end !== undefined && end.status !== "none")
        return { _tag: "Done", status: end.status, lost: false, oomKilled: false }
      return yield* loss("crashed", "crashed")
    }
    // The deadline, or the caller's abort: interrupt, then the supervisor's grace (and ours).
    let silent = false
    if (end === undefined) {
      yield* kernel.proc.write(encodeInterruptCommand(cellId)).pipe(Effect.ignore)
      silent = Option.isNone(
        yield* Effect.raceFirst(
          Effect.asVoid(Deferred.await(sink.ended)),
          Effect.asVoid(Deferred.await(kernel.end))
        ).pipe(Effect.interruptible, Effect.timeout(deps.plan.kernel.interruptGraceMs + KILL_GRACE_MS), Effect.option)
      )
      end = yield* polled(sink.ended)
    }
    if (violation(yield* polled(kernel.end)) !== undefined) return yield* loss("crashed", "crashed")
    // Ended and answered within the grace: the state is kept; the status is the host's.
    if (end !== undefined && end.status !== "none") return { _tag: "Done", status: wake, lost: false, oomKilled: false }
    return yield* loss(wake, wake, silent)
  })
