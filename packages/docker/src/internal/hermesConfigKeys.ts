/**
 * The keys of the `terminal:` section of a Hermes `config.yaml`: one table, key -> the normalized
 * field it sets and the schema its value decodes with (core's Schemas where the SDK already has
 * one: sizes and memory, images, variable names, the quoting of values). A value may arrive as a
 * YAML value (number, boolean, list, map), as a `TERMINAL_*` environment string, or as a JS value
 * passed in `overrides`; every schema accepts all three shapes. A refusal reads "expected ...,
 * got ..." and fails at the value's file:line (a list item's own line). Schemas never see
 * forwarded environment values, only configuration.
 */
import * as nodePath from "node:path"
import { describeValue } from "@hermes-sandbox/core/Errors"
import { Mounts, Schemas } from "@hermes-sandbox/core"
import { Either, ParseResult, Schema } from "effect"
import type { HermesConfigField, HermesScope, HermesVolume } from "../HermesConfig.js"
import { expandHome, failAt, placeOf, type RawEntry } from "./hermesOrigin.js"

export const BACKENDS = ["docker", "local", "ssh", "singularity", "modal", "daytona"] as const
export type HermesBackend = (typeof BACKENDS)[number]

// ---------------------------------------------------------------------------------------
// Value schemas
// ---------------------------------------------------------------------------------------

/** The problem a key's schema reports: "expected <what>, got <the value as written>". */
const expected = (what: string) => ({
  message: (issue: ParseResult.ParseIssue) => `expected ${what}, got ${describeValue(issue.actual)}`
})

/** A schema from a small lexical parser (undefined = not one): for words and specs no combinator spells better. */
const parsed = <A>(to: Schema.Schema<A>, parse: (input: unknown) => A | undefined) =>
  Schema.transformOrFail(Schema.Unknown, to, {
    strict: true,
    decode: (input, _, ast) => {
      const value = parse(input)
      return value === undefined ? ParseResult.fail(new ParseResult.Type(ast, input)) : ParseResult.succeed(value)
    },
    encode: ParseResult.succeed
  })

/** A problem in a list's item or a map's entry, as the whole message (its `[i]` and line come from the path). */
/** A comma-separated string's items, trimmed, empty ones dropped (the lists' and the maps' short form). */
const commaSeparated = (text: string): ReadonlyArray<string> =>
  text
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "")

const problemAt = (
  path: PropertyKey | undefined,
  actual: unknown,
  ast: Schema.Schema.Any["ast"],
  message: string
): ParseResult.ParseIssue => {
  const issue = new ParseResult.Type(ast, actual, message)
  return path === undefined ? issue : new ParseResult.Pointer(path, actual, issue)
}

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/

/** A finite number, or a numeric string (TERMINAL_* values are strings): 2, 1.5, "2048", " 1.5 ". */
const Numeric = Schema.Union(
  Schema.Number,
  Schema.Trim.pipe(Schema.compose(Schema.String.pipe(Schema.pattern(NUMBER))), Schema.compose(Schema.NumberFromString))
).pipe(Schema.finite())

const positive = (what: string) => Numeric.pipe(Schema.positive(), Schema.annotations(expected(`${what} > 0`)))
const integerFrom = (what: string, min: number) =>
  Numeric.pipe(Schema.int(), Schema.greaterThanOrEqualTo(min), Schema.annotations(expected(`${what} >= ${min}`)))
/** A number in one unit to another (MB to bytes, seconds to whole milliseconds), refused in the key's words. */
const scaled = <I>(from: Schema.Schema<number, I>, factor: number, what: string) =>
  Schema.transform(from, Schema.Number, {
    strict: true,
    decode: (n) => Math.round(n * factor),
    encode: (n) => n / factor
  }).annotations(expected(what))

const TRUE_WORDS = new Set(["true", "yes", "on", "1"])
const FALSE_WORDS = new Set(["false", "no", "off", "0"])

/** true/false, yes/no, on/off, 1/0 (any case), as PyYAML-based Hermes reads them; undefined otherwise. */
const booleanWord = (value: unknown): boolean | undefined => {
  if (typeof value === "boolean") return value
  if (value === 1 || value === 0) return value === 1
  if (typeof value !== "string") return undefined
  const word = value.trim().toLowerCase()
  return TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : undefined
}

