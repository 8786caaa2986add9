/**
 * The one set of value schemas for everything users write: requests, executor and session
 * options, the Hermes configuration's keys. Each schema decodes what a user writes ("512m",
 * 0.5 CPUs, 2.5 s) into what the engine takes (bytes, nanoCPUs, whole milliseconds), and carries
 * in its `message` annotation what is allowed, so a refusal reads the same on every path:
 * {@link toInvalidRequest} turns the first issue of a decode into an InvalidRequest (the issue's
 * path is the field, the annotation the `allowed`).
 *
 * The decode side is refined before any transformation, so `Arbitrary.make(Schema.encodedBoundSchema(x))`
 * generates valid input as users write it (core's `testing` entry point does).
 */
import { type Arbitrary, Either, ParseResult, Schema, SchemaAST } from "effect"
import { describeValue, type InvalidRequest, invalidRequest } from "./Errors.js"
import { type Language, LanguageAliases, Languages } from "./Language.js"

export { describeValue }

// ---------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------

export const KiB = 1024
export const MiB = 1024 * KiB
export const GiB = 1024 * MiB
export const TiB = 1024 * GiB

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

/** A path's bytes (UTF-8), as the kernel counts them: PATH_MAX (4096) with the NUL. */
export const MAX_PATH_BYTES = 4095
/** One segment (file or directory name), as the kernel counts it: NAME_MAX. */
export const MAX_PATH_SEGMENT_BYTES = 255

/** The longest timeout (and session lifetime) accepted: 24 h. */
export const MAX_TIMEOUT_MS = 24 * 3600_000

/** An environment variable's name, as shells and execve's callers accept it. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

// ---------------------------------------------------------------------------------------
// Sizes: one grammar, one formatter
// ---------------------------------------------------------------------------------------

/**
 * Docker's sizes and the Hermes agent's, together: a number, then k, m, g or t (powers of 1024),
 * optionally followed by b or ib; any case; "512m", "64MiB", "1g", "1.5G", "256 kb", "1073741824".
 */
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$/i
const SIZE_FACTORS: Record<string, number> = { "": 1, k: KiB, m: MiB, g: GiB, t: TiB }

/**
 * Bytes for a size given as a number of bytes or a size string; undefined when it does not parse
 * or is not a whole number of bytes (the engine and the journal take integers only, so
 * 536870912.5 and "1.1k" are refused rather than rounded; "1.5g" is 1610612736). Multiplying by a
 * power of two is exact in floating point, so the integer test is exact too.
 */
