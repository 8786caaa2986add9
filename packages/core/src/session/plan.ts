/**
 * Planning a session: its options as users write them, validated into a SessionPlan, and what the
 * plan becomes on the engine — the sandbox's spec, its labels and its fingerprint. Nothing here
 * talks to the engine or the journal.
 */
import { Effect, Either, Redacted, Schema } from "effect"
import { type InvalidRequest, invalidRequest } from "../Errors.js"
import type { ResolvedSandboxDefaults } from "../ExecutorConfig.js"
import * as Fingerprint from "../Fingerprint.js"
import { DEADLINE_MARGIN_S, deadlineLabel, Label, ownerLabels, ProjectName } from "../Labels.js"
import { mountDanger } from "../Mounts.js"
import * as Schemas from "../Schemas.js"
import { SUPERVISOR } from "../RunnerProtocol.js"
import { LIMIT } from "../RunnerProtocolTable.js"
import type { EngineHost, SandboxLimits, SandboxSpec } from "../SandboxRuntime.js"
import * as SessionReaper from "../SessionReaper.js"

export type SessionScope = "session" | "persistent"

/** A bind mount: read-only unless mode "rw". */
/** `background` in the session's options. */
export const BackgroundOptionsSchema = Schema.Struct({
  /** Background processes running at once (default 16, at most 64); spawn beyond it is refused. */
  maxProcesses: Schema.optional(Schemas.PositiveInt(64)),
  /** Bytes of each process's output kept from its start (default 256 KiB, at most 16 MiB). */
  headBytes: Schema.optional(Schemas.PositiveInt(16 * Schemas.MiB)),
  /** Bytes of each process's output kept from its end (default 1 MiB, at most 16 MiB). */
  tailBytes: Schema.optional(Schemas.PositiveInt(16 * Schemas.MiB))
}).annotations({ identifier: "BackgroundOptions", message: () => "an object of background process options" })

export interface BackgroundOptions extends Schemas.Input<typeof BackgroundOptionsSchema> {}

export interface BackgroundSettings {
  readonly maxProcesses: number
  readonly headBytes: number
  readonly tailBytes: number
}

export const DEFAULT_BACKGROUND: BackgroundSettings = {
  maxProcesses: 16,
  headBytes: 256 * Schemas.KiB,
  tailBytes: Schemas.MiB
}

export const backgroundSettings = (
  o:
    | {
        readonly maxProcesses?: number | undefined
        readonly headBytes?: number | undefined
        readonly tailBytes?: number | undefined
      }
    | undefined
): BackgroundSettings => ({
  maxProcesses: o?.maxProcesses ?? DEFAULT_BACKGROUND.maxProcesses,
  headBytes: o?.headBytes ?? DEFAULT_BACKGROUND.headBytes,
  tailBytes: o?.tailBytes ?? DEFAULT_BACKGROUND.tailBytes
})

export interface SessionMount extends Schemas.Input<typeof Schemas.Mount> {}

/** A session's options as users write them: {@link SessionOptionsSchema}'s input side, and the secrets. */
export interface SessionOptions extends Schemas.Input<typeof SessionOptionsSchema> {
  /** Forwarded variables (Hermes `docker_forward_env`): like `env`, and their values are never printed. */
  readonly secretEnv?: Readonly<Record<string, Redacted.Redacted<string>>>
}

/** A persistent sandbox's options: a session's, and which profile it serves. */
export interface PersistentOptions extends SessionOptions, Schemas.Input<typeof PersistentFieldsSchema> {}

export interface SessionPlan {
  readonly image: string
  readonly env: Readonly<Record<string, string>>
  readonly secretEnv: Readonly<Record<string, Redacted.Redacted<string>>>
  readonly mounts: SandboxSpec["mounts"]
  readonly workingDir: string
  readonly limits: SandboxLimits
  readonly network: boolean
  readonly timeoutMs: number
  readonly outputLimitBytes: number
  readonly lifetimeMs: number | undefined
  readonly maxLifetimeMs: number
  readonly keepBackgroundProcesses: boolean
  readonly tags: Readonly<Record<string, string>> | undefined
  readonly kernel: KernelSettings
  /** Background processes (session/background.ts): how many at once, how much output each keeps. */
  readonly background: BackgroundSettings
}