const BooleanWord = parsed(Schema.Boolean, booleanWord).annotations(expected("a boolean (true/false, yes/no, 1/0)"))

const Backend = parsed(Schema.Literal(...BACKENDS), (value) => {
  const word = typeof value === "string" ? value.trim().toLowerCase() : undefined
  return BACKENDS.find((backend) => backend === word)
}).annotations(expected(`one of ${BACKENDS.join(", ")}`))

/** core's Image, surrounding spaces trimmed first (YAML and env values often carry them). */
const Image = Schema.compose(Schema.Trim, Schemas.Image).annotations(
  expected("a non-empty image reference without spaces")
)

/** `/a//b/` → `/a/b`. */
const normalizePath = (path: string): string => path.replace(/\/+/g, "/").replace(/(.)\/$/, "$1")

const AbsolutePath = parsed(Schema.String, (value) =>
  typeof value === "string" && value.startsWith("/") && !value.includes("\0") ? normalizePath(value) : undefined
).annotations(expected("an absolute path"))

/** core's one size grammar and minimum, in the Hermes wording. */
const MemoryLimit = Schemas.Memory.annotations(
  expected(
    `a Docker-style size such as "512m" or "1g", or a number of bytes, of at least ${Schemas.DOCKER_MIN_MEMORY_BYTES / Schemas.MiB}m`
  )
)

/** `docker_network`: a boolean, or a network name ("none" = off, anything else = on). */
const DockerNetwork = parsed(
  Schema.Struct({ enabled: Schema.Boolean, name: Schema.optional(Schema.String) }),
  (value) => {
    const asBoolean = booleanWord(value)
    if (asBoolean !== undefined) return { enabled: asBoolean }
    if (typeof value !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(value.trim())) return undefined
    const name = value.trim()
    return { enabled: name.toLowerCase() !== "none", name }
  }
).annotations(expected(`a boolean or a Docker network name ("none" turns the network off)`))

/**
 * A list of strings: a YAML/JS list of strings, a JSON array string, or a comma-separated string
 * (empty items dropped). Its refusals are whole messages (no outer annotation overrides them).
 */
const StringList = Schema.transformOrFail(Schema.Unknown, Schema.Array(Schema.String), {
  strict: true,
  decode: (value, _, ast) => {
    const fromList = (items: ReadonlyArray<unknown>) => {
      const index = items.findIndex((item) => typeof item !== "string")
      return index === -1
        ? ParseResult.succeed(items.map((item) => (item as string).trim()))
        : ParseResult.fail(
            problemAt(
              undefined,
              value,
              ast,
              `expected a list of strings, but item ${index} is ${describeValue(items[index])}`
            )
          )
    }
    if (Array.isArray(value)) return fromList(value)
    if (typeof value !== "string")
      return ParseResult.fail(
        problemAt(
          undefined,
          value,
          ast,
          `expected a list of strings (or a comma-separated string), got ${describeValue(value)}`
        )
      )
    const text = value.trim()
    if (!text.startsWith("[")) return ParseResult.succeed(commaSeparated(text))
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      return ParseResult.fail(
        problemAt(
          undefined,
          value,
          ast,
          "expected a JSON array of strings or a comma-separated list, but the JSON does not parse"
        )
      )
    }
    return Array.isArray(json)
      ? fromList(json)
      : ParseResult.fail(
          problemAt(undefined, value, ast, `expected a JSON array of strings, got ${describeValue(value)}`)
        )
  },
  encode: ParseResult.succeed
})

/** One `docker_forward_env` entry: a NAME only, never a value (core's EnvName). */
const ForwardedName = Schema.String.pipe(
  Schema.filter((name) =>
    name.includes("=")
      ? "expected an environment variable NAME (values are looked up, never written here), got an assignment"
      : Schema.is(Schemas.EnvName)(name)
        ? undefined
        : `expected a variable name matching ${Schemas.ENV_NAME.source}, got ${describeValue(name)}`
  )
)

const ForwardedNames = Schema.compose(StringList, Schema.Array(ForwardedName)).pipe(
  Schema.transform(Schema.Array(Schema.String), {
    strict: true,
    decode: (names) => [...new Set(names)],
    encode: (names) => names
  })
)