export const parseSize = (input: unknown): number | undefined => {
  if (typeof input === "number") return Number.isSafeInteger(input) && input >= 0 ? input : undefined
  if (typeof input !== "string") return undefined
  const match = SIZE.exec(input)
  if (match === null) return undefined
  const bytes = Number(match[1]) * (SIZE_FACTORS[(match[2] ?? "").toLowerCase()] ?? Number.NaN)
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

/** The shortest size string for a number of bytes ("1g", "512m", "64k", "1234"); parseSize reads it back. */
export const formatSize = (bytes: number): string => {
  for (const [unit, factor] of [
    ["g", GiB],
    ["m", MiB],
    ["k", KiB]
  ] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`
  }
  return `${bytes}`
}

// ---------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------

/** What `allowed` says for a schema (its `message` annotation). */
const allowed = (text: string) => ({ message: () => text })

/** A count of bytes: what the engine and the journal take (int64 fields): a safe integer >= 0. */
export const Bytes = Schema.Number.pipe(
  Schema.int(),
  Schema.nonNegative(),
  Schema.annotations({ identifier: "Bytes", ...allowed("a whole number of bytes >= 0") })
)

/** fast-check, as arbitrary annotations receive it. */
type FastCheck = Parameters<Arbitrary.LazyArbitrary<unknown>>[0]

const sizeStrings = (fc: FastCheck, min: number, factor: number, units: ReadonlyArray<string>, max: number) =>
  fc
    .tuple(fc.integer({ min: Math.ceil(min / factor), max }), fc.constantFrom(...units))
    .map(([n, unit]) => `${n}${unit}`)

/**
 * A size as users write it, of at least `min` bytes, decoded to bytes. One parse per decode (this
 * runs per execution); the input side's arbitrary makes only valid sizes.
 */
export const sizeAtLeast = (min: number, text: string): Schema.Schema<number, number | string> =>
  Schema.transformOrFail(
    Schema.Union(Schema.Number, Schema.String).annotations({
      arbitrary: () => (fc) => {
        // Fractions that are whole bytes, where they reach min.
        const fractions = ["1.5g", "0.5G", "2.25m", "1.5 GiB"].filter((s) => parseSize(s)! >= min)
        return fc.oneof(
          fc.integer({ min, max: Math.max(min, 64 * GiB) }),
          sizeStrings(fc, min, KiB, ["k", "K", "kb", "KiB", " k"], 1 << 26),
          sizeStrings(fc, min, MiB, ["m", "M", "mb", "MiB", " MB"], 65_536),
          sizeStrings(fc, min, GiB, ["g", "G", "gb", "GiB"], 64),
          ...(fractions.length > 0 ? [fc.constantFrom(...fractions)] : [])
        )
      }
    }),
    // The decoded side is Bytes by construction: not re-checked per decode.
    Schema.Number,
    {
      strict: true,
      decode: (input, _, ast) => {
        const bytes = parseSize(input)
        return bytes !== undefined && bytes >= min
          ? ParseResult.succeed(bytes)
          : ParseResult.fail(new ParseResult.Type(ast, input))
      },
      encode: ParseResult.succeed
    }
  ).annotations({ identifier: "Size", ...allowed(text) })

/** Any size: bytes or "512m"-style, decoded to bytes. */
export const Size = sizeAtLeast(0, `bytes or a size like "64m"`)

/** A memory limit: a size of at least 6 MiB (Docker's minimum). Swap is set equal to it elsewhere. */
export const Memory = sizeAtLeast(
  DOCKER_MIN_MEMORY_BYTES,
  `bytes or a size like "512m", at least 6m (Docker's minimum)`
).annotations({ identifier: "Memory" })

/** A tmpfs or disk size of at least `min` bytes. */
export const sizeOfAtLeast = (min: number) => sizeAtLeast(min, `bytes or a size like "64m", at least ${min} bytes`)

/** CPUs (fractions allowed), decoded to the engine's nanoCPUs. */
export const Cpus = Schema.transform(
  // One filter, not three: this runs per execution. Its bounds also bound its arbitrary.
  Schema.Number.pipe(Schema.filter((n) => n >= 0.01 && n <= 1024, { jsonSchema: { minimum: 0.01, maximum: 1024 } })),
  // nanoCPUs, whole by construction: not re-checked per decode.
  Schema.Number,
  { strict: true, decode: (cpus) => Math.round(cpus * 1e9), encode: (nanoCpus) => nanoCpus / 1e9 }
).annotations({ identifier: "Cpus", ...allowed("a number of CPUs from 0.01 to 1024") })

/** A deadline in milliseconds (> 0, at most 24 h), rounded up to a whole millisecond. */
export const TimeoutMs = Schema.transform(
  Schema.Number.pipe(
    Schema.filter((n) => n > 0 && n <= MAX_TIMEOUT_MS, { jsonSchema: { exclusiveMinimum: 0, maximum: MAX_TIMEOUT_MS } })
  ),
  // Whole milliseconds from 1 to 24 h by construction: not re-checked per decode.
  Schema.Number,
  { strict: true, decode: (ms) => Math.ceil(ms), encode: (ms) => ms }
).annotations({ identifier: "TimeoutMs", ...allowed("a number of milliseconds > 0 and <= 86400000 (24 h)") })

const positiveInts = new Map<number, Schema.Schema<number>>()
/** An integer from 1 to `max` (one schema per bound, made once). */
export const PositiveInt = (max: number = Number.MAX_SAFE_INTEGER): Schema.Schema<number> => {
  let schema = positiveInts.get(max)
  if (schema === undefined) {
    schema = Schema.Number.pipe(
      Schema.filter((n) => Number.isSafeInteger(n) && n >= 1 && n <= max, {
        jsonSchema: { type: "integer", minimum: 1, maximum: max }
      }),
      Schema.annotations(allowed(`an integer from 1 to ${max}`))
    )
    positiveInts.set(max, schema)
  }
  return schema
}

export const NonNegativeInt = Schema.Number.pipe(
  Schema.int(),
  Schema.nonNegative(),
  Schema.annotations(allowed("an integer >= 0"))
)

/** true or false, nothing else. */
export const Flag = Schema.Boolean.annotations(allowed("true or false"))

/** An image reference: not empty, no whitespace anywhere. */
export const Image = Schema.String.pipe(
  Schema.filter((v) => v.trim() !== "" && !/\s/.test(v)),
  Schema.annotations({
    identifier: "Image",
    ...allowed("a non-empty image reference without spaces, e.g. hermes-sandbox/python:latest"),
    arbitrary: () => (fc) =>
      fc.oneof(
        fc.constantFrom(
          "hermes-sandbox/python:latest",
          "python:3.12-slim",
          "node:20-alpine",
          "bash:5",
          "registry.example.com:5000/team/img@sha256:" + "a".repeat(64)
        ),
        fc.stringMatching(/^[a-z0-9][a-z0-9._/-]{0,30}(:[a-z0-9._-]{1,10})?$/)
      )
  })
)

/** A language as requests name it (any case, aliases like "py", "js", "sh"), decoded to the language. */
export const LanguageName: Schema.Schema<Language, string> = Schema.transform(
  Schema.String.pipe(
    Schema.filter((name) => Object.hasOwn(LanguageAliases, name.toLowerCase())),
    Schema.annotations({
      arbitrary: () => (fc) =>
        fc
          .tuple(fc.constantFrom(...Object.keys(LanguageAliases)), fc.boolean())
          .map(([alias, upper]) => (upper ? alias.toUpperCase() : alias))
    })
  ),
  Schema.Literal(...Languages),
  { strict: true, decode: (name) => LanguageAliases[name.toLowerCase()]!, encode: (language) => language }
).annotations({ identifier: "LanguageName", ...allowed("python, javascript or bash (aliases: py, js, node, sh)") })

/** Exactly one of the languages (as options name them: no aliases). */
export const LanguageLiteral = Schema.Literal(...Languages).annotations(allowed(`one of ${Languages.join(", ")}`))

/** The most modules a preload (a kernel's, a warm pool's) may name. */
export const MAX_PRELOAD_MODULES = 32
/** A preload's names, joined by spaces, are at most this many bytes (the supervisor's bound too). */
export const MAX_PRELOAD_BYTES = 4096
const MODULE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/

/**
 * Python modules to import ahead of the code that uses them (`import pandas` costs ~1 s): dotted
 * names only, so nothing but a module name reaches the interpreter's argv or the kernel's header.
 */
export const PythonModules = Schema.Array(
  Schema.String.pipe(
    Schema.pattern(MODULE_NAME),
    Schema.annotations({ message: () => "a dotted module name ([A-Za-z_][A-Za-z0-9_]* parts)" })
  )
).pipe(
  Schema.filter((a) => a.length <= MAX_PRELOAD_MODULES && a.join(" ").length <= MAX_PRELOAD_BYTES, {
    message: () => `at most ${MAX_PRELOAD_MODULES} names, ${MAX_PRELOAD_BYTES} bytes in all`
  })
)

/** An environment variable's name. */
export const EnvName = Schema.String.pipe(
  Schema.pattern(ENV_NAME),
  Schema.annotations({ identifier: "EnvName", ...allowed("a variable name matching [A-Za-z_][A-Za-z0-9_]*") })
)

const envStringBytes = (name: string, value: string): number =>
  Buffer.byteLength(name, "utf8") + 1 + Buffer.byteLength(value, "utf8")

/**
 * A plain object (not an array, not null) taken as it is when `issueOf` finds nothing wrong with
 * it as a whole: one pass over the entries naming the first bad one, cheaper and more precise than
 * a Record schema of refinements (files of a request, variables).
 */
export const checkedObject = <A extends object>(
  issueOf: (input: object, ast: SchemaAST.AST) => ParseResult.ParseIssue | undefined,
  annotations: Schema.Annotations.Schema<A>
): Schema.Schema<A> =>
  Schema.declare(
    [],
    {
      decode: () => (input, _, ast) => {
        if (typeof input !== "object" || input === null || Array.isArray(input))
          return ParseResult.fail(new ParseResult.Type(ast, input))
        const issue = issueOf(input, ast)
        return issue === undefined ? ParseResult.succeed(input as A) : ParseResult.fail(issue)
      },
      encode: () => (input) => ParseResult.succeed(input as A)
    },
    annotations
  )

/** The first variable execve would refuse (its name, a NUL, its size), as an issue that never echoes a value. */
const envEntriesIssue = (env: object, ast: SchemaAST.AST): ParseResult.ParseIssue | undefined => {
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name))
      return new ParseResult.Pointer(
        name,
        env,
        new ParseResult.Type(ast, name, "a variable name matching [A-Za-z_][A-Za-z0-9_]*")
      )
    if (typeof value !== "string" || value.includes("\0")) {
      return new ParseResult.Pointer(
        name,
        env,
        new ParseResult.Type(ast, typeof value === "string" ? "(contains NUL)" : value, "a string without NUL bytes")
      )
    }
    const bytes = envStringBytes(name, value)
    if (bytes > MAX_ENV_STRING_BYTES) {
      return new ParseResult.Pointer(
        name,
        env,
        new ParseResult.Type(
          ast,
          `"NAME=value" of ${bytes} bytes`,
          `"NAME=value" of at most ${MAX_ENV_STRING_BYTES} bytes in UTF-8 (the kernel's MAX_ARG_STRLEN, 131072 with its NUL)`
        )
      )
    }
  }
  return undefined
}