/** A session's Python kernel (runCell), resolved: every field set. */
export interface KernelSettings {
  readonly preload: ReadonlyArray<string>
  readonly eager: boolean
  readonly startTimeoutMs: number
  readonly interruptGraceMs: number
  readonly maxBundleBytes: number
  readonly maxDisplays: number
  readonly maxDisplayBytes: number
}

const MiB = 1024 * 1024

/**
 * `SessionOptions.kernel` (docs/design/kernel.md §9): the kernel's start and interrupt, and the
 * per-cell bounds on its records (SECURITY.md, Kernels: the bounds table). Defaults in the schema.
 */
export const KernelOptionsSchema = Schema.Struct({
  /** Modules imported when the kernel starts (dotted names, at most 32): its start pays for them, the first cell does not. */
  preload: Schema.optionalWith(Schemas.PythonModules, { default: () => [] }),
  /** Start the kernel when the session opens, not on the first cell. Default false. */
  eager: Schema.optionalWith(Schemas.Flag, { default: () => false }),
  /** How long the kernel may take to start (preload included). Default 30 s, at most 5 min. */
  startTimeoutMs: Schema.optionalWith(Schemas.PositiveInt(300_000), { default: () => 30_000 }),
  /** After an interrupt's SIGINT, how long the kernel has to end the cell and answer before it is killed. Default 2 s; 100 ms to 30 s. */
  interruptGraceMs: Schema.optionalWith(
    Schema.Number.pipe(
      Schema.filter((n) => Number.isSafeInteger(n) && n >= 100 && n <= LIMIT.kernelGraceMaxMs, {
        message: () => `an integer from 100 to ${LIMIT.kernelGraceMaxMs}`
      })
    ),
    { default: () => LIMIT.kernelGraceMs }
  ),
  /** One display's or result's bytes (its JSON record) at most. Default 4 MiB, at most 64 MiB. */
  maxBundleBytes: Schema.optionalWith(Schemas.PositiveInt(64 * MiB), { default: () => LIMIT.kernelBundleBytes }),
  /** Displays and results per cell at most. Default 100, at most 1,000. */
  maxDisplays: Schema.optionalWith(Schemas.PositiveInt(1000), { default: () => LIMIT.kernelRecords }),
  /** Display and result bytes per cell at most. Default 32 MiB, at most 256 MiB. */
  maxDisplayBytes: Schema.optionalWith(Schemas.PositiveInt(LIMIT.kernelRecordBytesMax), {
    default: () => LIMIT.kernelRecordBytes
  })
}).annotations({ identifier: "KernelOptions", message: () => "an object of kernel options" })

/** The kernel's options as users write them. */
export interface KernelOptions extends Schema.Schema.Encoded<typeof KernelOptionsSchema> {}

/** The sandbox's main process, PID 1: the supervisor holding it open, reaping orphans, until removed. */
export const IDLE_COMMAND: ReadonlyArray<string> = [SUPERVISOR, "--hold"]
/** A session's hard cap on its life, by default and at most. */
export const DEFAULT_MAX_LIFETIME_MS = 24 * 3600_000
const PROFILE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/

/**
 * A session's options as users write them, each field decoded with core's shared schemas (the
 * same messages as an executor's options; an absent one is the service's); what needs more than
 * one field (the environment over the service's, dangerous and duplicate mounts, secrets) is
 * checked after the decode.
 */
