/**
 * What a session's Python kernel reports for one cell (`session.runCell`, docs/design/kernel.md §9):
 * the public type and its Schema (a result is plain data, JSON-safe, and decodes again).
 *
 * Who decides what (SECURITY.md, Kernels: cells as one trust domain): `status` `ok` / `error` is the
 * kernel's word, and only when it ended the cell before the host's deadline; `timeout`,
 * `interrupted` and `crashed` are the host's (its clock, the supervisor's frames). `stateLost` comes
 * from process identity (the kernel's exec, pid and start time), never from the kernel. Everything
 * else — stdout, stderr, the result, displays, the error — is the cell's own output, as untrusted
 * as a run's stdout, and bounded on the host (CellCapture.ts).
 */
import { Schema } from "effect"

const Count = Schema.NonNegativeInt

/** A MIME bundle: a MIME type to its data. Text as text; `image/png` and `image/jpeg` as base64; JSON types as JSON text. */
export const MimeBundle = Schema.Record({ key: Schema.String, value: Schema.String })
export type MimeBundle = typeof MimeBundle.Type

/** One output of a cell: Jupyter's `display_data` or `execute_result` content. */
export const CellOutput = Schema.Struct({
  data: MimeBundle,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
export interface CellOutput extends Schema.Schema.Type<typeof CellOutput> {}

/**
 * - `ok` / `error`: the kernel ended the cell before the deadline (an `error` holds its exception)
 * - `timeout`: the cell's deadline passed; the kernel was interrupted (or killed: `stateLost`)
 * - `interrupted`: the caller's `signal` aborted it; the same escalation
 * - `crashed`: the kernel died under the cell (OOM, a signal, its supervisor killed): `stateLost`
 */
export const CellStatus = Schema.Literal("ok", "error", "timeout", "interrupted", "crashed")
export type CellStatus = typeof CellStatus.Type

/** The cell's exception, as IPython formatted it (no ANSI colour), bounded on the host. */
export const CellError = Schema.Struct({
  name: Schema.String,
  value: Schema.String,
  traceback: Schema.Array(Schema.String),
  /** A part was cut: the name past 256 bytes, the value past 64 KiB, the traceback's middle past 256 KiB. */
  truncated: Schema.Boolean
})
export interface CellError extends Schema.Schema.Type<typeof CellError> {}

/**
 * Outputs not returned, whole records (`count`, `bytes`) by reason (`reasons`): `too-large` (one
 * bundle past maxBundleBytes), `count` (past maxDisplays), `total` (past maxDisplayBytes),
 * `malformed` (not a record the host can read), `late` (written between cells). `reasons` also
 * counts single MIME entries or metadata dropped from a kept output: `invalid` (an image that is not
 * valid base64 with its magic bytes, a name past 255 bytes, a value that is not text, JSON past 64
 * levels or 100,000 values), `types` (past 32 types in a bundle), `metadata` (past 64 KiB, replaced by {}).
 */
export const DisplaysOmitted = Schema.Struct({
  count: Count,
  bytes: Count,
  reasons: Schema.Record({ key: Schema.String, value: Count })
})
export interface DisplaysOmitted extends Schema.Schema.Type<typeof DisplaysOmitted> {}

export const CellResult = Schema.Struct({
  sessionId: Schema.String,
  cellId: Schema.String,
  status: CellStatus,
  /** The host's count in this kernel generation (1, 2, …), given to the kernel with the cell. */
  executionCount: Count,
  stdout: Schema.String,
  stderr: Schema.String,
  /** Bytes the cell wrote to each stream, kept or not. */
  stdoutBytes: Count,
  stderrBytes: Count,
  stdoutTruncated: Schema.Boolean,
  stderrTruncated: Schema.Boolean,
  /** The last expression's value (Jupyter's `execute_result`). */
  result: Schema.optional(CellOutput),
  /** `display()` calls and figures (Jupyter's `display_data`), in order. */
  displays: Schema.Array(CellOutput),
  displaysOmitted: DisplaysOmitted,
  error: Schema.optional(CellError),
  /**
   * The kernel's state did not survive up to this result: it was killed or died under this cell,
   * or since the last result returned (and the caller did not ask for it: restartKernel).
   */
  stateLost: Schema.Boolean,
  /** The kernel was killed by the memory limit (as far as the sandbox's cgroup says). */
  oomKilled: Schema.Boolean,
  /** Which kernel ran it: `generation` counts the session's kernels from 1; `started` — this cell started it. */
  kernel: Schema.Struct({ id: Schema.String, generation: Count, started: Schema.Boolean }),
  /** What the kernel wrote between the previous cell and this one (a thread, a fork): never this cell's stdout. */
  lateOutput: Schema.optional(Schema.Struct({ bytes: Count, text: Schema.String, truncated: Schema.Boolean })),
  /** Tool calls a handler served. */
  toolCallsMade: Count,
  /** From the cell's hand-over to its end, on the host's clock (the kernel's start not included). */
  durationMs: Schema.Finite.pipe(Schema.nonNegative())
})
export interface CellResult extends Schema.Schema.Type<typeof CellResult> {}
