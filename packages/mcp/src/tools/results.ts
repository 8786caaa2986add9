/**
 * From an SDK result to what a model reads. Shaped like the Hermes agent's execute_code result
 * (status, output, exit_code, duration_seconds, truncation flags and byte counts), so a Hermes
 * user feels at home; `output` is never empty (an empty output makes models answer as if nothing
 * happened) and says what went wrong in words.
 */
import type { ExecutionResult } from "@hermes-sandbox/core"
import { errorJson } from "@hermes-sandbox/core"
import type { FullOutput, RunResult, Status, Streams } from "./schemas.js"

/** Bytes of each stream a result carries: the Hermes agent's caps (50 KB stdout, 10 KB stderr). */
export interface ResultCaps {
  readonly stdoutBytes: number
  readonly stderrBytes: number
}
export const DEFAULT_RESULT_CAPS: ResultCaps = { stdoutBytes: 50_000, stderrBytes: 10_000 }

/** A UTF-8 prefix of at most `bytes` bytes that does not split a character. */
const utf8Head = (buffer: Buffer, bytes: number): Buffer => {
  let end = Math.min(bytes, buffer.length)
  while (end > 0 && end < buffer.length && (buffer[end]! & 0xc0) === 0x80) end--
  return buffer.subarray(0, end)
}
const utf8Tail = (buffer: Buffer, bytes: number): Buffer => {
  let start = Math.max(0, buffer.length - bytes)
  while (start < buffer.length && (buffer[start]! & 0xc0) === 0x80) start++
  return buffer.subarray(start)
}

/** At most `cap` bytes of `text`: 40% from its head, 60% from its tail (where errors usually are), marked between. */
export const headTail = (text: string, cap: number): { readonly text: string; readonly captured: number } => {
  const buffer = Buffer.from(text, "utf8")
  if (buffer.length <= cap) return { text, captured: buffer.length }
  const head = utf8Head(buffer, Math.floor(cap * 0.4))
  const tail = utf8Tail(buffer, cap - head.length)
  const omitted = buffer.length - head.length - tail.length
  return {
    text: `${head.toString("utf8")}\n[... ${omitted} bytes omitted ...]\n${tail.toString("utf8")}`,
    captured: head.length + tail.length
  }
}

export const statusOf = (r: Pick<ExecutionResult, "timedOut" | "oomKilled" | "exitCode">): Status =>
  r.timedOut ? "timeout" : r.oomKilled ? "oom" : r.exitCode === 0 ? "success" : "error"

export const withNewline = (text: string) => (text === "" || text.endsWith("\n") ? text : `${text}\n`)

export interface RunContext {
  /** The deadline the run had, for the timeout's words. */
  readonly timeoutS: number
  /** Where the caller can raise it, for the timeout's words. */
  readonly maxTimeoutS: number
  /**
   * What a timeout killed: execute_code's whole single-use sandbox, or (terminal) only the command,
   * while the session's sandbox, its files and working directory stay.
   */
  readonly killedOnTimeout: "sandbox" | "command"
}

/** What a run or a cell wrote to its two streams, as the sandbox captured it (the capture's own cap counted in the totals). */
export type CapturedStreams = Pick<ExecutionResult, "stdout" | "stderr" | "stdoutBytes" | "stderrBytes">

/**
 * Both streams within this server's caps (head and tail kept), with the byte counts; `printed`:
 * stdout, then stderr after a `--- stderr ---` line; `note`: what was cut, in words, if anything.
 * The one bounding of program output in a result: execute_code, terminal and run_python alike.
 */
export const boundStreams = (
  r: CapturedStreams,
  caps: ResultCaps
): { readonly fields: Streams; readonly printed: string; readonly note: string | undefined } => {
  const stdout = headTail(r.stdout, caps.stdoutBytes)
  const stderr = headTail(r.stderr, caps.stderrBytes)
  const omittedOut = r.stdoutBytes - stdout.captured
  const omittedErr = r.stderrBytes - stderr.captured
  return {
    fields: {
      stdout: stdout.text,
      stderr: stderr.text,
      stdout_truncated: omittedOut > 0,
      stderr_truncated: omittedErr > 0,
      stdout_bytes_total: r.stdoutBytes,
      stdout_bytes_captured: stdout.captured,
      stdout_bytes_omitted: omittedOut,
      stderr_bytes_total: r.stderrBytes,
      stderr_bytes_captured: stderr.captured,
      stderr_bytes_omitted: omittedErr
    },
    printed: withNewline(stdout.text) + (stderr.text === "" ? "" : `--- stderr ---\n${withNewline(stderr.text)}`),
    note:
      omittedOut > 0 || omittedErr > 0
        ? `Output was cut: ${omittedOut} bytes of stdout and ${omittedErr} bytes of stderr are not shown (print less, or write to a file and read parts of it).`
        : undefined
  }
}

