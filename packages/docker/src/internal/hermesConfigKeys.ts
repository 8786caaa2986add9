/**
 * The keys of the `terminal:` section of a Hermes `config.yaml`, and pure value checks
 * for each of them. A value may arrive as a YAML value (number, boolean, list, map),
 * as a `TERMINAL_*` environment string, or as a JS value passed in `overrides`; every
 * check accepts all three shapes. Checks never echo secrets: they only ever see
 * configuration values, never forwarded environment values.
 */
import { Either } from "effect"

export const BACKENDS = ["docker", "local", "ssh", "singularity", "modal", "daytona"] as const
export type HermesBackend = (typeof BACKENDS)[number]

/** The keys this loader understands, in the order they are documented and printed. */
export const KNOWN_KEYS = [
  "backend",
  "docker_image",
  "docker_volumes",
  "docker_forward_env",
  "docker_env",
  "container_cpu",
  "cpu_quota",
  "container_memory",
  "memory_limit",
  "container_disk",
  "container_persistent",
  "lifetime_seconds",
  "timeout",
  "cwd",
  "docker_network",
  "network_enabled"
] as const
export type HermesKey = (typeof KNOWN_KEYS)[number]

export const isKnownKey = (key: string): key is HermesKey => (KNOWN_KEYS as ReadonlyArray<string>).includes(key)

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
  return suggestion === undefined ? "is not a known setting; ignored" : `is not a known setting (did you mean ${suggestion}?); ignored`
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

// ---------------------------------------------------------------------------------------
// Value checks. Left = the problem, phrased "expected ..., got ...".
// ---------------------------------------------------------------------------------------

export type Check<A> = Either.Either<A, string>

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export const MiB = 1024 * 1024
/** Docker refuses a memory limit below 6 MiB. */
export const MIN_MEMORY_MB = 6

/** `got ...` text for a value; long strings and structures are summarised. */
export const describeValue = (value: unknown): string => {
  if (typeof value === "string") return value.length > 60 ? `a string of ${value.length} characters` : JSON.stringify(value)
  if (value === null || value === undefined) return "nothing"
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  if (Array.isArray(value)) return `a list of ${value.length} item${value.length === 1 ? "" : "s"}`
  if (typeof value === "object") return "a mapping"
  return typeof value
}

const bad = <A>(expected: string, value: unknown): Check<A> => Either.left(`expected ${expected}, got ${describeValue(value)}`)

const TRUE_WORDS = new Set(["true", "yes", "on", "1"])
const FALSE_WORDS = new Set(["false", "no", "off", "0"])

/** Parses true/false/yes/no/on/off/1/0 (any case); undefined when it is not a boolean word. */
export const booleanWord = (value: unknown): boolean | undefined => {
  if (typeof value === "boolean") return value
  if (value === 1 || value === 0) return value === 1
  if (typeof value !== "string") return undefined
  const word = value.trim().toLowerCase()
  if (TRUE_WORDS.has(word)) return true
  if (FALSE_WORDS.has(word)) return false
  return undefined
}

export const checkBoolean = (value: unknown): Check<boolean> => {
  const parsed = booleanWord(value)
  return parsed === undefined ? bad("a boolean (true/false, yes/no, 1/0)", value) : Either.right(parsed)
}

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/

/** A finite number from a number or a numeric string; undefined otherwise. */
export const numberValue = (value: unknown): number | undefined => {
  if (typeof value === "number") return Number.isFinite(value) ? value : undefined
  if (typeof value === "string" && NUMBER.test(value.trim())) {
    const parsed = Number(value.trim())
    return Number.isFinite(parsed) ? parsed : undefined
  }
  return undefined
}

export const checkPositiveNumber = (what: string) => (value: unknown): Check<number> => {
  const parsed = numberValue(value)
  return parsed === undefined || parsed <= 0 ? bad(`${what} > 0`, value) : Either.right(parsed)
}

