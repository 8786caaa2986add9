/**
 * A capped output buffer. Bytes past the cap are dropped as they arrive (only a
 * counter grows), so a program printing gigabytes never grows host memory past
 * the cap; kept bytes go into ONE buffer that doubles up to the cap, so a program
 * making a million one-byte writes costs the host the bytes, not an object per write.
 * Decoding is lenient: invalid UTF-8 becomes U+FFFD, never an exception.
 */
const INITIAL_BYTES = 4096

export class OutputCapture {
  private buffer: Uint8Array = new Uint8Array(0)
  private kept = 0
  /** Total bytes the program wrote, kept or not. */
  total = 0

  constructor(readonly limitBytes: number) {}

  readonly push = (chunk: Uint8Array): void => {
    this.total += chunk.byteLength
    const room = this.limitBytes - this.kept
    if (room <= 0) return
    const n = Math.min(room, chunk.byteLength)
    if (this.kept + n > this.buffer.byteLength) {
      // Copy: the runtime may reuse its buffers. Grow geometrically, never past the cap.
      let size = Math.max(this.buffer.byteLength * 2, INITIAL_BYTES)
      while (size < this.kept + n) size *= 2
      const grown = new Uint8Array(Math.min(size, this.limitBytes))
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

  get truncated(): boolean {
    return this.total > this.kept
  }

  get bytes(): Uint8Array {
    return this.buffer.slice(0, this.kept)
  }

  text(): string {
    // stream: false flushes a trailing partial sequence as U+FFFD rather than throwing.
    return new TextDecoder("utf-8", { fatal: false }).decode(this.buffer.subarray(0, this.kept))
  }
}
