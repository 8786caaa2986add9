/**
 * Loads the Docker-backend settings of a Hermes agent — the `terminal:` section of
 * `~/.hermes/config.yaml` — and turns them into this SDK's own executor and session options.
 *
 * Sources, lowest to highest precedence: built-in defaults < the YAML file <
 * `TERMINAL_<KEY>` environment variables < explicit `overrides`. A field is taken
 * whole from the highest source that sets it (lists are replaced, not merged).
 *
 * Invalid values fail with a {@link HermesConfigError} naming the key and the file and
 * line (or the environment variable); unknown keys only warn. Values of forwarded
 * environment variables are held as `Redacted` and never appear in messages, warnings,
 * `formatConfig` output or JSON.
 *
 * See docs/hermes-config.md for the table of keys. Here: the public types, the precedence of the
 * layers and the mapping to options; the YAML file with its line numbers is internal/hermesYaml.ts,
 * the key table (key -> field and schema) internal/hermesConfigKeys.ts, the `.env` file
 * internal/dotEnv.ts, the printing internal/hermesPrint.ts.
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { Effect, Either, Redacted } from "effect"
import { type ExecutorOptions, Mounts, type SessionOptions } from "@hermes-sandbox/core"
import { parseDotEnv } from "./internal/dotEnv.js"
import {
  BACKENDS,
  describeUnknownKey,
  envVarFor,
  fieldOf,
  HERMES_CONFIG_FIELDS,
  type HermesBackend,
  type HermesKey,
  interpretEntry,
  isKnownKey,
  KNOWN_KEYS
} from "./internal/hermesConfigKeys.js"
import {
  displayPath,
  expandHome,
  failAt,
  HermesConfigError,
  home,
  type Origin,
  type RawEntry
} from "./internal/hermesOrigin.js"
import { readConfigFile } from "./internal/hermesYaml.js"

export { BACKENDS, HERMES_CONFIG_FIELDS, HermesConfigError, KNOWN_KEYS, type HermesBackend, type HermesKey }
export { formatConfig } from "./internal/hermesPrint.js"

// ---------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------

/** The raw `terminal:` keys, as JS values (what `overrides` takes). */
export interface HermesTerminalConfigInput {
  readonly backend: HermesBackend
  readonly docker_image: string
  /** `host:container[:ro|:rw]`; read-only unless `:rw`. */
  readonly docker_volumes: ReadonlyArray<string>
  /** Names of variables whose values are forwarded from the environment or the `.env` file. */
  readonly docker_forward_env: ReadonlyArray<string>
  readonly docker_env: Readonly<Record<string, string>> | ReadonlyArray<string>
  /** CPUs (may be fractional). Same as `cpu_quota`. */
  readonly container_cpu: number
  /** Memory limit in MB (MiB), at least 6. Same as `memory_limit`. */
  readonly container_memory: number
  /** Disk limit in MB (MiB). */
  readonly container_disk: number
  /** true → scope "persistent", false → "session"; absent → "oneShot". */
  readonly container_persistent: boolean
  readonly lifetime_seconds: number
  /** Seconds. */
  readonly timeout: number
  readonly cwd: string
  /** A boolean, or a network name: "none" = off, anything else = on. Same as `network_enabled`. */
  readonly docker_network: boolean | string
  readonly network_enabled: boolean
  /** Docker-style size ("512m", "1g") or a number of bytes. Same as `container_memory`. */
  readonly memory_limit: string | number
  /** CPUs. Same as `container_cpu`. */
  readonly cpu_quota: number
}

export interface HermesVolume {
  readonly hostPath: string
  readonly containerPath: string
  readonly mode: "ro" | "rw"
}

export interface HermesForwardedEnv {
  readonly name: string
  /** Never printed: `String(value)` and `JSON.stringify` give "<redacted>". */
  readonly value: Redacted.Redacted<string>
  readonly from: "env" | ".env"
}

