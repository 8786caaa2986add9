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

/** A relative path that stays inside /workspace: no absolute paths, no "..", no empty or odd segments. */
export const validateWorkspacePath = (path: string): string | undefined => {
  if (path === "" || path.length > 4096 || path.includes("\0") || path.includes("\\")) return "a non-empty relative path without NUL or backslashes"
  if (path.startsWith("/")) return "a path relative to /workspace (absolute paths are refused)"
  const segments = path.split("/")
  if (segments.some((s) => s === "..")) return "a path without '..' segments (it must stay inside /workspace)"
  if (segments.some((s) => s === "" || s === ".")) return "a normalized path (no empty or '.' segments)"
  return undefined
}

export const planExecution = (
  request: ExecuteRequest,
  config: ResolvedExecutorConfig
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
      for (const [path, content] of entries) {
        const problem = validateWorkspacePath(path)
        if (problem) return yield* Effect.fail(invalidRequest(`files[${JSON.stringify(path)}]`, path, problem))
        const bytes = typeof content === "string" ? encoder.encode(content) : content instanceof Uint8Array ? content : undefined
        if (bytes === undefined) return yield* Effect.fail(invalidRequest(`files[${JSON.stringify(path)}]`, content, "a string or Uint8Array"))
        filesBytes += bytes.byteLength
        files.push([path, bytes])
      }
      if (filesBytes > MAX_FILES_BYTES) return yield* Effect.fail(invalidRequest("files", `${filesBytes} bytes`, `at most ${MAX_FILES_BYTES} bytes in all`))
    }
    const runtime = config.languages[language]
    const env = request.env === undefined ? config.env : { ...config.env, ...(yield* check.env("env", request.env)) }
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
      memoryBytes: request.memory === undefined ? config.memoryBytes : yield* check.memory("memory", request.memory),
      nanoCpus: request.cpus === undefined ? config.nanoCpus : yield* check.cpus("cpus", request.cpus),
      pidsLimit: request.pidsLimit === undefined ? config.pidsLimit : yield* check.positiveInt("pidsLimit", request.pidsLimit, 1 << 22),
      outputLimitBytes: request.outputLimitBytes === undefined
        ? config.outputLimitBytes
        : yield* check.positiveInt("outputLimitBytes", request.outputLimitBytes, 1024 * MiB)
    }
  })
