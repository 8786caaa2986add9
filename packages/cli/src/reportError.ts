/**
 * How a failed command is reported: its exit code and one line on standard error for people and,
 * under --json, `{"error": {"_tag": ..., ...fields}}` on standard output for programs, so a
 * wrapper tells an InvalidRequest from a ContainerFailed by its tag, not by parsing prose.
 */
import { ExitCode } from "./exitCodes.js"
import { NotFound, UsageError } from "./errors.js"

interface Described {
  readonly code: number
  readonly message: string
}

export const describeError = (error: unknown): Described => {
  const e = error as { _tag?: string; message?: string; hint?: string; buildCommand?: string }
  if (error instanceof UsageError) return { code: ExitCode.usage, message: error.message }
  if (error instanceof NotFound) return { code: ExitCode.notFound, message: error.message }
  switch (e?._tag) {
    case "InvalidRequest":
    case "HermesConfigError":
      return { code: ExitCode.usage, message: e.message ?? String(error) }
    case "DockerUnavailable":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.hint}` }
    case "ImageNotFound":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.buildCommand}` }
    default:
      return { code: ExitCode.sandboxFailed, message: e?.message ?? String(error) }
  }
}

/** A value JSON can carry: nested errors as their message, bigints as strings, no cycles. */
const plain = (value: unknown, seen = new Set<unknown>()): unknown => {
  if (typeof value === "bigint") return value.toString()
  if (typeof value !== "object" || value === null) return typeof value === "function" || typeof value === "symbol" ? undefined : value
  if (seen.has(value)) return undefined
  seen.add(value)
  if (value instanceof Error) return value.message
  if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`
  if (Array.isArray(value)) return value.map((v) => plain(v, seen))
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v, seen)]).filter(([, v]) => v !== undefined))
}

/**
 * The error as JSON: `_tag` (the SDK's error tags; UsageError for the CLI's own; the class name,
 * e.g. "Error", for anything else), `message`, and the error's own fields.
 */
export const errorJson = (error: unknown): { readonly error: Record<string, unknown> } => {
  if (typeof error !== "object" || error === null) return { error: { _tag: "Error", message: String(error) } }
  const e = error as { _tag?: unknown; name?: unknown; message?: unknown }
  const fields = Object.fromEntries(
    Object.entries(error).filter(([k]) => k !== "stack" && k !== "_tag" && k !== "message").map(([k, v]) => [k, plain(v)])
  )
  const tag = typeof e._tag === "string" ? e._tag : typeof e.name === "string" ? e.name : "Error"
  return { error: { _tag: tag, message: typeof e.message === "string" ? e.message : String(error), ...fields } }
}