/**
 * How long a sandbox lives:
 * - "oneShot": a fresh container per execution (this SDK's default; `container_persistent` absent)
 * - "session": one container per agent session, discarded at its end (`container_persistent: false`)
 * - "persistent": the container and its filesystem survive across sessions (`container_persistent: true`)
 */
export type HermesScope = "oneShot" | "session" | "persistent"

/** The normalized settings. */
export interface HermesTerminalConfig {
  readonly backend: HermesBackend
  readonly image?: string
  readonly volumes: ReadonlyArray<HermesVolume>
  readonly forwardEnv: ReadonlyArray<HermesForwardedEnv>
  readonly env: Readonly<Record<string, string>>
  readonly cpus?: number
  readonly memoryBytes?: number
  readonly diskBytes?: number
  readonly scope: HermesScope
  readonly lifetimeSeconds?: number
  readonly timeoutMs?: number
  readonly cwd: string
  readonly network: boolean
}

export type HermesConfigField = keyof HermesTerminalConfig

export interface HermesFieldSource {
  readonly source: "default" | "file" | "env" | "option"
  /** "path:line", "TERMINAL_X" or "overrides.key"; absent for defaults. */
  readonly where?: string
  /** The `terminal:` key that set the field (e.g. "memory_limit" for memoryBytes). */
  readonly key?: HermesKey
}

export interface LoadedHermesConfig {
  readonly values: HermesTerminalConfig
  readonly sources: Readonly<Record<HermesConfigField, HermesFieldSource>>
  readonly warnings: ReadonlyArray<string>
  /** Informational notes (e.g. "no config file at the default path; using defaults"). */
  readonly notes: ReadonlyArray<string>
  /** The absolute config path that was (or would have been) read. */
  readonly path: string
  readonly fileFound: boolean
}

export interface LoadHermesConfigOptions {
  /** Config file; `~` expands. Default: {@link defaultHermesConfigPath}. A missing explicit path is an error. */
  readonly path?: string
  /** Environment for `TERMINAL_*`, `HERMES_CONFIG`/`HERMES_HOME` and forwarded variables. Default: `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** Highest-precedence values, keyed like the YAML. */
  readonly overrides?: Partial<HermesTerminalConfigInput>
  /** `.env` file for `docker_forward_env`. Default: `.env` next to the config file (`~/.hermes/.env`). */
  readonly envFile?: string
  /** Allow mounting the Docker socket or the host root. Default false. */
  readonly allowDangerousMounts?: boolean
}

// ---------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------

/** `$HERMES_CONFIG`, else `$HERMES_HOME/config.yaml`, else `~/.hermes/config.yaml`. */
export const defaultHermesConfigPath = (env: Readonly<Record<string, string | undefined>> = process.env): string => {
  const explicit = env["HERMES_CONFIG"]
  if (explicit !== undefined && explicit !== "") return nodePath.resolve(expandHome(explicit))
  const hermesHome = env["HERMES_HOME"]
  if (hermesHome !== undefined && hermesHome !== "") return nodePath.resolve(expandHome(hermesHome), "config.yaml")
  return nodePath.join(home(), ".hermes", "config.yaml")
}

// ---------------------------------------------------------------------------------------
// Layers 2 and 3: TERMINAL_* variables and overrides (layer 1, the file: internal/hermesYaml.ts)
// ---------------------------------------------------------------------------------------

const envEntries = (
  env: Readonly<Record<string, string | undefined>>,
  warnings: Array<string>
): ReadonlyArray<RawEntry> => {
  const entries: Array<RawEntry> = []
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith("TERMINAL_")) continue
    const value = env[name]
    if (value === undefined || value.trim() === "") continue // empty = unset
    const key = name.slice("TERMINAL_".length).toLowerCase()
    if (!isKnownKey(key) || envVarFor(key) !== name) {
      warnings.push(`environment variable ${name} ${describeUnknownKey(key)}`)
      continue
    }
    entries.push({ value, origin: { source: "env", key, where: name } })
  }
  return entries
}

