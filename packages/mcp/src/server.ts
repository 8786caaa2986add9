/**
 * One MCP server instance per MCP session (the SDK refuses a shared one since 1.26, which fixed a
 * cross-client leak): the low-level `Server` with our handlers, since our schemas are Effect
 * Schemas (tools/schemas.ts) rather than Zod. Every argument is decoded before anything runs; a
 * failure is an `isError` result naming the field, and the server keeps serving.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Either, ParseResult, Schema } from "effect"
import { ContainerNamePrefix } from "@hermes-sandbox/core/Labels"
import { InvalidArguments } from "./errors.js"
import type { McpSession } from "./McpSession.js"
import { progressFor } from "./progress.js"
import {
  CELL_IMAGES_TEMPLATE,
  EVENTS_TEMPLATE,
  eventsResource,
  executionIdOfUri,
  FILES_TEMPLATE,
  fileContents,
  fileResource,
  OUTPUT_TEMPLATE,
  storedOfUri,
  storedUri
} from "./resources.js"
import { type ToolDefinition, tools } from "./tools/definitions.js"
import { failure, stoppedResult, structured } from "./tools/results.js"
import { jsonSchemaOf } from "./tools/schemas.js"
import { VERSION } from "./version.js"

const INSTRUCTIONS =
  "Sandboxed code execution. execute_code runs one program in a fresh single-use sandbox (nothing carries over). " +
  "terminal, run_python, read_file, write_file, patch and search_files share one sandbox for this session (files, working directory and exported variables persist until reset_session, the session's end, or idle expiry); " +
  "run_python runs Python cells in a kernel there whose variables and imports persist from call to call. " +
  "No sandbox has network access. Each run's lifecycle events are the resource sandbox://executions/{execution_id}/events; " +
  "the files execute_code collected (its collect argument) are sandbox://executions/{execution_id}/files/{path} for a while, " +
  "and a run_python image the result names instead of sending it is sandbox://cells/{id}/{name}."

const fieldOf = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>(
    (acc, key) => (typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`),
    ""
  )

/** Decode a call's arguments; every problem with its field. */
const decodeArguments = (tool: ToolDefinition<unknown>, input: unknown): unknown => {
  const decoded = Schema.decodeUnknownEither(tool.args, { errors: "all", onExcessProperty: "error" })(input ?? {})
  if (Either.isRight(decoded)) return decoded.right
  const all = ParseResult.ArrayFormatter.formatErrorSync(decoded.left).map((i) => ({
    field: fieldOf(i.path) || "(arguments)",
    message: i.message
  }))
  // One issue per field (a union reports once per member).
  const issues = all.filter((issue, i) => all.findIndex((other) => other.field === issue.field) === i)
  throw new InvalidArguments({
    tool: tool.name,
    issues,
    message: issues.map((i) => `${i.field}: ${i.message}`).join("; ")
  })
}

/** A hint for the calls models get wrong most (the Hermes agent's): code given to terminal, a command given to execute_code. */
const hintFor = (tool: string, input: unknown): string | undefined => {
  const given = typeof input === "object" && input !== null ? Object.keys(input) : []
  if (tool === "execute_code" && given.includes("command"))
    return "execute_code takes code and language; for a shell command use terminal(command=...)"
  if (tool === "terminal" && given.includes("code"))
    return "terminal takes command; for a program use execute_code(code=..., language=...)"
  return undefined
}

export const createServer = (session: McpSession): Server => {
  const limits = session.owner.limits
  const callable = { specs: session.owner.toolSpecs, limits: session.owner.toolLimits }
  const server = new Server(
    { name: "hermes-sandbox", title: "hermes-sandbox", version: VERSION },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS }
  )
  server.oninitialized = () => {
    session.clientInfo = server.getClientVersion()
  }

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description(limits, callable),
      inputSchema: jsonSchemaOf(t.args),
      outputSchema: jsonSchemaOf(t.result),
      annotations: { title: t.title, ...t.annotations }
    }))
  }))

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const tool = tools.find((t) => t.name === request.params.name)
    if (tool === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown tool: ${request.params.name}; this server has ${tools.map((t) => t.name).join(", ")}`
      )
    }
    // Also here, not only on notifications/initialized: a client that skips that notification is still named.
    session.clientInfo ??= server.getClientVersion()
    const progress = progressFor(extra, session.owner.subscribe, limits.progressIntervalMs)
    try {
      const args = decodeArguments(tool, request.params.arguments)
      const result = await tool.call(args, { session, signal: extra.signal, progress })
      return structured(result.value, result.isError, result.content)
    } catch (error) {
      const e = error as { _tag?: string; executionId?: string; reason?: string }
      if (e._tag === "ExecutionAborted" && tool.name === "execute_code" && e.executionId) {
        const status = extra.signal.aborted ? "cancelled" : "interrupted"
        return structured(
          stoppedResult(status, e.executionId, `${ContainerNamePrefix}${e.executionId}`, e.reason ?? "aborted"),
          true
        )
      }
      return failure(error, hintFor(tool.name, request.params.arguments))
    } finally {
      progress.stop()
    }
  })

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [EVENTS_TEMPLATE, FILES_TEMPLATE, CELL_IMAGES_TEMPLATE, OUTPUT_TEMPLATE]
  }))

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      ...[...session.executions].reverse().map((id) => ({
        uri: EVENTS_TEMPLATE.uriTemplate.replace("{id}", id),
        name: `execution ${id} events`,
        mimeType: EVENTS_TEMPLATE.mimeType
      })),
      // This session's collected files and cell images the server still keeps, newest first.
      ...[...session.owner.files.list()]
        .reverse()
        .filter((e) => e.owner === session.id)
        .flatMap((e) =>
          [...e.files.values()].map((f) => ({
            uri: storedUri(e, f.path),
            name: f.path,
            title: `${f.path} (${e.kind} ${e.executionId})`,
            mimeType: f.mime,
            size: f.size
          }))
        )
    ]
  }))

  // -32002: the spec's "resource not found".
  const notFound = (what: string) =>
    new McpError(
      -32002,
      `Resource not found: ${what}${session.context.transport === "http" ? " in this MCP session" : ""}`
    )

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri
    const stored = storedOfUri(uri)
    if (stored !== undefined) {
      const found = fileResource(session, stored.id, stored.path, stored.kind)
      if (found === undefined)
        throw notFound(
          `no ${stored.what} (the server keeps collected files, cell images and cut outputs for ${limits.fileRetentionS} s and ${limits.fileStoreBytes} bytes in all, the oldest evicted first)`
        )
      return { contents: [fileContents(uri, found)] }
    }
    const id = executionIdOfUri(uri)
    if (id === undefined)
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown resource ${uri}: this server has ${EVENTS_TEMPLATE.uriTemplate}, ${FILES_TEMPLATE.uriTemplate}, ${CELL_IMAGES_TEMPLATE.uriTemplate} and ${OUTPUT_TEMPLATE.uriTemplate}`
      )
    const text = await eventsResource(session, id)
    if (text === undefined) throw notFound(`no execution ${id}`)
    return { contents: [{ uri, mimeType: EVENTS_TEMPLATE.mimeType, text }] }
  })

  return server
}