export const checkInteger = (what: string, min: number) => (value: unknown): Check<number> => {
  const parsed = numberValue(value)
  return parsed === undefined || !Number.isSafeInteger(parsed) || parsed < min ? bad(`${what} >= ${min}`, value) : Either.right(parsed)
}

export const checkBackend = (value: unknown): Check<HermesBackend> => {
  const word = typeof value === "string" ? value.trim().toLowerCase() : undefined
  const found = BACKENDS.find((backend) => backend === word)
  return found === undefined ? bad(`one of ${BACKENDS.join(", ")}`, value) : Either.right(found)
}

export const checkImage = (value: unknown): Check<string> =>
  typeof value === "string" && value.trim() !== "" && !/\s/.test(value.trim())
    ? Either.right(value.trim())
    : bad("a non-empty image reference without spaces", value)

export const checkAbsolutePath = (value: unknown): Check<string> => {
  if (typeof value !== "string" || !value.startsWith("/") || value.includes("\0")) return bad("an absolute path", value)
  const normalized = value.replace(/\/+/g, "/").replace(/(.)\/$/, "$1")
  return Either.right(normalized)
}

const SIZE = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i
const SIZE_FACTORS: Record<string, number> = { "": 1, k: 1024, m: MiB, g: 1024 * MiB, t: 1024 * 1024 * MiB }

/** Docker-style size ("512m", "1g", "256M", "1073741824") in bytes; undefined when it does not parse. */
export const sizeValue = (value: unknown): number | undefined => {
  if (typeof value === "number") return Number.isSafeInteger(value) && value >= 0 ? value : undefined
  if (typeof value !== "string") return undefined
  const match = SIZE.exec(value.trim())
  if (match === null) return undefined
  const factor = SIZE_FACTORS[(match[2] ?? "").toLowerCase()]
  if (factor === undefined) return undefined
  const bytes = Math.floor(Number(match[1]) * factor)
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

export const checkMemoryLimit = (value: unknown): Check<number> => {
  const bytes = sizeValue(value)
  return bytes === undefined || bytes < MIN_MEMORY_MB * MiB
    ? bad(`a Docker-style size such as "512m" or "1g", or a number of bytes, of at least ${MIN_MEMORY_MB}m`, value)
    : Either.right(bytes)
}

/** `docker_network`: a boolean, or a network name ("none" = off, anything else = on). */
export const checkDockerNetwork = (value: unknown): Check<{ readonly enabled: boolean; readonly name?: string }> => {
  const asBoolean = booleanWord(value)
  if (asBoolean !== undefined) return Either.right({ enabled: asBoolean })
  if (typeof value === "string" && /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(value.trim())) {
    const name = value.trim()
    return Either.right({ enabled: name.toLowerCase() !== "none", name })
  }
  return bad(`a boolean or a Docker network name ("none" turns the network off)`, value)
}

/**
 * A list of strings: a YAML/JS list of strings, a JSON array string, or a
 * comma-separated string (empty items dropped).
 */
export const checkStringList = (value: unknown): Check<ReadonlyArray<string>> => {
  if (Array.isArray(value)) {
    const items: Array<string> = []
    for (const [index, item] of value.entries()) {
      if (typeof item !== "string") return Either.left(`expected a list of strings, but item ${index} is ${describeValue(item)}`)
      items.push(item.trim())
    }
    return Either.right(items)
  }
  if (typeof value === "string") {
    const text = value.trim()
    if (text.startsWith("[")) {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        return Either.left("expected a JSON array of strings or a comma-separated list, but the JSON does not parse")
      }
      return Array.isArray(parsed) ? checkStringList(parsed) : bad("a JSON array of strings", value)
    }
    return Either.right(text.split(",").map((item) => item.trim()).filter((item) => item !== ""))
  }
  return bad("a list of strings (or a comma-separated string)", value)
}

