/**
 * Executor options as users write them, and the resolved, validated form the
 * executor runs with. Defaults come from the seeds: 300 s timeout, 512 MiB of
 * memory with no extra swap, 1 CPU, 256 pids, /workspace, uid/gid 1001, no network.
 */
import { Effect } from "effect"
import { type InvalidRequest, invalidRequest } from "./Errors.js"
import { defaultLanguageRuntimes, type Language, type LanguageRuntime, Languages } from "./Language.js"
import { MiB, parseSize } from "./Size.js"
import { SUPERVISOR, supervisorFor } from "./RunnerProtocol.js"
import type { WarmPoolOptions } from "./WarmPool.js"

/** Docker refuses memory limits below 6 MiB. */
export const DOCKER_MIN_MEMORY_BYTES = 6 * MiB

/**
 * One "NAME=value" string of a sandbox's environment, in bytes (UTF-8, without its NUL): the kernel's
 * MAX_ARG_STRLEN (32 pages, 131072 bytes with the NUL) minus 1. A longer one makes the sandbox's
 * first execve fail with E2BIG ("argument list too long").
 */
export const MAX_ENV_STRING_BYTES = 131_071

/**
 * A sandbox's environment in all: "NAME=value" strings with their NULs. The kernel takes at most a
 * quarter of the stack limit (2 MiB under the usual 8 MiB) for argv and environment together; the
 * SDK allows half of that, leaving room for the command, the image's own variables and, in a
 * session, a call's variables over the session's.
 */
export const MAX_ENV_TOTAL_BYTES = 1 * MiB

const envStringBytes = (name: string, value: string): number => Buffer.byteLength(name, "utf8") + 1 + Buffer.byteLength(value, "utf8")

export type QueueFullBehaviour = "wait" | "fail"

/** Capabilities that may be added back (the Hermes agent's set); everything else stays dropped. */
export const AllowedCapabilities = ["DAC_OVERRIDE", "CHOWN", "FOWNER"] as const

export interface ExecutorOptions {
  /** Default per-request timeout. Default 300 000 (300 s). */
  readonly timeoutMs?: number
  /** Memory limit, bytes or "512m". Swap is set equal to it (no extra swap). Default 512m. */
  readonly memory?: number | string
  /** CPUs (fractional allowed). Default 1. */
  readonly cpus?: number
  /** Max processes/threads in the sandbox. Default 256. */
  readonly pidsLimit?: number
  /** Cap on each of stdout and stderr kept in the result. Default 1 MiB. */
  readonly outputLimitBytes?: number
  /** Largest accepted program. Default 1 MiB. */
  readonly maxCodeBytes?: number
  /** Size of the /tmp tmpfs (counts against memory). Default 64m. */
  readonly tmpSize?: number | string
  /** Size of the /workspace tmpfs (counts against memory). Default 64m. */
  readonly workspaceSize?: number | string
  /** Writable-layer quota; needs overlay2 on XFS with pquota. */
  readonly diskSize?: number | string
  /** Image per language; defaults to the project's own images. */
  readonly images?: Partial<Record<Language, string>>
  /** Network access. Default false: the sandbox has only a loopback interface. */
  readonly network?: boolean
  /** OCI runtime, e.g. "runsc" (gVisor). Default: the engine's (runc). */
  readonly runtime?: string
  /** Capabilities added back after dropping ALL. Default none. */
  readonly capAdd?: ReadonlyArray<(typeof AllowedCapabilities)[number]>
  /** Environment for every sandbox. */
  readonly env?: Readonly<Record<string, string>>
  /** Concurrent executions. Default 8. */
  readonly maxConcurrency?: number
  /** Requests waiting for a slot before QueueFull. Default 1000. */
  readonly maxQueue?: number
  /** When the queue is full: wait anyway, or fail with QueueFull. Default "fail". */
  readonly whenQueueFull?: QueueFullBehaviour
  /** Identity of this executor (labels, journal metadata). Default: a fresh UUID v7. */
  readonly executorId?: string
  /** Keep sandboxes created and started ahead of demand (opt-in); each still serves exactly one execution. */
  readonly warmPool?: WarmPoolOptions
  /** Remove orphans of dead owners and close their journal lifecycles when the executor starts. Default true. */
  readonly sweepOnStart?: boolean
  /** Wait for container removal before returning each result. Default false: removal runs in the background and close() waits for it. */
  readonly awaitRemoval?: boolean
}

export interface ResolvedExecutorConfig {
  readonly timeoutMs: number
  readonly memoryBytes: number
  readonly nanoCpus: number
  readonly pidsLimit: number
  readonly outputLimitBytes: number
  readonly maxCodeBytes: number
  readonly tmpBytes: number
  readonly workspaceBytes: number
  readonly diskBytes: number | undefined
  readonly languages: Record<Language, LanguageRuntime>
  readonly network: boolean
  readonly runtime: string | undefined
  readonly capAdd: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly maxConcurrency: number
  readonly maxQueue: number
  readonly whenQueueFull: QueueFullBehaviour
  readonly awaitRemoval: boolean
  readonly workingDir: string
  readonly user: string
}

