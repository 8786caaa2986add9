/**
 * Files out of a one-shot run (`collect`): the request's patterns and limits, and the host's half
 * of the transfer. The supervisor (PID 1, after the program and everything it left have been
 * killed) walks /workspace without following a symlink and sends what matches as frames carrying
 * the run's key ('f' begins a file, 'c' its content, 'F' ends it, 's' an entry it did not send);
 * the archive API cannot be used because it does not see tmpfs mounts. 'S' says how many more
 * entries were skipped for a reason once the list reached its bound. Nothing the program writes
 * can be taken for a file: its bytes only travel inside 'o'/'e' frames.
 *
 * The host takes nothing on trust either: the limits are checked again here as the bytes arrive
 * (so host memory never holds more than `maxTotalBytes` of content and names, plus a bounded list of
 * skipped entries), the size and the sha256 are
 * computed here from what arrived, and a frame out of order is a protocol violation.
 */
import { createHash, type Hash } from "node:crypto"
import { Schema } from "effect"
import type { CollectLimits } from "./RunnerProtocol.js"
import { FRAME, LIMIT, SKIP_REASONS as SUPERVISOR_SKIP_REASONS } from "./RunnerProtocolTable.js"
import * as Schemas from "./Schemas.js"

export type { CollectLimits } from "./RunnerProtocol.js"

/** What a run sends back unless the request says otherwise (the supervisor's defaults too). */
export const DEFAULT_COLLECT_LIMITS: CollectLimits = {
  maxFiles: LIMIT.collectDefaultFiles,
  maxFileBytes: LIMIT.collectDefaultFileBytes,
  maxTotalBytes: LIMIT.collectDefaultTotalBytes
}
export const MAX_COLLECT_PATTERNS = LIMIT.collectPatterns
/**
 * Skipped entries listed at most, and bytes of their paths at most (the supervisor stops at the same
 * numbers); past either the rest are counted per reason (`skippedFilesOmitted`). A workspace of
 * 16,384 symlinks with 4 KiB paths made 62 MB of skipped entries before.
 */
export const MAX_SKIPPED_LISTED = LIMIT.skippedListed
export const MAX_SKIPPED_NAME_BYTES = LIMIT.skippedNameBytes
export const MAX_COLLECT_PATTERN_BYTES = 1024
/** More than this many `**` in one pattern could make matching costly; none needs it. */
export const MAX_GLOBSTARS = LIMIT.globstars

/** One file sent back: its bytes, and what the host computed of them. */
export interface CollectedFile {
  /** Relative to /workspace, exactly as the filesystem holds it (any Unicode, spaces, newlines). */
  readonly path: string
  readonly size: number
  readonly sha256: string
  readonly mime: string
  /** Permission bits in the sandbox (e.g. 0o644). */
  readonly mode: number
  readonly content: Uint8Array
}

/** Why a matching entry was not sent. */
export type SkipReason =
  | "too-large" // larger than maxFileBytes
  | "limit" // maxFiles files were sent already
  | "total-limit" // it would pass maxTotalBytes
  | "symlink" // never followed
  | "not-regular" // a FIFO, socket or device
  | "unreadable"
  | "too-deep" // more than 32 directory levels
  | "name-too-long"
  | "walk-limit" // the walk stopped after 100,000 entries
  | "name-not-utf8" // a name JavaScript strings cannot hold exactly
  | "not-found" // a pattern without wildcards that named nothing

export interface SkippedFile {
  readonly path: string
  readonly size: number
  readonly skipped: SkipReason
}

/** Did every matching file come back? */
export interface CollectionStatus {
  /** complete: the walk ended; partial: cut short (files sent before the end are kept); none: nothing arrived. */
  readonly status: "complete" | "partial" | "none"
  /** Why it is not complete: "timed-out", or "sandbox-ended" (killed, OOM of the whole sandbox) before it was done. */
  readonly reason?: "timed-out" | "sandbox-ended"
}

