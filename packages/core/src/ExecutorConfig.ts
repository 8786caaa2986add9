/**
 * Executor options as users write them, and the resolved, validated form the
 * executor runs with. Defaults come from the seeds: 300 s timeout, 512 MiB of
 * memory with no extra swap, 1 CPU, 256 pids, /workspace, uid/gid 1001, no network.
 *
 * Two layers: the sandbox defaults (limits, images, env, network: what every sandbox gets, also
 * a session's) and the executor's own options (concurrency, queue, warm pool). Both are decoded
 * through Schemas, so their refusals read like a request's.
 */
import { Effect, Either, Schema } from "effect"
import type { InvalidRequest } from "./Errors.js"
import { defaultLanguageRuntimes, type Language, type LanguageRuntime, Languages } from "./Language.js"
import { SUPERVISOR, supervisorFor } from "./RunnerProtocol.js"
import type { OwnerLeaseOptions } from "./OwnerLease.js"
import * as Schemas from "./Schemas.js"
import { DEFAULT_TOOL_LIMITS, type ToolLimits, ToolLimitsSchema, type Tools, resolveToolLimits } from "./Tools.js"
import type { WarmPoolOptions } from "./WarmPool.js"

export { DOCKER_MIN_MEMORY_BYTES, MAX_ENV_STRING_BYTES, MAX_ENV_TOTAL_BYTES } from "./Schemas.js"

const { MiB } = Schemas

export type QueueFullBehaviour = "wait" | "fail"

/** Capabilities that may be added back (the Hermes agent's set); everything else stays dropped. */
export const AllowedCapabilities = ["DAC_OVERRIDE", "CHOWN", "FOWNER"] as const

/** What every sandbox gets: limits, images, environment, network. Sessions take these too. */
export interface SandboxDefaults {
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
  /** Identity of this executor (labels, journal metadata). Default: a fresh UUID v7. */
  readonly executorId?: string
  /** Remove orphans of dead owners and close their journal lifecycles when the executor starts. Default true. */
  readonly sweepOnStart?: boolean
  /**
   * Sweep again every this many ms while open; `false`: never. Default: every lease period (30 s)
   * on a journal shared across hosts (PostgreSQL), where a fleet needs a live sweeper to remove the
   * containers of an owner whose whole host died (ARCHITECTURE.md, "Ownership across hosts");
   * off on SQLite and memory journals (one host's: its watchdogs and the startup sweep cover it).
   */
  readonly sweepIntervalMs?: number | false
  /**
   * The ownership lease this owner renews in the journal, so sweepers on other hosts can tell it is
   * alive (OwnerLease.ts); `false`: none. Default: on (30 s, renewed every 10 s, 5 s clock skew) when the journal is shared across hosts (PostgreSQL), off on SQLite and memory journals (one host's: owners there are proven gone by pid); `{}` turns it on with the defaults.
   */
  readonly ownerLease?: false | OwnerLeaseOptions
  /** Host tools every run's code may call (a request's own `tools` replace them; see Tools.ts, docs/tools.md). */
  readonly tools?: Tools
  /** Bounds on each run's tool calls. Defaults: 50 calls, 8 at once, 60 s each, 1 MiB of arguments and of result. */
  readonly toolLimits?: Partial<ToolLimits>
}

/** The executor's options: the sandbox defaults, and how it schedules executions. */
export interface ExecutorOptions extends SandboxDefaults {
  /** Concurrent executions. Default 8. */
  readonly maxConcurrency?: number
  /** Requests waiting for a slot before QueueFull. Default 1000. */
  readonly maxQueue?: number
  /** When the queue is full: wait anyway, or fail with QueueFull. Default "fail". */
  readonly whenQueueFull?: QueueFullBehaviour
  /** Keep sandboxes created and started ahead of demand (opt-in); each still serves exactly one execution. */
  readonly warmPool?: WarmPoolOptions
  /** Wait for container removal before returning each result. Default false: removal runs in the background and close() waits for it. */
  readonly awaitRemoval?: boolean
}

/** The sandbox defaults, validated and resolved. */
export interface ResolvedSandboxDefaults {
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
  readonly workingDir: string
  readonly user: string
  readonly tools: Tools | undefined
  readonly toolLimits: ToolLimits
}