/** `output`: what was printed, then the notes; never empty, without a final newline. */
export const outputOf = (printed: string, notes: ReadonlyArray<string>): string => {
  const output = printed + notes.join("\n") || "(no output)"
  return output.endsWith("\n") ? output.slice(0, -1) : output
}

/** What became of the streams a result cut (tools/fullOutput.ts): where they are kept, in fields and words. */
export type KeepCut = (streams: Streams) => {
  readonly fullOutput: FullOutput | undefined
  readonly note: string | undefined
}

/**
 * A completed run, as the execute_code (and terminal) result; `more` are notes after the run's own
 * (what collect brought back); `keep` keeps what the result cut, and says where.
 */
export const runResult = (
  r: ExecutionResult,
  caps: ResultCaps,
  context: RunContext,
  more: ReadonlyArray<string> = [],
  keep?: KeepCut
): RunResult => {
  const streams = boundStreams(r, caps)
  const kept = streams.note === undefined ? undefined : keep?.(streams.fields)
  const status = statusOf(r)
  const notes: Array<string> = []
  if (status === "timeout") {
    notes.push(
      context.killedOnTimeout === "sandbox"
        ? `⏰ Timed out after ${context.timeoutS} s: the sandbox was killed and what it printed until then is above. Make the program faster or pass a larger timeout_s (at most ${context.maxTimeoutS}).`
        : `⏰ Timed out after ${context.timeoutS} s: the command was killed, not the session's sandbox (its files and working directory stay); what it printed until then is above. Make the command faster or pass a larger timeout_s (at most ${context.maxTimeoutS}).`
    )
  }
  if (status === "oom") notes.push("The program ran out of memory and was killed (OOM).")
  if (status === "error") notes.push(`The program exited with code ${r.exitCode}.`)
  if (streams.note !== undefined) notes.push(streams.note)
  if (kept?.note !== undefined) notes.push(kept.note)
  notes.push(...more)
  return {
    status,
    output: outputOf(streams.printed, notes),
    ...streams.fields,
    exit_code: r.exitCode,
    duration_seconds: r.durationMs / 1000,
    execution_id: r.executionId,
    container_name: r.containerName,
    ...(kept?.fullOutput === undefined ? {} : { full_output: kept.fullOutput })
  }
}

/** A run that was stopped before it ended (the client cancelled it, or the server is stopping): nothing of it is kept. */
/** A result's output fields when nothing ran to give any (a cancelled run, a process started in the background). */
export const NO_OUTPUT = {
  stdout: "",
  stderr: "",
  stdout_truncated: false,
  stderr_truncated: false,
  stdout_bytes_total: 0,
  stdout_bytes_captured: 0,
  stdout_bytes_omitted: 0,
  stderr_bytes_total: 0,
  stderr_bytes_captured: 0,
  stderr_bytes_omitted: 0,
  exit_code: null,
  duration_seconds: 0
} as const

export const stoppedResult = (
  status: "cancelled" | "interrupted",
  executionId: string,
  containerName: string,
  reason: string
): RunResult => ({
  status,
  output: `${status === "cancelled" ? "Cancelled" : "Interrupted"}: ${reason}. The sandbox was killed and removed; nothing of the run is kept.`,
  ...NO_OUTPUT,
  execution_id: executionId,
  container_name: containerName
})

/**
 * A name the sandbox chose, as `output` shows it: a JSON string (newlines, quotes and control
 * characters escaped), cut to `max` characters, with what could still mislead a reader escaped the
 * JSON way too: "://" (a name cannot pass for a resource URI this server wrote: every
 * "sandbox://" in `output` is one) and the characters that break or reorder lines (U+2028,
 * U+2029, the bidirectional controls).
 */
export const quotedName = (name: string, max: number): string =>
  JSON.stringify(name.length > max ? `${name.slice(0, max)}…` : name)
    .replaceAll("://", "\\u003a//")
    .replace(
      /[\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
    )

/** A content block after the text one: an image, a link to a resource. */
export type ExtraContent =
  | { readonly type: "image"; readonly data: string; readonly mimeType: string }
  | {
      readonly type: "resource_link"
      readonly uri: string
      readonly name: string
      readonly mimeType: string
      readonly size: number
      readonly description: string
    }

/**
 * The MCP result of a structured value: structuredContent and the same JSON as text (some clients
 * read only one), first; then `more` (collected files: images, resource links).
 */
export const structured = (
  value: Record<string, unknown>,
  isError: boolean,
  more: ReadonlyArray<ExtraContent> = []
) => ({
  structuredContent: value,
  content: [{ type: "text" as const, text: JSON.stringify(value) }, ...more],
  ...(isError ? { isError: true } : {})
})

/** A failure with no result (bad arguments, a sandbox that could not be made): an isError result with the error as JSON. */
export const failure = (error: unknown, hint?: string) => {
  const json = errorJson(error)
  const text = JSON.stringify(hint === undefined ? json : { ...json, hint })
  return { content: [{ type: "text" as const, text }], isError: true }
}
