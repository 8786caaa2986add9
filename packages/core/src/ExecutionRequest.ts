/**
 * An `execute_code` request, and its validation into an ExecutionPlan: the
 * language resolved to an image and interpreter, limits resolved against the
 * executor's defaults. Invalid input stops here, before any resource exists.
 */
import { Effect, Either, ParseResult, Schema } from "effect"
import { createHash } from "node:crypto"
import { type InvalidRequest, invalidRequest } from "./Errors.js"
import type { ResolvedSandboxDefaults } from "./ExecutorConfig.js"
import type { Language } from "./Language.js"
import * as Schemas from "./Schemas.js"
import { type CollectLimits, CollectLimitsSchema, CollectPatterns, DEFAULT_COLLECT_LIMITS } from "./Artifacts.js"
import { planTools, resolveToolLimits, ToolLimitsSchema, type ToolPlan, type Tools } from "./Tools.js"

export { MAX_PATH_BYTES, MAX_PATH_SEGMENT_BYTES } from "./Schemas.js"

/**
 * An execute_code request as users write it: {@link ExecuteRequestSchema}'s input side, and the
 * host tools, which are functions, not data.
 */
export interface ExecuteRequest extends Schemas.Input<typeof ExecuteRequestSchema> {
  /**
   * Host tools the code may call (`from hermes_tools import name` in Python, `require("hermes_tools")`
   * in JavaScript, `hermes-tool NAME JSON` in bash). Replaces the executor's `tools`; `{}` gives none.
   */
  readonly tools?: Tools
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
  /** What to send back after the program, if anything was asked for. */
  readonly collect?: { readonly patterns: ReadonlyArray<string>; readonly limits: CollectLimits }
  /** The tools the code may call, checked, if any. */
  readonly tools?: ToolPlan
}

const encoder = new TextEncoder()
const MAX_FILES = 1000
const MAX_FILES_BYTES = 16 * Schemas.MiB
/**
 * The paths of a request's files together (UTF-8 bytes). The SDK's own bound on what the runner
 * reads before the program starts (protocol 1's runner refused a header over 1 MiB; protocol 2's
 * reads each path on its own), well above any real tree of at most 1000 files.
 */
export const MAX_FILES_PATH_BYTES = 1 * Schemas.MiB
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
const fileField = (path: string): string =>
  path.length > 100 ? `files[${JSON.stringify(path.slice(0, 100))}...]` : `files[${JSON.stringify(path)}]`

/**
 * A relative path that stays inside /workspace and that the filesystem takes: no absolute paths,
 * no "..", no empty or "." segments (so one file has one spelling), at most 4095 bytes, each
 * segment at most 255 bytes. Undefined when it is one; else what is allowed.
 */
export const validateWorkspacePath: (path: string) => string | undefined = Schemas.workspacePathProblem

/**
 * The first path that the others make impossible: a file that is also another file's directory
 * ("a" and "a/b"), in either order. Paths are normalized (validateWorkspacePath), so equal
 * spellings are equal strings.
 */
const fileDirectoryConflict = (
  paths: ReadonlyArray<string>
): { readonly path: string; readonly file: string } | undefined => {
  const set = new Set(paths)
  for (const path of paths) {
    for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
      const parent = path.slice(0, i)
      if (set.has(parent)) return { path, file: parent }
    }
  }
  return undefined
}

type FileContent = string | Uint8Array

/**
 * Why these files cannot be written into /workspace before the program starts; undefined when
 * they can. Checks across the entries (counts, totals, a file that is another's directory), so
 * one pass over them, in order, naming the first bad one.
 */
