/**
 * The REPL's images (docs/design/kernel.md §13): a cell's PNG or JPEG output, named in the output,
 * and with --out written there as `cell-<n>-<i>.png|jpg`. The name is the CLI's, never the cell's;
 * the bytes go through collectedFiles.ts's writer (no link followed, only a regular file replaced).
 * A type is believed only when the decoded bytes start with its signature (Artifacts.mimeOf, as
 * the host's CellCapture already checked). At most `maxBytes` (OUT_BYTES: 1 GiB) are written per
 * REPL; past that an image is named, not written (SECURITY.md, Kernels, the row "repl --out").
 */
import { Artifacts, type CellOutput } from "@hermes-sandbox/core"
import { formatBytes, shownPath, writeCollected } from "./collectedFiles.js"

/** Bytes of images one REPL writes to --out at most. */
export const OUT_BYTES = 1024 ** 3

const IMAGE_TYPES = [
  ["image/png", "png"],
  ["image/jpeg", "jpg"]
] as const

/** A bundle's image as bytes, when its bytes start with the type's signature. */
const imageOf = (
  o: CellOutput
): { readonly mime: string; readonly ext: string; readonly bytes: Buffer } | undefined => {
  for (const [mime, ext] of IMAGE_TYPES) {
    const value = Object.hasOwn(o.data, mime) ? o.data[mime] : undefined
    if (value === undefined) continue
    const bytes = Buffer.from(value, "base64")
    if (Artifacts.mimeOf("", bytes) === mime) return { mime, ext, bytes }
  }
  return undefined
}

export class ReplImages {
  private written = 0

  constructor(
    /** --out DIR, or undefined: images are named only. */
    private readonly out: string | undefined,
    private readonly maxBytes = OUT_BYTES
  ) {}

  /** The output's image (the `i`th output of cell `n`) in words, written under --out when it may be; undefined without one. */
  name(o: CellOutput, n: number, i: number): string | undefined {
    const found = imageOf(o)
    if (found === undefined) return undefined
    const what = `${found.mime} ${formatBytes(found.bytes.byteLength)}`
    if (this.out === undefined) return `[${what}]`
    if (this.written + found.bytes.byteLength > this.maxBytes)
      return `[${what}, not written: --out has had ${formatBytes(this.maxBytes)} from this REPL]`
    const file = `cell-${n}-${i}.${found.ext}`
    const report = writeCollected(this.out, [{ path: file, mode: 0o644, content: found.bytes }])
    const refused = report.notWritten[0]
    if (refused !== undefined) return `[${what}, not written to ${shownPath(`${this.out}/${file}`)}: ${refused.reason}]`
    this.written += found.bytes.byteLength
    return `[${what} → ${shownPath(`${report.dir}/${file}`)}]`
  }
}
