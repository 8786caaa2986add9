/**
 * The resources: an execution's lifecycle events, read from the journal (the same events
 * `hermes-sandbox events --execution ID` prints), and the files execute_code collected, from the
 * server's file store (fileStore.ts) while it keeps them, and the images run_python's cells
 * displayed, and the whole output of a run whose result was cut, from the same store (kept when a
 * result names them rather than sending them). Over
 * HTTP a session reads only what its own calls made (their ExecutionRequested carries its
 * `mcp.session` tag; the store keeps the session with the files); over stdio the one local client
 * may read any.
 */
import { Chunk, Effect, Stream } from "effect"
import type { CollectedFile } from "@hermes-sandbox/core/Artifacts"
import { Journal } from "@hermes-sandbox/events"
import type { StoredExecution, StoredKind } from "./fileStore.js"
import type { McpSession } from "./McpSession.js"

export const EVENTS_TEMPLATE = {
  uriTemplate: "sandbox://executions/{id}/events",
  name: "execution-events",
  title: "An execution's lifecycle events",
  description:
    "The journal's events of one execution (an execute_code or terminal call): requested, created, started, exited or timed out, removed, completed; as a JSON array.",
  mimeType: "application/json"
} as const

const URI = /^sandbox:\/\/executions\/([A-Za-z0-9-]{1,64})\/events$/

export const executionIdOfUri = (uri: string): string | undefined => URI.exec(uri)?.[1]

/** The execution's events as JSON, or undefined when there is none this session may read. */
export const eventsResource = (session: McpSession, executionId: string): Promise<string | undefined> =>
  session.owner.runtime.runPromise(
    Effect.gen(function* () {
      const journal = yield* Journal.Journal
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(journal.read({ streamId: executionId })))
      const requested = events.find((e) => e.type === "ExecutionRequested")
      if (requested === undefined) return undefined
      const tags = requested.type === "ExecutionRequested" ? requested.data.tags : undefined
      if (session.context.transport === "http" && tags?.["mcp.session"] !== session.id) return undefined
      return JSON.stringify(events)
    })
  )

export const FILES_TEMPLATE = {
  uriTemplate: "sandbox://executions/{id}/files/{+path}",
  name: "execution-file",
  title: "A file an execution collected",
  description:
    "A file execute_code brought back with `collect` (path relative to /workspace, each segment percent-encoded), kept by the server for a limited time: text/* as text, anything else as a base64 blob.",
  mimeType: "application/octet-stream"
} as const

const FILE_URI = /^sandbox:\/\/executions\/([A-Za-z0-9-]{1,64})\/files\/([\s\S]+)$/

/** A segment percent-encoded as RFC 3986 has it: `!'()*` too, so a URI written in words never holds a parenthesis or quote. */
const encodeSegment = (segment: string) =>
  encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** The resource URI of a collected file: its path percent-encoded segment by segment (a name may hold any character but "/"). */
export const fileUri = (executionId: string, path: string): string =>
  `sandbox://executions/${executionId}/files/${path.split("/").map(encodeSegment).join("/")}`

/** The execution and the path a file URI names, or undefined when it names none. */
export const fileOfUri = (uri: string): { readonly executionId: string; readonly path: string } | undefined => {
  const match = FILE_URI.exec(uri)
  if (match === null) return undefined
  try {
    return { executionId: match[1]!, path: match[2]!.split("/").map(decodeURIComponent).join("/") }
  } catch {
    return undefined
  }
}

export const CELL_IMAGES_TEMPLATE = {
  uriTemplate: "sandbox://cells/{id}/{name}",
  name: "cell-image",
  title: "An image a run_python cell displayed",
  description:
    "A PNG or JPEG a run_python cell displayed (name: display-N.png for its N-th display, out.png for its value's), kept by the server for a limited time, as a base64 blob.",
  mimeType: "image/png"
} as const

const CELL_URI = /^sandbox:\/\/cells\/([A-Za-z0-9-]{1,64})\/((?:display-[1-9][0-9]{0,5}|out)\.(?:png|jpg))$/