export const defaults = {
  timeoutMs: 300_000,
  memoryBytes: 512 * MiB,
  cpus: 1,
  pidsLimit: 256,
  outputLimitBytes: 1 * MiB,
  maxCodeBytes: 1 * MiB,
  tmpBytes: 64 * MiB,
  workspaceBytes: 64 * MiB,
  maxConcurrency: 8,
  maxQueue: 1000,
  workingDir: "/workspace",
  user: "1001:1001"
} as const

/** Validators shared by executor options and per-request overrides, so both say the same thing. */
export const check = {
  timeoutMs: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> =>
    typeof v === "number" && Number.isFinite(v) && v > 0 && v <= 24 * 3600_000
      ? Effect.succeed(Math.ceil(v))
      : Effect.fail(invalidRequest(field, v, "a number of milliseconds > 0 and <= 86400000 (24 h)")),
  memory: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> => {
    const bytes = typeof v === "number" || typeof v === "string" ? parseSize(v) : undefined
    return bytes !== undefined && bytes >= DOCKER_MIN_MEMORY_BYTES
      ? Effect.succeed(bytes)
      : Effect.fail(invalidRequest(field, v, `bytes or a size like "512m", at least 6m (Docker's minimum)`))
  },
  size: (field: string, v: unknown, min: number): Effect.Effect<number, InvalidRequest> => {
    const bytes = typeof v === "number" || typeof v === "string" ? parseSize(v) : undefined
    return bytes !== undefined && bytes >= min
      ? Effect.succeed(bytes)
      : Effect.fail(invalidRequest(field, v, `bytes or a size like "64m", at least ${min} bytes`))
  },
  cpus: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> =>
    typeof v === "number" && Number.isFinite(v) && v >= 0.01 && v <= 1024
      ? Effect.succeed(Math.round(v * 1e9))
      : Effect.fail(invalidRequest(field, v, "a number of CPUs from 0.01 to 1024")),
  positiveInt: (field: string, v: unknown, max = Number.MAX_SAFE_INTEGER): Effect.Effect<number, InvalidRequest> =>
    typeof v === "number" && Number.isInteger(v) && v > 0 && v <= max
      ? Effect.succeed(v)
      : Effect.fail(invalidRequest(field, v, `an integer from 1 to ${max}`)),
  nonNegativeInt: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> =>
    typeof v === "number" && Number.isInteger(v) && v >= 0
      ? Effect.succeed(v)
      : Effect.fail(invalidRequest(field, v, "an integer >= 0")),
  image: (field: string, v: unknown): Effect.Effect<string, InvalidRequest> =>
    typeof v === "string" && v.trim() !== "" && !/\s/.test(v)
      ? Effect.succeed(v)
      : Effect.fail(invalidRequest(field, v, "a non-empty image reference without spaces, e.g. hermes-sandbox/python:latest")),
  /**
   * An environment: names, values without NUL, each "NAME=value" under the kernel's MAX_ARG_STRLEN,
   * and all of `{ ...base, ...v }` (the variables it is merged over) within MAX_ENV_TOTAL_BYTES.
   * Values are never echoed in the error (they may be secrets): only their size.
   */
  env: (field: string, v: unknown, base: Readonly<Record<string, string>> = {}): Effect.Effect<Readonly<Record<string, string>>, InvalidRequest> => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      return Effect.fail(invalidRequest(field, v, "an object of NAME: value strings"))
    }
    for (const [k, value] of Object.entries(v)) {
      const name = k.length > 64 ? `${k.slice(0, 64)}...` : k
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) return Effect.fail(invalidRequest(`${field}.${name}`, k, "a variable name matching [A-Za-z_][A-Za-z0-9_]*"))
      if (typeof value !== "string" || value.includes("\0")) {
        return Effect.fail(invalidRequest(`${field}.${name}`, typeof value === "string" ? "(contains NUL)" : value, "a string without NUL bytes"))
      }
      const bytes = envStringBytes(k, value)
      if (bytes > MAX_ENV_STRING_BYTES) {
        return Effect.fail(
          invalidRequest(`${field}.${name}`, `"NAME=value" of ${bytes} bytes`, `"NAME=value" of at most ${MAX_ENV_STRING_BYTES} bytes in UTF-8 (the kernel's MAX_ARG_STRLEN, 131072 with its NUL)`)
        )
      }
    }
    const merged = { ...base, ...v } as Readonly<Record<string, string>>
    let total = 0
    for (const [k, value] of Object.entries(merged)) total += envStringBytes(k, value) + 1
    if (total > MAX_ENV_TOTAL_BYTES) {
      return Effect.fail(
        invalidRequest(
          field,
          `${total} bytes in ${Object.keys(merged).length} variables${Object.keys(base).length > 0 ? " (counting the variables it is merged over)" : ""}`,
          `at most ${MAX_ENV_TOTAL_BYTES} bytes (1 MiB) of "NAME=value" strings in all, each counted with its NUL`
        )
      )
    }
    return Effect.succeed(v as Readonly<Record<string, string>>)
  }
}

