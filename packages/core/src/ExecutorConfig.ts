/**
 * Executor options as users write them, and the resolved, validated form the
 * executor runs with. Defaults come from the seeds: 300 s timeout, 512 MiB of
 * memory with no extra swap, 1 CPU, 256 pids, /workspace, uid/gid 1001, no network.
 *
 * Two layers: the sandbox defaults (limits, images, env, network: what every sandbox gets, also
 * a session's) and the executor's own options (concurrency, queue, warm pool). Each is a schema,
 * its type derived from it (Schemas.Input), its defaults in it; both decode through Schemas, so
 * their refusals read like a request's.
 */
import { type Effect, Either, Schema } from "effect"
import type { InvalidRequest } from "./Errors.js"
import { defaultLanguageRuntimes, type Language, type LanguageRuntime, Languages } from "./Language.js"
import { SUPERVISOR, supervisorFor } from "./RunnerProtocol.js"
import { OwnerLeaseOptionsSchema } from "./OwnerLease.js"
import * as Schemas from "./Schemas.js"
import { DEFAULT_TOOL_LIMITS, type ToolLimits, ToolLimitsSchema, type Tools, resolveToolLimits } from "./Tools.js"
import { WarmPoolOptionsSchema } from "./WarmPool.js"

export { DOCKER_MIN_MEMORY_BYTES, MAX_ENV_STRING_BYTES, MAX_ENV_TOTAL_BYTES } from "./Schemas.js"

const { MiB } = Schemas

/** Capabilities that may be added back (the Hermes agent's set); everything else stays dropped. */
export const AllowedCapabilities = ["DAC_OVERRIDE", "CHOWN", "FOWNER"] as const

/** What an absent option is (the sandbox defaults' and the executor's schemas decode to these). */
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

/** Exactly one of `keys`, said the way the options' messages say it. */
const oneOf = <const K extends ReadonlyArray<string>>(keys: K, text = `one of ${keys.join(", ")}`) =>
  Schema.Literal(...keys).annotations({ message: () => text })

// Mutable, as `Partial<Record<Language, string>>` (its type before it was a schema) is.
const Images = Schema.mutable(
  Schema.Struct({
    python: Schema.optional(Schemas.Image),
    javascript: Schema.optional(Schemas.Image),
    bash: Schema.optional(Schemas.Image)
  })
).annotations({ message: () => `one of ${Languages.join(", ")}`, parseOptions: { onExcessProperty: "error" } })

const RuntimeName = Schema.String.pipe(
  Schema.pattern(/^[a-zA-Z0-9._-]+$/),
  Schema.annotations({
    message: () => `an OCI runtime name registered with the engine, e.g. "runc" or "runsc"`,
    arbitrary: () => (fc) => fc.constantFrom("runc", "runsc")
  })
)

/**
 * What every sandbox gets (limits, images, environment, network), as users write it; sessions take
 * these too. Each field decodes to what the executor runs with (sizes to bytes, CPUs to nanoCPUs),
 * an absent one to its default.
 */
