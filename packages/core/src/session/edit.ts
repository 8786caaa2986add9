/**
 * A session's edit and search operations, as coding agents expect them (the Hermes agent's `patch`
 * and `search_files`): `patchFile` and `searchFiles`. Neither goes through a shell.
 *
 * - patchFile reads the file through the supervisor's `read` (session/files.ts: no symlink followed,
 *   a regular file only, at most MAX_PATCH_BYTES), replaces on the host, and writes it back through
 *   the supervisor's `write` (the file keeps its permission bits) — both under the session's lock
 *   in ONE serialized operation, so no call or file operation of the session comes between them.
 *   (A process the sandbox keeps in the background does not take that lock: what it writes in
 *   between is overwritten, as with any editor.) The old text must occur exactly once unless
 *   `replaceAll`; a unified diff's hunks must match the file's lines. Otherwise PatchFailed says
 *   how many matches and on which lines, and nothing is written.
 * - searchFiles checks its path through the supervisor first (a `read` of none of its bytes: every
 *   directory on the way opened without following a symlink; the path itself a directory or a
 *   regular file, not a symlink), then runs GNU grep (content) or find (file names) as an ARGV of
 *   the supervisor — the pattern one argument after `-e` (grep) or `-name` (find), the path after
 *   `--` — under the session's lock, with the call's deadline (a catastrophic regular expression
 *   is bounded by it). `grep -r` (never -R) and `find -P` do not follow the symlinks they meet,
 *   `-D skip` skips FIFOs, sockets and devices (none can make it hang), `-I` skips binary files.
 *   Output is NUL-separated (`--null`, `-printf '%p\0'`): a file name may hold newlines and colons.
 *   What comes back is read as hostile: at most MAX_SEARCH_OUTPUT_BYTES of it is kept (the
 *   supervisor counts and drops the rest), at most `maxResults` results, each matched line cut to
 *   MAX_MATCH_TEXT_BYTES; `truncated` says when anything was left out. The grep and find that run
 *   are the image's, as the sandbox's own user: a sandbox that replaced them can only make its own
 *   search lie, within those bounds.
 */
import { Effect, type Scope } from "effect"
import { invalidRequest, type InvalidRequest, PatchFailed, SandboxFileError, type SessionEnded } from "../Errors.js"
import { SESSION_LOCK, SESSION_STATE_DIR } from "../internal/sessionShell.js"
import { makeSupervisedRun } from "../kernel/SupervisedRun.js"
import * as Schemas from "../Schemas.js"
import { type CallDeps, superviseExec } from "./call.js"
import {
  type FileCallOptions,
  integerIn,
  planRead,
  planWrite,
  readLocked,
  type SessionFileError,
  WORKSPACE,
  writeLocked
} from "./files.js"
import { callTimeoutMs } from "./plan.js"

/** The largest file patchFile edits, and the largest it writes back. */
export const MAX_PATCH_BYTES = 8 * Schemas.MiB
/** searchFiles' results unless `maxResults` says otherwise. */
export const DEFAULT_SEARCH_RESULTS = 100
/** The most results one search returns. */
export const MAX_SEARCH_RESULTS = 1000
/** The most output of grep or find one search keeps (the rest is counted and dropped). */
export const MAX_SEARCH_OUTPUT_BYTES = 1 * Schemas.MiB
/** A matched line is cut to this many bytes (`textTruncated`). */
export const MAX_MATCH_TEXT_BYTES = 1000
/** Lines named in PatchFailed. */
const MAX_NAMED_LINES = 20

/** Replace `oldString` (exactly, bytes as UTF-8) with `newString`: once (it must be unique) or everywhere. */
export interface PatchReplace {
  readonly oldString: string
  readonly newString: string
  /** Replace every occurrence (default false: exactly one must exist). */
  readonly replaceAll?: boolean
}

/** A unified diff of this one file (`---`/`+++` headers optional, `@@ -l,n +l,n @@` hunks). */
export interface PatchDiff {
  readonly diff: string
}

export type PatchSpec = PatchReplace | PatchDiff