/**
 * When an environment (with the variables it is merged over, `mergedOver` of them) is too large
 * in all for execve: the issue to report, its value the size only.
 */
export const envTotalIssue = (
  env: Readonly<Record<string, string>>,
  mergedOver: number,
  ast: SchemaAST.AST
): ParseResult.Type | undefined => {
  let total = 0
  let count = 0
  for (const name in env) {
    total += envStringBytes(name, env[name]!) + 1
    count++
  }
  return total > MAX_ENV_TOTAL_BYTES
    ? new ParseResult.Type(
        ast,
        `${total} bytes in ${count} variables${mergedOver > 0 ? " (counting the variables it is merged over)" : ""}`,
        `at most ${MAX_ENV_TOTAL_BYTES} bytes (1 MiB) of "NAME=value" strings in all, each counted with its NUL`
      )
    : undefined
}

const arbEnv = (fc: FastCheck) =>
  fc.dictionary(
    fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,15}$/),
    fc.string({ maxLength: 40 }).filter((v) => !v.includes("\0")),
    { maxKeys: 6 }
  )

/**
 * Variables each of which execve takes: names, values without NUL, each "NAME=value" under the
 * kernel's MAX_ARG_STRLEN. Not their total: that depends on what they are merged over ({@link EnvMap}
 * is this with its own total). One pass over the entries, in order, naming the first bad one;
 * values are never echoed (they may be secrets), only their size.
 */