export const SandboxDefaultsSchema = Schema.Struct({
  /** Image per language; defaults to the project's own images. */
  images: Schema.optional(Images),
  /** Capabilities added back after dropping ALL. Default none. */
  capAdd: Schema.optionalWith(
    Schema.Array(oneOf(AllowedCapabilities, `only ${AllowedCapabilities.join(", ")} may be added back`)),
    { default: () => [] }
  ),
  /** OCI runtime, e.g. "runsc" (gVisor). Default: the engine's (runc). */
  runtime: Schema.optional(RuntimeName),
  // Defaults: a 300 s timeout, 512 MiB of memory (no extra swap), 1 CPU, 256 pids, 1 MiB of each output.
  ...Schemas.withDefaults(Schemas.LimitFields, {
    timeoutMs: defaults.timeoutMs,
    memory: defaults.memoryBytes,
    cpus: defaults.cpus * 1e9,
    pidsLimit: defaults.pidsLimit,
    outputLimitBytes: defaults.outputLimitBytes
  }),
  /** Largest accepted program. Default 1 MiB. */
  maxCodeBytes: Schema.optionalWith(Schemas.PositiveInt(64 * MiB), { default: () => defaults.maxCodeBytes }),
  /** Size of the /tmp tmpfs (counts against memory). Default 64m. */
  tmpSize: Schema.optionalWith(Schemas.sizeOfAtLeast(MiB), { default: () => defaults.tmpBytes }),
  /** Size of the /workspace tmpfs (counts against memory). Default 64m. */
  workspaceSize: Schema.optionalWith(Schemas.sizeOfAtLeast(MiB), { default: () => defaults.workspaceBytes }),
  /** Writable-layer quota; needs overlay2 on XFS with pquota. */
  diskSize: Schema.optional(Schemas.sizeOfAtLeast(MiB)),
  /** Network access. Default false: the sandbox has only a loopback interface. */
  network: Schema.optionalWith(Schemas.Flag, { default: () => false }),
  /** Environment for every sandbox. */
  env: Schema.optionalWith(Schemas.EnvMap, { default: () => ({}) }),
  /** Identity of this executor (labels, journal metadata). Default: a fresh UUID v7. */
  executorId: Schema.optional(
    Schema.String.pipe(Schema.minLength(1), Schema.annotations({ message: () => "a non-empty string" }))
  ),
  /** Remove orphans of dead owners and close their journal lifecycles when the executor starts. Default true. */
  sweepOnStart: Schema.optional(Schemas.Flag),
  /**
   * Sweep again every this many ms while open; `false`: never. Default: every lease period (30 s)
   * on a journal shared across hosts (PostgreSQL), where a fleet needs a live sweeper to remove the
   * containers of an owner whose whole host died (ARCHITECTURE.md, "Ownership across hosts");
   * off on SQLite and memory journals (one host's: its watchdogs and the startup sweep cover it).
   */
  sweepIntervalMs: Schema.optional(Schema.Union(Schemas.PositiveInt(), Schema.Literal(false))),
  /**
   * The ownership lease this owner renews in the journal, so sweepers on other hosts can tell it is
   * alive (OwnerLease.ts); `false`: none. Default: on (30 s, renewed every 10 s, 5 s clock skew) when the journal is shared across hosts (PostgreSQL), off on SQLite and memory journals (one host's: owners there are proven gone by pid); `{}` turns it on with the defaults.
   */
  ownerLease: Schema.optional(
    Schema.Union(Schema.Literal(false), OwnerLeaseOptionsSchema).annotations({
      message: () => "false or an object { leaseMs?, renewEveryMs?, clockSkewMs? }"
    })
  ),
  /** Bounds on each run's tool calls. Defaults: 50 calls, 8 at once, 60 s each, 1 MiB of arguments and of result. */
  toolLimits: Schema.optional(ToolLimitsSchema),
  /**
   * An audit trail: record each program's code (its first 64 KiB) and the head of its output (16 KiB
   * of each stream) in the journal (CodeRecorded, OutputRecorded), one-shot runs, session calls and
   * cells alike. Default false: the journal keeps the code's size and sha256 only. What is recorded
   * may hold secrets; anyone who can read the journal reads it (SECURITY.md, docs/observability.md).
   */
  recordCode: Schema.optionalWith(Schemas.Flag, { default: () => false })
}).annotations({ identifier: "SandboxDefaults", message: () => "an object of options" })

/** What every sandbox gets: limits, images, environment, network. Sessions take these too. */
export interface SandboxDefaults extends Schemas.Input<typeof SandboxDefaultsSchema> {
  /** Host tools every run's code may call (a request's own `tools` replace them; see Tools.ts, docs/tools.md). */
  readonly tools?: Tools
}

const QueueFullBehaviourSchema = oneOf(["wait", "fail"], `"wait" or "fail"`)
export type QueueFullBehaviour = typeof QueueFullBehaviourSchema.Type

