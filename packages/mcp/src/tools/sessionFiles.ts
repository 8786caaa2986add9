/**
 * read_file, write_file, patch and search_files on the MCP session's sandbox, through the session's
 * file operations (Session.readFile / writeFile / patchFile / searchFiles): the sandbox's supervisor
 * does them itself (or runs grep and find as an argv), without a shell and without following a
 * symbolic link, and its reply cannot be forged from inside the sandbox.
 *
 * What the tools add on top, so that they keep the contract they had:
 *
 * - a relative path is from the terminal's current directory (the session saves it in its state
 *   directory, which is read here like any file), and `..` is resolved lexically — the only
 *   meaning that can succeed, since nothing on the way may be a symbolic link;
 * - the session's own state (/tmp/.hermes-session) is not a file the tools serve;
 * - text is read by lines (offset/limit count lines, total_lines counts them all), binary (a NUL
 *   byte in the first 8 KiB) by bytes, as the Hermes agent's read_file does;
 * - read_file's line_numbers: Hermes' `LINE|CONTENT` lines (withLineNumbers), within the same byte cap;
 * - write_file keeps an existing file's permission bits (a script stays executable);
 * - patch and search_files are the session's patchFile and searchFiles (core's session/edit.ts) on
 *   the path resolved as above; search_files without a path searches the terminal's directory
 *   (/workspace when that is outside the roots);
 * - failures are FileOperationFailed with the reasons the tools always had; patch's PatchFailed (how
 *   many matches, which lines) and a pattern grep refuses (InvalidRequest) pass as core says them.
 */
import { posix } from "node:path"
import { Effect } from "effect"
import type { Session } from "@hermes-sandbox/core"
import { SESSION_STATE_DIR } from "@hermes-sandbox/core/Session"
import { FileOperationFailed } from "../errors.js"

/** The sandbox's writable roots, the only places the tools serve. */
const ROOTS = ["/workspace", "/tmp"] as const
/** The session shell's working directory when no call has saved one. */
const INITIAL_CWD = "/workspace"
/** Bytes read per file operation while a text file's lines are counted. */
const CHUNK = 4 * 1024 * 1024
/** A file with a NUL byte in this many first bytes is binary. */
const SNIFF = 8192
/** Each file operation's deadline. */
const TIMEOUT_MS = 30_000

type Reason = FileOperationFailed["reason"]
const failed = (path: string, reason: Reason, why: string) =>
  new FileOperationFailed({ path, reason, message: `${path}: ${why}` })

