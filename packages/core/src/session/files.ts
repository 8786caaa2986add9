/**
 * A session's file operations — `readFile`, `writeFile`, `listFiles`, `removeFile` — validated
 * here, then run on the kernel like a call (session/call.ts `superviseExec`): one exec of the
 * supervisor whose framed header holds the operation (RunnerProtocol `read` | `write` | `list` |
 * `remove`) under the session's lock, with a deadline. The supervisor does the operation itself:
 * no program runs, no shell sees the path or the content, and nothing follows a symlink (every
 * directory on the way is opened O_NOFOLLOW; a symlink at the end is reported, never read or
 * written through). Its reply comes in keyed frames (kernel/FileOpReply.ts), so nothing in the
 * sandbox can forge it.
 *
 * Paths: absolute under the writable roots (/workspace, /tmp), or relative to /workspace — never
 * to the shell's working directory, which belongs to the calls. `..` is refused rather than
 * resolved (resolving it lexically would disagree with a symlinked directory, and nothing here
 * follows one). Limits are checked before anything runs (InvalidRequest).
 */
import { Effect, type Scope } from "effect"
import {
  ContainerFailed,
  FileNotFound,
  type FileOperation,
  type InvalidRequest,
  invalidRequest,
  type SandboxError,
  SandboxFileError,
  type SessionEnded
} from "../Errors.js"
import { SESSION_LOCK } from "../internal/sessionShell.js"
import { makeSupervisedRun } from "../kernel/SupervisedRun.js"
import { type FileOp, KEEP_EXISTING_MODE } from "../RunnerProtocol.js"
import * as Schemas from "../Schemas.js"
import { type CallDeps, superviseExec } from "./call.js"
import { callTimeoutMs } from "./plan.js"

/** Where relative paths resolve. */
export const WORKSPACE = "/workspace"
/** The sandbox's writable roots (tmpfs): file operations reach nothing else. */
export const WRITABLE_ROOTS: ReadonlyArray<string> = [WORKSPACE, "/tmp"]
/** A read returns at most this much unless it asks for more (`limit`). */
export const DEFAULT_READ_LIMIT_BYTES = 8 * Schemas.MiB
/** The most one read returns (`limit`); read larger files in pieces (`offset`). */
export const MAX_READ_LIMIT_BYTES = 64 * Schemas.MiB
/** The most one write takes (the default /workspace tmpfs is 64 MiB too). */
export const MAX_WRITE_BYTES = 64 * Schemas.MiB
/** A written file's permission bits unless `mode` says otherwise. */
export const DEFAULT_FILE_MODE = 0o644

export interface FileCallOptions {
  /** Deadline of the operation. Default: the session's per-call timeoutMs. */
  readonly timeoutMs?: number
}

export interface ReadFileOptions extends FileCallOptions {
  /** Where the content starts (bytes). Default 0; past the end: nothing is read. */
  readonly offset?: number
  /** At most this many bytes. Default 8 MiB, at most 64 MiB. */
  readonly limit?: number
}

export interface WriteFileOptions extends FileCallOptions {
  /** Permission bits of the file (0 to 0o777). Default: an existing file keeps its own, a new one gets 0o644. */
  readonly mode?: number
}

export interface ReadFileResult {
  /** The path as resolved in the sandbox (absolute, normalized). */
  readonly path: string
  /** The bytes from `offset`, at most `limit` of them. */
  readonly content: Uint8Array
  /** The whole file's size. */
  readonly size: number
  /** Where `content` starts (the requested offset, or the size when that is past the end). */
  readonly offset: number
  readonly bytesRead: number
  /** More follows `content` (read on from `offset + bytesRead`). */
  readonly truncated: boolean
  /** Permission bits (e.g. 0o644). */
  readonly mode: number
  /** SHA-256 of `content` (hex), computed on the host from what arrived. */
  readonly sha256: string
}

export interface WriteFileResult {
  readonly path: string
  readonly bytesWritten: number
}

export interface FileEntry {
  readonly name: string
  /** A symlink is listed as one, never followed. */
  readonly kind: "file" | "directory" | "symlink" | "other"
  /** Bytes (of a symlink: its target's length). */
  readonly size: number
  readonly mode: number
  /** ISO 8601. */
  readonly modifiedAt: string
}