const filesIssue = (files: object, ast: Schema.Schema.AnyNoContext["ast"]): ParseResult.ParseIssue | undefined => {
  const at = (path: string, actual: unknown, allowed: string) =>
    new ParseResult.Pointer(path, files, new ParseResult.Type(ast, actual, allowed))
  const entries = Object.entries(files)
  if (entries.length > MAX_FILES)
    return new ParseResult.Type(ast, `${entries.length} files`, `at most ${MAX_FILES} files`)
  let filesBytes = 0
  let pathBytes = 0
  for (const [path, content] of entries) {
    const problem = Schemas.workspacePathProblem(path)
    if (problem !== undefined) return at(path, path, problem)
    if (typeof content === "string") filesBytes += utf8Bytes(content)
    else if (content instanceof Uint8Array) filesBytes += content.byteLength
    else return at(path, content, "a string or Uint8Array")
    pathBytes += utf8Bytes(path)
  }
  if (filesBytes > MAX_FILES_BYTES)
    return new ParseResult.Type(ast, `${filesBytes} bytes`, `at most ${MAX_FILES_BYTES} bytes in all`)
  if (pathBytes > MAX_FILES_PATH_BYTES) {
    return new ParseResult.Type(
      ast,
      `paths of ${pathBytes} bytes in all (${entries.length} files)`,
      `paths of at most ${MAX_FILES_PATH_BYTES} bytes (1 MiB) in all, in UTF-8`
    )
  }
  const conflict = fileDirectoryConflict(entries.map(([path]) => path))
  if (conflict !== undefined) {
    return at(
      conflict.path,
      conflict.path,
      `a path whose directories are not also files: ${JSON.stringify(conflict.file)} is a file of this request, so it cannot be a directory`
    )
  }
  return undefined
}

/** The files of a request (relative path -> content), checked as {@link filesIssue} says. */
export const Files: Schema.Schema<Readonly<Record<string, FileContent>>> = Schemas.checkedObject(filesIssue, {
  identifier: "Files",
  message: () => "an object of relative path -> content",
  // Directories are d*, files anything else: no file is another's directory.
  arbitrary: () => (fc) =>
    fc.dictionary(
      fc.stringMatching(/^(d[a-z0-9]{0,3}\/){0,3}[a-ce-z0-9_][a-z0-9_.-]{0,9}$/),
      fc.oneof(fc.string({ maxLength: 200 }), fc.uint8Array({ maxLength: 200 })),
      { maxKeys: 8 }
    )
})

const aString = Schema.String.annotations({ message: () => "a string" })

/**
 * An execute_code request as users write it, each field decoded to what the plan holds (the
 * language resolved from its alias, memory in bytes, CPUs in nanoCPUs, the timeout in whole
 * milliseconds). What depends on the executor (code and files against its sizes, the env merged
 * over its env) is checked by planExecution.
 */
export const ExecuteRequestSchema = Schema.Struct({
  /** python, javascript or bash, in any case; aliases py, js, node, sh. */
  language: Schemas.LanguageName,
  code: aString,
  /** Fed to the program's standard input. */
  stdin: Schema.optional(aString),
  /** Files written into /workspace before the program starts: relative path -> content. */
  files: Schema.optional(Files),
  /** Variables over the executor's `env`. */
  env: Schema.optional(Schemas.EnvEntries),
  // Each absent one is the executor's.
  ...Schemas.optionalFields(Schemas.LimitFields),
  /** Overrides the language's image. */
  image: Schema.optional(Schemas.Image),
  /**
   * Files to send back after the program ends: globs relative to /workspace ("*.png", "out/**",
   * "report.csv"; `*` and `?` stay within a name, `**` spans directories, a leading dot must be
   * matched explicitly; a directory brings everything below it). See Artifacts.ts.
   */
  collect: Schema.optional(CollectPatterns),
  /** Bounds on what `collect` sends back (defaults: 100 files, 10 MiB each, 32 MiB in all). */
  collectLimits: Schema.optional(CollectLimitsSchema),
  /** Bounds on this run's tool calls, over the executor's. */
  toolLimits: Schema.optional(ToolLimitsSchema),
  /** Record each call's arguments in ToolCallRequested (default false: only their size and sha256). */
  recordToolArguments: Schema.optional(Schemas.Flag)
}).annotations({ identifier: "ExecuteRequest", message: () => "an object { language, code, ... }" })

// Compiled once: planning runs per execution.
const decodeRequest = Schema.decodeUnknownEither(ExecuteRequestSchema)

/** A request's field: `files["a/b"]` for a file, else the path's keys (see Schemas.fieldOf). */
const requestField = (path: ReadonlyArray<PropertyKey>): string =>
  path[0] === "files" && path.length > 1 ? fileField(String(path[1])) : Schemas.fieldOf("", path)

