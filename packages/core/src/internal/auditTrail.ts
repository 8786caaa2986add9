/**
 * The audit trail a caller asks for with `recordCode: true` (executor, sessions, the MCP server's
 * `--record-code`): each program's code (CodeRecorded, right after its request) and the head of its
 * output (OutputRecorded, before its terminal event), in its journal stream. Off by default.
 *
 * Bounded whatever the program does: the code's head is at most RECORDED_CODE_BYTES of UTF-8 and
 * each stream's at most RECORDED_OUTPUT_BYTES, cut at a character boundary. The output is the
 * sandbox's and hostile: it is decoded leniently (invalid UTF-8 becomes U+FFFD, as for a result),
 * NUL becomes U+FFFD too (so a PostgreSQL row stays castable to jsonb), and the journal's JSON
 * escapes what remains; so an event's data is at most 6 bytes per recorded byte (a control
 * character is escaped as \u00XX), OUTPUT_RECORD_MAX_BYTES for OutputRecorded. With tools, both
 * take their share of the run's journal budget (maxJournalEvents, maxJournalBytes) before any call
 * (`reserve`, kernel/ToolChannel.ts).
 */
import { Effect } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import type { OutputCapture } from "../OutputCapture.js"
import type { ToolChannel } from "../kernel/ToolChannel.js"

/** The code recorded at most: 64 KiB of UTF-8. */
export const RECORDED_CODE_BYTES = 64 * 1024
/** Each output stream recorded at most: 16 KiB of UTF-8. */
export const RECORDED_OUTPUT_BYTES = 16 * 1024
/** JSON's worst case per UTF-8 byte (a control character as \u00XX). */
const JSON_ESCAPE_FACTOR = 6
/** The most an OutputRecorded's data may take as JSON (both heads at their worst, and the fields). */
export const OUTPUT_RECORD_MAX_BYTES = 2 * JSON_ESCAPE_FACTOR * RECORDED_OUTPUT_BYTES + 512

const decoder = new TextDecoder("utf-8", { fatal: false })
const encoder = new TextEncoder()

/** A byte offset at or before `n` that does not split a UTF-8 sequence of valid text. */
const boundary = (bytes: Uint8Array, n: number): number => {
  if (n >= bytes.byteLength) return bytes.byteLength
  let at = n
  // Continuation bytes (10xxxxxx): step back to the lead byte, at most 3.
  while (at > 0 && n - at < 3 && (bytes[at]! & 0xc0) === 0x80) at--
  return (bytes[at]! & 0xc0) === 0x80 ? n : at
}

/**
 * The first `maxBytes` of `bytes` as text, at most `maxBytes` of UTF-8 once decoded (an invalid
 * byte decodes to U+FFFD, 3 bytes: the text is cut again at a character then), NUL as U+FFFD.
 * `cut`: the text is not all of `bytes`.
 */
export const headText = (bytes: Uint8Array, maxBytes: number): { readonly text: string; readonly cut: boolean } => {
  const end = boundary(bytes, maxBytes)
  let text = decoder.decode(bytes.subarray(0, end)).replaceAll("\0", "\uFFFD")
  let cut = end < bytes.byteLength
  const encoded = encoder.encode(text)
  if (encoded.byteLength > maxBytes) {
    text = decoder.decode(encoded.subarray(0, boundary(encoded, maxBytes)))
    cut = true
  }
  return { text, cut }
}

/** A stream's recorded head; `cut`: the program wrote more (the capture's cap dropped some, or the head did). */
const streamHead = (capture: OutputCapture) => {
  // A few bytes past the bound, so that a character across it is seen whole (and left out).
  const bytes = capture.head(RECORDED_OUTPUT_BYTES + 3)
  const head = headText(bytes, RECORDED_OUTPUT_BYTES)
  return { text: head.text, cut: head.cut || capture.total > bytes.byteLength }
}

/** What a run's recording takes of its journal budget (the tool calls get the rest). */
export interface JournalReserve {
  readonly events: number
  readonly bytes: number
}

export interface AuditRecorder {
  /** CodeRecorded: appended with the request (the same append, so neither is journaled alone) or right after it. */
  readonly code: JournalEvent
  /** The two events' share of the run's journal budget. */
  readonly reserve: JournalReserve
  /** The run's output captures, once it has them. */
  readonly captures: (stdout: OutputCapture, stderr: OutputCapture) => void
  /** OutputRecorded, once, before the terminal event (nothing before the run had captures); never fails. */
  readonly output: Effect.Effect<void>
}

const dataBytes = (event: JournalEvent): number => Buffer.byteLength(JSON.stringify(event.data), "utf8")

/**
 * The recorder of one run (a one-shot execution, a session call, a cell: `cellId`), or undefined
 * when the caller did not ask for an audit trail.
 */
export const auditRecorder = (
  enabled: boolean,
  code: Uint8Array,
  append: (event: JournalEvent) => Effect.Effect<unknown, JournalError>,
  cellId?: string
): AuditRecorder | undefined => {
  if (!enabled) return undefined
  const head = headText(code, RECORDED_CODE_BYTES)
  const cell = cellId === undefined ? {} : { cellId }
  const codeEvent: JournalEvent = {
    type: "CodeRecorded",
    data: { ...cell, code: head.text, codeBytes: code.byteLength, truncated: head.cut }
  }
  let streams: { readonly stdout: OutputCapture; readonly stderr: OutputCapture } | undefined
  let recorded = false
  return {
    code: codeEvent,
    reserve: { events: 2, bytes: dataBytes(codeEvent) + OUTPUT_RECORD_MAX_BYTES },
    captures: (stdout, stderr) => void (streams = { stdout, stderr }),
    output: Effect.suspend(() => {
      if (recorded || streams === undefined) return Effect.void
      recorded = true
      const out = streamHead(streams.stdout)
      const err = streamHead(streams.stderr)
      return append({
        type: "OutputRecorded",
        data: {
          ...cell,
          stdout: out.text,
          stderr: err.text,
          stdoutBytes: streams.stdout.total,
          stderrBytes: streams.stderr.total,
          truncated: out.cut || err.cut
        }
      }).pipe(
        Effect.ignore,
        Effect.catchAllDefect(() => Effect.void)
      )
    })
  }
}

/** What runs before a run's terminal event (withTerminalEvent): its tool calls settled, then its output recorded. */
export const beforeTerminal = (
  tools: ToolChannel | undefined,
  recorder: AuditRecorder | undefined
): Effect.Effect<void> =>
  recorder === undefined
    ? (tools?.settle ?? Effect.void)
    : Effect.zipRight(tools?.settle ?? Effect.void, recorder.output)
