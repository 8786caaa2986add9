/**
 * An error as JSON, the one shape every front end reports failures in (the CLI's --json, the
 * MCP server's isError results): `{"error": {"_tag", "message", ...the error's own fields}}`, so
 * a program tells an InvalidRequest from a ContainerFailed by its tag, not by parsing prose.
 */
/** A value JSON can carry: nested errors as their message, bigints as strings, no cycles. */
const plain = (value: unknown, seen = new Set<unknown>()): unknown => {
  if (typeof value === "bigint") return value.toString()
  if (typeof value !== "object" || value === null)
    return typeof value === "function" || typeof value === "symbol" ? undefined : value
  if (seen.has(value)) return undefined
  seen.add(value)
  if (value instanceof Error) return value.message
  if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`
  if (Array.isArray(value)) return value.map((v) => plain(v, seen))
  return Object.fromEntries(
    Object.entries(value)
      .map(([k, v]) => [k, plain(v, seen)])
      .filter(([, v]) => v !== undefined)
  )
}

/**
 * The error as JSON: `_tag` (the SDK's error tags; UsageError for the CLI's own; the class name,
 * e.g. "Error", for anything else), `message`, and the error's own fields.
 */
export const errorJson = (error: unknown): { readonly error: Record<string, unknown> } => {
  if (typeof error !== "object" || error === null) return { error: { _tag: "Error", message: String(error) } }
  const e = error as { _tag?: unknown; name?: unknown; message?: unknown }
  const fields = Object.fromEntries(
    Object.entries(error)
      .filter(([k]) => k !== "stack" && k !== "_tag" && k !== "message")
      .map(([k, v]) => [k, plain(v)])
  )
  const tag = typeof e._tag === "string" ? e._tag : typeof e.name === "string" ? e.name : "Error"
  return { error: { _tag: tag, message: typeof e.message === "string" ? e.message : String(error), ...fields } }
}