/** The executor's own options, beyond the sandbox defaults: how it schedules executions. */
export const ExecutorOnlyOptionsSchema = Schema.Struct({
  /** Concurrent executions. Default 8. */
  maxConcurrency: Schema.optionalWith(Schemas.PositiveInt(1024), { default: () => defaults.maxConcurrency }),
  /** Requests waiting for a slot before QueueFull. Default 1000. */
  maxQueue: Schema.optionalWith(Schemas.NonNegativeInt, { default: () => defaults.maxQueue }),
  /** When the queue is full: wait anyway, or fail with QueueFull. Default "fail". */
  whenQueueFull: Schema.optionalWith(QueueFullBehaviourSchema, { default: () => "fail" as const }),
  /** Keep sandboxes created and started ahead of demand (opt-in); each still serves exactly one execution. */
  warmPool: Schema.optional(WarmPoolOptionsSchema),
  /** Wait for container removal before returning each result. Default false: removal runs in the background and close() waits for it. */
  awaitRemoval: Schema.optionalWith(Schemas.Flag, { default: () => false })
})

/** The executor's options as users write them: the sandbox defaults and its scheduling. */
export const ExecutorOptionsSchema = Schema.Struct({
  ...SandboxDefaultsSchema.fields,
  ...ExecutorOnlyOptionsSchema.fields
}).annotations({ identifier: "ExecutorOptions", message: () => "an object of options" })

/** The executor's options: the sandbox defaults, and how it schedules executions. */
export interface ExecutorOptions extends SandboxDefaults, Schemas.Input<typeof ExecutorOnlyOptionsSchema> {}

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
  /** Record each program's code and the head of its output (CodeRecorded, OutputRecorded). */
  readonly recordCode: boolean
}

export interface ResolvedExecutorConfig extends ResolvedSandboxDefaults {
  readonly maxConcurrency: number
  readonly maxQueue: number
  readonly whenQueueFull: QueueFullBehaviour
  readonly awaitRemoval: boolean
}

const decodeSandboxDefaults = Schemas.decoderFor(SandboxDefaultsSchema, "options")
const decodeExecutorOptions = Schemas.decoderFor(ExecutorOptionsSchema, "options")

/** The decoded sandbox defaults (each absent one its default) as the executor and sessions run with them. */
const resolved = (o: typeof SandboxDefaultsSchema.Type, tools: Tools | undefined): ResolvedSandboxDefaults => {
  const supervisor = supervisorFor(o.runtime)
  const languages = { ...defaultLanguageRuntimes }
  for (const language of Languages) {
    languages[language] = {
      image: o.images?.[language] ?? languages[language].image,
      command: languages[language].command.map((a) => (a === SUPERVISOR ? supervisor : a))
    }
  }
  return {
    timeoutMs: o.timeoutMs,
    memoryBytes: o.memory,
    nanoCpus: o.cpus,
    pidsLimit: o.pidsLimit,
    outputLimitBytes: o.outputLimitBytes,
    maxCodeBytes: o.maxCodeBytes,
    tmpBytes: o.tmpSize,
    workspaceBytes: o.workspaceSize,
    diskBytes: o.diskSize,
    languages,
    network: o.network,
    runtime: o.runtime === "runc" ? undefined : o.runtime,
    capAdd: o.capAdd,
    env: o.env,
    workingDir: defaults.workingDir,
    user: defaults.user,
    // Checked per request (planTools, cached per tool): a request's own tools replace them.
    tools,
    toolLimits: resolveToolLimits(o.toolLimits, DEFAULT_TOOL_LIMITS),
    recordCode: o.recordCode
  }
}

/** The sandbox defaults (of an executor or of a session service), validated; executor-only options are not read. */
export const resolveSandboxDefaults = (
  options: SandboxDefaults = {}
): Effect.Effect<ResolvedSandboxDefaults, InvalidRequest> =>
  Either.map(decodeSandboxDefaults("", options), (o) => resolved(o, options.tools))

export const resolveExecutorConfig = (
  options: ExecutorOptions = {}
): Effect.Effect<ResolvedExecutorConfig, InvalidRequest> =>
  Either.map(decodeExecutorOptions("", options), (o) => ({
    ...resolved(o, options.tools),
    maxConcurrency: o.maxConcurrency,
    maxQueue: o.maxQueue,
    whenQueueFull: o.whenQueueFull,
    awaitRemoval: o.awaitRemoval
  }))