const under = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`)

/** The session's SandboxFileError/FileNotFound as the tools' reasons; anything else (the sandbox ended, a deadline) as it is. */
const asToolFailure =
  (path: string) =>
  (error: unknown): Effect.Effect<never, unknown> => {
    const e = error as { _tag?: string; code?: string; message?: string }
    if (e._tag === "FileNotFound") return Effect.fail(failed(path, "not-found", "no such file"))
    if (e._tag !== "SandboxFileError") return Effect.fail(error)
    switch (e.code) {
      case "ELOOP":
        return Effect.fail(
          failed(
            path,
            "outside-sandbox",
            "a symbolic link is on the way; it is not followed (it could lead outside the sandbox's writable roots /workspace, /tmp)"
          )
        )
      case "EISDIR":
      case "EINVAL":
        return Effect.fail(failed(path, "not-a-file", "not a regular file"))
      case "ENOTDIR":
        return Effect.fail(failed(path, "not-a-file", "a part of the path is not a directory"))
      case "EACCES":
      case "EPERM":
      case "EROFS":
        return Effect.fail(failed(path, "permission-denied", "permission denied"))
      case "ENOSPC":
      case "EFBIG":
      case "EDQUOT":
        return Effect.fail(failed(path, "too-large", "too large: the sandbox's filesystem is full"))
      case "ETIMEDOUT":
        return Effect.fail(failed(path, "failed", "timed out"))
      default:
        return Effect.fail(failed(path, "failed", e.message ?? "failed"))
    }
  }

/** The terminal's current directory, as the session shell saved it (NUL-terminated: a path may hold a newline). */
const cwdOf = (sandbox: Session.Session) =>
  sandbox.readFile(`${SESSION_STATE_DIR}/cwd`, { limit: 8192, timeoutMs: TIMEOUT_MS }).pipe(
    Effect.map((r) => {
      const end = r.content.indexOf(0)
      const bytes = Buffer.from(r.content.subarray(0, end < 0 ? r.content.length : end))
      const cwd = bytes.toString("utf8")
      return cwd.startsWith("/") && Buffer.from(cwd, "utf8").equals(bytes) ? cwd : INITIAL_CWD
    }),
    Effect.catchTag("FileNotFound", () => Effect.succeed(INITIAL_CWD))
  )

/** The tool's path, absolute and normalized, inside the roots; or why not. */
export const resolveToolPath = (sandbox: Session.Session, given: string): Effect.Effect<string, unknown> =>
  Effect.gen(function* () {
    if (given === "" || given.includes("\0"))
      return yield* failed(given, "failed", "a non-empty path without NUL bytes")
    const resolved = given.startsWith("/") ? posix.resolve("/", given) : posix.resolve(yield* cwdOf(sandbox), given)
    if (under(resolved, SESSION_STATE_DIR) || !ROOTS.some((root) => under(resolved, root))) {
      return yield* failed(given, "outside-sandbox", "outside the sandbox's writable roots (/workspace, /tmp)")
    }
    return resolved
  })

export interface ReadWindow {
  readonly path: string
  readonly size: number
  readonly binary: boolean
  /** Binary: the bytes asked for (at most `max`). Text: the lines asked for, at most `max + 1` bytes. */
  readonly bytes: Buffer
  /** Text: lines in the whole file. */
  readonly totalLines: number
}

/** A part of a file as read: `bytesRead` bytes from where it was asked, `truncated` when more follows. */
export interface ReadChunk {
  readonly content: Uint8Array
  readonly size: number
  readonly bytesRead: number
  readonly truncated: boolean
}

/**
 * Read what read_file returns: the bytes from `offset` (1-based) for a binary file, at most
 * min(limit, max); for text, lines `offset`..`offset + limit - 1` (at most `max + 1` bytes, so
 * the caller sees whether they went past `max`), counting every line of the file.
 */
export const readWindow = (
  sandbox: Session.Session,
  given: string,
  offset: number,
  limit: number,
  max: number
): Effect.Effect<ReadWindow, unknown> =>
  Effect.flatMap(resolveToolPath(sandbox, given), (path) =>
    windowOf(
      path,
      (from, n) =>
        sandbox
          .readFile(path, { offset: from, limit: n, timeoutMs: TIMEOUT_MS })
          .pipe(Effect.catchAll(asToolFailure(given))),
      offset,
      limit,
      max
    )
  )

/** The same window of bytes the host holds (a run's kept output, sandbox://…/output/…). */
export const windowOfBytes = (
  path: string,
  content: Uint8Array,
  offset: number,
  limit: number,
  max: number
): Effect.Effect<ReadWindow> =>
  windowOf(
    path,
    (from, n) => {
      const part = content.subarray(Math.min(from, content.length), Math.min(from + n, content.length))
      return Effect.succeed({
        content: part,
        size: content.length,
        bytesRead: part.length,
        truncated: from + part.length < content.length
      })
    },
    offset,
    limit,
    max
  )

/** readWindow's reading, from whatever reads a file's parts (the sandbox's supervisor, or bytes held here). */
const windowOf = <E>(
  path: string,
  read: (from: number, n: number) => Effect.Effect<ReadChunk, E>,
  offset: number,
  limit: number,
  max: number
): Effect.Effect<ReadWindow, E> =>
  Effect.gen(function* () {
    const first = yield* read(0, CHUNK)
    const size = first.size
    if (first.content.subarray(0, SNIFF).includes(0)) {
      const from = offset - 1
      const n = Math.min(limit, max)
      const inFirst = from + n <= first.bytesRead || !first.truncated
      const bytes = inFirst
        ? first.content.subarray(Math.min(from, first.bytesRead), Math.min(from + n, first.bytesRead))
        : (yield* read(from, n)).content
      return { path, size, binary: true, bytes: Buffer.from(bytes), totalLines: 0 }
    }
    const end = offset + limit
    const window: Array<Buffer> = []
    let windowBytes = 0
    let line = 1
    let newlines = 0
    let lastByte = -1
    let chunk = first
    let at = first.bytesRead
    for (;;) {
      const content = Buffer.from(chunk.content.buffer, chunk.content.byteOffset, chunk.content.byteLength)
      let i = 0
      while (i < content.length) {
        const newline = content.indexOf(0x0a, i)
        const stop = newline < 0 ? content.length : newline + 1
        if (line >= offset && line < end && windowBytes <= max) {
          const piece = content.subarray(i, Math.min(stop, i + max + 1 - windowBytes))
          window.push(Buffer.from(piece))
          windowBytes += piece.length
        }
        if (newline < 0) break
        newlines++
        line++
        i = stop
      }
      if (content.length > 0) lastByte = content[content.length - 1]!
      if (!chunk.truncated || chunk.bytesRead === 0) break
      chunk = yield* read(at, CHUNK)
      at += chunk.bytesRead
    }
    const totalLines = newlines + (size > 0 && lastByte !== 0x0a && lastByte !== -1 ? 1 : 0)
    return { path, size, binary: false, bytes: Buffer.concat(window), totalLines }
  })

/**
 * read_file's `line_numbers`: "LINE|CONTENT" lines, the number right-aligned in 6 columns (the Hermes
 * agent's format), within `max` bytes in all (the prefixes count: a file of empty lines would
 * otherwise grow eightfold); `cut` when lines were left out for it.
 */
export const withLineNumbers = (
  text: string,
  first: number,
  max: number
): { readonly text: string; readonly lines: number; readonly cut: boolean } => {
  const lines = text.split("\n")
  if (lines.at(-1) === "") lines.pop()
  const out: Array<string> = []
  let bytes = 0
  for (const [i, line] of lines.entries()) {
    const numbered = `${String(first + i).padStart(6)}|${line}`
    bytes += Buffer.byteLength(numbered) + 1
    if (bytes > max && out.length > 0) return { text: `${out.join("\n")}\n`, lines: out.length, cut: true }
    out.push(numbered)
  }
  return { text: out.length === 0 ? "" : `${out.join("\n")}\n`, lines: out.length, cut: false }
}

/** Write read_file's counterpart: create or replace, parents made, an existing file's permission bits kept. */
export const writeWhole = (
  sandbox: Session.Session,
  given: string,
  bytes: Uint8Array
): Effect.Effect<{ readonly path: string; readonly bytesWritten: number }, unknown> =>
  Effect.gen(function* () {
    const path = yield* resolveToolPath(sandbox, given)
    // No mode: an existing file keeps its permission bits (Session.writeFile's default).
    const written = yield* sandbox
      .writeFile(path, bytes, { timeoutMs: TIMEOUT_MS })
      .pipe(Effect.catchAll(asToolFailure(given)))
    return { path: written.path, bytesWritten: written.bytesWritten }
  })

/** patch: the session's patchFile on the tool's path. */
export const patchAt = (
  sandbox: Session.Session,
  given: string,
  patch: Session.PatchSpec
): Effect.Effect<Session.PatchFileResult, unknown> =>
  Effect.gen(function* () {
    const path = yield* resolveToolPath(sandbox, given)
    return yield* sandbox.patchFile(path, patch, { timeoutMs: TIMEOUT_MS }).pipe(Effect.catchAll(asToolFailure(given)))
  })

/** search_files: the session's searchFiles under the tool's path (default: the terminal's directory). */
export const searchAt = (
  sandbox: Session.Session,
  given: string | undefined,
  options: Omit<Session.SearchFilesOptions, "path" | "timeoutMs">
): Effect.Effect<Session.SearchFilesResult, unknown> =>
  Effect.gen(function* () {
    const path =
      given === undefined
        ? yield* resolveToolPath(sandbox, ".").pipe(Effect.orElseSucceed(() => INITIAL_CWD))
        : yield* resolveToolPath(sandbox, given)
    return yield* sandbox.searchFiles({ ...options, path, timeoutMs: TIMEOUT_MS }).pipe(
      Effect.catchAll((e: { _tag?: string; operation?: string; message?: string }) =>
        // The search's own failure (a deadline, no grep in the image) says what to do; keep its words.
        e._tag === "SandboxFileError" && e.operation === "search"
          ? Effect.fail(failed(given ?? path, "failed", e.message ?? "the search failed"))
          : asToolFailure(given ?? path)(e)
      )
    )
  })
