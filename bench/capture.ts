/**
 * pnpm bench:capture — host memory of output capture per execution (hostile review, finding 5: one
 * array per chunk cost ~240 bytes a chunk, so 1.1 MB of paced one-byte writes grew host RSS by
 * 38 MB). Feeds one OutputCapture (1 MiB cap) with 1.1 million one-byte chunks, and, as the
 * baseline in the same run, the same bytes as one chunk; reports the growth of the process's
 * heap + array buffers while the capture is alive (after a GC), for each. Run with --expose-gc.
 */
import { OutputCapture } from "@hermes-sandbox/core"

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with node --expose-gc (pnpm bench:capture does)")
const used = () => {
  gc()
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}
const CHUNKS = 1_100_000
const measure = (
  label: string,
  feed: (c: { push: (chunk: Uint8Array) => void; total: number }) => void,
  make: () => { push: (chunk: Uint8Array) => void; total: number } = () => new OutputCapture(1024 * 1024)
) => {
  const before = used()
  const capture = make()
  feed(capture)
  const grown = used() - before
  if (capture.total !== CHUNKS) throw new Error(`${label}: wrong capture`)
  return { label, grownMiB: grown / (1024 * 1024), keep: capture }
}
/** The capture as it was before (a14c94a, one array per chunk), measured in the same run for comparison. */
class ChunkListCapture {
  private readonly chunks: Array<Uint8Array> = []
  private kept = 0
  total = 0
  constructor(readonly limitBytes: number) {}
  readonly push = (chunk: Uint8Array): void => {
    this.total += chunk.byteLength
    const room = this.limitBytes - this.kept
    if (room <= 0) return
    const piece = chunk.byteLength <= room ? Uint8Array.from(chunk) : chunk.slice(0, room)
    this.chunks.push(piece)
    this.kept += piece.byteLength
  }
}
const one = new Uint8Array([120])
const rows = [
  measure("one chunk of 1.1 MB (baseline)", (c) => c.push(new Uint8Array(CHUNKS).fill(120))),
  measure("1.1 million one-byte chunks", (c) => {
    for (let i = 0; i < CHUNKS; i++) c.push(one)
  }),
  measure(
    "1.1 million one-byte chunks, the previous capture (a14c94a)",
    (c) => {
      for (let i = 0; i < CHUNKS; i++) c.push(one)
    },
    () => new ChunkListCapture(1024 * 1024)
  )
]
console.log(`pnpm bench:capture, ${new Date().toISOString()}, cap 1 MiB\n`)
console.log("| input | heap + array buffers held (MiB) | ratio to baseline |")
console.log("| --- | --- | --- |")
for (const r of rows)
  console.log(`| ${r.label} | ${r.grownMiB.toFixed(2)} | ${(r.grownMiB / rows[0]!.grownMiB).toFixed(2)}× |`)
