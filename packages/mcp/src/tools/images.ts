/**
 * How an image a call produced reaches the client (execute_code's collected PNG/JPEG/GIF/WebP,
 * run_python's PNG/JPEG displays), the one policy both tools apply:
 *
 * - `inline` (the default): an `image` content block, for clients that render them. Within one
 *   call's budget: `maxImages` blocks, `maxImageBytes` each, `maxImageTotalBytes` in all, so the
 *   base64 one result carries is bounded whatever the images;
 * - `link`: no image block; the text names the image's resource (resources/read), for clients
 *   that turn content blocks into text (the OpenAI Agents SDK, the Vercel AI SDK: an 8.6 KB chart
 *   became 11.5 K characters of base64 in the model's context);
 * - `none`: neither; the text still says what was produced, and that it was not sent.
 *
 * The words say what was done, never what a client will do with it ("sent as image 1", not
 * "shown"). Width and height come from the file's own header (imageFacts): the sandbox wrote it,
 * so they are displayed, within bounds, and never used for anything else.
 */

export const IMAGE_MODES = ["inline", "link", "none"] as const
export type ImageMode = (typeof IMAGE_MODES)[number]

export interface ImageLimits {
  /** What the server does with images when a call does not say. */
  readonly images: ImageMode
  readonly maxImages: number
  readonly maxImageBytes: number
  readonly maxImageTotalBytes: number
}

/** A side a header may claim and still be displayed; past it (or 0) the dimensions are "not readable". */
export const MAX_IMAGE_SIDE = 100_000
/** Bytes of a JPEG scanned for its frame header, at most. */
const JPEG_SCAN_BYTES = 1024 * 1024

export interface ImageFacts {
  /** PNG, JPEG, GIF, WebP. */
  readonly format: string
  /** From the header, when it has readable ones within MAX_IMAGE_SIDE. */
  readonly width?: number
  readonly height?: number
}

const FORMATS: Record<string, string> = {
  "image/png": "PNG",
  "image/jpeg": "JPEG",
  "image/gif": "GIF",
  "image/webp": "WebP"
}

const be16 = (b: Uint8Array, i: number) => (b[i]! << 8) | b[i + 1]!
const le16 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8)
const le24 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16)
const be32 = (b: Uint8Array, i: number) => ((b[i]! << 24) >>> 0) + (b[i + 1]! << 16) + (b[i + 2]! << 8) + b[i + 3]!
const ascii = (b: Uint8Array, i: number, s: string) =>
  b.length >= i + s.length && [...s].every((c, k) => b[i + k] === c.charCodeAt(0))

/** The dimensions a header claims: PNG's IHDR, a JPEG's first frame (SOFn), GIF's screen, WebP's VP8/VP8L/VP8X. */
const dimensionsOf = (mime: string, b: Uint8Array): readonly [number, number] | undefined => {
  switch (mime) {
    case "image/png":
      return b.length >= 24 && ascii(b, 12, "IHDR") ? [be32(b, 16), be32(b, 20)] : undefined
    case "image/gif":
      return b.length >= 10 ? [le16(b, 6), le16(b, 8)] : undefined
    case "image/webp":
      if (b.length >= 30 && ascii(b, 12, "VP8 ")) return [le16(b, 26) & 0x3fff, le16(b, 28) & 0x3fff]
      if (b.length >= 25 && ascii(b, 12, "VP8L"))
        return [1 + (((b[22]! & 0x3f) << 8) | b[21]!), 1 + (((b[24]! & 0x0f) << 10) | (b[23]! << 2) | (b[22]! >> 6))]
      if (b.length >= 30 && ascii(b, 12, "VP8X")) return [1 + le24(b, 24), 1 + le24(b, 27)]
      return undefined
    case "image/jpeg": {
      // Markers from after SOI; each segment's length read as given, the scan bounded.
      const end = Math.min(b.length, JPEG_SCAN_BYTES)
      let i = 2
      while (i + 3 < end) {
        if (b[i] !== 0xff) return undefined
        const marker = b[i + 1]!
        if (marker === 0xff) {
          i++
          continue
        }
        if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
          i += 2
          continue
        }
        if (marker === 0xd9 || marker === 0xda) return undefined
        const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc
        if (isFrame) return i + 8 < end ? [be16(b, i + 7), be16(b, i + 5)] : undefined
        const length = be16(b, i + 2)
        if (length < 2) return undefined
        i += 2 + length
      }
      return undefined
    }
    default:
      return undefined
  }
}