export interface ListFilesResult {
  readonly path: string
  /** Sorted by name (byte order). */
  readonly entries: ReadonlyArray<FileEntry>
  /** The directory holds more than the 10,000 entries listed. */
  readonly truncated: boolean
  /** Entries left out because their names are not UTF-8 (a JavaScript string cannot hold them exactly). */
  readonly omitted: number
}

/** What a file operation can fail with. */
export type SessionFileError = InvalidRequest | SandboxError | SessionEnded | FileNotFound | SandboxFileError

const encoder = new TextEncoder()
const utf8 = new TextDecoder("utf-8", { fatal: true })

/** Why `path` is not one a file operation takes; undefined with its resolved form when it is. */
export const resolveSandboxPath = (path: unknown): { readonly path: string } | { readonly problem: string } => {
  if (typeof path !== "string" || path === "" || path.includes("\0"))
    return { problem: "a non-empty path without NUL bytes" }
  const segments = (path.startsWith("/") ? path : `${WORKSPACE}/${path}`)
    .split("/")
    .filter((s) => s !== "" && s !== ".")
  if (segments.includes(".."))
    return {
      problem: "a path without '..' segments (they are refused, not resolved: nothing is resolved through a symlink)"
    }
  const resolved = `/${segments.join("/")}`
  if (!WRITABLE_ROOTS.some((root) => resolved === root || resolved.startsWith(`${root}/`))) {
    return {
      problem: `a path under the sandbox's writable roots (${WRITABLE_ROOTS.join(", ")}); a relative path resolves against ${WORKSPACE}`
    }
  }
  const bytes = Buffer.byteLength(resolved, "utf8")
  if (bytes > Schemas.MAX_PATH_BYTES)
    return {
      problem: `a path of at most ${Schemas.MAX_PATH_BYTES} bytes in UTF-8 (PATH_MAX); this one resolves to ${bytes}`
    }
  const long = segments.find((s) => Buffer.byteLength(s, "utf8") > Schemas.MAX_PATH_SEGMENT_BYTES)
  if (long !== undefined)
    return { problem: `names of at most ${Schemas.MAX_PATH_SEGMENT_BYTES} bytes in UTF-8 (NAME_MAX)` }
  return { path: resolved }
}

export const sandboxPath = (field: string, path: unknown): Effect.Effect<string, InvalidRequest> => {
  const r = resolveSandboxPath(path)
  return "path" in r ? Effect.succeed(r.path) : Effect.fail(invalidRequest(field, path, r.problem))
}

export const integerIn = (
  field: string,
  value: unknown,
  min: number,
  max: number,
  allowed: string
): Effect.Effect<number, InvalidRequest> =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max
    ? Effect.succeed(value)
    : Effect.fail(invalidRequest(field, value, allowed))

/** An operation validated: what the supervisor is asked, and its deadline. */
export interface Planned {
  readonly op: FileOp
  readonly timeoutMs: number
}

export const planRead = (
  path: unknown,
  o: ReadFileOptions | undefined,
  defaultTimeoutMs: number
): Effect.Effect<Planned, InvalidRequest> =>
  Effect.gen(function* () {
    const resolved = yield* sandboxPath("path", path)
    const offset =
      o?.offset === undefined
        ? 0
        : yield* integerIn("offset", o.offset, 0, Number.MAX_SAFE_INTEGER, "an integer >= 0 (bytes)")
    const limit =
      o?.limit === undefined
        ? DEFAULT_READ_LIMIT_BYTES
        : yield* integerIn(
            "limit",
            o.limit,
            0,
            MAX_READ_LIMIT_BYTES,
            `an integer from 0 to ${MAX_READ_LIMIT_BYTES} (64 MiB; read larger files in pieces with offset)`
          )
    return { op: { op: "read", path: resolved, offset, limit }, timeoutMs: yield* callTimeoutMs(o, defaultTimeoutMs) }
  })