export const EnvEntries: Schema.Schema<Readonly<Record<string, string>>> = checkedObject(envEntriesIssue, {
  identifier: "EnvEntries",
  ...allowed("an object of NAME: value strings"),
  arbitrary: () => (fc) => arbEnv(fc)
})

/** An environment on its own: {@link EnvEntries}, and at most MAX_ENV_TOTAL_BYTES in all. */
export const EnvMap = EnvEntries.pipe(
  Schema.filter((env, _, ast) => envTotalIssue(env, 0, ast)),
  Schema.annotations({ identifier: "EnvMap", arbitrary: () => (fc) => arbEnv(fc) })
)

const utf8Bytes = (s: string): number => Buffer.byteLength(s, "utf8")

/**
 * Why a path is not one that stays inside /workspace and that the filesystem takes (no absolute
 * paths, no "..", no empty or "." segments so one file has one spelling, at most 4095 bytes, each
 * segment at most 255 bytes); undefined when it is.
 */
export const workspacePathProblem = (path: string): string | undefined => {
  if (path === "" || path.includes("\0") || path.includes("\\"))
    return "a non-empty relative path without NUL or backslashes"
  if (path.startsWith("/")) return "a path relative to /workspace (absolute paths are refused)"
  const segments = path.split("/")
  if (segments.some((s) => s === "..")) return "a path without '..' segments (it must stay inside /workspace)"
  if (segments.some((s) => s === "" || s === ".")) return "a normalized path (no empty or '.' segments)"
  const bytes = utf8Bytes(path)
  if (bytes > MAX_PATH_BYTES)
    return `a path of at most ${MAX_PATH_BYTES} bytes in UTF-8 (PATH_MAX); this one has ${bytes}`
  for (const segment of segments) {
    const n = utf8Bytes(segment)
    if (n > MAX_PATH_SEGMENT_BYTES) {
      return `path segments (file and directory names) of at most ${MAX_PATH_SEGMENT_BYTES} bytes in UTF-8 (NAME_MAX); ${JSON.stringify(segment.length > 40 ? `${segment.slice(0, 40)}...` : segment)} has ${n}`
    }
  }
  return undefined
}