/**
 * `docker_env`: a mapping NAME → value (scalar values are turned into strings), a list of
 * `NAME=value`, a JSON object string or a comma-separated `NAME=value` string. Problems name the
 * variable, never its value.
 */
const EnvMap = Schema.transformOrFail(Schema.Unknown, Schema.Record({ key: Schema.String, value: Schema.String }), {
  strict: true,
  decode: (value, _, ast) => {
    const result: Record<string, string> = {}
    const fail = (message: string) => ParseResult.fail(problemAt(undefined, value, ast, message))
    const put = (name: string, raw: unknown, label: string): string | undefined => {
      if (!Schema.is(Schemas.EnvName)(name))
        return `${label}: expected a variable name matching ${Schemas.ENV_NAME.source}, got ${describeValue(name)}`
      if (
        raw !== null &&
        raw !== undefined &&
        typeof raw !== "string" &&
        typeof raw !== "number" &&
        typeof raw !== "boolean"
      ) {
        return `${label}: the value of ${name} must be a string, number or boolean, got ${describeValue(raw)}`
      }
      result[name] = raw === null || raw === undefined ? "" : String(raw)
      return undefined
    }
    const fromAssignments = (items: ReadonlyArray<unknown>) => {
      for (const [index, item] of items.entries()) {
        if (typeof item !== "string" || !item.includes("="))
          return fail(
            `item ${index}: expected NAME=value, got ${typeof item === "string" ? "text without '='" : describeValue(item)}`
          )
        const at = item.indexOf("=")
        const problem = put(item.slice(0, at).trim(), item.slice(at + 1), `item ${index}`)
        if (problem !== undefined) return fail(problem)
      }
      return ParseResult.succeed(result)
    }
    const fromMapping = (mapping: object) => {
      for (const [name, raw] of Object.entries(mapping)) {
        const problem = put(name, raw, name)
        if (problem !== undefined) return fail(problem)
      }
      return ParseResult.succeed(result)
    }
    if (Array.isArray(value)) return fromAssignments(value)
    if (typeof value === "string") {
      const text = value.trim()
      if (!text.startsWith("{")) return fromAssignments(commaSeparated(text))
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        return fail("expected a JSON object or comma-separated NAME=value pairs, but the JSON does not parse")
      }
      return json !== null && typeof json === "object" && !Array.isArray(json)
        ? fromMapping(json)
        : fail(`expected a JSON object, got ${describeValue(value)}`)
    }
    if (value !== null && typeof value === "object") return fromMapping(value)
    return fail(`expected a mapping of NAME: value (or a list of NAME=value), got ${describeValue(value)}`)
  },
  encode: ParseResult.succeed
})

/** `host:container[:ro|:rw]`, read-only unless `:rw`; `~/` expands; the host must be absolute (no named volumes). */
const VolumeSpec = Schema.transformOrFail(
  Schema.String,
  Schema.Struct({ hostPath: Schema.String, containerPath: Schema.String, mode: Schema.Literal("ro", "rw") }),
  {
    strict: true,
    decode: (spec, _, ast) => {
      const fail = (message: string) => ParseResult.fail(problemAt(undefined, spec, ast, message))
      const parts = spec.split(":")
      if (parts.length < 2 || parts.length > 3)
        return fail(`expected host:container[:ro|:rw], got ${describeValue(spec)}`)
      const [host = "", container = "", written = "ro"] = parts
      if (host === "") return fail(`expected host:container[:ro|:rw] with a host path, got ${describeValue(spec)}`)
      const mode = written === "ro" || written === "rw" ? written : undefined
      if (mode === undefined)
        return fail(`expected the mode to be ro or rw, got ${describeValue(written)} in ${describeValue(spec)}`)
      if (!container.startsWith("/"))
        return fail(`expected an absolute container path, got ${describeValue(container)} in ${describeValue(spec)}`)
      const containerPath = normalizePath(container)
      if (containerPath === "/")
        return fail(`refusing to mount over the container's root directory in ${describeValue(spec)}`)
      const expanded = expandHome(host)
      if (!expanded.startsWith("/"))
        return fail(
          `expected an absolute host path (or one starting with ~/), got ${describeValue(host)}; named volumes are not supported`
        )
      return ParseResult.succeed<HermesVolume>({ hostPath: nodePath.resolve(expanded), containerPath, mode })
    },
    encode: (volume) => ParseResult.succeed(`${volume.hostPath}:${volume.containerPath}:${volume.mode}`)
  }
)