const refuse = (field: string, value: unknown, allowed: string): Effect.Effect<never, InvalidRequest> =>
  Effect.fail(invalidRequest(field, value, allowed))

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
  config: ResolvedSandboxDefaults,
  options: PlanOptions = {}
): Effect.Effect<ExecutionPlan, InvalidRequest> => {
  const decoded = decodeRequest(request)
  if (Either.isLeft(decoded))
    return Effect.fail(Schemas.toInvalidRequest(decoded.left.issue, "", requestField, "request"))
  const r = decoded.right
  const code = encoder.encode(r.code)
  if (code.byteLength > config.maxCodeBytes)
    return refuse("code", `${code.byteLength} bytes`, `at most ${config.maxCodeBytes} bytes (maxCodeBytes)`)
  const files: Array<readonly [string, Uint8Array]> = []
  for (const [path, content] of Object.entries(r.files ?? {})) {
    files.push([path, typeof content === "string" ? encoder.encode(content) : content])
  }
  let env = config.env
  if (r.env !== undefined) {
    env = { ...config.env, ...r.env }
    const tooLarge = Schemas.envTotalIssue(env, Object.keys(config.env).length, ExecuteRequestSchema.ast)
    if (tooLarge !== undefined) return Effect.fail(Schemas.toInvalidRequest(tooLarge, "env"))
  }
  const memoryBytes = r.memory ?? config.memoryBytes
  if (options.checkSandboxSizes !== false) {
    // The runner writes the code to /tmp and the files to /workspace, both tmpfs, whose pages
    // also count against the memory limit (no swap): past either size, setup fails for sure.
    const filesPages = files.reduce((n, [, bytes]) => n + tmpfsBytes(bytes.byteLength), 0)
    const codePages = tmpfsBytes(code.byteLength)
    if (codePages > config.tmpBytes) {
      return refuse(
        "code",
        `${code.byteLength} bytes`,
        `at most the /tmp tmpfs it is written to: ${config.tmpBytes} bytes (tmpSize), counted in 4 KiB pages`
      )
    }
    if (filesPages > config.workspaceBytes) {
      return refuse(
        "files",
        `${files.length} files taking ${filesPages} bytes of tmpfs pages`,
        `at most the /workspace tmpfs: ${config.workspaceBytes} bytes (workspaceSize), each file counted in whole 4 KiB pages`
      )
    }
    if (filesPages + codePages > memoryBytes) {
      return refuse(
        files.length > 0 ? "files" : "code",
        `${files.length > 0 ? `${files.length} files and the code` : "the code"}, taking ${filesPages + codePages} bytes of tmpfs pages`,
        `at most the memory limit those pages count against: ${memoryBytes} bytes (memory)`
      )
    }
  }
  const runtime = config.languages[r.language]
  return Effect.map(
    planTools(
      request.tools ?? config.tools,
      resolveToolLimits(r.toolLimits, config.toolLimits),
      r.recordToolArguments ?? false
    ),
    (tools) => ({
      language: r.language,
      image: r.image ?? runtime.image,
      command: runtime.command,
      code,
      codeSha256: createHash("sha256").update(code).digest("hex"),
      stdin: r.stdin === undefined ? new Uint8Array(0) : encoder.encode(r.stdin),
      files,
      env,
      timeoutMs: r.timeoutMs ?? config.timeoutMs,
      memoryBytes,
      nanoCpus: r.cpus ?? config.nanoCpus,
      pidsLimit: r.pidsLimit ?? config.pidsLimit,
      outputLimitBytes: r.outputLimitBytes ?? config.outputLimitBytes,
      ...(r.collect !== undefined && r.collect.length > 0
        ? {
            collect: {
              patterns: r.collect,
              limits: {
                maxFiles: r.collectLimits?.maxFiles ?? DEFAULT_COLLECT_LIMITS.maxFiles,
                maxFileBytes: r.collectLimits?.maxFileBytes ?? DEFAULT_COLLECT_LIMITS.maxFileBytes,
                maxTotalBytes: r.collectLimits?.maxTotalBytes ?? DEFAULT_COLLECT_LIMITS.maxTotalBytes
              }
            }
          }
        : {}),
      ...(tools === undefined ? {} : { tools })
    })
  )
}