const optional = <A>(v: unknown, f: (v: unknown) => Effect.Effect<A, InvalidRequest>, fallback: A) =>
  v === undefined ? Effect.succeed(fallback) : f(v)

export const resolveExecutorConfig = (options: ExecutorOptions = {}): Effect.Effect<ResolvedExecutorConfig, InvalidRequest> =>
  Effect.gen(function*() {
    const images = options.images ?? {}
    for (const key of Object.keys(images)) {
      if (!(Languages as ReadonlyArray<string>).includes(key)) {
        return yield* Effect.fail(invalidRequest(`images.${key}`, key, `one of ${Languages.join(", ")}`))
      }
    }
    const languages = { ...defaultLanguageRuntimes }
    const supervisor = supervisorFor(options.runtime)
    for (const language of Languages) {
      languages[language] = { ...languages[language], command: languages[language].command.map((a) => a === SUPERVISOR ? supervisor : a) }
      const image = images[language]
      if (image !== undefined) {
        languages[language] = { ...languages[language], image: yield* check.image(`images.${language}`, image) }
      }
    }
    const capAdd = options.capAdd ?? []
    for (const cap of capAdd) {
      if (!(AllowedCapabilities as ReadonlyArray<string>).includes(cap)) {
        return yield* Effect.fail(invalidRequest("capAdd", cap, `only ${AllowedCapabilities.join(", ")} may be added back`))
      }
    }
    if (options.warmPool !== undefined) {
      yield* check.positiveInt("warmPool.size", options.warmPool.size, 256)
      if (options.warmPool.idleTtlMs !== undefined) yield* check.positiveInt("warmPool.idleTtlMs", options.warmPool.idleTtlMs)
      for (const language of options.warmPool.languages ?? []) {
        if (!(Languages as ReadonlyArray<string>).includes(language)) {
          return yield* Effect.fail(invalidRequest("warmPool.languages", language, `one of ${Languages.join(", ")}`))
        }
      }
    }
    if (options.whenQueueFull !== undefined && options.whenQueueFull !== "wait" && options.whenQueueFull !== "fail") {
      return yield* Effect.fail(invalidRequest("whenQueueFull", options.whenQueueFull, `"wait" or "fail"`))
    }
    if (options.runtime !== undefined && !/^[a-zA-Z0-9._-]+$/.test(options.runtime)) {
      return yield* Effect.fail(invalidRequest("runtime", options.runtime, `an OCI runtime name registered with the engine, e.g. "runc" or "runsc"`))
    }
    return {
      timeoutMs: yield* optional(options.timeoutMs, (v) => check.timeoutMs("timeoutMs", v), defaults.timeoutMs),
      memoryBytes: yield* optional(options.memory, (v) => check.memory("memory", v), defaults.memoryBytes),
      nanoCpus: yield* optional(options.cpus, (v) => check.cpus("cpus", v), defaults.cpus * 1e9),
      pidsLimit: yield* optional(options.pidsLimit, (v) => check.positiveInt("pidsLimit", v, 1 << 22), defaults.pidsLimit),
      outputLimitBytes: yield* optional(options.outputLimitBytes, (v) => check.positiveInt("outputLimitBytes", v, 1024 * MiB), defaults.outputLimitBytes),
      maxCodeBytes: yield* optional(options.maxCodeBytes, (v) => check.positiveInt("maxCodeBytes", v, 64 * MiB), defaults.maxCodeBytes),
      tmpBytes: yield* optional(options.tmpSize, (v) => check.size("tmpSize", v, MiB), defaults.tmpBytes),
      workspaceBytes: yield* optional(options.workspaceSize, (v) => check.size("workspaceSize", v, MiB), defaults.workspaceBytes),
      diskBytes: options.diskSize === undefined ? undefined : yield* check.size("diskSize", options.diskSize, MiB),
      languages,
      network: options.network ?? false,
      runtime: options.runtime === "runc" ? undefined : options.runtime,
      capAdd,
      env: yield* optional(options.env, (v) => check.env("env", v), {}),
      maxConcurrency: yield* optional(options.maxConcurrency, (v) => check.positiveInt("maxConcurrency", v, 1024), defaults.maxConcurrency),
      maxQueue: yield* optional(options.maxQueue, (v) => check.nonNegativeInt("maxQueue", v), defaults.maxQueue),
      whenQueueFull: options.whenQueueFull ?? "fail",
      awaitRemoval: options.awaitRemoval ?? false,
      workingDir: defaults.workingDir,
      user: defaults.user
    }
  })