export const SessionOptionsSchema = Schema.Struct({
  /** Image of the sandbox. It needs bash; code snippets need the runner. Default: the Sessions' image. */
  image: Schema.optional(Schemas.Image),
  /** Variables for every call (exec environment; not in the container's configuration). */
  env: Schema.optional(Schemas.EnvEntries),
  /** Bind mounts, read-only unless mode "rw". The Docker socket and "/" are refused unless allowDangerousMounts. */
  mounts: Schema.optional(Schema.Array(Schemas.Mount)),
  allowDangerousMounts: Schema.optional(Schemas.Flag),
  /** Working directory of the first call. Default /workspace. */
  workingDir: Schema.optional(
    Schema.String.pipe(Schema.startsWith("/"), Schema.annotations({ message: () => "an absolute path" }))
  ),
  /** Idle seconds after which the sandbox is destroyed (Hermes `lifetime_seconds`). Default: never. */
  lifetimeSeconds: Schema.optional(Schemas.PositiveInt(366 * 86400)),
  /**
   * Hard cap on the sandbox's life, counted from its creation, whatever it does. Session: default
   * and at most 24 h. Persistent: default 7 days, at most 366 days; recorded as its `deadline`
   * label when it is created (reopening with another value does not move it), past which the
   * startup sweep, the reaper and its holder remove it (SessionReaper).
   */
  maxLifetimeMs: Schema.optional(Schemas.PositiveInt(SessionReaper.MAX_PERSISTENT_LIFETIME_MS)),
  // `timeoutMs` is each call's default deadline. Each absent one is the Sessions'.
  ...Schemas.optionalFields(Schemas.LimitFields),
  network: Schema.optional(Schemas.Flag),
  /**
   * Let processes a call leaves running (`server &`, daemons) live on into later calls. Default
   * false: each call starts by ending every process earlier calls left in the sandbox, and ends
   * those it left itself, so no call can read, alter or wedge another (one process-free trust
   * domain per call; files and the saved cwd/env carry over). With true, the Hermes agent's
   * background jobs work, and a leftover can read a later call's environment, memory and output
   * (same uid, no Yama) — but never forge its exit code or its end (docs/sessions.md).
   */
  keepBackgroundProcesses: Schema.optional(Schemas.Flag),
  /** The caller's labels, recorded in SessionOpened and in every call's ExecutionRequested. */
  tags: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** The session's Python kernel (runCell): preload, eager start, interrupt grace, display bounds. */
  kernel: Schema.optional(KernelOptionsSchema),
  /** Background processes (`spawn`): at most `maxProcesses` at once, `headBytes` + `tailBytes` of output kept each. */
  background: Schema.optional(BackgroundOptionsSchema)
}).annotations({ identifier: "SessionOptions", message: () => "an object of session options" })

/** What a persistent sandbox takes beyond a session's options. */
const PersistentFieldsSchema = Schema.Struct({
  /** Which persistent sandbox (Hermes profile). Default "default". */
  profile: Schema.optionalWith(
    Schema.String.pipe(
      Schema.pattern(PROFILE),
      Schema.annotations({ message: () => "1-63 characters [A-Za-z0-9_.-], starting with a letter or digit" })
    ),
    { default: () => "default" }
  ),
  /** When the profile's sandbox was made with another configuration. Default "replace". */
  onConfigChange: Schema.optionalWith(
    Schema.Literal("replace", "refuse").annotations({ message: () => `"replace" or "refuse"` }),
    { default: () => "replace" as const }
  )
})

const decodeSessionOptions = Schemas.decoderFor(SessionOptionsSchema, "options")
const defaultKernel: KernelSettings = Schema.decodeSync(KernelOptionsSchema)({})
const decodePersistentFields = Schemas.decoderFor(PersistentFieldsSchema, "options")
// A session's hard cap is a deadline like a call's (at most 24 h); a persistent sandbox's may be a year.
const decodeSessionLifetime = Schemas.decoderFor(Schema.Struct({ maxLifetimeMs: Schemas.TimeoutMs }))
const decodeCallTimeout = Schemas.decoderFor(SessionOptionsSchema.pick("timeoutMs"))

/** A call's own deadline (`timeoutMs` of its options), decoded as the session's is; absent, `otherwise`. */
export const callTimeoutMs = (
  o: { readonly timeoutMs?: number } | undefined,
  otherwise: number
): Effect.Effect<number, InvalidRequest> =>
  o?.timeoutMs === undefined
    ? Effect.succeed(otherwise)
    : Either.map(decodeCallTimeout("", o), (d) => d.timeoutMs ?? otherwise)

