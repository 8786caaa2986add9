/**
 * A capped output buffer. Bytes past the cap are dropped as they arrive (only a
 * counter grows), so a program printing gigabytes never grows host memory past
 * the cap. Decoding is lenient: invalid UTF-8 becomes U+FFFD, never an exception.
 */
export class OutputCapture {
  private readonly chunks: Array<Uint8Array> = []
  private kept = 0
  /** Total bytes the program wrote, kept or not. */
  total = 0

  constructor(readonly limitBytes: number) {}

  readonly push = (chunk: Uint8Array): void => {
    this.total += chunk.byteLength
    const room = this.limitBytes - this.kept
    if (room <= 0) return
    // Copy: the runtime may reuse its buffers, and a slice keeps only what we need.
    const piece = chunk.byteLength <= room ? Uint8Array.from(chunk) : chunk.slice(0, room)
    this.chunks.push(piece)
    this.kept += piece.byteLength
  }

  get truncated(): boolean {
    return this.total > this.kept
  }

  get bytes(): Uint8Array {
    const out = new Uint8Array(this.kept)
    let offset = 0
    for (const chunk of this.chunks) {
      out.set(chunk, offset)
      offset += chunk.byteLength
    }
    return out
  }

  text(): string {
    // stream: false flushes a trailing partial sequence as U+FFFD rather than throwing.
    return new TextDecoder("utf-8", { fatal: false }).decode(this.bytes)
  }
}
