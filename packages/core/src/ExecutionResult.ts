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
