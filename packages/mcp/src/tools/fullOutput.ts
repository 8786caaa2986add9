/**
 * The whole output is never just gone: when a result keeps only the head and tail of a stream
 * (results.ts boundStreams), the stream as the program wrote it (up to `fullOutputBytes`, which
 * the SDK keeps with ExecuteOptions.keepFullOutput) is put in the server's file store, bounded
 * with the collected files, and the result names it: `full_output`, and a line in `output` that
 * says how to read it. The Hermes agent saves a large output to a file for the model to read; here
 * read_file takes the URI (offset and limit in lines), and resources/read serves it too.
 */
import { createHash } from "node:crypto"
import type { ExecutionResult } from "@hermes-sandbox/core"
import type { CollectedFile } from "@hermes-sandbox/core/Artifacts"
import type { ExecuteOptions } from "@hermes-sandbox/core/Executor"
import { FileOperationFailed } from "../errors.js"
import type { ResolvedLimits } from "../McpSandbox.js"
import type { McpSession } from "../McpSession.js"
import { fileResource, type OutputStream, outputUri } from "../resources.js"
import type { FullOutput, Streams } from "./schemas.js"

/** What a run keeps of each stream besides its result, for this server: keepFullOutput, when the server keeps any. */
export const keepOption = (session: McpSession): Pick<ExecuteOptions, "keepFullOutput"> => {
  const bytes = session.owner.limits.fullOutputBytes
  return bytes > 0 ? { keepFullOutput: bytes } : {}
}

const encoder = new TextEncoder()

/** The stream's text as UTF-8, at most `max` bytes (not splitting a character): `cut` when it was longer. */
const boundedUtf8 = (text: string, max: number): { readonly content: Uint8Array; readonly cut: boolean } => {
  const all = encoder.encode(text)
  if (all.byteLength <= max) return { content: all, cut: false }
  let end = max
  while (end > 0 && (all[end]! & 0xc0) === 0x80) end--
  return { content: all.subarray(0, end), cut: true }
}

const keptFile = (stream: OutputStream, content: Uint8Array): CollectedFile => {
  return {
    path: stream,
    size: content.byteLength,
    sha256: createHash("sha256").update(content).digest("hex"),
    mime: "text/plain",
    mode: 0o644,
    content
  }
}

/**
 * Keep the streams this result cut, and say where: the result's `full_output` and the words for
 * `output` (undefined when nothing was cut). When the store cannot hold them (larger than it, or
 * the server keeps none) the words say that instead.
 */
export const keepCutOutput = (
  session: McpSession,
  r: ExecutionResult,
  streams: Pick<Streams, "stdout_bytes_omitted" | "stderr_bytes_omitted">
): { readonly fullOutput: FullOutput | undefined; readonly note: string | undefined } => {
  const cut = (["stdout", "stderr"] as const).filter((s) => streams[`${s}_bytes_omitted`] > 0)
  if (cut.length === 0) return { fullOutput: undefined, note: undefined }
  const limits = session.owner.limits
  if (limits.fullOutputBytes === 0)
    return { fullOutput: undefined, note: "The whole output is not kept: this server keeps none (fullOutputBytes 0)." }
  const files = cut.map((s) => {
    // The SDK's own result holds the stream whole when it was within outputLimitBytes (which may
    // be more than this server keeps: cut to fullOutputBytes, as the SDK would have).
    const { content, cut } = boundedUtf8(r.fullOutput?.[s] ?? r[s], limits.fullOutputBytes)
    const truncated = r.fullOutput === undefined ? r[`${s}Truncated`] : r.fullOutput[`${s}Truncated`]
    return { stream: s, file: keptFile(s, content), complete: !cut && !truncated }
  })
  const kept = session.owner.files.put(
    r.executionId,
    session.id,
    files.map((f) => f.file),
    "output"
  )
  if (!kept)
    return { fullOutput: undefined, note: "The whole output is not kept: it is larger than this server's store." }
  const fullOutput: FullOutput = Object.fromEntries(
    files.map((f) => [f.stream, { uri: outputUri(r.executionId, f.stream), bytes: f.file.size, complete: f.complete }])
  )
  const minutes = Math.round(limits.fileRetentionS / 60)
  const named = files
    .map(
      (f) =>
        `${f.stream} (${f.file.size} bytes${f.complete ? "" : `, its first ${limits.fullOutputBytes} bytes`}): read_file with path ${outputUri(r.executionId, f.stream)}`
    )
    .join("; ")
  return { fullOutput, note: `The whole output is kept for ${minutes} min: ${named} (offset and limit are lines).` }
}

/**
 * A kept stream's bytes for read_file, when this MCP session may read it (over HTTP, only its own
 * runs'); else a not-found naming the bounds it may have fallen to.
 */
export const keptOutput = (
  session: McpSession,
  of: { readonly executionId: string; readonly stream: OutputStream }
): Uint8Array => {
  const found = fileResource(session, of.executionId, of.stream, "output")
  if (found === undefined) {
    const limits = session.owner.limits
    throw new FileOperationFailed({
      path: outputUri(of.executionId, of.stream),
      reason: "not-found",
      message: `no kept ${of.stream} of run ${of.executionId}${session.context.transport === "http" ? " in this MCP session" : ""}: the server keeps a cut output for ${limits.fileRetentionS} s and ${limits.fileStoreBytes} bytes in all with the collected files, the oldest evicted first`
    })
  }
  return found.content
}

/** The tool descriptions' words for it, after "keep their head and tail". */
export const keptWords = (l: Pick<ResolvedLimits, "fullOutputBytes">): string =>
  l.fullOutputBytes > 0
    ? ` (the whole stream, up to ${l.fullOutputBytes} bytes, is kept for a while: full_output names it, read it with read_file)`
    : ""
