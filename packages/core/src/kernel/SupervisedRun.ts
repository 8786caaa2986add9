/**
 * The host's half of one supervised run (RunnerProtocol, version 2), shared by one-shot
 * executions, warm-pool claims and session calls: a fresh key, the bounded captures, the frame
 * decoder on the sandbox's stdout, and the supervisor's report as one Deferred.
 *
 * The report is built ONLY from frames that carry the run's key, written by the supervisor after
 * the program's process exited; the program's own bytes arrive inside 'o'/'e' frames and can never
 * be taken for anything else. What the program cannot forge is therefore: the exit code, the end of
 * the run, the byte counts and the truncation flags. What arrives on the sandbox's stderr is the
 * supervisor's own words from before it could frame (a bad header), kept (bounded) for diagnostics.
 */
import { Deferred, Effect } from "effect"
import { keptOutputBytes, OutputCapture } from "../OutputCapture.js"
import { type FileOp, FrameDecoder, makeRunKey, parseExitPayload, type ReportedExit } from "../RunnerProtocol.js"
import type { OutputReceiver } from "../SandboxRuntime.js"
import { type CollectLimits, FileReceiver } from "../Artifacts.js"
import { FileOpReply } from "./FileOpReply.js"
import type { ToolFrames } from "./ToolChannel.js"
import { FRAME, type RunnerFeature } from "../RunnerProtocolTable.js"

export type SupervisorReport =
  | { readonly _tag: "Exited"; readonly exit: ReportedExit }
  | { readonly _tag: "SetupFailed"; readonly message: string }
  | { readonly _tag: "Violation"; readonly reason: string }

export interface SupervisedRunHooks {
  readonly onStdout?: ((chunk: Uint8Array) => void) | undefined
  readonly onStderr?: ((chunk: Uint8Array) => void) | undefined
  /** The program started ('p'): its pid and start time (a session's background process waits for it). */
  readonly onStarted?: ((started: { readonly pid: number; readonly start: string }) => void) | undefined
  /** Keep each stream whole up to this (ExecuteOptions.keepFullOutput, checked by the caller). */
  readonly keepFullOutput?: boolean | number | undefined
}

/** Files the run sends back ('f'/'c'/'F'/'s'/'S' frames): without it, any such frame is a violation. */
export interface SupervisedRunFiles {
  readonly patterns: ReadonlyArray<string>
  readonly limits: CollectLimits
}

/** How much of the sandbox's own stderr (the supervisor's pre-frame messages) is kept. */
const DIAGNOSTICS_BYTES = 8192

export interface SupervisedRun {
  readonly key: string
  readonly receiver: OutputReceiver
  readonly stdout: OutputCapture
  readonly stderr: OutputCapture
  /** What the supervisor relays of each stream (its header's cap): the larger of the result's cap and what is kept whole. */
  readonly capBytes: number
  /** The supervisor's report: the program exited, setup failed, or the channel was tampered with. */
  readonly report: Deferred.Deferred<SupervisorReport>
  /** The program's pid and start time inside the sandbox ('p'), once started. */
  readonly started: () => { readonly pid: number; readonly start: string } | undefined
  /** The session lock's holder while the supervisor waits for it ('w'), until it is held ('l'). */
  readonly lockWait: () => string | undefined
  /** The sandbox's own stderr (not the program's), for error messages. */
  readonly diagnostics: () => string
  /** With `files`: what arrived of them so far. */
  readonly files: FileReceiver | undefined
  /** With `files`: when their first frame arrived (the clock's ms: the supervisor's walk began), if one did. */
  readonly collectBeganAt: () => number | undefined
  /** With `fileOp`: the supervisor's reply to it so far. */
  readonly reply: FileOpReply | undefined
}

/**
 * `files`: the run collects files ('f'/'c'/'F'/'s'). `fileOp`: the run is a session's file
 * operation (its reply: 'n'/'k'/'r', and a read's 'f'/'c'/'F'). `tools`: the run's tool calls
 * ('t'/'a'/'b'/'q', kernel/ToolChannel.ts). A frame of a kind the run did not ask for is a violation.
 */
