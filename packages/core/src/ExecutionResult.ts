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
}

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
}

export const toExecutionResult = (run: RunOutcome): ExecutionResult => ({
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
  finishedAt: new Date(run.finishedAtMs).toISOString()
})