export interface ResolvedExecutorConfig extends ResolvedSandboxDefaults {
  readonly maxConcurrency: number
  readonly maxQueue: number
  readonly whenQueueFull: QueueFullBehaviour
  readonly awaitRemoval: boolean
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

// The decoders behind `check`, compiled once (sessions call them per call).
const timeoutMs = Schemas.decoderFor(Schemas.TimeoutMs)
const memory = Schemas.decoderFor(Schemas.Memory)
const cpus = Schemas.decoderFor(Schemas.Cpus)
const nonNegativeInt = Schemas.decoderFor(Schemas.NonNegativeInt)
const image = Schemas.decoderFor(Schemas.Image)
const envEntries = Schemas.decoderFor(Schemas.EnvEntries)
const sizes = new Map<number, ReturnType<typeof Schemas.decoderFor<number, number | string>>>()
const positiveInts = new Map<number, ReturnType<typeof Schemas.decoderFor<number, number>>>()
const memo = <D>(cache: Map<number, D>, key: number, make: () => D): D => {
  let d = cache.get(key)
  if (d === undefined) cache.set(key, d = make())
  return d
}

/**
 * Field-by-field validators over Schemas, for callers that check options one at a time (sessions,
 * per-call overrides), so they say what a request says. Each returns an Either (an Effect).
 */
export const check = {
  timeoutMs: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> => timeoutMs(field, v),
  memory: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> => memory(field, v),
  size: (field: string, v: unknown, min: number): Effect.Effect<number, InvalidRequest> => memo(sizes, min, () => Schemas.decoderFor(Schemas.sizeOfAtLeast(min)))(field, v),
  cpus: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> => cpus(field, v),
  positiveInt: (field: string, v: unknown, max = Number.MAX_SAFE_INTEGER): Effect.Effect<number, InvalidRequest> =>
    memo(positiveInts, max, () => Schemas.decoderFor(Schemas.PositiveInt(max)))(field, v),
  nonNegativeInt: (field: string, v: unknown): Effect.Effect<number, InvalidRequest> => nonNegativeInt(field, v),
  image: (field: string, v: unknown): Effect.Effect<string, InvalidRequest> => image(field, v),
  /**
   * An environment: names, values without NUL, each "NAME=value" under the kernel's MAX_ARG_STRLEN,
   * and all of `{ ...base, ...v }` (the variables it is merged over) within MAX_ENV_TOTAL_BYTES.
   * Values are never echoed in the error (they may be secrets): only their size.
   */
  env: (field: string, v: unknown, base: Readonly<Record<string, string>> = {}): Effect.Effect<Readonly<Record<string, string>>, InvalidRequest> =>
    Either.flatMap(envEntries(field, v), (env) => {
      const tooLarge = Schemas.envTotalIssue({ ...base, ...env }, Object.keys(base).length, Schemas.EnvEntries.ast)
      return tooLarge === undefined ? Either.right(env) : Either.left(Schemas.toInvalidRequest(tooLarge, field))
    })
}

/** Exactly one of `keys`, said the way the options' messages say it. */
const oneOf = <const K extends ReadonlyArray<string>>(keys: K, text = `one of ${keys.join(", ")}`) => Schema.Literal(...keys).annotations({ message: () => text })

const Images = Schema.Struct({
  python: Schema.optional(Schemas.Image),
  javascript: Schema.optional(Schemas.Image),
  bash: Schema.optional(Schemas.Image)
}).annotations({ message: () => `one of ${Languages.join(", ")}`, parseOptions: { onExcessProperty: "error" } })

const RuntimeName = Schema.String.pipe(
  Schema.pattern(/^[a-zA-Z0-9._-]+$/),
  Schema.annotations({ message: () => `an OCI runtime name registered with the engine, e.g. "runc" or "runsc"`, arbitrary: () => (fc) => fc.constantFrom("runc", "runsc") })
)

/** The sandbox defaults as users write them, each field decoded (sizes to bytes, CPUs to nanoCPUs). */
export const SandboxDefaultsSchema = Schema.Struct({
  images: Schema.optional(Images),
  capAdd: Schema.optional(Schema.Array(oneOf(AllowedCapabilities, `only ${AllowedCapabilities.join(", ")} may be added back`))),
  runtime: Schema.optional(RuntimeName),
  timeoutMs: Schema.optional(Schemas.TimeoutMs),
  memory: Schema.optional(Schemas.Memory),
  cpus: Schema.optional(Schemas.Cpus),
  pidsLimit: Schema.optional(Schemas.PositiveInt(1 << 22)),
  outputLimitBytes: Schema.optional(Schemas.PositiveInt(1024 * MiB)),
  maxCodeBytes: Schema.optional(Schemas.PositiveInt(64 * MiB)),
  tmpSize: Schema.optional(Schemas.sizeOfAtLeast(MiB)),
  workspaceSize: Schema.optional(Schemas.sizeOfAtLeast(MiB)),
  diskSize: Schema.optional(Schemas.sizeOfAtLeast(MiB)),
  network: Schema.optional(Schemas.Flag),
  env: Schema.optional(Schemas.EnvMap),
  executorId: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.annotations({ message: () => "a non-empty string" }))),
  sweepOnStart: Schema.optional(Schemas.Flag),
  sweepIntervalMs: Schema.optional(Schema.Union(Schemas.PositiveInt(), Schema.Literal(false))),
  ownerLease: Schema.optional(Schema.Union(
    Schema.Literal(false),
    Schema.Struct({
      leaseMs: Schema.optional(Schemas.PositiveInt()),
      renewEveryMs: Schema.optional(Schemas.PositiveInt()),
      clockSkewMs: Schema.optional(Schemas.NonNegativeInt)
    })
  ).annotations({ message: () => "false or an object { leaseMs?, renewEveryMs?, clockSkewMs? }" })),
  toolLimits: Schema.optional(ToolLimitsSchema)
}).annotations({ identifier: "SandboxDefaults", message: () => "an object of options" })