/** One `docker_forward_env` entry: a NAME only, never a value. */
export const checkEnvName = (name: string): Check<string> => {
  if (name.includes("=")) return Either.left("expected an environment variable NAME (values are looked up, never written here), got an assignment")
  return ENV_NAME.test(name) ? Either.right(name) : bad(`a variable name matching ${ENV_NAME.source}`, name)
}

/**
 * `docker_env`: a mapping NAME → value (scalar values are turned into strings), a list
 * of `NAME=value`, a JSON object string or a comma-separated `NAME=value` string.
 * Problems name the variable, never its value.
 */
export const checkEnvMap = (value: unknown): Check<Readonly<Record<string, string>>> => {
  const result: Record<string, string> = {}
  const put = (name: string, raw: unknown, label: string): string | undefined => {
    if (!ENV_NAME.test(name)) return `${label}: expected a variable name matching ${ENV_NAME.source}, got ${describeValue(name)}`
    if (raw === null || raw === undefined) {
      result[name] = ""
      return undefined
    }
    if (typeof raw !== "string" && typeof raw !== "number" && typeof raw !== "boolean") {
      return `${label}: the value of ${name} must be a string, number or boolean, got ${describeValue(raw)}`
    }
    result[name] = String(raw)
    return undefined
  }
  const fromAssignments = (items: ReadonlyArray<unknown>): Check<Readonly<Record<string, string>>> => {
    for (const [index, item] of items.entries()) {
      if (typeof item !== "string" || !item.includes("=")) {
        return Either.left(`item ${index}: expected NAME=value, got ${typeof item === "string" ? "text without '='" : describeValue(item)}`)
      }
      const at = item.indexOf("=")
      const problem = put(item.slice(0, at).trim(), item.slice(at + 1), `item ${index}`)
      if (problem !== undefined) return Either.left(problem)
    }
    return Either.right(result)
  }
  if (Array.isArray(value)) return fromAssignments(value)
  if (typeof value === "string") {
    const text = value.trim()
    if (text.startsWith("{")) {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        return Either.left("expected a JSON object or comma-separated NAME=value pairs, but the JSON does not parse")
      }
      return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? checkEnvMap(parsed) : bad("a JSON object", value)
    }
    return fromAssignments(text.split(",").map((item) => item.trim()).filter((item) => item !== ""))
  }
  if (value !== null && typeof value === "object") {
    for (const [name, raw] of Object.entries(value)) {
      const problem = put(name, raw, name)
      if (problem !== undefined) return Either.left(problem)
    }
    return Either.right(result)
  }
  return bad("a mapping of NAME: value (or a list of NAME=value)", value)
}

/** Names that look like they hold a secret: their `docker_env` values are redacted when printed. */
export const looksSecret = (name: string): boolean => /TOKEN|SECRET|PASSW|PRIVATE|CREDENTIAL|API_?KEY|ACCESS_?KEY|AUTH/i.test(name)

export interface VolumeSpec {
  readonly host: string
  readonly containerPath: string
  readonly mode: "ro" | "rw"
}

/** `host:container[:ro|:rw]`, read-only unless `:rw`. The host part is checked by the caller (it needs the filesystem). */
export const checkVolumeSpec = (value: string): Check<VolumeSpec> => {
  const parts = value.split(":")
  if (parts.length < 2 || parts.length > 3) return bad("host:container[:ro|:rw]", value)
  const [host = "", container = "", mode = "ro"] = parts
  if (host === "") return bad("host:container[:ro|:rw] with a host path", value)
  if (mode !== "ro" && mode !== "rw") return Either.left(`expected the mode to be ro or rw, got ${describeValue(mode)} in ${describeValue(value)}`)
  if (!container.startsWith("/")) return Either.left(`expected an absolute container path, got ${describeValue(container)} in ${describeValue(value)}`)
  const containerPath = container.replace(/\/+/g, "/").replace(/(.)\/$/, "$1")
  if (containerPath === "/") return Either.left(`refusing to mount over the container's root directory in ${describeValue(value)}`)
  return Either.right({ host, containerPath, mode })
}
