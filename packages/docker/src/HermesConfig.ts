/**
 * Loads the Docker-backend settings of a Hermes agent — the `terminal:` section of
 * `~/.hermes/config.yaml` — and turns them into hermes-sandbox executor options.
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
 * See docs/hermes-config.md for the table of keys.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { Effect, Either, Redacted, Schema } from "effect"
import { Mounts } from "@hermes-sandbox/core"
import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, type Document, type Pair } from "yaml"
import {
  BACKENDS,
  checkAbsolutePath,
  checkBackend,
  checkBoolean,
  checkDockerNetwork,
  checkEnvMap,
  checkEnvName,
  checkImage,
  checkInteger,
  checkMemoryLimit,
  checkPositiveNumber,
  checkStringList,
  checkVolumeSpec,
  type Check,
  describeUnknownKey,
  describeValue,
  envVarFor,
  type HermesBackend,
  type HermesKey,
  isKnownKey,
  KNOWN_KEYS,
  looksSecret,
  MiB,
  MIN_MEMORY_MB
} from "./internal/hermesConfigKeys.js"

export { BACKENDS, KNOWN_KEYS, type HermesBackend, type HermesKey }

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

export const HERMES_CONFIG_FIELDS: ReadonlyArray<HermesConfigField> = [
  "backend",
  "image",
  "volumes",
  "forwardEnv",
  "env",
  "cpus",
  "memoryBytes",
  "diskBytes",
  "scope",
  "lifetimeSeconds",
  "timeoutMs",
  "cwd",
  "network"
]

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

/** The configuration is invalid (or an explicitly named file cannot be read). */
export class HermesConfigError extends Schema.TaggedError<HermesConfigError>()("HermesConfigError", {
  /** The `terminal:` key at fault, when there is one. */
  key: Schema.optional(Schema.String),
  /** Where the bad value came from; "config" = the normalized values given to `toExecutorOptions`. */
  source: Schema.Literal("file", "env", "option", "config"),
  /** The config (or .env) file, when the problem is in one. */
  path: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Number),
  envVar: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** Options for the executor, as a plain object. */
export interface HermesExecutorOptions {
  readonly image?: string
  readonly timeoutMs?: number
  readonly memoryBytes?: number
  readonly nanoCpus?: number
  readonly network: boolean
  readonly workingDir: string
  readonly env: Record<string, string>
  readonly volumes: Array<HermesVolume>
  readonly diskBytes?: number
  readonly scope: HermesScope
  readonly lifetimeSeconds?: number
  /** Names of forwarded variables (their values are in `secretEnv`). */
  readonly forwardEnvNames: Array<string>
  /** Forwarded values, still redacted: unwrap with `Redacted.value` only when creating the container. */
  readonly secretEnv: Record<string, Redacted.Redacted<string>>
}

// ---------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------

const home = (): string => os.homedir()

const expandHome = (p: string): string => (p === "~" ? home() : p.startsWith("~/") ? nodePath.join(home(), p.slice(2)) : p)

/** `/home/me/.hermes/config.yaml` → `~/.hermes/config.yaml` for messages. */
const displayPath = (p: string): string => {
  const h = home()
  return h !== "/" && (p === h || p.startsWith(`${h}/`)) ? `~${p.slice(h.length)}` : p
}

/** `$HERMES_CONFIG`, else `$HERMES_HOME/config.yaml`, else `~/.hermes/config.yaml`. */
export const defaultHermesConfigPath = (env: Readonly<Record<string, string | undefined>> = process.env): string => {
  const explicit = env["HERMES_CONFIG"]
  if (explicit !== undefined && explicit !== "") return nodePath.resolve(expandHome(explicit))
  const hermesHome = env["HERMES_HOME"]
  if (hermesHome !== undefined && hermesHome !== "") return nodePath.resolve(expandHome(hermesHome), "config.yaml")
  return nodePath.join(home(), ".hermes", "config.yaml")
}

// ---------------------------------------------------------------------------------------
// Raw entries and their origins
// ---------------------------------------------------------------------------------------

interface Origin {
  readonly source: "file" | "env" | "option"
  readonly key: HermesKey
  /** "path:line", "TERMINAL_X" or "overrides.key". */
  readonly where: string
  readonly path?: string
  readonly line?: number
  /** Line of each list item (file lists only). */
  readonly itemLines?: ReadonlyArray<number>
}

interface RawEntry {
  readonly value: unknown
  readonly origin: Origin
}

/** Thrown inside the synchronous core, turned into a failure at its edge. */
const failAt = (origin: Origin, problem: string, item?: number): never => {
  const suffix = item === undefined ? "" : `[${item}]`
  switch (origin.source) {
    case "file": {
      const line = (item === undefined ? undefined : origin.itemLines?.[item]) ?? origin.line
      const fileRef = `${displayPath(origin.path ?? "")}${line === undefined ? "" : `:${line}`}`
      throw new HermesConfigError({
        key: origin.key,
        source: "file",
        ...(origin.path === undefined ? {} : { path: origin.path }),
        ...(line === undefined ? {} : { line }),
        message: `${fileRef}: terminal.${origin.key}${suffix}: ${problem}`
      })
    }
    case "env":
      throw new HermesConfigError({
        key: origin.key,
        source: "env",
        envVar: origin.where,
        message: `environment variable ${origin.where}${suffix}: ${problem}`
      })
    case "option":
      throw new HermesConfigError({ key: origin.key, source: "option", message: `${origin.where}${suffix}: ${problem}` })
  }
}

const must = <A>(check: Check<A>, origin: Origin, item?: number): A =>
  Either.isRight(check) ? check.right : failAt(origin, check.left, item)

/** How a warning names its place. */
const placeOf = (origin: Origin): string => {
  switch (origin.source) {
    case "file":
      return `${origin.where}: terminal.${origin.key}`
    case "env":
      return `environment variable ${origin.where}`
    case "option":
      return origin.where
  }
}

// ---------------------------------------------------------------------------------------
// Layer 1: the YAML file
// ---------------------------------------------------------------------------------------

interface FileLayer {
  readonly entries: ReadonlyArray<RawEntry>
  readonly found: boolean
}

const readConfigFile = (path: string, explicit: boolean, warnings: Array<string>, notes: Array<string>): FileLayer => {
  const shown = displayPath(path)
  let text: string
  try {
    text = fs.readFileSync(path, "utf8")
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" && !explicit) {
      notes.push(`no config file at ${shown}; using defaults`)
      return { entries: [], found: false }
    }
    throw new HermesConfigError({
      source: "file",
      path,
      message:
        code === "ENOENT"
          ? `${shown}: config file not found`
          : `${shown}: cannot read the config file (${code ?? (error instanceof Error ? error.message : String(error))})`
    })
  }

  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true })
  const firstError = doc.errors[0]
  if (firstError !== undefined) {
    const line = firstError.linePos?.[0].line ?? lineCounter.linePos(firstError.pos[0]).line
    const summary = firstError.message.split("\n")[0]?.replace(/ at line \d+, column \d+:?$/, "") ?? firstError.code
    throw new HermesConfigError({ source: "file", path, line, message: `${shown}:${line}: YAML syntax error: ${summary}` })
  }
  for (const warning of doc.warnings) {
    const line = warning.linePos?.[0].line ?? lineCounter.linePos(warning.pos[0]).line
    warnings.push(`${shown}:${line}: YAML: ${warning.message.split("\n")[0] ?? warning.code}`)
  }

  const lineOf = (node: unknown): number | undefined => {
    const range = isNode(node) ? node.range : undefined
    return range === undefined || range === null ? undefined : lineCounter.linePos(range[0]).line
  }
  const toJS = (node: unknown, line: number | undefined, key: string): unknown => {
    if (!isNode(node)) return node ?? null
    try {
      return node.toJS(doc as Document, { maxAliasCount: 100 })
    } catch (error) {
      throw new HermesConfigError({
        source: "file",
        path,
        ...(line === undefined ? {} : { line }),
        message: `${shown}${line === undefined ? "" : `:${line}`}: ${key}: ${error instanceof Error ? error.message : String(error)}`
      })
    }
  }

  const root = doc.contents
  if (root === null || (isScalar(root) && (root.value === null || root.value === undefined))) {
    notes.push(`${shown} is empty; using defaults`)
    return { entries: [], found: true }
  }
  if (!isMap(root)) {
    const line = lineOf(root) ?? 1
    throw new HermesConfigError({ source: "file", path, line, message: `${shown}:${line}: expected a mapping at the top level (with a terminal: section)` })
  }
  const terminalPair = root.items.find((pair) => isScalar(pair.key) && pair.key.value === "terminal")
  if (terminalPair === undefined) {
    notes.push(`${shown} has no terminal: section; using defaults`)
    return { entries: [], found: true }
  }
  const section = terminalPair.value
  const sectionLine = lineOf(terminalPair.key)
  if (section === null || section === undefined || (isScalar(section) && section.value === null)) {
    notes.push(`${shown}: the terminal: section is empty; using defaults`)
    return { entries: [], found: true }
  }
  if (!isMap(section)) {
    const line = lineOf(section) ?? sectionLine
    throw new HermesConfigError({
      key: "terminal",
      source: "file",
      path,
      ...(line === undefined ? {} : { line }),
      message: `${shown}${line === undefined ? "" : `:${line}`}: terminal: expected a mapping of settings, got ${describeValue(toJS(section, line, "terminal"))}`
    })
  }

  const entries: Array<RawEntry> = []
  for (const pair of section.items as ReadonlyArray<Pair<unknown, unknown>>) {
    const keyLine = lineOf(pair.key)
    const at = `${shown}${keyLine === undefined ? "" : `:${keyLine}`}`
    const keyName = isScalar(pair.key) ? pair.key.value : undefined
    if (typeof keyName !== "string") {
      warnings.push(`${at}: terminal: ignoring a key that is not a string (${describeValue(toJS(pair.key, keyLine, "terminal"))})`)
      continue
    }
    if (!isKnownKey(keyName)) {
      warnings.push(`${at}: terminal.${keyName} ${describeUnknownKey(keyName)}`)
      continue
    }
    const itemLines = isSeq(pair.value) ? pair.value.items.map((item) => lineOf(item) ?? keyLine ?? 0) : undefined
    entries.push({
      value: toJS(pair.value, keyLine, `terminal.${keyName}`),
      origin: {
        source: "file",
        key: keyName,
        where: at,
        path,
        ...(keyLine === undefined ? {} : { line: keyLine }),
        ...(itemLines === undefined ? {} : { itemLines })
      }
    })
  }
  return { entries, found: true }
}

