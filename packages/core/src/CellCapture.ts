/**
 * One cell's output on the host, every bound checked again here (SECURITY.md, Kernels: the bounds
 * table): the kernel's supervisor enforces them first, but what it forwards comes from the domain,
 * so the host believes no size, count or shape it did not measure itself.
 *
 * - stdout / stderr: `outputLimitBytes` each, the rest counted (as for executions, OutputCapture).
 * - records ('M' … 'm'): one record's bytes at most `maxBundleBytes`; `maxDisplays` outputs (results
 *   and displays) and `maxDisplayBytes` record bytes per cell; a record past one is omitted whole,
 *   counted by reason. A record is JSON, measured before it is parsed: nesting and values bounded
 *   (`application/json` at most 64 levels and 100,000 values). A bundle keeps at most 32 MIME types,
 *   names of at most 255 bytes, text values; `image/png` and `image/jpeg` must be valid base64
 *   starting with their magic bytes, else dropped (`invalid`). Metadata: 64 KiB, else {}.
 * - the error ('X'): name 256 bytes, value 64 KiB, traceback 256 KiB (head and tail kept, `truncated`).
 * - late output (between cells): 64 KiB kept, the rest counted.
 *
 * CellExecuted journals `outputs` from here: kinds, MIME types and sizes (never data), at most
 * MAX_JOURNAL_OUTPUTS outputs of MAX_JOURNAL_TYPES types, the rest counted.
 */
import type { CellError, CellOutput, DisplaysOmitted, MimeBundle } from "./CellResult.js"
import { OutputCapture } from "./OutputCapture.js"
import { LIMIT } from "./RunnerProtocolTable.js"

export const MAX_MIME_TYPES = 32
export const MAX_MIME_NAME_BYTES = 255
export const MAX_METADATA_BYTES = 64 * 1024
export const MAX_JSON_DEPTH = 64
export const MAX_JSON_VALUES = 100_000
export const MAX_ERROR_NAME_BYTES = 256
export const MAX_ERROR_VALUE_BYTES = 64 * 1024
export const MAX_TRACEBACK_BYTES = 256 * 1024
export const MAX_LATE_BYTES = LIMIT.kernelLateBytes
export const MAX_JOURNAL_OUTPUTS = 100
export const MAX_JOURNAL_TYPES = 16
/**
 * A whole record's nesting and values, measured before parsing: the bundle's own levels
 * ({data: {type: …}, metadata: …}) above application/json's bound, and its values plus metadata's.
 */
const RECORD_DEPTH = MAX_JSON_DEPTH + 4
const RECORD_VALUES = 2 * MAX_JSON_VALUES

export interface CellLimits {
  readonly outputLimitBytes: number
  readonly maxBundleBytes: number
  readonly maxDisplays: number
  readonly maxDisplayBytes: number
}

export type RecordKind = "R" | "D" | "X"

/** One output as CellExecuted lists it. */
export interface JournaledOutput {
  readonly kind: "result" | "display"
  readonly mime: ReadonlyArray<{ readonly type: string; readonly bytes: number }>
}

const encoder = new TextEncoder()
const utf8 = new TextDecoder("utf-8", { fatal: false })
const byteLength = (s: string) => Buffer.byteLength(s, "utf8")

/**
 * Nesting depth and value count of JSON text, without parsing it (strings skipped, escapes
 * honoured); stops counting once past either bound. Malformed text only yields wrong numbers:
 * JSON.parse still judges it.
 */
export const measureJson = (
  text: string,
  maxDepth: number,
  maxValues: number
): { readonly depth: number; readonly values: number; readonly over: boolean } => {
  let depth = 0
  let deepest = 0
  let values = 0
  let inValue = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 34) {
      // A string: a value, or a key (counted too: a bound on the work, not an exact count).
      values++
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i)
        if (d === 92) i++
        else if (d === 34) break
      }
      inValue = false
    } else if (c === 123 || c === 91) {
      values++
      depth++
      if (depth > deepest) deepest = depth
      inValue = false
    } else if (c === 125 || c === 93) {
      depth--
      inValue = false
    } else if (c === 44 || c === 58 || c === 32 || c === 10 || c === 13 || c === 9) {
      inValue = false
    } else if (!inValue) {
      // A number, true, false or null begins.
      values++
      inValue = true
    }
    if (deepest > maxDepth || values > maxValues) return { depth: deepest, values, over: true }
  }
  return { depth: deepest, values, over: false }
}