export interface PatchFileResult {
  /** The path as resolved in the sandbox. */
  readonly path: string
  /** Occurrences replaced, or hunks applied (diff). */
  readonly replacements: number
  /** 1-based lines (in the new file) where each replacement or hunk starts; the first 20. */
  readonly lines: ReadonlyArray<number>
  readonly bytesBefore: number
  readonly bytesWritten: number
}

export interface SearchFilesOptions extends FileCallOptions {
  /**
   * content: a POSIX extended regular expression (GNU grep -E, UTF-8: `|`, `+`, `?`, `{n,m}`, `()`,
   * `\b`, `\w`, `\s`; not Python's lookarounds, `\d` or lazy `*?`). files: a shell glob matched
   * against file names (find -name: `*.py`).
   */
  readonly pattern: string
  /** A directory (searched recursively) or a file; default /workspace. */
  readonly path?: string
  /** content only: search only files whose name matches this glob (grep --include). */
  readonly glob?: string
  /** Default 100, at most 1000. */
  readonly maxResults?: number
  /** "content" (default): lines matching `pattern`; "files": files whose name matches it. */
  readonly target?: "content" | "files"
}

export interface SearchMatch {
  /** The file's absolute path. */
  readonly path: string
  /** content: the matching line's number (1-based); files: 0. */
  readonly line: number
  /** content: the matching line (without its newline, invalid UTF-8 as U+FFFD); files: "". */
  readonly text: string
  /** The line was longer than MAX_MATCH_TEXT_BYTES and `text` is its start. */
  readonly textTruncated: boolean
}

export interface SearchFilesResult {
  readonly path: string
  readonly target: "content" | "files"
  /** Sorted by path (byte order), then line. */
  readonly matches: ReadonlyArray<SearchMatch>
  /** More results existed than returned (maxResults, or the output bound). */
  readonly truncated: boolean
  /** Results left out because their file names are not UTF-8. */
  readonly omitted: number
  /** Some files could not be read (permissions): grep or find said so, and searched the rest. */
  readonly incomplete: boolean
}

const latin1 = (s: string) => Buffer.from(s, "utf8").toString("latin1")

/** 1-based line of each of the first MAX_NAMED_LINES byte offsets in `text` (latin1: a char per byte), offsets sorted. */
const linesAt = (text: string, offsets: ReadonlyArray<number>): Array<number> => {
  const out: Array<number> = []
  let line = 1
  let pos = 0
  for (const offset of offsets.slice(0, MAX_NAMED_LINES + 1)) {
    for (let i = text.indexOf("\n", pos); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) line++
    pos = offset
    out.push(line)
  }
  return out
}

const named = (lines: ReadonlyArray<number>) =>
  `${lines.slice(0, MAX_NAMED_LINES).join(", ")}${lines.length > MAX_NAMED_LINES ? ", ..." : ""}`

const patchFailed = (
  path: string,
  reason: PatchFailed["reason"],
  message: string,
  matches = 0,
  lines: ReadonlyArray<number> = []
) => new PatchFailed({ path, reason, matches, lines: lines.slice(0, MAX_NAMED_LINES), message: `${path}: ${message}` })

interface Applied {
  readonly text: string
  readonly replacements: number
  readonly lines: ReadonlyArray<number>
}