/**
 * Validate session options over the service's defaults; InvalidRequest before any resource exists.
 * Mounts are judged against `engine`, the one the runtime talks to (Mounts.mountDanger).
 */
export const resolvePlan = (
  input: SessionOptions,
  scope: SessionScope,
  config: ResolvedSandboxDefaults,
  defaultImage: string,
  engine: EngineHost
): Effect.Effect<SessionPlan, InvalidRequest> =>
  Effect.gen(function* () {
    const o = yield* decodeSessionOptions("", input)
    const env = { ...config.env, ...(o.env ?? {}) }
    const tooLarge = Schemas.envTotalIssue(env, 0, SessionOptionsSchema.ast)
    if (tooLarge !== undefined) return yield* Effect.fail(Schemas.toInvalidRequest(tooLarge, "env"))
    const secretEnv: Record<string, Redacted.Redacted<string>> = {}
    for (const [name, value] of Object.entries(input.secretEnv ?? {})) {
      if (!Schemas.ENV_NAME.test(name))
        return yield* Effect.fail(
          invalidRequest(`secretEnv.${name}`, name, "a variable name matching [A-Za-z_][A-Za-z0-9_]*")
        )
      if (!Redacted.isRedacted(value))
        return yield* Effect.fail(
          invalidRequest(`secretEnv.${name}`, "(not Redacted)", "a Redacted value (Redacted.make)")
        )
      secretEnv[name] = value
    }
    {
      // The same bounds as env (NUL bytes, string and total sizes), the values never echoed.
      const revealed = Object.fromEntries(Object.entries(secretEnv).map(([k, v]) => [k, Redacted.value(v)]))
      const checked = Schemas.decodeEnvOver("secretEnv", revealed, env)
      if (checked._tag === "Left")
        return yield* Effect.fail(invalidRequest(checked.left.field, "(redacted)", checked.left.allowed))
    }
    const mounts: Array<SandboxSpec["mounts"][number]> = []
    for (const [i, m] of (o.mounts ?? []).entries()) {
      const danger = mountDanger(m.hostPath, engine)
      if (danger !== undefined && o.allowDangerousMounts !== true) {
        return yield* Effect.fail(
          invalidRequest(
            `mounts[${i}].hostPath`,
            m.hostPath,
            `a path that does not hand over the host (${danger}); pass allowDangerousMounts: true to force it`
          )
        )
      }
      if (mounts.some((x) => x.containerPath === m.containerPath))
        return yield* Effect.fail(
          invalidRequest(`mounts[${i}].containerPath`, m.containerPath, "a container path mounted once")
        )
      mounts.push({ hostPath: m.hostPath, containerPath: m.containerPath, mode: m.mode ?? "ro" })
    }
    if (scope === "session" && o.maxLifetimeMs !== undefined)
      yield* decodeSessionLifetime("", { maxLifetimeMs: o.maxLifetimeMs })
    return {
      image: o.image ?? defaultImage,
      env,
      secretEnv,
      mounts,
      workingDir: o.workingDir ?? config.workingDir,
      limits: {
        memoryBytes: o.memory ?? config.memoryBytes,
        nanoCpus: o.cpus ?? config.nanoCpus,
        pidsLimit: o.pidsLimit ?? config.pidsLimit,
        tmpBytes: config.tmpBytes,
        workspaceBytes: config.workspaceBytes,
        diskBytes: config.diskBytes
      },
      network: o.network ?? config.network,
      timeoutMs: o.timeoutMs ?? config.timeoutMs,
      outputLimitBytes: o.outputLimitBytes ?? config.outputLimitBytes,
      lifetimeMs: o.lifetimeSeconds === undefined ? undefined : o.lifetimeSeconds * 1000,
      maxLifetimeMs:
        o.maxLifetimeMs ??
        (scope === "persistent" ? SessionReaper.DEFAULT_PERSISTENT_MAX_LIFETIME_MS : DEFAULT_MAX_LIFETIME_MS),
      keepBackgroundProcesses: o.keepBackgroundProcesses ?? false,
      tags: o.tags,
      kernel: o.kernel ?? defaultKernel,
      background: backgroundSettings(o.background)
    }
  })