const Volumes = Schema.compose(StringList, Schema.Array(VolumeSpec)).pipe(
  Schema.filter((volumes, _, ast) => {
    const index = volumes.findIndex(
      (volume, i) => volumes.findIndex((other) => other.containerPath === volume.containerPath) < i
    )
    return index === -1
      ? undefined
      : problemAt(index, volumes[index], ast, `the container path ${volumes[index]!.containerPath} is mounted twice`)
  })
)

// ---------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------

/** What a key's value may still need once decoded: the host's filesystem, and warnings. */
export interface KeyContext {
  readonly allowDangerousMounts: boolean
  readonly dockerHostSocket?: string
  /** A warning at the key's place (a list item's with `item`). */
  readonly warn: (text: string, item?: number) => void
  /** Refuses the value at the key's place (a list item's line with `item`). */
  readonly fail: (problem: string, item?: number) => never
}

interface KeySpec<A> {
  /** The normalized field the key sets. */
  readonly field: HermesConfigField
  readonly schema: Schema.Schema.AnyNoContext
  /** The schema's decoder, compiled once. */
  readonly decode: (input: unknown) => Either.Either<A, ParseResult.ParseError>
  /** The field's value from the decoded one, where that needs more than the schema (the host, warnings). */
  readonly finish?: (value: A, at: KeyContext) => unknown
}

const key = <A, I>(
  field: HermesConfigField,
  schema: Schema.Schema<A, I>,
  finish?: (value: A, at: KeyContext) => unknown
): KeySpec<A> => ({
  field,
  schema,
  decode: Schema.decodeUnknownEither(schema),
  ...(finish === undefined ? {} : { finish })
})

/** Refuses (or, allowed, warns about) mounts that would hand the sandbox the host: core's one check. */
const refuseDangerousMounts = (volumes: ReadonlyArray<HermesVolume>, at: KeyContext): ReadonlyArray<HermesVolume> => {
  for (const [index, { hostPath }] of volumes.entries()) {
    const danger = Mounts.mountDanger(hostPath, at.dockerHostSocket)
    if (danger === undefined) continue
    if (!at.allowDangerousMounts)
      at.fail(`refusing to mount ${hostPath}: ${danger}; pass allowDangerousMounts: true to force it`, index)
    at.warn(`mounting ${hostPath} although ${danger} (allowDangerousMounts is on)`, index)
  }
  return volumes
}

/** Names that look like they hold a secret: their `docker_env` values are redacted when printed. */
export const looksSecret = (name: string): boolean =>
  /TOKEN|SECRET|PASSW|PRIVATE|CREDENTIAL|API_?KEY|ACCESS_?KEY|AUTH/i.test(name)

/** The keys this loader understands, in the order they are documented and printed. */
const KEYS = {
  backend: key("backend", Backend),
  docker_image: key("image", Image),
  docker_volumes: key("volumes", Volumes, refuseDangerousMounts),
  docker_forward_env: key("forwardEnv", ForwardedNames),
  docker_env: key("env", EnvMap, (env, at) => {
    for (const name of Object.keys(env)) {
      if (looksSecret(name))
        at.warn(
          `${name} looks like a secret; list it in docker_forward_env instead so its value stays out of the configuration`
        )
    }
    return env
  }),
  container_cpu: key("cpus", positive("a number of CPUs")),
  cpu_quota: key("cpus", positive("a number of CPUs")),
  container_memory: key(
    "memoryBytes",
    scaled(
      integerFrom("an integer number of MB", Schemas.DOCKER_MIN_MEMORY_BYTES / Schemas.MiB),
      Schemas.MiB,
      `an integer number of MB >= ${Schemas.DOCKER_MIN_MEMORY_BYTES / Schemas.MiB}`
    )
  ),
  memory_limit: key("memoryBytes", MemoryLimit),
  container_disk: key(
    "diskBytes",
    scaled(integerFrom("an integer number of MB", 1), Schemas.MiB, "an integer number of MB >= 1")
  ),
  container_persistent: key("scope", BooleanWord, (persistent): HermesScope => (persistent ? "persistent" : "session")),
  lifetime_seconds: key("lifetimeSeconds", integerFrom("an integer number of seconds", 1)),
  timeout: key("timeoutMs", scaled(positive("a number of seconds"), 1000, "a number of seconds > 0")),
  cwd: key("cwd", AbsolutePath),
  docker_network: key("network", DockerNetwork, (network, at) => {
    const name = network.name?.toLowerCase()
    if (name !== undefined && name !== "none" && name !== "bridge" && name !== "default") {
      at.warn(
        `network ${JSON.stringify(network.name)} only turns network access on; the sandbox always uses its own network${name === "host" ? " (host networking is never used)" : ""}`
      )
    }
    return network.enabled
  }),
  network_enabled: key("network", BooleanWord)
}

