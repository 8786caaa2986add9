import type { CollectedFile, CollectionStatus, SkippedFile } from "./Artifacts.js"
import type { OutputCapture } from "./OutputCapture.js"
/** What an execution reports. A non-zero exit, a timeout or an OOM kill is a result, not an error. */
export interface ExecutionResult {
  readonly executionId: string
  readonly containerName: string
  /** The program's exit code; 137 after a kill (timeout or OOM). */
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
  readonly oomKilled: boolean
  readonly stdoutTruncated: boolean
  readonly stderrTruncated: boolean
  /** Total bytes the program wrote to each stream, including what was dropped past the cap. */
  readonly stdoutBytes: number
  readonly stderrBytes: number
  /** From the container's start (or pooled claim) to the observed exit. */
  readonly durationMs: number
  /** ISO-8601 */
  readonly startedAt: string
  readonly finishedAt: string
  /** With `collect`: the files sent back (content, size and sha256 as the host received them). */
  readonly files?: ReadonlyArray<CollectedFile>
  /** With `collect`: matching entries not sent, each with the reason. */
  readonly skippedFiles?: ReadonlyArray<SkippedFile>
  /** With `collect`: skipped entries past the list's bounds (Artifacts.MAX_SKIPPED_LISTED entries, MAX_SKIPPED_NAME_BYTES of paths), counted only. */
  readonly skippedFilesOmitted?: number
  /** With `collect`: something matching was held back (a limit) or the collection was cut short. */
  readonly filesTruncated?: boolean
  /** With `collect`: whether the walk ended (a timeout or a killed sandbox cuts it short). */
  readonly collection?: CollectionStatus
  /** With `tools`: the calls the code made that a handler served (refusals do not count). */
  readonly toolCallsMade?: number
  /**
   * With `keepFullOutput`, when stdout or stderr was cut: each stream as kept whole (up to
   * keepFullOutput's bytes; `…Truncated` when the program wrote even more).
   */
  readonly fullOutput?: FullOutput
}

/** Both streams as kept whole (ExecuteOptions.keepFullOutput). */
export interface FullOutput {
  readonly stdout: string
  readonly stderr: string
  readonly stdoutTruncated: boolean
  readonly stderrTruncated: boolean
}

/** The whole streams, when they were kept and the result's own were cut. */
const fullOutputOf = (stdout: OutputCapture, stderr: OutputCapture): FullOutput | undefined => {
  if (!stdout.truncated && !stderr.truncated) return undefined
  const out = stdout.full()
  const err = stderr.full()
  if (out === undefined || err === undefined) return undefined
  return { stdout: out.text, stderr: err.text, stdoutTruncated: out.truncated, stderrTruncated: err.truncated }
}

/** The files part of a result (ExecutionResult's optional fields). */
export type CollectedOutcome = Pick<
  Required<ExecutionResult>,
  "files" | "skippedFiles" | "filesTruncated" | "collection"
> &
  Pick<ExecutionResult, "skippedFilesOmitted">

/** What the executor and sessions know when a run ends; the result is derived from it in one place. */
export interface RunOutcome {
  readonly executionId: string
  readonly containerName: string
  readonly exitCode: number
  readonly timedOut: boolean
  readonly oomKilled: boolean
  readonly stdout: OutputCapture
  readonly stderr: OutputCapture
  readonly startedAtMs: number
  readonly finishedAtMs: number
  readonly collected?: CollectedOutcome | undefined
  readonly toolCallsMade?: number | undefined
}

export const toExecutionResult = (run: RunOutcome): ExecutionResult => {
  const fullOutput = fullOutputOf(run.stdout, run.stderr)
  return {
    executionId: run.executionId,
    containerName: run.containerName,
    exitCode: run.exitCode,
    stdout: run.stdout.text(),
    stderr: run.stderr.text(),
    timedOut: run.timedOut,
    oomKilled: run.oomKilled,
    stdoutTruncated: run.stdout.truncated,
    stderrTruncated: run.stderr.truncated,
    stdoutBytes: run.stdout.total,
    stderrBytes: run.stderr.total,
    durationMs: run.finishedAtMs - run.startedAtMs,
    startedAt: new Date(run.startedAtMs).toISOString(),
    finishedAt: new Date(run.finishedAtMs).toISOString(),
    ...run.collected,
    ...(run.toolCallsMade === undefined ? {} : { toolCallsMade: run.toolCallsMade }),
    ...(fullOutput === undefined ? {} : { fullOutput })
  }
}