/** The reasons an 's' or 'S' frame may give: the supervisor's, and the two the host adds itself (as before). */
const SKIP_REASONS: ReadonlySet<string> = new Set<SkipReason>([
  ...SUPERVISOR_SKIP_REASONS,
  "name-not-utf8",
  "not-found"
])
/** Skips that mean "there was more than the limits let through". */
const TRUNCATING: ReadonlySet<SkipReason> = new Set<SkipReason>([
  "too-large",
  "limit",
  "total-limit",
  "walk-limit",
  "too-deep"
])

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The pattern's problem, if any (the supervisor refuses the same ones). */
export const patternIssue = (pattern: string): string | undefined => {
  const bytes = Buffer.byteLength(pattern, "utf8")
  if (bytes === 0 || bytes > MAX_COLLECT_PATTERN_BYTES) return `a glob of 1 to ${MAX_COLLECT_PATTERN_BYTES} bytes`
  if (pattern.includes("\0")) return "a glob without NUL bytes"
  if (pattern.startsWith("/")) return "a glob relative to /workspace (not an absolute path)"
  const segments = pattern.split("/").filter((s) => s !== "" && s !== ".")
  if (segments.length === 0) return "a glob that names something"
  if (segments.includes("..")) return "a glob that stays inside /workspace (no '..')"
  if (segments.length > 128) return "a glob of at most 128 segments"
  if (segments.filter((s) => s === "**").length > MAX_GLOBSTARS) return `a glob with at most ${MAX_GLOBSTARS} '**'`
  return undefined
}

const aPattern = Schema.String.pipe(Schema.filter((p) => patternIssue(p) ?? true)).annotations({
  message: () => "a glob relative to /workspace"
})

/** `collect` as requests write it: globs relative to /workspace ("*.png", "out/**"). */
export const CollectPatterns = Schema.Array(aPattern)
  .pipe(Schema.filter((a) => a.length <= MAX_COLLECT_PATTERNS || `at most ${MAX_COLLECT_PATTERNS} patterns`))
  .annotations({ message: () => "an array of globs relative to /workspace" })

/** `collectLimits`: each optional, each a positive integer (the caps keep one run's files within the host's means). */
export const CollectLimitsSchema = Schema.Struct({
  maxFiles: Schema.optional(Schemas.PositiveInt(100_000)),
  maxFileBytes: Schema.optional(Schemas.PositiveInt(1024 * Schemas.MiB)),
  maxTotalBytes: Schema.optional(Schemas.PositiveInt(4096 * Schemas.MiB))
}).annotations({ message: () => "an object { maxFiles?, maxFileBytes?, maxTotalBytes? }" })

/** A pattern without wildcards names one path: if nothing came back for it, say so. */
const literalPath = (pattern: string): string | undefined =>
  /[*?[\\]/.test(pattern)
    ? undefined
    : pattern
        .split("/")
        .filter((s) => s !== "" && s !== ".")
        .join("/")

const MIME_BY_EXTENSION: Readonly<Record<string, string>> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  bmp: "image/bmp",
  tif: "image/tiff",
  tiff: "image/tiff",
  ico: "image/vnd.microsoft.icon",
  pdf: "application/pdf",
  csv: "text/csv",
  tsv: "text/tab-separated-values",
  txt: "text/plain",
  md: "text/markdown",
  html: "text/html",
  htm: "text/html",
  json: "application/json",
  jsonl: "application/jsonl",
  ndjson: "application/x-ndjson",
  xml: "application/xml",
  yaml: "application/yaml",
  yml: "application/yaml",
  py: "text/x-python",
  js: "text/javascript",
  ts: "text/typescript",
  sh: "text/x-shellscript",
  log: "text/plain",
  zip: "application/zip",
  gz: "application/gzip",
  tar: "application/x-tar",
  parquet: "application/vnd.apache.parquet",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  npy: "application/octet-stream",
  wav: "audio/wav",
  mp3: "audio/mpeg",
  mp4: "video/mp4"
}

const startsWith = (b: Uint8Array, ...sig: Array<number>) => sig.every((v, i) => b[i] === v)

/**
 * The media type: the content's signature for the images agents render (it decides whether an
 * MCP client is handed an image), else the extension, else octet-stream.
 */