export type HermesKey = keyof typeof KEYS
export const KNOWN_KEYS = Object.keys(KEYS) as ReadonlyArray<HermesKey>

export const isKnownKey = (key: string): key is HermesKey => Object.hasOwn(KEYS, key)

/** The field a key sets. */
export const fieldOf = (key: HermesKey): HermesConfigField => KEYS[key].field

/** The normalized fields, in the order they are printed. */
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

/** The value one entry contributes to its field, validated; a bad one throws HermesConfigError at its origin. */
export const interpretEntry = (
  entry: RawEntry,
  context: {
    readonly allowDangerousMounts: boolean
    readonly dockerHostSocket?: string
    readonly warnings: Array<string>
  }
): unknown => {
  const { origin } = entry
  const fail = (problem: string, item?: number): never => failAt(origin, problem, item)
  // Each spec's finish takes what its own decode gives: one value flows from one to the other.
  const spec = KEYS[origin.key] as KeySpec<unknown>
  const decoded = spec.decode(entry.value)
  if (Either.isLeft(decoded)) {
    const problem = Schemas.firstProblem(decoded.left.issue)
    const item = problem.path.find((k): k is number => typeof k === "number")
    return fail(problem.message ?? `expected a valid value, got ${describeValue(entry.value)}`, item)
  }
  if (spec.finish === undefined) return decoded.right
  return spec.finish(decoded.right, {
    allowDangerousMounts: context.allowDangerousMounts,
    ...(context.dockerHostSocket === undefined ? {} : { dockerHostSocket: context.dockerHostSocket }),
    warn: (text, item) => context.warnings.push(`${placeOf(origin)}${item === undefined ? "" : `[${item}]`}: ${text}`),
    fail
  })
}

// ---------------------------------------------------------------------------------------
// Unknown keys
// ---------------------------------------------------------------------------------------

/** `docker_image` → `TERMINAL_DOCKER_IMAGE`. */
export const envVarFor = (key: HermesKey): string => `TERMINAL_${key.toUpperCase()}`

/** Keys that belong to other Hermes backends: recognised so the warning can say so. */
const OTHER_BACKEND_PREFIXES = ["ssh_", "modal_", "singularity_", "daytona_", "local_"] as const

/** A one-line explanation for an unknown key (used in warnings). */
export const describeUnknownKey = (key: string): string => {
  const lower = key.toLowerCase()
  for (const prefix of OTHER_BACKEND_PREFIXES) {
    if (lower.startsWith(prefix)) return `is a setting of the ${prefix.slice(0, -1)} backend; ignored by hermes-sandbox`
  }
  const suggestion = closestKey(lower)
  return suggestion === undefined
    ? "is not a known setting; ignored"
    : `is not a known setting (did you mean ${suggestion}?); ignored`
}

const closestKey = (key: string): HermesKey | undefined => {
  let best: HermesKey | undefined
  let bestDistance = Infinity
  for (const known of KNOWN_KEYS) {
    const distance = levenshtein(key, known)
    if (distance < bestDistance) {
      best = known
      bestDistance = distance
    }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 4)) ? best : undefined
}

const levenshtein = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost))
    }
    previous = current
  }
  return previous[b.length] ?? 0
}