/** The format and the dimensions an image's header claims (shown only when each side is 1..MAX_IMAGE_SIDE). */
export const imageFacts = (mime: string, bytes: Uint8Array): ImageFacts => {
  const format = FORMATS[mime] ?? mime
  const claimed = dimensionsOf(mime, bytes)
  if (claimed === undefined) return { format }
  const [width, height] = claimed
  const fits = (n: number) => Number.isInteger(n) && n >= 1 && n <= MAX_IMAGE_SIDE
  return fits(width) && fits(height) ? { format, width, height } : { format }
}

/** A size as a person says it: 70 B, 8.6 KB, 1.2 MB (1024-based). */
export const sizeWords = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1).replace(/\.0$/, "")} KB`
  return `${(bytes / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MB`
}

/** "8.6 KB, PNG 640×480" (or "…, PNG, dimensions not readable from its header"). */
export const imageWords = (size: number, facts: ImageFacts): string =>
  `${sizeWords(size)}, ${facts.format}${facts.width === undefined ? ", dimensions not readable from its header" : ` ${facts.width}×${facts.height}`}`

/** Characters of a resource URI repeated in `output` at most (a collected file's path may be long): past it the JSON has it. */
const MAX_URI_IN_OUTPUT = 512

/** What became of one image: sent as the call's `index`-th image block, or not, and why. */
export type ImageOutcome =
  | { readonly sent: true; readonly index: number }
  | { readonly sent: false; readonly why: string }

/**
 * One call's images, in the order it meets them: each sent inline while the mode is `inline` and
 * the call's budget (count, bytes each, bytes in all) allows; the base64 of a result is at most
 * 4/3 of maxImageTotalBytes whatever it produced.
 */
export class ImageBudget {
  private sentCount = 0
  private sentBytes = 0

  constructor(
    readonly mode: ImageMode,
    private readonly limits: ImageLimits
  ) {}

  admit(bytes: number): ImageOutcome {
    const l = this.limits
    if (this.mode === "link") return { sent: false, why: "not sent as an image (images: link)" }
    if (this.mode === "none") return { sent: false, why: "not sent (images: none)" }
    if (bytes > l.maxImageBytes) return { sent: false, why: `not sent: over ${sizeWords(l.maxImageBytes)} per image` }
    if (this.sentCount >= l.maxImages)
      return { sent: false, why: `not sent: ${l.maxImages} ${l.maxImages === 1 ? "image" : "images"} per call at most` }
    if (this.sentBytes + bytes > l.maxImageTotalBytes)
      return { sent: false, why: `not sent: over the ${sizeWords(l.maxImageTotalBytes)} of images per call` }
    this.sentCount++
    this.sentBytes += bytes
    return { sent: true, index: this.sentCount }
  }
}

/**
 * One image's words in `output`: its size and header, then what became of it; its resource when
 * the mode names resources (not `none`) and the server keeps it.
 */
export const outcomeWords = (
  size: number,
  facts: ImageFacts,
  outcome: ImageOutcome,
  mode: ImageMode,
  uri: string | undefined
): string =>
  `${imageWords(size, facts)}; ${outcome.sent ? `sent as image ${outcome.index}` : outcome.why}` +
  (outcome.sent || mode === "none"
    ? ""
    : uri === undefined
      ? ", and not kept as a resource (over the server's file store)"
      : uri.length <= MAX_URI_IN_OUTPUT
        ? `: resource ${uri}`
        : ": its resource is the uri in the result's JSON (too long to repeat here)")

/** The tools' words on images, from the server's limits (tool descriptions). */
export const describeImages = (l: ImageLimits, what: string): string =>
  l.images === "inline"
    ? `${what} also as image content (at most ${l.maxImages} per call, ${sizeWords(l.maxImageBytes)} each, ${sizeWords(l.maxImageTotalBytes)} in all)`
    : l.images === "link"
      ? `${what} not sent as image content: the output names each one's resource (sandbox://…, read it with resources/read)`
      : `${what} not sent: the output describes them (size, format, width×height)`

/** The per-call `images` argument's words. */
export const IMAGES_ARGUMENT =
  "What to do with images: inline (image content blocks, for clients that render them), link (no image block; the output names each image's resource, to read with resources/read), or none (only described). Default: the server's (see the description)."