export const planWrite = (
  path: unknown,
  content: unknown,
  o: WriteFileOptions | undefined,
  defaultTimeoutMs: number
): Effect.Effect<Planned, InvalidRequest> =>
  Effect.gen(function* () {
    const resolved = yield* sandboxPath("path", path)
    const bytes =
      typeof content === "string" ? encoder.encode(content) : content instanceof Uint8Array ? content : undefined
    if (bytes === undefined)
      return yield* Effect.fail(invalidRequest("content", content, "a string (written as UTF-8) or a Uint8Array"))
    if (bytes.byteLength > MAX_WRITE_BYTES) {
      return yield* Effect.fail(
        invalidRequest("content", `${bytes.byteLength} bytes`, `at most ${MAX_WRITE_BYTES} bytes (64 MiB) in one write`)
      )
    }
    // Without a mode, an existing file keeps its bits (a new one gets DEFAULT_FILE_MODE), as an editor's save does.
    const mode =
      o?.mode === undefined
        ? KEEP_EXISTING_MODE | DEFAULT_FILE_MODE
        : yield* integerIn("mode", o.mode, 0, 0o777, "permission bits from 0 to 0o777 (511)")
    return {
      op: { op: "write", path: resolved, content: bytes, mode },
      timeoutMs: yield* callTimeoutMs(o, defaultTimeoutMs)
    }
  })

export const planList = (
  dir: unknown,
  o: FileCallOptions | undefined,
  defaultTimeoutMs: number
): Effect.Effect<Planned, InvalidRequest> =>
  Effect.gen(function* () {
    const resolved = yield* sandboxPath("dir", dir ?? WORKSPACE)
    return { op: { op: "list", path: resolved }, timeoutMs: yield* callTimeoutMs(o, defaultTimeoutMs) }
  })

export const planRemove = (
  path: unknown,
  o: FileCallOptions | undefined,
  defaultTimeoutMs: number
): Effect.Effect<Planned, InvalidRequest> =>
  Effect.gen(function* () {
    const resolved = yield* sandboxPath("path", path)
    return { op: { op: "remove", path: resolved }, timeoutMs: yield* callTimeoutMs(o, defaultTimeoutMs) }
  })

const VERB: Readonly<Record<FileOperation, string>> = {
  read: "read",
  write: "write",
  list: "list",
  remove: "remove",
  search: "search"
}

/** A range of mtimes a Date holds (±8.64e15 ms); a sandboxed program can set any. */
const isoOf = (seconds: number) => new Date(Math.max(-8.64e15, Math.min(8.64e15, seconds * 1000))).toISOString()

/**
 * Run a planned operation (the caller holds the session's call lock). Its reply decides:
 * ENOENT is FileNotFound, any other errno a SandboxFileError; a deadline that passed before the
 * reply is a SandboxFileError ETIMEDOUT (a lock held all along is named as for calls:
 * ContainerFailed session-locked).
 */
const runOp = (deps: CallDeps, planned: Planned) =>
  Effect.gen(function* () {
    const { op, timeoutMs } = planned
    const run = yield* makeSupervisedRun(0, {}, undefined, op)
    const done = yield* superviseExec(
      deps,
      run,
      {
        // The supervisor's root for /workspace, whatever the image's environment says.
        env: { HERMES_WORKSPACE: WORKSPACE },
        timeoutMs,
        what: "file operation",
        payload: { key: run.key, lock: SESSION_LOCK, fileOp: op, stdin: new Uint8Array(0) }
        // Not journaled: a file operation is not an execution (no ExecutionRequested, nothing to record).
      },
      () => Effect.void
    ).pipe(Effect.catchTag("JournalError", (e) => Effect.die(e)))
    const reply = run.reply!
    const fail = (code: string, message: string) =>
      Effect.fail(
        code === "ENOENT"
          ? new FileNotFound({
              operation: op.op,
              path: op.path,
              message: `cannot ${VERB[op.op]} ${op.path}: ${message}`
            })
          : new SandboxFileError({
              operation: op.op,
              path: op.path,
              code,
              message: `cannot ${VERB[op.op]} ${op.path}: ${message}`
            })
      )
    // A reply that came whole is what happened, even when it came while the deadline's kill was under
    // way (the supervisor finished first): saying "timed out" would hide a write that was done.
    const outcome = reply.outcome
    if (outcome === undefined && done.timedOut) {
      return yield* fail(
        "ETIMEDOUT",
        `the deadline (${timeoutMs} ms) passed before the sandbox finished it${op.op === "write" ? " (the file may be partly written)" : ""}`
      )
    }
    if (outcome === undefined) {
      return yield* new ContainerFailed({
        operation: "session file operation",
        containerName: deps.container.name,
        reason: "engine",
        message: `the ${op.op} of ${op.path} in ${deps.container.name} ended before its supervisor replied (exit code ${done.exitCode}): the sandbox was killed or ran out of memory`
      })
    }
    if (outcome._tag === "Failed") return yield* fail(outcome.code, outcome.message)
    return { reply, outcome }
  })