/** The resource URI of a cell's image (the host names it: `display-3.png`, `out.jpg`). */
export const cellImageUri = (cellId: string, name: string): string => `sandbox://cells/${cellId}/${name}`

/** The cell and the image name a cell image URI names, or undefined when it names none. */
export const cellImageOfUri = (uri: string): { readonly cellId: string; readonly name: string } | undefined => {
  const match = CELL_URI.exec(uri)
  return match === null ? undefined : { cellId: match[1]!, name: match[2]! }
}

export const OUTPUT_TEMPLATE = {
  uriTemplate: "sandbox://executions/{id}/output/{stream}",
  name: "execution-output",
  title: "A run's whole output, when its result was cut",
  description:
    "stdout or stderr of an execute_code or terminal call whose result kept only the head and tail of it: the whole stream as the program wrote it (up to the server's bound per stream), kept by the server for a limited time, as text.",
  mimeType: "text/plain"
} as const

/** The two streams a run's kept output has. */
export type OutputStream = "stdout" | "stderr"

const OUTPUT_URI = /^sandbox:\/\/executions\/([A-Za-z0-9-]{1,64})\/output\/(stdout|stderr)$/

/** The resource URI of a run's kept stream. */
export const outputUri = (executionId: string, stream: OutputStream): string =>
  `sandbox://executions/${executionId}/output/${stream}`

/** The run and the stream an output URI names, or undefined when it names none. */
export const outputOfUri = (
  uri: string
): { readonly executionId: string; readonly stream: OutputStream } | undefined => {
  const match = OUTPUT_URI.exec(uri)
  return match === null ? undefined : { executionId: match[1]!, stream: match[2] as OutputStream }
}

/** What a URI of the file store names: whose (kind and id), which file, and the words for it. */
export interface StoredRef {
  readonly kind: StoredKind
  readonly id: string
  readonly path: string
  /** For "not found": `file "a.csv" of execution ID`, `image out.png of cell ID`, `kept stdout of execution ID`. */
  readonly what: string
}

/** The stored file a URI names (a collected file, a cell's image, a run's kept stream), or undefined when it names none. */
export const storedOfUri = (uri: string): StoredRef | undefined => {
  const file = fileOfUri(uri)
  if (file !== undefined)
    return {
      kind: "execution",
      id: file.executionId,
      path: file.path,
      what: `file ${JSON.stringify(file.path)} of execution ${file.executionId}`
    }
  const image = cellImageOfUri(uri)
  if (image !== undefined)
    return { kind: "cell", id: image.cellId, path: image.name, what: `image ${image.name} of cell ${image.cellId}` }
  const output = outputOfUri(uri)
  if (output !== undefined)
    return {
      kind: "output",
      id: output.executionId,
      path: output.stream,
      what: `kept ${output.stream} of execution ${output.executionId}`
    }
  return undefined
}

/** The URI of a file the store keeps (a run's collected file, a cell's image, a run's kept stream). */
export const storedUri = (stored: StoredExecution, path: string): string =>
  stored.kind === "cell"
    ? cellImageUri(stored.executionId, path)
    : stored.kind === "output"
      ? outputUri(stored.executionId, path as OutputStream)
      : fileUri(stored.executionId, path)

/** A file this session may read, while the server keeps it (`kind`: a run's collected file, or a cell's image). */
export const fileResource = (
  session: McpSession,
  executionId: string,
  path: string,
  kind: StoredKind = "execution"
): CollectedFile | undefined => {
  const stored = session.owner.files.get(executionId, kind)
  if (stored === undefined) return undefined
  if (session.context.transport === "http" && stored.owner !== session.id) return undefined
  return stored.files.get(path)
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** What resources/read returns for a file: text/* that is UTF-8 as text, anything else as a base64 blob. */
export const fileContents = (
  uri: string,
  file: CollectedFile
): { uri: string; mimeType: string; text: string } | { uri: string; mimeType: string; blob: string } => {
  if (file.mime.startsWith("text/")) {
    try {
      return { uri, mimeType: file.mime, text: utf8.decode(file.content) }
    } catch {}
  }
  return { uri, mimeType: file.mime, blob: Buffer.from(file.content).toString("base64") }
}