/** Exact replacement on the file's bytes (as latin1 text: byte for byte, any encoding). */
export const applyReplace = (path: string, text: string, p: PatchReplace): Effect.Effect<Applied, PatchFailed> =>
  Effect.gen(function* () {
    const oldText = latin1(p.oldString)
    const newText = latin1(p.newString)
    const offsets: Array<number> = []
    for (let i = text.indexOf(oldText); i !== -1; i = text.indexOf(oldText, i + oldText.length)) offsets.push(i)
    if (offsets.length === 0) {
      // A hint: where the old text's first line is, ignoring the whitespace around it.
      const first = oldText
        .split("\n")
        .find((l) => l.trim() !== "")
        ?.trim()
      const near: Array<number> = []
      if (first !== undefined)
        text.split("\n").forEach((l, i) => {
          if (l.includes(first)) near.push(i + 1)
        })
      return yield* patchFailed(
        path,
        "no-match",
        `old_string was not found (it must match exactly, whitespace and indentation included)${
          near.length > 0
            ? `; its first line occurs on line${near.length > 1 ? "s" : ""} ${named(near)}: read the file there and copy the text exactly`
            : ""
        }`
      )
    }
    const lines = linesAt(text, offsets)
    if (offsets.length > 1 && p.replaceAll !== true) {
      return yield* patchFailed(
        path,
        "ambiguous",
        `old_string occurs ${offsets.length} times (lines ${named(lines)}); include more surrounding lines to make it unique, or set replace_all to replace every one`,
        offsets.length,
        lines
      )
    }
    const size = text.length + offsets.length * (newText.length - oldText.length)
    if (size > MAX_PATCH_BYTES) {
      return yield* patchFailed(
        path,
        "too-large",
        `the result would be ${size} bytes, over the ${MAX_PATCH_BYTES} a patch writes`,
        offsets.length,
        lines
      )
    }
    const parts: Array<string> = []
    let at = 0
    for (const o of offsets) {
      parts.push(text.slice(at, o), newText)
      at = o + oldText.length
    }
    parts.push(text.slice(at))
    const out = parts.join("")
    // Where each replacement starts in the new file.
    const shift = newText.length - oldText.length
    return {
      text: out,
      replacements: offsets.length,
      lines: linesAt(
        out,
        offsets.map((o, i) => o + i * shift)
      )
    }
  })