/** A planned read, run under the session's lock the caller holds (readFile; patchFile, session/edit.ts). */
export const readLocked = (deps: CallDeps, planned: Planned) =>
  Effect.gen(function* () {
    const { reply } = yield* runOp(deps, planned)
    const file = reply.file!
    const got = file.files[0]
    const op = planned.op as Extract<FileOp, { op: "read" }>
    if (got === undefined) {
      // Fewer bytes than announced: the file shrank while it was read (a process in the sandbox).
      return yield* new SandboxFileError({
        operation: "read",
        path: op.path,
        code: "EIO",
        message: `cannot read ${op.path}: it changed while it was read; read it again`
      })
    }
    const size = file.announcedSize ?? got.size
    const offset = Math.min(op.offset, size)
    const result: ReadFileResult = {
      path: op.path,
      content: got.content,
      size,
      offset,
      bytesRead: got.size,
      truncated: offset + got.size < size,
      mode: got.mode,
      sha256: got.sha256
    }
    return result
  })

/** A planned write, run under the session's lock the caller holds (writeFile; patchFile, session/edit.ts). */
export const writeLocked = (deps: CallDeps, planned: Planned) =>
  Effect.gen(function* () {
    yield* runOp(deps, planned)
    const op = planned.op as Extract<FileOp, { op: "write" }>
    const result: WriteFileResult = { path: op.path, bytesWritten: op.content.byteLength }
    return result
  })

/** A session's file operations over a way to run one serialized with its calls (session/handle.ts). */
export const makeFileOps = (
  defaultTimeoutMs: number,
  serialized: <A, E>(body: (deps: CallDeps) => Effect.Effect<A, E, Scope.Scope>) => Effect.Effect<A, E | SessionEnded>
) => {
  const run = (planned: Planned) => serialized((deps) => runOp(deps, planned))
  return {
    readFile: (path: string, o?: ReadFileOptions) =>
      Effect.flatMap(planRead(path, o, defaultTimeoutMs), (planned) => serialized((deps) => readLocked(deps, planned))),
    writeFile: (path: string, content: string | Uint8Array, o?: WriteFileOptions) =>
      Effect.flatMap(planWrite(path, content, o, defaultTimeoutMs), (planned) =>
        serialized((deps) => writeLocked(deps, planned))
      ),
    listFiles: (dir?: string, o?: FileCallOptions) =>
      Effect.gen(function* () {
        const planned = yield* planList(dir, o, defaultTimeoutMs)
        const { outcome, reply } = yield* run(planned)
        const entries: Array<FileEntry> = []
        let omitted = 0
        for (const e of reply.entries) {
          let name: string
          try {
            name = utf8.decode(e.name)
          } catch {
            omitted++
            continue
          }
          entries.push({ name, kind: e.kind, size: e.size, mode: e.mode, modifiedAt: isoOf(e.mtimeSeconds) })
        }
        const result: ListFilesResult = {
          path: planned.op.path,
          entries,
          truncated: outcome._tag === "Listed" && outcome.more,
          omitted
        }
        return result
      }),
    removeFile: (path: string, o?: FileCallOptions) =>
      Effect.gen(function* () {
        yield* run(yield* planRemove(path, o, defaultTimeoutMs))
      })
  }
}