/** A relative path inside /workspace (see {@link workspacePathProblem}). */
export const WorkspacePath = Schema.String.pipe(
  Schema.filter(workspacePathProblem),
  Schema.annotations({
    identifier: "WorkspacePath",
    arbitrary: () => (fc) =>
      fc
        .stringMatching(/^[a-z0-9_-]{1,12}(\/[a-z0-9_.-]{1,12}){0,3}$/)
        .filter((p) => workspacePathProblem(p) === undefined)
  })
)

const AbsolutePath = Schema.String.pipe(Schema.startsWith("/"))

// ---------------------------------------------------------------------------------------
// Option types: a struct schema is the type
// ---------------------------------------------------------------------------------------

/**
 * The limits every sandbox has, as requests, sandbox defaults and session options write them (one
 * schema each, spread into the three structs: see {@link optionalFields} and {@link withDefaults}).
 */
export const LimitFields = {
  /** The deadline, in milliseconds (fractions rounded up), at most 24 h. */
  timeoutMs: TimeoutMs,
  /** Memory limit, bytes or "512m"; swap is set equal to it (no extra swap). */
  memory: Memory,
  /** CPUs, fractions allowed. */
  cpus: Cpus,
  /** Most processes/threads in the sandbox. */
  pidsLimit: PositiveInt(1 << 22),
  /** Cap on each of stdout and stderr kept in the result. */
  outputLimitBytes: PositiveInt(1024 * MiB)
}

/** Each field optional: absent (or undefined), it is left out of the decoded value, for its user's default. */
export const optionalFields = <const F extends Record<string, Schema.Schema.Any>>(
  fields: F
): { readonly [K in keyof F]: Schema.optional<F[K]> } =>
  Object.fromEntries(Object.entries(fields).map(([key, schema]) => [key, Schema.optional(schema)])) as {
    readonly [K in keyof F]: Schema.optional<F[K]>
  }

/** Each field optional: absent (or undefined), it decodes to its value in `defaults` (given decoded). */
export const withDefaults = <const F extends Record<string, Schema.Schema.Any>>(
  fields: F,
  defaults: { readonly [K in keyof F]: Schema.Schema.Type<F[K]> }
): { readonly [K in keyof F]: Schema.optionalWith<F[K], { readonly default: () => Schema.Schema.Type<F[K]> }> } =>
  Object.fromEntries(
    Object.entries(fields).map(([key, schema]) => [key, Schema.optionalWith(schema, { default: () => defaults[key] })])
  ) as {
    readonly [K in keyof F]: Schema.optionalWith<F[K], { readonly default: () => Schema.Schema.Type<F[K]> }>
  }