/** Depth and value count of a parsed value (bounded by the measure before it was parsed). */
const measureValue = (v: unknown, depth = 0): { depth: number; values: number } => {
  if (v === null || typeof v !== "object") return { depth, values: 1 }
  let deepest = depth + 1
  let values = 1
  for (const x of Array.isArray(v) ? v : Object.values(v)) {
    const m = measureValue(x, depth + 1)
    deepest = Math.max(deepest, m.depth)
    values += m.values
  }
  return { depth: deepest, values }
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
const MAGIC: Readonly<Record<string, ReadonlyArray<number>>> = {
  "image/png": [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
  "image/jpeg": [0xff, 0xd8, 0xff]
}

/** An image's base64 (newlines allowed, as Jupyter writes long ones) is valid and starts with the type's magic bytes. */
export const validImage = (type: string, value: string): boolean => {
  // Own keys only: a type may well be called `__proto__`.
  if (!Object.hasOwn(MAGIC, type)) return true
  const magic = MAGIC[type]!
  const b64 = value.includes("\n") ? value.replace(/\r?\n/g, "") : value
  if (b64.length === 0 || !BASE64.test(b64)) return false
  const head = Buffer.from(b64.slice(0, 16), "base64")
  return magic.every((b, i) => head[i] === b)
}

const isJsonType = (type: string) => type === "application/json" || type.endsWith("+json")

/** At most `max` bytes of `s`, cut on a character boundary. */
export const cutUtf8 = (s: string, max: number): string => {
  const bytes = encoder.encode(s)
  if (bytes.byteLength <= max) return s
  // Drop a partial sequence at the cut rather than decode it as U+FFFD.
  let end = max
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return utf8.decode(bytes.subarray(0, end))
}

/** A traceback within `max` bytes: lines from the head and from the tail, each half of it; the middle dropped. */
export const boundTraceback = (
  lines: ReadonlyArray<string>,
  max: number
): { readonly traceback: ReadonlyArray<string>; readonly truncated: boolean } => {
  const total = lines.reduce((n, l) => n + byteLength(l), 0)
  if (total <= max) return { traceback: lines, truncated: false }
  const half = Math.floor(max / 2)
  const head: Array<string> = []
  let used = 0
  let i = 0
  for (; i < lines.length; i++) {
    const n = byteLength(lines[i]!)
    if (used + n > half) {
      if (head.length === 0) head.push(cutUtf8(lines[i]!, half)), i++
      break
    }
    head.push(lines[i]!)
    used += n
  }
  const tail: Array<string> = []
  used = 0
  for (let j = lines.length - 1; j >= i; j--) {
    const n = byteLength(lines[j]!)
    if (used + n > half) {
      if (tail.length === 0) tail.push(cutUtf8(lines[j]!, half))
      break
    }
    tail.unshift(lines[j]!)
    used += n
  }
  return { traceback: [...head, ...tail], truncated: true }
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v)

export class CellCapture {
  readonly stdout: OutputCapture
  readonly stderr: OutputCapture
  result: CellOutput | undefined
  readonly displays: Array<CellOutput> = []
  error: CellError | undefined
  private omittedCount = 0
  private omittedBytes = 0
  private readonly reasons: Record<string, number> = {}
  /** Outputs (results and displays) taken, and record bytes taken, against the per-cell bounds. */
  private outputs = 0
  private recordBytes = 0
  /** Kinds of the outputs in order, for the journal. */
  private readonly order: Array<{ readonly kind: "result" | "display"; readonly output: CellOutput }> = []

  constructor(readonly limits: CellLimits) {
    this.stdout = new OutputCapture(limits.outputLimitBytes)
    this.stderr = new OutputCapture(limits.outputLimitBytes)
  }

  private omit(reason: string, bytes: number): undefined {
    this.omittedCount++
    this.omittedBytes += bytes
    this.note(reason)
    return undefined
  }

  private note(reason: string): void {
    this.reasons[reason] = (this.reasons[reason] ?? 0) + 1
  }

  /** The supervisor skipped a record ('N'): counted, its bytes never seen. */
  readonly skipped = (bytes: number, reason: string): void => void this.omit(reason, bytes)

  /** A whole record ('M' and its 'm' frames) as the host received it; the output it gave, if one was kept. */
  readonly record = (kind: RecordKind, bytes: Uint8Array): CellOutput | undefined => {
    const size = bytes.byteLength
    if (size > this.limits.maxBundleBytes) return this.omit("too-large", size)
    if (kind !== "X" && this.outputs >= this.limits.maxDisplays) return this.omit("count", size)
    if (this.recordBytes + size > this.limits.maxDisplayBytes) return this.omit("total", size)
    const text = utf8.decode(bytes)
    if (measureJson(text, RECORD_DEPTH, RECORD_VALUES).over) return this.omit("invalid", size)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return this.omit("malformed", size)
    }
    if (kind === "X") {
      const error = this.errorOf(parsed)
      if (error === undefined || this.error !== undefined) return this.omit("malformed", size)
      this.recordBytes += size
      this.error = error
      return undefined
    }
    const output = this.outputOf(parsed)
    if (output === undefined || (kind === "R" && this.result !== undefined)) return this.omit("malformed", size)
    this.recordBytes += size
    this.outputs++
    if (kind === "R") this.result = output
    else this.displays.push(output)
    this.order.push({ kind: kind === "R" ? "result" : "display", output })
    return output
  }

  private outputOf(parsed: unknown): CellOutput | undefined {
    if (!isRecord(parsed) || !isRecord(parsed.data)) return undefined
    const data: Record<string, string> = {}
    let types = 0
    for (const [type, value] of Object.entries(parsed.data)) {
      if (types >= MAX_MIME_TYPES) {
        this.note("types")
        continue
      }
      if (type.length === 0 || byteLength(type) > MAX_MIME_NAME_BYTES || Object.hasOwn(data, type)) {
        this.note("invalid")
        continue
      }
      let text: string | undefined
      if (typeof value === "string") text = isJsonType(type) ? this.checkedJsonText(value) : value
      else if (isJsonType(type)) {
        const m = measureValue(value)
        text = m.depth > MAX_JSON_DEPTH || m.values > MAX_JSON_VALUES ? undefined : JSON.stringify(value)
      }
      if (text === undefined || !validImage(type, text)) {
        this.note("invalid")
        continue
      }
      types++
      // defineProperty: a type named __proto__ stays a plain key.
      Object.defineProperty(data, type, { value: text, enumerable: true, writable: true, configurable: true })
    }
    let metadata: Record<string, unknown> = {}
    if (isRecord(parsed.metadata)) {
      if (byteLength(JSON.stringify(parsed.metadata)) <= MAX_METADATA_BYTES) metadata = parsed.metadata
      else this.note("metadata")
    }
    return { data: data as MimeBundle, metadata }
  }

  private checkedJsonText(value: string): string | undefined {
    return measureJson(value, MAX_JSON_DEPTH, MAX_JSON_VALUES).over ? undefined : value
  }

  private errorOf(parsed: unknown): CellError | undefined {
    if (!isRecord(parsed)) return undefined
    const { ename, evalue, traceback } = parsed
    if (typeof ename !== "string" || typeof evalue !== "string") return undefined
    if (!Array.isArray(traceback) || !traceback.every((l) => typeof l === "string")) return undefined
    const name = cutUtf8(ename, MAX_ERROR_NAME_BYTES)
    const value = cutUtf8(evalue, MAX_ERROR_VALUE_BYTES)
    const bounded = boundTraceback(traceback as Array<string>, MAX_TRACEBACK_BYTES)
    return {
      name,
      value,
      traceback: bounded.traceback,
      truncated: bounded.truncated || name !== ename || value !== evalue
    }
  }

  get displaysOmitted(): DisplaysOmitted {
    return { count: this.omittedCount, bytes: this.omittedBytes, reasons: { ...this.reasons } }
  }

  /** CellExecuted's `outputs` and `outputsOmitted`: kinds, types and sizes, bounded. */
  journal(): { readonly outputs: ReadonlyArray<JournaledOutput>; readonly outputsOmitted: number } {
    const outputs = this.order.slice(0, MAX_JOURNAL_OUTPUTS).map(({ kind, output }) => ({
      kind,
      mime: Object.entries(output.data)
        .slice(0, MAX_JOURNAL_TYPES)
        .map(([type, value]) => ({ type, bytes: byteLength(value) }))
    }))
    return { outputs, outputsOmitted: this.order.length - outputs.length }
  }
}

/** What the kernel wrote between two cells: 64 KiB kept, the rest counted (the 'C' frame's idle bytes). */
export class LateOutput {
  private capture = new OutputCapture(MAX_LATE_BYTES)

  readonly push = (chunk: Uint8Array): void => this.capture.push(chunk)

  /** The next cell started: what came since the last one, as a result's `lateOutput` (none if nothing). */
  take(idleBytes: number): { readonly bytes: number; readonly text: string; readonly truncated: boolean } | undefined {
    const c = this.capture
    this.capture = new OutputCapture(MAX_LATE_BYTES)
    c.countAtLeast(idleBytes)
    return c.total === 0 ? undefined : { bytes: c.total, text: c.text(), truncated: c.truncated }
  }
}