export const mimeOf = (path: string, content: Uint8Array): string => {
  if (startsWith(content, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png"
  if (startsWith(content, 0xff, 0xd8, 0xff)) return "image/jpeg"
  if (startsWith(content, 0x47, 0x49, 0x46, 0x38)) return "image/gif"
  if (startsWith(content, 0x52, 0x49, 0x46, 0x46) && startsWith(content.subarray(8), 0x57, 0x45, 0x42, 0x50))
    return "image/webp"
  if (startsWith(content, 0x25, 0x50, 0x44, 0x46, 0x2d)) return "application/pdf"
  const byExtension = MIME_BY_EXTENSION[path.slice(path.lastIndexOf(".") + 1).toLowerCase()]
  // A name saying "image" over content that is not one is not trusted for the raster types.
  if (byExtension !== undefined && !/^image\/(png|jpeg|gif|webp)$/.test(byExtension)) return byExtension
  return "application/octet-stream"
}

interface Receiving {
  readonly path: Buffer
  readonly mode: number
  readonly declared: number
  readonly hash: Hash
  /** Allocated once at the announced size (checked against the limits first): the content is held once, never copied again. */
  readonly content: Buffer
  received: number
}

/**
 * The host's receiver of one run's files. `frame` takes the 'f'/'F'/'s' control frames, `content`
 * the 'c' pieces; either returns a violation (a reason) when the supervisor did not write it: then
 * the run's report is refused as a whole.
 *
 * With `range` (a session's `read` of part of a file, kernel/FileOpReply.ts), the 'f' frame
 * announces the whole file's size, and what must follow is its bytes from `range.offset`, at most
 * `limits.maxFileBytes` of them: the limits and the checks below apply to that share.
 */
export class FileReceiver {
  readonly files: Array<CollectedFile> = []
  readonly skipped: Array<SkippedFile> = []
  /** Skipped entries past the list's bounds, counted per reason. */
  readonly omitted = new Map<SkipReason, number>()
  private skippedNameBytes = 0
  private current: Receiving | undefined
  private totalBytes = 0
  private sentFiles = 0
  /** Any file frame arrived (the walk began). */
  began = false

  /** The size the last 'f' frame announced (with a range: the whole file's). */
  announcedSize: number | undefined

  constructor(
    private readonly limits: CollectLimits,
    private readonly patterns: ReadonlyArray<string> = [],
    private readonly range?: { readonly offset: number } | undefined
  ) {}

  /** "<words> " + raw bytes, the bytes last: split off the first `n` words. */
  private static split(bytes: Buffer, n: number): { words: Array<string>; rest: Buffer } | undefined {
    const words: Array<string> = []
    let at = 0
    for (let i = 0; i < n; i++) {
      const space = bytes.indexOf(0x20, at)
      if (space < 0 || space - at > 24) return undefined
      words.push(bytes.subarray(at, space).toString("latin1"))
      at = space + 1
    }
    return { words, rest: bytes.subarray(at) }
  }

  readonly frame = (type: string, bytes: Buffer): string | undefined => {
    this.began = true
    if (type === FRAME.fileBegin) {
      if (this.current !== undefined) return "a file began inside another"
      const parts = FileReceiver.split(bytes, 2)
      if (
        parts === undefined ||
        !/^[0-7]{1,5}$/.test(parts.words[0]!) ||
        !/^(0|[1-9][0-9]{0,15})$/.test(parts.words[1]!) ||
        parts.rest.length === 0
      ) {
        return "a file frame that is not the supervisor's"
      }
      if (this.sentFiles >= this.limits.maxFiles) return `more than ${this.limits.maxFiles} files`
      const announced = Number(parts.words[1])
      this.announcedSize = announced
      const declared =
        this.range === undefined
          ? announced
          : Math.min(this.limits.maxFileBytes, announced - Math.min(this.range.offset, announced))
      if (declared > this.limits.maxFileBytes)
        return `a file of ${declared} bytes announced, over ${this.limits.maxFileBytes}`
      // A collection's names count against maxTotalBytes too (the supervisor counts them the same way).
      const nameBytes = this.range === undefined ? parts.rest.length : 0
      if (this.totalBytes + declared + nameBytes > this.limits.maxTotalBytes)
        return `files over ${this.limits.maxTotalBytes} bytes in all announced`
      this.totalBytes += nameBytes
      this.current = {
        path: Buffer.from(parts.rest),
        mode: Number.parseInt(parts.words[0]!, 8),
        declared,
        hash: createHash("sha256"),
        content: Buffer.allocUnsafeSlow(declared),
        received: 0
      }
      return undefined
    }
    if (type === FRAME.fileEnd) {
      const file = this.current
      if (file === undefined) return "a file ended that never began"
      if (bytes.toString("latin1") !== String(file.received)) return "a file's end that does not count its bytes"
      this.current = undefined
      this.sentFiles++
      if (file.received !== file.declared) {
        // The read stopped early (an I/O error inside): the file is not whole, so it is not returned.
        this.skip({ path: file.path.toString("utf8"), size: file.declared, skipped: "unreadable" }, file.path.length)
        return undefined
      }
      const content = file.content
      const path = this.decodePath(file.path)
      if (path === undefined) {
        this.skip({ path: file.path.toString("utf8"), size: file.received, skipped: "name-not-utf8" }, file.path.length)
        return undefined
      }
      this.files.push({
        path,
        size: file.received,
        sha256: file.hash.digest("hex"),
        mime: mimeOf(path, content),
        mode: file.mode,
        content: new Uint8Array(content.buffer, content.byteOffset, content.byteLength)
      })
      return undefined
    }
    if (type === FRAME.skipped) {
      if (this.current !== undefined) return "a skipped entry inside a file"
      const parts = FileReceiver.split(bytes, 2)
      if (parts === undefined || !SKIP_REASONS.has(parts.words[0]!) || !/^(0|[1-9][0-9]{0,19})$/.test(parts.words[1]!))
        return "a skipped-entry frame that is not the supervisor's"
      const path = this.decodePath(parts.rest)
      this.skip(
        {
          path: path ?? parts.rest.toString("utf8"),
          size: Number(parts.words[1]),
          skipped: path === undefined ? "name-not-utf8" : (parts.words[0] as SkipReason)
        },
        parts.rest.length
      )
      return undefined
    }
    if (type === FRAME.skippedCount) {
      if (this.current !== undefined) return "a count of skipped entries inside a file"
      const words = bytes.toString("latin1").split(" ")
      if (words.length !== 2 || !SKIP_REASONS.has(words[0]!) || !/^[1-9][0-9]{0,15}$/.test(words[1]!))
        return "a count of skipped entries that is not the supervisor's"
      const reason = words[0] as SkipReason
      this.omitted.set(reason, (this.omitted.get(reason) ?? 0) + Number(words[1]))
      return undefined
    }
    return `a frame '${type}' where files were expected`
  }

  readonly content = (chunk: Uint8Array): string | undefined => {
    const file = this.current
    if (file === undefined) return "file content outside a file"
    // The announced size was checked against the limits, so staying within it keeps them.
    if (file.received + chunk.byteLength > file.declared) return "a file longer than announced"
    file.content.set(chunk, file.received)
    file.hash.update(chunk)
    file.received += chunk.byteLength
    this.totalBytes += chunk.byteLength
    return undefined
  }

  /** List a skipped entry within the list's bounds; past them, count it. */
  private skip(entry: SkippedFile, nameBytes: number): void {
    if (this.skipped.length >= MAX_SKIPPED_LISTED || this.skippedNameBytes + nameBytes > MAX_SKIPPED_NAME_BYTES) {
      this.omitted.set(entry.skipped, (this.omitted.get(entry.skipped) ?? 0) + 1)
      return
    }
    this.skippedNameBytes += nameBytes
    this.skipped.push(entry)
  }

  private decodePath(bytes: Buffer): string | undefined {
    try {
      return utf8.decode(bytes)
    } catch {
      return undefined
    }
  }

  /**
   * What the result says: the files, the skipped entries (plus, once the walk is complete, literal
   * patterns that named nothing), whether anything was held back, and whether the walk ended.
   */
  outcome(ended: { readonly complete: boolean; readonly timedOut: boolean }): {
    readonly files: ReadonlyArray<CollectedFile>
    readonly skippedFiles: ReadonlyArray<SkippedFile>
    readonly filesTruncated: boolean
    readonly collection: CollectionStatus
    readonly skippedFilesOmitted?: number
  } {
    const skippedFiles = [...this.skipped]
    const omitted = [...this.omitted.values()].reduce((a, b) => a + b, 0)
    // (With entries left out of the list, a literal pattern's may be among them: nothing is claimed then.)
    if (ended.complete && omitted === 0) {
      const seen = new Set([...this.files.map((f) => f.path), ...this.skipped.map((s) => s.path)])
      for (const pattern of this.patterns) {
        const literal = literalPath(pattern)
        if (literal !== undefined && ![...seen].some((p) => p === literal || p.startsWith(`${literal}/`))) {
          skippedFiles.push({ path: literal, size: 0, skipped: "not-found" })
        }
      }
    }
    const collection: CollectionStatus = ended.complete
      ? { status: "complete" }
      : {
          status: this.files.length > 0 || this.skipped.length > 0 || omitted > 0 ? "partial" : "none",
          reason: ended.timedOut ? "timed-out" : "sandbox-ended"
        }
    return {
      files: this.files,
      skippedFiles,
      filesTruncated:
        !ended.complete ||
        this.skipped.some((s) => TRUNCATING.has(s.skipped)) ||
        [...this.omitted.keys()].some((r) => TRUNCATING.has(r)),
      collection,
      ...(omitted > 0 ? { skippedFilesOmitted: omitted } : {})
    }
  }
}