/** The persistent options beyond a session's: which profile, and what a changed configuration does. */
export const resolvePersistent = (
  o: PersistentOptions
): Effect.Effect<{ readonly profile: string; readonly policy: "replace" | "refuse" }, InvalidRequest> =>
  Either.map(decodePersistentFields("", o), (p) => ({ profile: p.profile, policy: p.onConfigChange }))

/** What a persistent sandbox is found again by: image, limits, mounts, env NAMES and the sandbox's shape. */
export const fingerprintOf = (plan: SessionPlan, imageId: string, config: ResolvedSandboxDefaults) => {
  const canonical = Fingerprint.canonical({
    image: plan.image,
    imageId,
    limits: plan.limits,
    mounts: plan.mounts,
    envNames: [...Object.keys(plan.env), ...Object.keys(plan.secretEnv)],
    network: plan.network,
    runtime: config.runtime,
    capAdd: config.capAdd,
    user: config.user,
    workingDir: plan.workingDir
  })
  return { canonical, fingerprint: Fingerprint.fingerprintOf(canonical) }
}

/** The session sandbox's spec: the one-shot hardening, the supervisor holding it as PID 1, no env. */
export const sandboxSpec = (
  plan: SessionPlan,
  name: string,
  labels: Readonly<Record<string, string>>,
  config: ResolvedSandboxDefaults,
  supervisor: string
): SandboxSpec => ({
  name,
  image: plan.image,
  command: IDLE_COMMAND.map((a) => (a === SUPERVISOR ? supervisor : a)),
  // Nothing of the session's env: values travel with each call's exec.
  env: {},
  workingDir: plan.workingDir,
  user: config.user,
  labels,
  limits: plan.limits,
  network: plan.network,
  openStdin: false,
  capAdd: config.capAdd,
  runtime: config.runtime,
  mounts: plan.mounts
})

const fingerprintLabels = (plan: SessionPlan, fp: { readonly canonical: string; readonly fingerprint: string }) => ({
  [Label.fingerprint]: fp.fingerprint,
  [Label.fingerprintSpec]: fp.canonical,
  ...(plan.lifetimeMs === undefined ? {} : { [Label.idleSeconds]: String(plan.lifetimeMs / 1000) })
})

/**
 * A session's labels: owned by this process (the startup sweep and the watchdog cover its death)
 * and capped at its maximum lifetime. Wall-clock time on purpose: other processes read the deadline.
 */
export const sessionLabels = (
  plan: SessionPlan,
  sessionId: string,
  executorId: string,
  fp: { readonly canonical: string; readonly fingerprint: string }
): Record<string, string> => ({
  [Label.project]: ProjectName,
  [Label.scope]: "session",
  [Label.session]: sessionId,
  [Label.executor]: executorId,
  ...ownerLabels(),
  // Hard cap (+ margin): a label cannot move, so it is not the idle deadline (see SessionReaper).
  [Label.deadline]: deadlineLabel(plan.maxLifetimeMs, DEADLINE_MARGIN_S),
  ...fingerprintLabels(plan, fp)
})

/** A persistent sandbox's labels: no owner (it outlives its process), its maximum lifetime fixed at create. */
export const persistentLabels = (
  plan: SessionPlan,
  sessionId: string,
  profile: string,
  fp: { readonly canonical: string; readonly fingerprint: string },
  nowMs: number
): Record<string, string> => ({
  [Label.project]: ProjectName,
  [Label.scope]: "persistent",
  [Label.session]: sessionId,
  [Label.profile]: profile,
  // The maximum lifetime, fixed at create (labels cannot move): the sweep and the reaper remove it past it.
  [Label.deadline]: deadlineLabel(plan.maxLifetimeMs, 0, nowMs),
  ...fingerprintLabels(plan, fp)
})