const overrideEntries = (
  overrides: Partial<HermesTerminalConfigInput>,
  warnings: Array<string>
): ReadonlyArray<RawEntry> => {
  const entries: Array<RawEntry> = []
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue
    if (!isKnownKey(key)) {
      warnings.push(`overrides.${key} ${describeUnknownKey(key)}`)
      continue
    }
    entries.push({ value, origin: { source: "option", key, where: `overrides.${key}` } })
  }
  return entries
}

// ---------------------------------------------------------------------------------------
// Interpreting a layer: each entry through its key's schema (internal/hermesConfigKeys.ts)
// ---------------------------------------------------------------------------------------

interface FieldValue {
  readonly value: unknown
  readonly origin: Origin
}

type Layer = Map<HermesConfigField, FieldValue>

const FIELD_MEANING: Partial<Record<HermesConfigField, string>> = {
  cpus: "the CPU limit",
  memoryBytes: "the memory limit",
  network: "network access"
}

interface Context {
  readonly allowDangerousMounts: boolean
  readonly dockerHostSocket?: string
  readonly warnings: Array<string>
}

const interpretLayer = (entries: ReadonlyArray<RawEntry>, ctx: Context): Layer => {
  const layer: Layer = new Map()
  for (const entry of entries) {
    const field = fieldOf(entry.origin.key)
    const value = interpretEntry(entry, ctx)
    const previous = layer.get(field)
    if (previous !== undefined) {
      const what = FIELD_MEANING[field] ?? field
      const other = previous.origin
      const both =
        entry.origin.source === "file"
          ? `terminal.${other.key} (line ${other.line ?? "?"}) and terminal.${entry.origin.key}`
          : `${other.where} and ${entry.origin.source === "env" ? entry.origin.where : `overrides.${entry.origin.key}`}`
      failAt(entry.origin, `${both} both set ${what}; keep only one of them`)
    }
    layer.set(field, { value, origin: entry.origin })
  }
  return layer
}

// ---------------------------------------------------------------------------------------
// Forwarded environment
// ---------------------------------------------------------------------------------------

const resolveForwardEnv = (
  names: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
  envFile: string,
  envFileExplicit: boolean,
  warnings: Array<string>
): ReadonlyArray<HermesForwardedEnv> => {
  const shown = displayPath(envFile)
  let dotEnv: Map<string, string> | undefined
  const loadDotEnv = (): Map<string, string> => {
    if (dotEnv !== undefined) return dotEnv
    try {
      dotEnv = parseDotEnv(fs.readFileSync(envFile, "utf8"), shown, warnings)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code !== "ENOENT" || envFileExplicit) {
        throw new HermesConfigError({
          key: "docker_forward_env",
          source: "option",
          path: envFile,
          message:
            code === "ENOENT"
              ? `${shown}: .env file not found (envFile option)`
              : `${shown}: cannot read the .env file (${code ?? "error"})`
        })
      }
      dotEnv = new Map()
    }
    return dotEnv
  }
  if (envFileExplicit) loadDotEnv()

  const forwarded: Array<HermesForwardedEnv> = []
  for (const name of names) {
    const fromEnv = env[name]
    if (fromEnv !== undefined && fromEnv !== "") {
      forwarded.push({ name, value: Redacted.make(fromEnv), from: "env" })
      continue
    }
    const fromFile = loadDotEnv().get(name)
    if (fromFile !== undefined && fromFile !== "") {
      forwarded.push({ name, value: Redacted.make(fromFile), from: ".env" })
      continue
    }
    warnings.push(
      `docker_forward_env: ${name} is set neither in the environment nor in ${shown}; it will not be forwarded`
    )
  }
  return forwarded
}

// ---------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------

