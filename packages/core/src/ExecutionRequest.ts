/**
 * An `execute_code` request, and its validation into an ExecutionPlan: the
 * language resolved to an image and interpreter, limits resolved against the
 * executor's defaults. Invalid input stops here, before any resource exists.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { type InvalidRequest, invalidRequest } from "./Errors.js"
import { check, type ResolvedExecutorConfig } from "./ExecutorConfig.js"
import { type Language, LanguageAliases } from "./Language.js"
import { MiB } from "./Size.js"

export interface ExecuteRequest {
  readonly language: string
  readonly code: string
  /** Fed to the program's standard input. */
  readonly stdin?: string
  readonly timeoutMs?: number
  readonly memory?: number | string
  readonly cpus?: number
  readonly pidsLimit?: number
  readonly outputLimitBytes?: number
  readonly env?: Readonly<Record<string, string>>
  /** Files written into /workspace before the program starts: relative path -> content. */
  readonly files?: Readonly<Record<string, string | Uint8Array>>
  /** Overrides the language's image. */
  readonly image?: string
}

export interface ExecutionPlan {
  readonly language: Language
  readonly image: string
  readonly command: ReadonlyArray<string>
  readonly code: Uint8Array
  readonly codeSha256: string
  readonly stdin: Uint8Array
  readonly files: ReadonlyArray<readonly [string, Uint8Array]>
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs: number
  readonly memoryBytes: number
  readonly nanoCpus: number
  readonly pidsLimit: number
  readonly outputLimitBytes: number
}

const encoder = new TextEncoder()
const MAX_FILES = 1000
const MAX_FILES_BYTES = 16 * MiB
/** A path's bytes (UTF-8), as the kernel counts them: PATH_MAX (4096) with the NUL. */
export const MAX_PATH_BYTES = 4095
/** One segment (file or directory name), as the kernel counts it: NAME_MAX. */
export const MAX_PATH_SEGMENT_BYTES = 255
/**
 * The paths of a request's files together (UTF-8 bytes). The SDK's own bound on what the runner
 * reads before the program starts (protocol 1's runner refused a header over 1 MiB; protocol 2's
 * reads each path on its own), well above any real tree of at most 1000 files.
 */
export const MAX_FILES_PATH_BYTES = 1 * MiB
/**
 * tmpfs (the sandbox's /workspace and /tmp) allocates whole pages: a file of n bytes takes
 * ceil(n / 4096) pages of the mount's size and of the memory limit; directories take none. Pages
 * are at least 4 KiB, so this undercounts nothing (measured on runc and runsc: 256 one-byte files
 * fill a 1 MiB tmpfs, the 257th gets ENOSPC).
 */
const TMPFS_PAGE_BYTES = 4096
const tmpfsBytes = (bytes: number): number => Math.ceil(bytes / TMPFS_PAGE_BYTES) * TMPFS_PAGE_BYTES

const utf8Bytes = (s: string): number => Buffer.byteLength(s, "utf8")

/** `files["path"]`, the path cut short when it is long (the message quotes it again, cut by describeValue). */
const fileField = (path: string): string => path.length > 100 ? `files[${JSON.stringify(path.slice(0, 100))}...]` : `files[${JSON.stringify(path)}]`

/**
 * A relative path that stays inside /workspace and that the filesystem takes: no absolute paths,
 * no "..", no empty or "." segments (so one file has one spelling), at most 4095 bytes, each
 * segment at most 255 bytes.
 */
export const validateWorkspacePath = (path: string): string | undefined => {
  if (path === "" || path.includes("\0") || path.includes("\\")) return "a non-empty relative path without NUL or backslashes"
  if (path.startsWith("/")) return "a path relative to /workspace (absolute paths are refused)"
  const segments = path.split("/")
  if (segments.some((s) => s === "..")) return "a path without '..' segments (it must stay inside /workspace)"
  if (segments.some((s) => s === "" || s === ".")) return "a normalized path (no empty or '.' segments)"
  const bytes = utf8Bytes(path)
  if (bytes > MAX_PATH_BYTES) return `a path of at most ${MAX_PATH_BYTES} bytes in UTF-8 (PATH_MAX); this one has ${bytes}`
  for (const segment of segments) {
    const n = utf8Bytes(segment)
    if (n > MAX_PATH_SEGMENT_BYTES) {
      return `path segments (file and directory names) of at most ${MAX_PATH_SEGMENT_BYTES} bytes in UTF-8 (NAME_MAX); ${JSON.stringify(segment.length > 40 ? `${segment.slice(0, 40)}...` : segment)} has ${n}`
    }
  }
  return undefined
}

/**
 * The first path that the others make impossible: a file that is also another file's directory
 * ("a" and "a/b"), in either order. Paths are normalized (validateWorkspacePath), so equal
 * spellings are equal strings.
 */
const fileDirectoryConflict = (paths: ReadonlyArray<string>): { readonly path: string; readonly file: string } | undefined => {
  const set = new Set(paths)
  for (const path of paths) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
      const parent = path.slice(0, i)
      if (set.has(parent)) return { path, file: parent }
    }
  }
  return undefined
}

export interface PlanOptions {
  /**
   * Refuse code larger than the /tmp tmpfs, files larger than the /workspace tmpfs, and files and
   * code whose tmpfs pages alone exceed the memory limit. Default true: right for a fresh
   * single-use sandbox made with `config`'s sizes; a caller that runs the plan elsewhere (a
   * session, whose files land in its current directory and whose memory limit is its own) turns it off.
   */
  readonly checkSandboxSizes?: boolean
}