/** `T` with `undefined` taken out of the type of its optional properties, at every depth of plain objects. */
type ExactOptional<T> = T extends string | number | boolean | bigint | symbol | null | undefined | Uint8Array
  ? T
  : T extends ReadonlyArray<infer E>
    ? ReadonlyArray<ExactOptional<E>>
    : {
        [K in keyof T]: Pick<T, K> extends Required<Pick<T, K>>
          ? ExactOptional<T[K]>
          : ExactOptional<Exclude<T[K], undefined>>
      }

/** A struct: fields and no index signatures (a Record is a TypeLiteral too, with no fields). */
type StructSchema = { readonly fields: Schema.Struct.Fields; readonly records: readonly [] }

/** The keys of a struct's fields that users may leave out. */
type OptionalKeys<F> = { [K in keyof F]: F[K] extends { readonly _EncodedToken: "?:" } ? K : never }[keyof F]

/** A schema's input: a struct's (and so a struct's within an array or a union) by {@link Input}, keeping its fields' doc comments. */
type SchemaInput<S> = S extends StructSchema
  ? { [K in keyof Input<S>]: Input<S>[K] }
  : S extends Schema.Array$<infer V>
    ? ReadonlyArray<SchemaInput<V>>
    : S extends { readonly members: ReadonlyArray<infer M> }
      ? SchemaInput<M>
      : ExactOptional<Schema.Schema.Encoded<S>>

/** Each field's input (an optional one's, `optional(S)` or `optionalWith(S, ...)`, is S's), mapped over the fields themselves so that each keeps its doc comment. */
type FieldInputs<F> = {
  readonly [K in keyof F]: F[K] extends { readonly _EncodedToken: "?:"; readonly from: infer S }
    ? SchemaInput<S>
    : F[K] extends { readonly _EncodedToken: "?:" }
      ? ExactOptional<Exclude<Schema.Schema.Encoded<F[K]>, undefined>>
      : SchemaInput<F[K]>
}

/**
 * What users write for a struct schema, as its options' types say it: the struct's encoded side,
 * readonly, a field optional where the schema lets it be left out, typed without an explicit
 * `undefined` (`timeoutMs?: number`, as a hand-written interface has it under
 * exactOptionalPropertyTypes), at every depth; each field with its doc comment. The decoders still
 * take `undefined` for an absent field. (Fields are not renamed: no `fromKey`.)
 *
 *   export interface ExecuteRequest extends Schemas.Input<typeof ExecuteRequestSchema> { readonly tools?: Tools }
 */
export type Input<S extends StructSchema> = Pick<
  FieldInputs<S["fields"]>,
  Exclude<keyof S["fields"], OptionalKeys<S["fields"]>>
> &
  Partial<Pick<FieldInputs<S["fields"]>, OptionalKeys<S["fields"]>>>

/** A bind mount: host path and container path absolute (the container's / refused), read-only unless "rw". */
export const Mount = Schema.Struct({
  hostPath: AbsolutePath.annotations(allowed("an absolute host path")),
  containerPath: AbsolutePath.pipe(
    Schema.filter((p) => p !== "/"),
    Schema.annotations(allowed("an absolute container path other than /"))
  ),
  /** Read-only unless "rw". */
  mode: Schema.optional(Schema.Literal("ro", "rw").annotations(allowed(`"ro" (default) or "rw"`)))
}).annotations({ identifier: "Mount" })

// ---------------------------------------------------------------------------------------
// From a decode's first issue to InvalidRequest
// ---------------------------------------------------------------------------------------

/** The first problem of a decode: where (the path of keys), the value at fault, and what is allowed. */
export interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly actual: unknown
  readonly message: string | undefined
}

const messageOf = (issue: ParseResult.ParseIssue): string | undefined => {
  if (!("ast" in issue)) return undefined
  // A missing key's issue carries the property signature (typed as its type): read its type's.
  const ast = (
    (issue.ast as unknown) instanceof SchemaAST.PropertySignature
      ? (issue.ast as unknown as SchemaAST.PropertySignature).type
      : issue.ast
  ) as SchemaAST.AST
  const annotation = SchemaAST.getMessageAnnotation(ast)
  if (annotation._tag === "None") return undefined
  const out = annotation.value(issue)
  return typeof out === "string"
    ? out
    : typeof out === "object" && "message" in out && typeof out.message === "string"
      ? out.message
      : undefined
}