export const makeSupervisedRun = (
  outputLimitBytes: number,
  hooks: SupervisedRunHooks = {},
  files?: SupervisedRunFiles,
  fileOp?: FileOp,
  tools?: ToolFrames
): Effect.Effect<SupervisedRun> =>
  Effect.map(Effect.zip(Deferred.make<SupervisorReport>(), Effect.clock), ([report, clock]) => {
    const key = makeRunKey()
    let collectBeganAt: number | undefined
    const keepBytes = keptOutputBytes(hooks.keepFullOutput) ?? 0
    const stdout = new OutputCapture(outputLimitBytes, keepBytes)
    const stderr = new OutputCapture(outputLimitBytes, keepBytes)
    const diagnostics = new OutputCapture(DIAGNOSTICS_BYTES)
    let started: { pid: number; start: string } | undefined
    let lockWait: string | undefined
    const settle = (r: SupervisorReport) => Deferred.unsafeDone(report, Effect.succeed(r))
    const reply = fileOp === undefined ? undefined : new FileOpReply(fileOp)
    const receiver = files === undefined ? reply?.file : new FileReceiver(files.limits, files.patterns)
    // A file frame the receiver refuses ends the decoding as any other violation would.
    let decoder: FrameDecoder | undefined
    const refused = (reason: string | undefined) => {
      if (reason === undefined) return
      settle({ _tag: "Violation", reason })
      if (decoder !== undefined) decoder.violated = reason
    }
    decoder = new FrameDecoder(key, {
      // A file operation runs no program: it has no output.
      stdout:
        fileOp !== undefined
          ? () => refused("program output in a file operation")
          : hooks.onStdout
            ? (c) => (stdout.push(c), hooks.onStdout!(c))
            : stdout.push,
      stderr:
        fileOp !== undefined
          ? () => refused("program output in a file operation")
          : hooks.onStderr
            ? (c) => (stderr.push(c), hooks.onStderr!(c))
            : stderr.push,
      ...(receiver === undefined ? {} : { content: (chunk: Uint8Array) => refused(receiver.content(chunk)) }),
      ...(tools === undefined ? {} : { toolArguments: (chunk: Uint8Array) => refused(tools.argumentsChunk(chunk)) }),
      control: (type, payload, bytes) => {
        if (type === FRAME.toolCall || type === FRAME.toolTooLarge || type === FRAME.toolCallerGone) {
          refused(
            tools === undefined ? `a tool call frame '${type}' where no tools were given` : tools.frame(type, bytes)
          )
        } else if (
          type === FRAME.fileBegin ||
          type === FRAME.fileEnd ||
          type === FRAME.skipped ||
          type === FRAME.skippedCount
        ) {
          if (reply === undefined && collectBeganAt === undefined) collectBeganAt = clock.unsafeCurrentTimeMillis()
          refused(
            reply?.fileFrame(type) ??
              (receiver === undefined
                ? `a file frame '${type}' where no files were asked for`
                : receiver.frame(type, bytes))
          )
        } else if (type === FRAME.listEntry || type === FRAME.opDone || type === FRAME.opFailed) {
          refused(
            reply === undefined
              ? `a file operation's frame '${type}' where none was asked for`
              : reply.frame(type, bytes)
          )
        } else if (type === FRAME.exited) {
          const exit = parseExitPayload(payload)
          if (exit === undefined)
            return settle({
              _tag: "Violation",
              reason: `an end-of-run frame that is not the supervisor's (${JSON.stringify(payload.slice(0, 80))})`
            })
          if (reply !== undefined && reply.outcome === undefined)
            return settle({ _tag: "Violation", reason: "the end of a file operation without its reply" })
          stdout.countAtLeast(exit.stdoutBytes)
          stderr.countAtLeast(exit.stderrBytes)
          settle({ _tag: "Exited", exit })
        } else if (type === FRAME.setupFailed) {
          // A write refused before its content was read (a symlinked parent, say) leaves that content
          // on the supervisor's stdin, where it reads it as header lines and stops on the first it
          // cannot parse: the keyed reply before that is the answer, this is the supervisor's exit (126).
          if (fileOp?.op === "write" && reply?.outcome?._tag === "Failed")
            return settle({ _tag: "Exited", exit: { exitCode: 126, stdoutBytes: 0, stderrBytes: 0, outsideSignal: 0 } })
          settle({ _tag: "SetupFailed", message: payload })
        } else if (type === FRAME.dropped) {
          // The stream passed the cap: how much the program wrote so far (a run killed before its
          // 'x' still reports the cut, and at least this count).
          const match = /^([oe]) (0|[1-9][0-9]{0,19})$/.exec(payload)
          if (match === null)
            return refused(
              `a dropped-bytes frame that is not the supervisor's (${JSON.stringify(payload.slice(0, 80))})`
            )
          ;(match[1] === "o" ? stdout : stderr).countAtLeast(Number(match[2]))
        } else if (type === FRAME.started) {
          const [pid, start] = payload.split(" ")
          if (pid !== undefined && /^[1-9][0-9]*$/.test(pid) && start !== undefined && /^[0-9]+$/.test(start)) {
            started = { pid: Number(pid), start }
            hooks.onStarted?.(started)
          }
        } else if (type === FRAME.lockWait) {
          lockWait = payload
        } else if (type === FRAME.locked) {
          lockWait = undefined
        }
      },
      violation: (reason) => settle({ _tag: "Violation", reason })
    })
    // What the supervisor must be able to do for this run beyond protocol 2's base: the runtime
    // refuses, before anything is created, a sandbox or exec whose image lacks it.
    const requires: Array<RunnerFeature> = [
      ...(files === undefined ? [] : ["collect" as const]),
      ...(fileOp === undefined ? [] : ["fileops" as const]),
      ...(tools === undefined ? [] : ["tools" as const])
    ]
    return {
      key,
      receiver: { stdout: decoder.push, stderr: diagnostics.push, ...(requires.length === 0 ? {} : { requires }) },
      stdout,
      stderr,
      capBytes: Math.max(outputLimitBytes, keepBytes),
      report,
      started: () => started,
      lockWait: () => lockWait,
      // A frame cut short when the stream ends is the supervisor killed mid-write (deadline, OOM):
      // the engine's verdict decides then, and the partial frame is dropped.
      diagnostics: () => diagnostics.text().trim(),
      files: files === undefined ? undefined : receiver,
      collectBeganAt: () => collectBeganAt,
      reply
    }
  })