export const planExecution = (
  request: ExecuteRequest,
  config: ResolvedExecutorConfig,
  options: PlanOptions = {}
): Effect.Effect<ExecutionPlan, InvalidRequest> =>
  Effect.gen(function*() {
    if (typeof request !== "object" || request === null) {
      return yield* Effect.fail(invalidRequest("request", request, "an object { language, code, ... }"))
    }
    const language = typeof request.language === "string" ? LanguageAliases[request.language.toLowerCase()] : undefined
    if (language === undefined) {
      return yield* Effect.fail(invalidRequest("language", request.language, "python, javascript or bash (aliases: py, js, node, sh)"))
    }
    if (typeof request.code !== "string") {
      return yield* Effect.fail(invalidRequest("code", request.code, "a string"))
    }
    const code = encoder.encode(request.code)
    if (code.byteLength > config.maxCodeBytes) {
      return yield* Effect.fail(invalidRequest("code", `${code.byteLength} bytes`, `at most ${config.maxCodeBytes} bytes (maxCodeBytes)`))
    }
    if (request.stdin !== undefined && typeof request.stdin !== "string") {
      return yield* Effect.fail(invalidRequest("stdin", request.stdin, "a string"))
    }
    const files: Array<readonly [string, Uint8Array]> = []
    let filesBytes = 0
    if (request.files !== undefined) {
      if (typeof request.files !== "object" || request.files === null) {
        return yield* Effect.fail(invalidRequest("files", request.files, "an object of relative path -> content"))
      }
      const entries = Object.entries(request.files)
      if (entries.length > MAX_FILES) return yield* Effect.fail(invalidRequest("files", `${entries.length} files`, `at most ${MAX_FILES} files`))
      let pathBytes = 0
      for (const [path, content] of entries) {
        const problem = validateWorkspacePath(path)
        if (problem) return yield* Effect.fail(invalidRequest(fileField(path), path, problem))
        const bytes = typeof content === "string" ? encoder.encode(content) : content instanceof Uint8Array ? content : undefined
        if (bytes === undefined) return yield* Effect.fail(invalidRequest(fileField(path), content, "a string or Uint8Array"))
        filesBytes += bytes.byteLength
        pathBytes += utf8Bytes(path)
        files.push([path, bytes])
      }
      if (filesBytes > MAX_FILES_BYTES) return yield* Effect.fail(invalidRequest("files", `${filesBytes} bytes`, `at most ${MAX_FILES_BYTES} bytes in all`))
      if (pathBytes > MAX_FILES_PATH_BYTES) {
        return yield* Effect.fail(invalidRequest("files", `paths of ${pathBytes} bytes in all (${entries.length} files)`, `paths of at most ${MAX_FILES_PATH_BYTES} bytes (1 MiB) in all, in UTF-8`))
      }
      const conflict = fileDirectoryConflict(entries.map(([path]) => path))
      if (conflict !== undefined) {
        return yield* Effect.fail(
          invalidRequest(fileField(conflict.path), conflict.path, `a path whose directories are not also files: ${JSON.stringify(conflict.file)} is a file of this request, so it cannot be a directory`)
        )
      }
    }
    const runtime = config.languages[language]
    const env = request.env === undefined ? config.env : { ...config.env, ...(yield* check.env("env", request.env, config.env)) }
    const memoryBytes = request.memory === undefined ? config.memoryBytes : yield* check.memory("memory", request.memory)
    if (options.checkSandboxSizes !== false) {
      // The runner writes the code to /tmp and the files to /workspace, both tmpfs, whose pages
      // also count against the memory limit (no swap): past either size, setup fails for sure.
      const filesPages = files.reduce((n, [, bytes]) => n + tmpfsBytes(bytes.byteLength), 0)
      const codePages = tmpfsBytes(code.byteLength)
      if (codePages > config.tmpBytes) {
        return yield* Effect.fail(invalidRequest("code", `${code.byteLength} bytes`, `at most the /tmp tmpfs it is written to: ${config.tmpBytes} bytes (tmpSize), counted in 4 KiB pages`))
      }
      if (filesPages > config.workspaceBytes) {
        return yield* Effect.fail(
          invalidRequest("files", `${files.length} files taking ${filesPages} bytes of tmpfs pages`, `at most the /workspace tmpfs: ${config.workspaceBytes} bytes (workspaceSize), each file counted in whole 4 KiB pages`)
        )
      }
      if (filesPages + codePages > memoryBytes) {
        return yield* Effect.fail(
          invalidRequest(
            files.length > 0 ? "files" : "code",
            `${files.length > 0 ? `${files.length} files and the code` : "the code"}, taking ${filesPages + codePages} bytes of tmpfs pages`,
            `at most the memory limit those pages count against: ${memoryBytes} bytes (memory)`
          )
        )
      }
    }
    return {
      language,
      image: request.image === undefined ? runtime.image : yield* check.image("image", request.image),
      command: runtime.command,
      code,
      codeSha256: createHash("sha256").update(code).digest("hex"),
      stdin: request.stdin === undefined ? new Uint8Array(0) : encoder.encode(request.stdin),
      files,
      env,
      timeoutMs: request.timeoutMs === undefined ? config.timeoutMs : yield* check.timeoutMs("timeoutMs", request.timeoutMs),
      memoryBytes,
      nanoCpus: request.cpus === undefined ? config.nanoCpus : yield* check.cpus("cpus", request.cpus),
      pidsLimit: request.pidsLimit === undefined ? config.pidsLimit : yield* check.positiveInt("pidsLimit", request.pidsLimit, 1 << 22),
      outputLimitBytes: request.outputLimitBytes === undefined
        ? config.outputLimitBytes
        : yield* check.positiveInt("outputLimitBytes", request.outputLimitBytes, 1024 * MiB)
    }
  })