interface Hunk {
  readonly header: string
  /** 1-based; 0 for an insertion at the top. */
  readonly oldStart: number
  readonly oldLines: ReadonlyArray<string>
  readonly newLines: ReadonlyArray<string>
  readonly oldNoEol: boolean
  readonly newNoEol: boolean
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/

/**
 * A unified diff's hunks (one file). A hunk ends when its header's line counts are met (so a removed
 * line that reads "--- x" is a line, not a header), or at the next "@@" or the end when it has
 * fewer lines than it says (a hand-written diff's counts are often off). Lines outside hunks
 * (`diff --git`, `index`, the `---`/`+++` headers) are skipped; a second file's header is refused.
 */
export const parseUnifiedDiff = (path: string, diff: string): Effect.Effect<ReadonlyArray<Hunk>, PatchFailed> =>
  Effect.gen(function* () {
    const malformed = (why: string) => patchFailed(path, "malformed-diff", `not a unified diff of one file: ${why}`)
    const lines = diff.split("\n")
    if (lines.at(-1) === "") lines.pop()
    const hunks: Array<Hunk> = []
    let current:
      | { header: string; oldStart: number; old: Array<string>; new: Array<string>; oldLeft: number; newLeft: number }
      | undefined
    let oldNoEol = false
    let newNoEol = false
    let last: "-" | "+" | " " | undefined
    let files = 0
    const close = () => {
      if (current !== undefined)
        hunks.push({
          header: current.header,
          oldStart: current.oldStart,
          oldLines: current.old,
          newLines: current.new,
          oldNoEol,
          newNoEol
        })
      current = undefined
      oldNoEol = newNoEol = false
      last = undefined
    }
    for (const line of lines) {
      const m = HUNK.exec(line)
      if (m !== null) {
        close()
        const count = (c: string | undefined) => (c === undefined ? 1 : Number(c))
        current = {
          header: m[0],
          oldStart: Number(m[1]),
          old: [],
          new: [],
          oldLeft: count(m[2]),
          newLeft: count(m[4])
        }
        continue
      }
      if (line.startsWith("\\")) {
        // "\ No newline at end of file": of the line before it.
        if (last === "-") oldNoEol = true
        else if (last === "+") newNoEol = true
        else if (last === " ") oldNoEol = newNoEol = true
        continue
      }
      if (current !== undefined && current.oldLeft <= 0 && current.newLeft <= 0) close()
      if (current === undefined) {
        if (line.startsWith("--- ") && ++files > 1)
          return yield* malformed("it has more than one file's '---' header; patch one file per call")
        if (hunks.length > 0 && /^[ +-]/.test(line) && !line.startsWith("--- ") && !line.startsWith("+++ "))
          return yield* malformed(
            `hunk ${hunks.length} has more lines than its header (${hunks.at(-1)!.header}) says: ${JSON.stringify(line.slice(0, 80))}`
          )
        continue // "diff --git", "index", "---", "+++": outside hunks
      }
      const tag = line[0]
      const body = line.slice(1)
      if (tag === " " || line === "") {
        current.old.push(body)
        current.new.push(body)
        current.oldLeft--
        current.newLeft--
        last = " "
      } else if (tag === "-") {
        current.old.push(body)
        current.oldLeft--
        last = "-"
      } else if (tag === "+") {
        current.new.push(body)
        current.newLeft--
        last = "+"
      } else {
        return yield* malformed(
          `a hunk line starts with neither ' ', '-', '+' nor '\\': ${JSON.stringify(line.slice(0, 80))}`
        )
      }
    }
    close()
    if (hunks.length === 0) return yield* malformed("it has no '@@ -l,n +l,n @@' hunk")
    return hunks
  })

/** Apply hunks in order: each where its header says (shifted by the hunks before), else at the nearest place its lines match. */
export const applyDiff = (path: string, text: string, diff: string): Effect.Effect<Applied, PatchFailed> =>
  Effect.gen(function* () {
    const hunks = yield* parseUnifiedDiff(path, latin1(diff))
    const parts = text.split("\n")
    let finalNewline = text === "" || text.endsWith("\n")
    const lines = text === "" ? [] : finalNewline ? parts.slice(0, -1) : parts
    const out: Array<string> = []
    const starts: Array<number> = []
    let from = 0 // first line of `lines` not yet copied
    for (const [n, h] of hunks.entries()) {
      const matchesAt = (at: number) => h.oldLines.every((l, i) => lines[at + i] === l)
      // The header's line in the original file (an insertion's: the line it follows).
      const wanted = Math.max(from, h.oldLines.length === 0 ? h.oldStart : h.oldStart - 1)
      let at: number | undefined
      if (h.oldLines.length === 0) at = Math.min(wanted, lines.length)
      else
        for (
          let d = 0;
          at === undefined && (wanted - d >= from || wanted + d + h.oldLines.length <= lines.length);
          d++
        ) {
          if (wanted + d + h.oldLines.length <= lines.length && matchesAt(wanted + d)) at = wanted + d
          else if (d > 0 && wanted - d >= from && matchesAt(wanted - d)) at = wanted - d
        }
      if (at === undefined) {
        const first = h.oldLines.find((l) => l.trim() !== "")
        return yield* patchFailed(
          path,
          "no-match",
          `hunk ${n + 1} (${h.header}) does not match the file: its ${h.oldLines.length} context and removed line${h.oldLines.length === 1 ? "" : "s"} are not there in order${
            first === undefined
              ? ""
              : ` (its first, ${JSON.stringify(Buffer.from(first, "latin1").toString("utf8").slice(0, 80))}, was looked for from line ${from + 1})`
          }; nothing was changed`
        )
      }
      out.push(...lines.slice(from, at))
      starts.push(out.length + 1)
      out.push(...h.newLines)
      from = at + h.oldLines.length
      if (from === lines.length) {
        if (h.newNoEol) finalNewline = false
        else if (h.oldNoEol) finalNewline = true
      }
    }
    out.push(...lines.slice(from))
    const result = out.length === 0 ? "" : out.join("\n") + (finalNewline ? "\n" : "")
    if (result.length > MAX_PATCH_BYTES) {
      return yield* patchFailed(
        path,
        "too-large",
        `the result would be ${result.length} bytes, over the ${MAX_PATCH_BYTES} a patch writes`
      )
    }
    return { text: result, replacements: hunks.length, lines: starts }
  })

/** Why `spec` is not a patch; undefined when it is one. */
const checkSpec = (spec: unknown): InvalidRequest | undefined => {
  const s = spec as Partial<PatchReplace & PatchDiff> | undefined
  if (typeof s !== "object" || s === null)
    return invalidRequest("patch", spec, "{ oldString, newString, replaceAll? } or { diff }")
  if ("diff" in s && s.diff !== undefined) {
    if (s.oldString !== undefined || s.newString !== undefined)
      return invalidRequest("patch", "diff and oldString", "either a diff or oldString/newString, not both")
    return typeof s.diff === "string" && s.diff.trim() !== ""
      ? undefined
      : invalidRequest("diff", s.diff, "a non-empty unified diff")
  }
  if (typeof s.oldString !== "string" || s.oldString === "")
    return invalidRequest("oldString", s.oldString, "the exact, non-empty text to replace")
  if (typeof s.newString !== "string") return invalidRequest("newString", s.newString, "a string (may be empty)")
  if (s.oldString === s.newString) return invalidRequest("newString", "the same as oldString", "a different text")
  if (s.replaceAll !== undefined && typeof s.replaceAll !== "boolean")
    return invalidRequest("replaceAll", s.replaceAll, "a boolean")
  const bytes = Buffer.byteLength(s.oldString) + Buffer.byteLength(s.newString)
  if (bytes > MAX_PATCH_BYTES)
    return invalidRequest(
      "newString",
      `${bytes} bytes`,
      `old and new text of at most ${MAX_PATCH_BYTES} bytes together`
    )
  return undefined
}

const grepArgv = (path: string, pattern: string, glob: string | undefined, maxResults: number) => [
  "grep",
  "-r", // never -R: symlinks met on the way are not followed
  "-n",
  "-H",
  "-I", // binary files: skipped
  "-E",
  "-s",
  "--null",
  "--color=never",
  "-D",
  "skip", // FIFOs, sockets, devices: skipped, never opened
  `--max-count=${maxResults}`,
  "--exclude-dir=.hermes-session", // the session shell's state (SESSION_STATE_DIR)
  ...(glob === undefined ? [] : [`--include=${glob}`]),
  "-e",
  pattern,
  "--",
  path
]

const findArgv = (path: string, pattern: string) => [
  "find",
  "-P", // symlinks (the path's own too) are not followed
  path,
  "-path",
  SESSION_STATE_DIR,
  "-prune",
  "-o",
  "-name",
  pattern,
  "-printf",
  "%p\\0"
]

const utf8 = new TextDecoder("utf-8", { fatal: true })
const lenient = new TextDecoder("utf-8", { fatal: false })

/**
 * grep's `--null -n -H` output (FILE NUL LINE ':' TEXT '\n') or find's (FILE NUL), as hostile bytes:
 * at most `max` results; a record cut short by the output bound is dropped (`cut`).
 */
export const parseSearchOutput = (
  bytes: Uint8Array,
  target: "content" | "files",
  max: number
): { readonly matches: Array<SearchMatch>; readonly more: boolean; readonly omitted: number } => {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const matches: Array<SearchMatch> = []
  let omitted = 0
  let at = 0
  while (at < b.length) {
    const nul = b.indexOf(0, at)
    if (nul < 0) break
    const name = b.subarray(at, nul)
    if (name[0] !== 0x2f) break // not grep's or find's: a path given absolute comes back so
    let next = nul + 1
    let line = 0
    let text = ""
    let textTruncated = false
    if (target === "content") {
      const colon = b.indexOf(0x3a, nul + 1)
      const end = b.indexOf(0x0a, nul + 1)
      if (colon < 0 || end < 0 || colon > end) break
      const digits = b.subarray(nul + 1, colon).toString("latin1")
      if (!/^[1-9]\d{0,15}$/.test(digits)) break
      line = Number(digits)
      const body = b.subarray(colon + 1, end)
      textTruncated = body.length > MAX_MATCH_TEXT_BYTES
      text = lenient.decode(textTruncated ? body.subarray(0, MAX_MATCH_TEXT_BYTES) : body)
      next = end + 1
    }
    if (matches.length >= max) break
    at = next
    let path: string
    try {
      path = utf8.decode(name)
    } catch {
      omitted++
      continue
    }
    matches.push({ path, line, text, textTruncated })
  }
  return { matches, more: at < b.length, omitted }
}

/** What the search asked, validated. */
interface PlannedSearch {
  readonly path: string
  readonly target: "content" | "files"
  readonly argv: ReadonlyArray<string>
  readonly maxResults: number
  readonly timeoutMs: number
}

export const planSearch = (
  o: SearchFilesOptions,
  defaultTimeoutMs: number
): Effect.Effect<PlannedSearch, InvalidRequest> =>
  Effect.gen(function* () {
    if (typeof o !== "object" || o === null)
      return yield* invalidRequest("options", o, "{ pattern, path?, glob?, maxResults?, target? }")
    const target = o.target ?? "content"
    if (target !== "content" && target !== "files")
      return yield* invalidRequest("target", o.target, '"content" (lines matching) or "files" (names matching)')
    if (typeof o.pattern !== "string" || o.pattern === "" || o.pattern.includes("\0"))
      return yield* invalidRequest("pattern", o.pattern, "a non-empty string without NUL bytes")
    if (Buffer.byteLength(o.pattern) > 4096)
      return yield* invalidRequest("pattern", `${Buffer.byteLength(o.pattern)} bytes`, "at most 4096 bytes")
    if (o.glob !== undefined) {
      if (target === "files")
        return yield* invalidRequest("glob", o.glob, 'nothing with target "files" (the pattern is the glob)')
      if (typeof o.glob !== "string" || o.glob === "" || o.glob.includes("\0") || o.glob.length > 1024)
        return yield* invalidRequest("glob", o.glob, "a non-empty file-name glob (e.g. *.py) without NUL bytes")
    }
    const maxResults =
      o.maxResults === undefined
        ? DEFAULT_SEARCH_RESULTS
        : yield* integerIn(
            "maxResults",
            o.maxResults,
            1,
            MAX_SEARCH_RESULTS,
            `an integer from 1 to ${MAX_SEARCH_RESULTS}`
          )
    // The path rule of the other file operations (planRead: absolute under the roots, or relative to /workspace).
    const { op } = yield* planRead(o.path ?? WORKSPACE, { offset: 0, limit: 0 }, defaultTimeoutMs)
    const path = op.path
    const argv = target === "content" ? grepArgv(path, o.pattern, o.glob, maxResults) : findArgv(path, o.pattern)
    return { path, target, argv, maxResults, timeoutMs: yield* callTimeoutMs(o, defaultTimeoutMs) }
  })

/** A session's patchFile and searchFiles over a way to run one serialized with its calls (session/handle.ts). */
export const makeEditOps = (
  defaultTimeoutMs: number,
  serialized: <A, E>(body: (deps: CallDeps) => Effect.Effect<A, E, Scope.Scope>) => Effect.Effect<A, E | SessionEnded>
) => ({
  patchFile: (
    path: string,
    patch: PatchSpec,
    o?: FileCallOptions
  ): Effect.Effect<PatchFileResult, SessionFileError | PatchFailed> =>
    Effect.gen(function* () {
      const bad = checkSpec(patch)
      if (bad !== undefined) return yield* Effect.fail(bad)
      // One more byte than the limit: a file that fills it is over.
      const read = yield* planRead(path, { ...o, limit: MAX_PATCH_BYTES + 1 }, defaultTimeoutMs)
      return yield* serialized((deps) =>
        Effect.gen(function* () {
          const file = yield* readLocked(deps, read)
          if (file.size > MAX_PATCH_BYTES) {
            return yield* patchFailed(
              file.path,
              "too-large",
              `${file.size} bytes, over the ${MAX_PATCH_BYTES} (8 MiB) a patch edits; edit it with a command instead`
            )
          }
          const text = Buffer.from(file.content).toString("latin1")
          const applied =
            "diff" in patch && patch.diff !== undefined
              ? yield* applyDiff(file.path, text, patch.diff)
              : yield* applyReplace(file.path, text, patch as PatchReplace)
          const write = yield* planWrite(file.path, Buffer.from(applied.text, "latin1"), o, defaultTimeoutMs)
          const written = yield* writeLocked(deps, write)
          const result: PatchFileResult = {
            path: file.path,
            replacements: applied.replacements,
            lines: applied.lines.slice(0, MAX_NAMED_LINES),
            bytesBefore: file.size,
            bytesWritten: written.bytesWritten
          }
          return result
        })
      )
    }),
  searchFiles: (o: SearchFilesOptions): Effect.Effect<SearchFilesResult, SessionFileError> =>
    Effect.gen(function* () {
      const planned = yield* planSearch(o, defaultTimeoutMs)
      const check = yield* planRead(
        planned.path,
        { offset: 0, limit: 0, timeoutMs: planned.timeoutMs },
        defaultTimeoutMs
      )
      return yield* serialized((deps) =>
        Effect.gen(function* () {
          // The path itself: reached without a symlink, a directory or a regular file (the supervisor's walk).
          yield* readLocked(deps, check).pipe(
            Effect.catchIf(
              (e) => e._tag === "SandboxFileError" && e.code === "EISDIR",
              () => Effect.void
            )
          )
          const run = yield* makeSupervisedRun(MAX_SEARCH_OUTPUT_BYTES)
          const done = yield* superviseExec(
            deps,
            run,
            {
              // C.UTF-8: patterns and lines are UTF-8 (glibc has it built in).
              env: { LC_ALL: "C.UTF-8" },
              timeoutMs: planned.timeoutMs,
              what: "search",
              payload: {
                key: run.key,
                capBytes: MAX_SEARCH_OUTPUT_BYTES,
                lock: SESSION_LOCK,
                args: planned.argv,
                stdin: new Uint8Array(0)
              }
            },
            () => Effect.void
          ).pipe(Effect.catchTag("JournalError", (e) => Effect.die(e)))
          const fail = (message: string) =>
            new SandboxFileError({
              operation: "search",
              path: planned.path,
              code: done.timedOut ? "ETIMEDOUT" : "EIO",
              message: `cannot search ${planned.path}: ${message}`
            })
          const stderr = lenient.decode(run.stderr.bytes.subarray(0, 600)).trim()
          if (done.timedOut)
            return yield* fail(
              `the deadline (${planned.timeoutMs} ms) passed first (a regular expression that backtracks, or a tree too large: narrow the path or the pattern)`
            )
          const tool = planned.target === "content" ? "grep" : "find"
          // grep: 0 found, 1 none, 2 trouble (with -s: a bad pattern, or something unreadable). find: 0, or 1 for trouble.
          const trouble = planned.target === "content" ? done.exitCode === 2 : done.exitCode === 1
          const ok = done.exitCode === 0 || (planned.target === "content" && done.exitCode === 1)
          if (!ok && !trouble)
            return yield* fail(
              `${tool} exited ${done.exitCode}${stderr === "" ? "" : `: ${stderr}`} (does the image have GNU ${tool}?)`
            )
          const parsed = parseSearchOutput(run.stdout.bytes, planned.target, planned.maxResults)
          // grep -s keeps quiet about unreadable files: what it still says with nothing found is about the
          // pattern (or a grep that is not GNU's). find's trouble is an unreadable directory: incomplete.
          if (planned.target === "content" && trouble && parsed.matches.length === 0 && stderr !== "")
            return yield* Effect.fail(
              invalidRequest("pattern", o.pattern, `a pattern GNU grep -E takes (grep said: ${stderr})`)
            )
          const matches = parsed.matches.sort((a, b) =>
            a.path === b.path ? a.line - b.line : Buffer.compare(Buffer.from(a.path), Buffer.from(b.path))
          )
          const result: SearchFilesResult = {
            path: planned.path,
            target: planned.target,
            matches,
            truncated: parsed.more || run.stdout.truncated,
            omitted: parsed.omitted,
            incomplete: trouble
          }
          return result
        })
      )
    })
})