const WarmPool = Schema.Struct({
  size: Schemas.PositiveInt(256),
  idleTtlMs: Schema.optional(Schemas.PositiveInt()),
  languages: Schema.optional(Schema.Array(Schemas.LanguageLiteral))
}).annotations({ message: () => "an object { size, languages?, idleTtlMs? }" })

/** The executor's options as users write them: the sandbox defaults and its scheduling. */
export const ExecutorOptionsSchema = Schema.Struct({
  ...SandboxDefaultsSchema.fields,
  warmPool: Schema.optional(WarmPool),
  whenQueueFull: Schema.optional(oneOf(["wait", "fail"], `"wait" or "fail"`)),
  maxConcurrency: Schema.optional(Schemas.PositiveInt(1024)),
  maxQueue: Schema.optional(Schemas.NonNegativeInt),
  awaitRemoval: Schema.optional(Schemas.Flag)
}).annotations({ identifier: "ExecutorOptions", message: () => "an object of options" })

const decodeSandboxDefaults = Schemas.decoderFor(SandboxDefaultsSchema, "options")
const decodeExecutorOptions = Schemas.decoderFor(ExecutorOptionsSchema, "options")

const resolved = (o: typeof SandboxDefaultsSchema.Type, tools: Tools | undefined): ResolvedSandboxDefaults => {
  const supervisor = supervisorFor(o.runtime)
  const languages = { ...defaultLanguageRuntimes }
  for (const language of Languages) {
    languages[language] = {
      image: o.images?.[language] ?? languages[language].image,
      command: languages[language].command.map((a) => a === SUPERVISOR ? supervisor : a)
    }
  }
  return {
    timeoutMs: o.timeoutMs ?? defaults.timeoutMs,
    memoryBytes: o.memory ?? defaults.memoryBytes,
    nanoCpus: o.cpus ?? defaults.cpus * 1e9,
    pidsLimit: o.pidsLimit ?? defaults.pidsLimit,
    outputLimitBytes: o.outputLimitBytes ?? defaults.outputLimitBytes,
    maxCodeBytes: o.maxCodeBytes ?? defaults.maxCodeBytes,
    tmpBytes: o.tmpSize ?? defaults.tmpBytes,
    workspaceBytes: o.workspaceSize ?? defaults.workspaceBytes,
    diskBytes: o.diskSize,
    languages,
    network: o.network ?? false,
    runtime: o.runtime === "runc" ? undefined : o.runtime,
    capAdd: o.capAdd ?? [],
    env: o.env ?? {},
    workingDir: defaults.workingDir,
    user: defaults.user,
    // Checked per request (planTools, cached per tool): a request's own tools replace them.
    tools,
    toolLimits: resolveToolLimits(o.toolLimits, DEFAULT_TOOL_LIMITS)
  }
}

/** The sandbox defaults (of an executor or of a session service), validated; executor-only options are not read. */
export const resolveSandboxDefaults = (options: SandboxDefaults = {}): Effect.Effect<ResolvedSandboxDefaults, InvalidRequest> =>
  Either.map(decodeSandboxDefaults("", options), (o) => resolved(o, options.tools))

export const resolveExecutorConfig = (options: ExecutorOptions = {}): Effect.Effect<ResolvedExecutorConfig, InvalidRequest> =>
  Either.map(decodeExecutorOptions("", options), (o) => ({
    ...resolved(o, options.tools),
    maxConcurrency: o.maxConcurrency ?? defaults.maxConcurrency,
    maxQueue: o.maxQueue ?? defaults.maxQueue,
    whenQueueFull: o.whenQueueFull ?? "fail",
    awaitRemoval: o.awaitRemoval ?? false
  }))