// ---------------------------------------------------------------------------------------
// Layers 2 and 3: TERMINAL_* variables and overrides
// ---------------------------------------------------------------------------------------

const envEntries = (env: Readonly<Record<string, string | undefined>>, warnings: Array<string>): ReadonlyArray<RawEntry> => {
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

const overrideEntries = (overrides: Partial<HermesTerminalConfigInput>, warnings: Array<string>): ReadonlyArray<RawEntry> => {
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
// Interpreting a layer
// ---------------------------------------------------------------------------------------

interface FieldValue {
  readonly value: unknown
  readonly origin: Origin
}

type Layer = Map<HermesConfigField, FieldValue>

const FIELD_OF: Record<HermesKey, HermesConfigField> = {
  backend: "backend",
  docker_image: "image",
  docker_volumes: "volumes",
  docker_forward_env: "forwardEnv",
  docker_env: "env",
  container_cpu: "cpus",
  cpu_quota: "cpus",
  container_memory: "memoryBytes",
  memory_limit: "memoryBytes",
  container_disk: "diskBytes",
  container_persistent: "scope",
  lifetime_seconds: "lifetimeSeconds",
  timeout: "timeoutMs",
  cwd: "cwd",
  docker_network: "network",
  network_enabled: "network"
}

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

/** Why mounting this host path would hand the sandbox the host (core's one check); undefined when it is fine. */
const dangerOf = (hostPath: string, ctx: Context): string | undefined => Mounts.mountDanger(hostPath, ctx.dockerHostSocket)

const interpretVolumes = (entry: RawEntry, ctx: Context): ReadonlyArray<HermesVolume> => {
  const specs = must(checkStringList(entry.value), entry.origin)
  const volumes: Array<HermesVolume> = []
  for (const [index, text] of specs.entries()) {
    const spec = must(checkVolumeSpec(text), entry.origin, index)
    const expanded = expandHome(spec.host)
    if (!expanded.startsWith("/")) {
      failAt(
        entry.origin,
        `expected an absolute host path (or one starting with ~/), got ${describeValue(spec.host)}; named volumes are not supported`,
        index
      )
    }
    const hostPath = nodePath.resolve(expanded)
    const danger = dangerOf(hostPath, ctx)
    if (danger !== undefined) {
      if (!ctx.allowDangerousMounts) {
        failAt(entry.origin, `refusing to mount ${hostPath}: ${danger}; pass allowDangerousMounts: true to force it`, index)
      }
      ctx.warnings.push(`${placeOf(entry.origin)}[${index}]: mounting ${hostPath} although ${danger} (allowDangerousMounts is on)`)
    }
    if (volumes.some((volume) => volume.containerPath === spec.containerPath)) {
      failAt(entry.origin, `the container path ${spec.containerPath} is mounted twice`, index)
    }
    volumes.push({ hostPath, containerPath: spec.containerPath, mode: spec.mode })
  }
  return volumes
}

/** The value one key contributes to its field (validated). */
const interpretEntry = (entry: RawEntry, ctx: Context): unknown => {
  const { origin, value } = entry
  switch (origin.key) {
    case "backend":
      return must(checkBackend(value), origin)
    case "docker_image":
      return must(checkImage(value), origin)
    case "docker_volumes":
      return interpretVolumes(entry, ctx)
    case "docker_forward_env": {
      const names = must(checkStringList(value), origin)
      return [...new Set(names.map((name, index) => must(checkEnvName(name), origin, index)))]
    }
    case "docker_env": {
      const env = must(checkEnvMap(value), origin)
      for (const name of Object.keys(env)) {
        if (looksSecret(name)) {
          ctx.warnings.push(
            `${placeOf(origin)}: ${name} looks like a secret; list it in docker_forward_env instead so its value stays out of the configuration`
          )
        }
      }
      return env
    }
    case "container_cpu":
    case "cpu_quota":
      return must(checkPositiveNumber("a number of CPUs")(value), origin)
    case "container_memory":
      return must(checkInteger("an integer number of MB", MIN_MEMORY_MB)(value), origin) * MiB
    case "memory_limit":
      return must(checkMemoryLimit(value), origin)
    case "container_disk":
      return must(checkInteger("an integer number of MB", 1)(value), origin) * MiB
    case "container_persistent":
      return must(checkBoolean(value), origin) ? "persistent" : "session"
    case "lifetime_seconds":
      return must(checkInteger("an integer number of seconds", 1)(value), origin)
    case "timeout":
      return Math.round(must(checkPositiveNumber("a number of seconds")(value), origin) * 1000)
    case "cwd":
      return must(checkAbsolutePath(value), origin)
    case "network_enabled":
      return must(checkBoolean(value), origin)
    case "docker_network": {
      const network = must(checkDockerNetwork(value), origin)
      const name = network.name?.toLowerCase()
      if (name !== undefined && name !== "none" && name !== "bridge" && name !== "default") {
        ctx.warnings.push(
          `${placeOf(origin)}: network ${JSON.stringify(network.name)} only turns network access on; the sandbox always uses its own network${name === "host" ? " (host networking is never used)" : ""}`
        )
      }
      return network.enabled
    }
  }
}

const interpretLayer = (entries: ReadonlyArray<RawEntry>, ctx: Context): Layer => {
  const layer: Layer = new Map()
  for (const entry of entries) {
    const field = FIELD_OF[entry.origin.key]
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

/** Parses a `.env` file: `KEY=VALUE`, `export KEY=VALUE`, `#` comments, optional quotes. */
const parseDotEnv = (text: string, shown: string, warnings: Array<string>): Map<string, string> => {
  const values = new Map<string, string>()
  for (const [index, rawLine] of text.split(/\r?\n/).entries()) {
    const line = rawLine.trim()
    if (line === "" || line.startsWith("#")) continue
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line)
    if (match === null) {
      warnings.push(`${shown}:${index + 1}: ignoring a line that is not KEY=VALUE`)
      continue
    }
    const name = match[1] ?? ""
    const rest = match[2] ?? ""
    let value: string
    const quote = rest[0]
    if (quote === '"' || quote === "'") {
      const end = quote === '"' ? findClosingDoubleQuote(rest) : rest.indexOf("'", 1)
      if (end < 0) {
        warnings.push(`${shown}:${index + 1}: ignoring ${name}: unterminated quote`)
        continue
      }
      const inner = rest.slice(1, end)
      value = quote === '"' ? inner.replace(/\\([nrt"\\])/g, (_, c: string) => ({ n: "\n", r: "\r", t: "\t" })[c] ?? c) : inner
    } else {
      value = rest.replace(/\s+#.*$/, "").trim()
    }
    values.set(name, value)
  }
  return values
}

const findClosingDoubleQuote = (text: string): number => {
  for (let i = 1; i < text.length; i++) {
    if (text[i] === "\\") i++
    else if (text[i] === '"') return i
  }
  return -1
}

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
          message: code === "ENOENT" ? `${shown}: .env file not found (envFile option)` : `${shown}: cannot read the .env file (${code ?? "error"})`
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
    warnings.push(`docker_forward_env: ${name} is set neither in the environment nor in ${shown}; it will not be forwarded`)
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

const sourceOf = (origin: Origin): HermesFieldSource => ({ source: origin.source, where: origin.where, key: origin.key })

const load = (options: LoadHermesConfigOptions): LoadedHermesConfig => {
  const env = options.env ?? process.env
  const warnings: Array<string> = []
  const notes: Array<string> = []
  const explicitPath = options.path !== undefined || (env["HERMES_CONFIG"] !== undefined && env["HERMES_CONFIG"] !== "")
  const path = options.path !== undefined ? nodePath.resolve(expandHome(options.path)) : defaultHermesConfigPath(env)

  const dockerHost = env["DOCKER_HOST"]
  const ctx: Context = {
    allowDangerousMounts: options.allowDangerousMounts === true,
    ...(Mounts.dockerHostSocket(dockerHost) === undefined ? {} : { dockerHostSocket: Mounts.dockerHostSocket(dockerHost)! }),
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
  const envFile = envFileExplicit ? nodePath.resolve(expandHome(options.envFile ?? "")) : nodePath.join(nodePath.dirname(path), ".env")
  const names = (values["forwardEnv"] ?? []) as ReadonlyArray<string>
  const forwardEnv = resolveForwardEnv(names, env, envFile, envFileExplicit, warnings)
  values["forwardEnv"] = forwardEnv

  const explicitEnv = values["env"] as Readonly<Record<string, string>>
  const clashes = forwardEnv.filter((forwarded) => Object.hasOwn(explicitEnv, forwarded.name)).map((forwarded) => forwarded.name)
  if (clashes.length > 0) {
    warnings.push(`${clashes.join(", ")} ${clashes.length === 1 ? "is" : "are"} both in docker_env and docker_forward_env; the forwarded value wins`)
    values["env"] = Object.fromEntries(Object.entries(explicitEnv).filter(([name]) => !clashes.includes(name)))
  }

  const backend = values["backend"] as HermesBackend
  if (backend !== "docker") {
    warnings.push(`backend ${JSON.stringify(backend)} is not supported by hermes-sandbox (only "docker"); toExecutorOptions will refuse it`)
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

const loadEither = (options: LoadHermesConfigOptions): Either.Either<LoadedHermesConfig, HermesConfigError> => {
  try {
    return Either.right(load(options))
  } catch (error) {
    if (error instanceof HermesConfigError) return Either.left(error)
    throw error
  }
}

/** Loads and validates the Hermes terminal configuration. */
export const loadHermesConfig = (options: LoadHermesConfigOptions = {}): Effect.Effect<LoadedHermesConfig, HermesConfigError> =>
  Effect.suspend(() => loadEither(options))

/** Synchronous variant: throws {@link HermesConfigError}. */
export const loadHermesConfigSync = (options: LoadHermesConfigOptions = {}): LoadedHermesConfig => {
  const result = loadEither(options)
  if (Either.isLeft(result)) throw result.left
  return result.right
}

/** Promise variant: rejects with {@link HermesConfigError}. */
export const loadHermesConfigAsync = (options: LoadHermesConfigOptions = {}): Promise<LoadedHermesConfig> =>
  Promise.resolve().then(() => loadHermesConfigSync(options))

// ---------------------------------------------------------------------------------------
// Executor options
// ---------------------------------------------------------------------------------------

const toExecutorOptionsEither = (values: HermesTerminalConfig): Either.Either<HermesExecutorOptions, HermesConfigError> => {
  if (values.backend !== "docker") {
    return Either.left(
      new HermesConfigError({
        key: "backend",
        source: "config",
        message: `terminal.backend is ${JSON.stringify(values.backend)}, but hermes-sandbox only runs the "docker" backend; set backend: docker (or TERMINAL_BACKEND=docker)`
      })
    )
  }
  return Either.right({
    ...(values.image === undefined ? {} : { image: values.image }),
    ...(values.timeoutMs === undefined ? {} : { timeoutMs: values.timeoutMs }),
    ...(values.memoryBytes === undefined ? {} : { memoryBytes: values.memoryBytes }),
    ...(values.cpus === undefined ? {} : { nanoCpus: Math.round(values.cpus * 1e9) }),
    network: values.network,
    workingDir: values.cwd,
    env: { ...values.env },
    volumes: values.volumes.map((volume) => ({ ...volume })),
    ...(values.diskBytes === undefined ? {} : { diskBytes: values.diskBytes }),
    scope: values.scope,
    ...(values.lifetimeSeconds === undefined ? {} : { lifetimeSeconds: values.lifetimeSeconds }),
    forwardEnvNames: values.forwardEnv.map((forwarded) => forwarded.name),
    secretEnv: Object.fromEntries(values.forwardEnv.map((forwarded) => [forwarded.name, forwarded.value]))
  })
}

/** Plain executor options. Throws {@link HermesConfigError} when the backend is not "docker". */
export const toExecutorOptions = (values: HermesTerminalConfig): HermesExecutorOptions => {
  const result = toExecutorOptionsEither(values)
  if (Either.isLeft(result)) throw result.left
  return result.right
}

/** Effect variant of {@link toExecutorOptions}. */
export const toExecutorOptionsEffect = (values: HermesTerminalConfig): Effect.Effect<HermesExecutorOptions, HermesConfigError> =>
  Effect.suspend(() => toExecutorOptionsEither(values))

// ---------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------

const formatBytes = (bytes: number): string => {
  for (const [unit, factor] of [["g", 1024 * MiB], ["m", MiB], ["k", 1024]] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit} (${bytes} bytes)`
  }
  return `${bytes} bytes`
}

const formatValue = (values: HermesTerminalConfig, field: HermesConfigField): string => {
  switch (field) {
    case "backend":
      return values.backend
    case "image":
      return values.image ?? "(executor default)"
    case "volumes":
      return values.volumes.length === 0
        ? "(none)"
        : values.volumes.map((volume) => `${volume.hostPath} -> ${volume.containerPath} (${volume.mode})`).join(", ")
    case "forwardEnv":
      return values.forwardEnv.length === 0
        ? "(none)"
        : values.forwardEnv.map((forwarded) => `${forwarded.name}=<redacted, from ${forwarded.from}>`).join(", ")
    case "env": {
      const entries = Object.entries(values.env)
      return entries.length === 0
        ? "(none)"
        : entries.map(([name, value]) => `${name}=${looksSecret(name) ? "<redacted>" : JSON.stringify(value)}`).join(", ")
    }
    case "cpus":
      return values.cpus === undefined ? "(executor default)" : String(values.cpus)
    case "memoryBytes":
      return values.memoryBytes === undefined ? "(executor default)" : formatBytes(values.memoryBytes)
    case "diskBytes":
      return values.diskBytes === undefined ? "(no limit)" : formatBytes(values.diskBytes)
    case "scope":
      return values.scope
    case "lifetimeSeconds":
      return values.lifetimeSeconds === undefined ? "(no idle reaper)" : `${values.lifetimeSeconds}s`
    case "timeoutMs":
      return values.timeoutMs === undefined ? "(executor default)" : `${values.timeoutMs}ms`
    case "cwd":
      return values.cwd
    case "network":
      return values.network ? "on" : "off"
  }
}

const formatSource = (source: HermesFieldSource): string => {
  switch (source.source) {
    case "default":
      return "default"
    case "file":
      return `${source.where ?? "file"} (terminal.${source.key ?? "?"})`
    case "env":
      return `env ${source.where ?? ""}`
    case "option":
      return `option ${source.where ?? ""}`
  }
}

/** What `hermes-sandbox config show` prints: one line per field with its value and origin; secrets redacted. */
export const formatConfig = (loaded: LoadedHermesConfig): string => {
  const rows = HERMES_CONFIG_FIELDS.map((field) => [field, formatValue(loaded.values, field), formatSource(loaded.sources[field])] as const)
  const nameWidth = Math.max(...rows.map(([field]) => field.length))
  const valueWidth = Math.min(48, Math.max(...rows.map(([, value]) => value.length)))
  const lines = [`# Hermes terminal config: ${displayPath(loaded.path)}${loaded.fileFound ? "" : " (not found; defaults)"}`]
  for (const [field, value, source] of rows) lines.push(`${field.padEnd(nameWidth)}  ${value.padEnd(valueWidth)}  # ${source}`)
  for (const note of loaded.notes) lines.push(`# note: ${note}`)
  for (const warning of loaded.warnings) lines.push(`# warning: ${warning}`)
  return lines.join("\n")
}