/**
 * Walks the first issue down to its leaf. The message is the field's own: the outermost `message`
 * annotation met since the last key of the path (so a field schema speaks for the pieces it is
 * built from), else the leaf's explicit message (checks that know better, e.g. which variable is
 * too long), else the leaf schema's annotation. An unexpected key is reported with the key as
 * its value and the message of the object that does not take it.
 */
export const firstProblem = (issue: ParseResult.ParseIssue): Problem => {
  const path: Array<PropertyKey> = []
  let annotated: string | undefined
  let enclosing: string | undefined
  let current = issue
  for (;;) {
    switch (current._tag) {
      case "Pointer":
        if (Array.isArray(current.path)) path.push(...current.path)
        else path.push(current.path as PropertyKey)
        enclosing = annotated
        annotated = undefined
        current = current.issue
        continue
      case "Composite":
        annotated ??= messageOf(current)
        current = Array.isArray(current.issues) ? current.issues[0]! : (current.issues as ParseResult.ParseIssue)
        continue
      case "Refinement":
      case "Transformation":
        annotated ??= messageOf(current)
        current = current.issue
        continue
      case "Unexpected":
        return { path, actual: path[path.length - 1], message: enclosing ?? current.message }
      case "Missing":
      case "Type":
      case "Forbidden":
        return { path, actual: current.actual, message: annotated ?? current.message ?? messageOf(current) }
    }
  }
}

/** `memory`, `images.python`, `mounts[0].hostPath`: keys joined, a list index kept only inside an item, long keys cut. */
export const fieldOf = (root: string, path: ReadonlyArray<PropertyKey>): string => {
  let field = root
  path.forEach((key, i) => {
    if (typeof key === "number") {
      if (i < path.length - 1) field += `[${key}]`
      return
    }
    const name = String(key)
    const cut = name.length > 64 ? `${name.slice(0, 64)}...` : name
    field = field === "" ? cut : `${field}.${cut}`
  })
  return field
}

/**
 * An InvalidRequest for a decode's first issue. Its field is `prefix` followed by the issue's path
 * (or what `field` makes of the path); `whole` names a problem with the whole value (default: `prefix`).
 */
export const toInvalidRequest = (
  issue: ParseResult.ParseIssue,
  prefix: string,
  field: (path: ReadonlyArray<PropertyKey>) => string = (path) => fieldOf(prefix, path),
  whole: string = prefix
): InvalidRequest => {
  const problem = firstProblem(issue)
  return invalidRequest(field(problem.path) || whole, problem.actual, problem.message ?? "a valid value")
}

/**
 * A decoder made once (its parser compiled at module load, not per call) that fails with the
 * InvalidRequest of its first issue, fields under `prefix` (or named `whole` for the whole value).
 * It returns an Either, which is also an Effect.
 */
export const decoderFor = <A, I>(schema: Schema.Schema<A, I>, whole?: string) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (prefix: string, input: unknown): Either.Either<A, InvalidRequest> =>
    Either.mapLeft(decode(input), (error) => toInvalidRequest(error.issue, prefix, undefined, whole ?? prefix))
}

const decodeEnvEntries = decoderFor(EnvEntries)

/**
 * Variables merged over others (a session's secrets over its env, a call's over its session's):
 * each as {@link EnvEntries} takes it, and all of `{ ...base, ...env }` within MAX_ENV_TOTAL_BYTES.
 * Fields under `prefix`; values are never echoed (they may be secrets), only their size.
 */
export const decodeEnvOver = (
  prefix: string,
  env: unknown,
  base: Readonly<Record<string, string>> = {}
): Either.Either<Readonly<Record<string, string>>, InvalidRequest> =>
  Either.flatMap(decodeEnvEntries(prefix, env), (entries) => {
    const tooLarge = envTotalIssue({ ...base, ...entries }, Object.keys(base).length, EnvEntries.ast)
    return tooLarge === undefined ? Either.right(entries) : Either.left(toInvalidRequest(tooLarge, prefix))
  })
