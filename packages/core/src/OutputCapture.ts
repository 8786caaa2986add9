/**
 * A capped output buffer. Bytes past the cap are dropped as they arrive (only a
 * counter grows), so a program printing gigabytes never grows host memory past
 * the cap; kept bytes go into ONE buffer that doubles up to the cap, so a program
 * making a million one-byte writes costs the host the bytes, not an object per write.
 * Decoding is lenient: invalid UTF-8 becomes U+FFFD, never an exception.
 *
 * Two caps: `limitBytes`, what a result carries (`text()`, `truncated`), and `keepBytes`, what is
 * kept of the whole stream when the caller asked for it (ExecuteOptions.keepFullOutput): the buffer
 * holds the larger of the two, and `full()` reads it.
 */
import { Effect } from "effect"
import { type InvalidRequest, invalidRequest } from "./Errors.js"

const INITIAL_BYTES = 4096
const MiB = 1024 * 1024

/** What `keepFullOutput: true` keeps of each stream: 10 MiB, as the "like the artifacts store". */
export const DEFAULT_KEPT_OUTPUT_BYTES = 10 * MiB
/** The most `keepFullOutput` may ask for per stream (as `outputLimitBytes`). */
export const MAX_KEPT_OUTPUT_BYTES = 1024 * MiB

/** ExecuteOptions.keepFullOutput as bytes per stream (0: not asked), or undefined when it is no valid value. */
export const keptOutputBytes = (keep: unknown): number | undefined =>
  keep === undefined || keep === false
    ? 0
    : keep === true
      ? DEFAULT_KEPT_OUTPUT_BYTES
      : typeof keep === "number" && Number.isSafeInteger(keep) && keep > 0 && keep <= MAX_KEPT_OUTPUT_BYTES
        ? keep
        : undefined

/** keepFullOutput checked where a run is asked for, before anything is recorded or created. */
export const checkKeepFullOutput = (keep: unknown): Effect.Effect<number, InvalidRequest> => {
  const bytes = keptOutputBytes(keep)
  return bytes === undefined
    ? Effect.fail(
        invalidRequest(
          "keepFullOutput",
          keep,
          `true (${DEFAULT_KEPT_OUTPUT_BYTES} bytes of each stream), false, or a whole number of bytes from 1 to ${MAX_KEPT_OUTPUT_BYTES}`
        )
      )
    : Effect.succeed(bytes)
}

/** A stream as kept whole (up to its `keepBytes`). */
export interface FullStream {
  readonly text: string
  /** The program wrote more than was kept. */
  readonly truncated: boolean
}

export class OutputCapture {
  private buffer: Uint8Array = new Uint8Array(0)
  private kept = 0
  /** The buffer's bound: the larger of the two caps. */
  private readonly capacity: number
  /** Total bytes the program wrote, kept or not. */
  total = 0

  constructor(
    readonly limitBytes: number,
    readonly keepBytes = 0
  ) {
    this.capacity = Math.max(limitBytes, keepBytes)
  }

  readonly push = (chunk: Uint8Array): void => {
    this.total += chunk.byteLength
    const room = this.capacity - this.kept
    if (room <= 0) return
    const n = Math.min(room, chunk.byteLength)
    if (this.kept + n > this.buffer.byteLength) {
      // Copy: the runtime may reuse its buffers. Grow geometrically, never past the cap.
      let size = Math.max(this.buffer.byteLength * 2, INITIAL_BYTES)
      while (size < this.kept + n) size *= 2
      const grown = new Uint8Array(Math.min(size, this.capacity))
      grown.set(this.buffer.subarray(0, this.kept))
      this.buffer = grown
    }
    this.buffer.set(n === chunk.byteLength ? chunk : chunk.subarray(0, n), this.kept)
    this.kept += n
  }

  /** The program wrote this many bytes in all (the supervisor counts what it did not relay). */
  readonly countAtLeast = (total: number): void => {
    if (total > this.total) this.total = total
  }

  /** What the result carries is not all the program wrote. */
  get truncated(): boolean {
    return this.total > Math.min(this.kept, this.limitBytes)
  }

  /** The result's bytes: at most `limitBytes`. */
  get bytes(): Uint8Array {
    return this.buffer.slice(0, Math.min(this.kept, this.limitBytes))
  }

  text(): string {
    return decode(this.buffer.subarray(0, Math.min(this.kept, this.limitBytes)))
  }

  /** The stream's first bytes as kept, at most `maxBytes` (a view: copy it to keep it). */
  head(maxBytes: number): Uint8Array {
    return this.buffer.subarray(0, Math.min(this.kept, maxBytes))
  }

  /** The stream as kept whole, when the caller asked to keep it (keepBytes > 0). */
  full(): FullStream | undefined {
    if (this.keepBytes === 0) return undefined
    const n = Math.min(this.kept, this.keepBytes)
    return { text: decode(this.buffer.subarray(0, n)), truncated: this.total > n }
  }
}

// stream: false flushes a trailing partial sequence as U+FFFD rather than throwing.
const decode = (bytes: Uint8Array): string => new TextDecoder("utf-8", { fatal: false }).decode(bytes)