const DEFAULTS = {
  backend: "docker",
  volumes: [],
  forwardEnv: [],
  env: {},
  scope: "oneShot",
  cwd: "/workspace",
  network: false
} as const satisfies Partial<HermesTerminalConfig>

const sourceOf = (origin: Origin): HermesFieldSource => ({
  source: origin.source,
  where: origin.where,
  key: origin.key
})

const load = (options: LoadHermesConfigOptions): LoadedHermesConfig => {
  const env = options.env ?? process.env
  const warnings: Array<string> = []
  const notes: Array<string> = []
  const explicitPath = options.path !== undefined || (env["HERMES_CONFIG"] !== undefined && env["HERMES_CONFIG"] !== "")
  const path = options.path !== undefined ? nodePath.resolve(expandHome(options.path)) : defaultHermesConfigPath(env)

  const dockerHost = env["DOCKER_HOST"]
  const ctx: Context = {
    allowDangerousMounts: options.allowDangerousMounts === true,
    ...(Mounts.dockerHostSocket(dockerHost) === undefined
      ? {}
      : { dockerHostSocket: Mounts.dockerHostSocket(dockerHost)! }),
    warnings
  }

  const file = readConfigFile(path, explicitPath, warnings, notes)
  const layers = [
    interpretLayer(file.entries, ctx),
    interpretLayer(envEntries(env, warnings), ctx),
    interpretLayer(overrideEntries(options.overrides ?? {}, warnings), ctx)
  ]

  const winner = (field: HermesConfigField): FieldValue | undefined => {
    for (let i = layers.length - 1; i >= 0; i--) {
      const found = layers[i]?.get(field)
      if (found !== undefined) return found
    }
    return undefined
  }

  const values: Record<string, unknown> = { ...DEFAULTS }
  const sources = {} as Record<HermesConfigField, HermesFieldSource>
  for (const field of HERMES_CONFIG_FIELDS) {
    const found = winner(field)
    if (found === undefined) {
      sources[field] = { source: "default" }
    } else {
      values[field] = found.value
      sources[field] = sourceOf(found.origin)
    }
  }

  const envFileExplicit = options.envFile !== undefined
  const envFile = envFileExplicit
    ? nodePath.resolve(expandHome(options.envFile ?? ""))
    : nodePath.join(nodePath.dirname(path), ".env")
  const names = (values["forwardEnv"] ?? []) as ReadonlyArray<string>
  const forwardEnv = resolveForwardEnv(names, env, envFile, envFileExplicit, warnings)
  values["forwardEnv"] = forwardEnv

  const explicitEnv = values["env"] as Readonly<Record<string, string>>
  const clashes = forwardEnv
    .filter((forwarded) => Object.hasOwn(explicitEnv, forwarded.name))
    .map((forwarded) => forwarded.name)
  if (clashes.length > 0) {
    warnings.push(
      `${clashes.join(", ")} ${clashes.length === 1 ? "is" : "are"} both in docker_env and docker_forward_env; the forwarded value wins`
    )
    values["env"] = Object.fromEntries(Object.entries(explicitEnv).filter(([name]) => !clashes.includes(name)))
  }

  const backend = values["backend"] as HermesBackend
  if (backend !== "docker") {
    warnings.push(
      `backend ${JSON.stringify(backend)} is not supported by hermes-sandbox (only "docker"); toExecutorOptions will refuse it`
    )
  }

  return {
    values: values as unknown as HermesTerminalConfig,
    sources,
    warnings,
    notes,
    path,
    fileFound: file.found
  }
}

/** Loads and validates the Hermes terminal configuration: the one implementation, as an Either. */
export const loadHermesConfigEither = (
  options: LoadHermesConfigOptions = {}
): Either.Either<LoadedHermesConfig, HermesConfigError> => {
  try {
    return Either.right(load(options))
  } catch (error) {
    if (error instanceof HermesConfigError) return Either.left(error)
    throw error
  }
}

/** Loads and validates the Hermes terminal configuration. */
export const loadHermesConfig = (
  options: LoadHermesConfigOptions = {}
): Effect.Effect<LoadedHermesConfig, HermesConfigError> => Effect.suspend(() => loadHermesConfigEither(options))

// The facades' spellings (the CLI and docs use them): the Either, thrown or rejected as itself.

/** Synchronous variant: throws {@link HermesConfigError}. */
export const loadHermesConfigSync = (options: LoadHermesConfigOptions = {}): LoadedHermesConfig =>
  Either.getOrThrowWith(loadHermesConfigEither(options), (error) => error)

/** Promise variant: rejects with {@link HermesConfigError}. */
export const loadHermesConfigAsync = (options: LoadHermesConfigOptions = {}): Promise<LoadedHermesConfig> =>
  Promise.resolve().then(() => loadHermesConfigSync(options))

// ---------------------------------------------------------------------------------------
// This SDK's options
// ---------------------------------------------------------------------------------------

/**
 * The configuration as this SDK's own options, field for field: no intermediate shape and no
 * unit left to convert (memory is bytes, CPUs are CPUs; each is validated once more by the
 * executor or the sessions, as every option is).
 */
export interface HermesMappedOptions {
  readonly scope: HermesScope
  /**
   * For createExecutor (one-shot executions). The forwarded variables are NOT in its env: they
   * stay redacted in `session.secretEnv` until a container is made (fromHermesConfig's `executor`
   * has them added, for its facade).
   */
  readonly executor: ExecutorOptions
  /** For createSession / openPersistent; the forwarded variables redacted in `secretEnv`. */
  readonly session: SessionOptions
}

/** Maps the normalized values to executor and session options; refuses a backend other than "docker". */
export const toExecutorOptionsEither = (
  values: HermesTerminalConfig
): Either.Either<HermesMappedOptions, HermesConfigError> => {
  if (values.backend !== "docker") {
    return Either.left(
      new HermesConfigError({
        key: "backend",
        source: "config",
        message: `terminal.backend is ${JSON.stringify(values.backend)}, but hermes-sandbox only runs the "docker" backend; set backend: docker (or TERMINAL_BACKEND=docker)`
      })
    )
  }
  const limits = {
    ...(values.timeoutMs === undefined ? {} : { timeoutMs: values.timeoutMs }),
    ...(values.memoryBytes === undefined ? {} : { memory: values.memoryBytes }),
    ...(values.cpus === undefined ? {} : { cpus: values.cpus }),
    network: values.network
  }
  const image = values.image
  return Either.right({
    scope: values.scope,
    executor: {
      ...limits,
      ...(image === undefined ? {} : { images: { python: image, javascript: image, bash: image } }),
      ...(values.diskBytes === undefined ? {} : { diskSize: values.diskBytes }),
      env: { ...values.env }
    },
    session: {
      ...limits,
      ...(image === undefined ? {} : { image }),
      env: { ...values.env },
      secretEnv: Object.fromEntries(values.forwardEnv.map((forwarded) => [forwarded.name, forwarded.value])),
      mounts: values.volumes.map((volume) => ({ ...volume })),
      workingDir: values.cwd,
      ...(values.lifetimeSeconds === undefined ? {} : { lifetimeSeconds: values.lifetimeSeconds })
    }
  })
}

/** Effect variant of {@link toExecutorOptions}. */
export const toExecutorOptionsEffect = (
  values: HermesTerminalConfig
): Effect.Effect<HermesMappedOptions, HermesConfigError> => Effect.suspend(() => toExecutorOptionsEither(values))

/** Executor and session options. Throws {@link HermesConfigError} when the backend is not "docker". */
export const toExecutorOptions = (values: HermesTerminalConfig): HermesMappedOptions =>
  Either.getOrThrowWith(toExecutorOptionsEither(values), (error) => error)
