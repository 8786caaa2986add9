/**
 * The MCP bridge (issue 18, item 6): the tools of an upstream MCP server — a stdio command or a
 * Streamable HTTP URL — as sandbox `Tools`, so that sandboxed code calls them through the tool
 * channel while the connection (and whatever credentials it carries) stays on the host.
 *
 *   const upstream = await toolsFromMcp({ command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", dir], prefix: "fs_" })
 *   await executeCode({ language: "python", code, tools: upstream.tools })
 *   await upstream.close()                  // or: await using upstream = await toolsFromMcp(...)
 *
 * In Effect: `McpTools.scoped(options)`, the connection closed with its Scope.
 *
 * The tool list is read once, at connect (every page of it); a server that changes its tools later
 * (notifications/tools/list_changed) is not followed: the sandbox's generated modules are fixed per
 * run anyway. Results are unwrapped the way Cloudflare's Code Mode does (see unwrapCallToolResult).
 *
 * The SDK's types stay out of this module's exported signatures (see index.ts on HeadersInit).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Schema, type Scope } from "effect"
import { MAX_TOOL_LIMITS, RESERVED_TOOL_NAMES, TOOL_NAME } from "@hermes-sandbox/core/Tools"
import { type Tool, type ToolContext, type Tools } from "@hermes-sandbox/core"
import { VERSION } from "./version.js"

/** An upstream server started as a child process, spoken to over its stdin/stdout. */
export interface McpStdioServer {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  /**
   * Added to the few variables the SDK passes on by default (HOME, LOGNAME, PATH, SHELL, TERM,
   * USER): the rest of this process's environment (its secrets) is not inherited.
   */
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly cwd?: string | undefined
  /** Where the server's standard error goes: this process's standard error (default), or nowhere. */
  readonly stderr?: "inherit" | "ignore" | undefined
}

/** An upstream server reached over Streamable HTTP. */
export interface McpHttpServer {
  readonly url: string | URL
  /** Sent with every request (e.g. Authorization). */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

export interface McpBridgeOptions {
  /** Put before every tool's name (e.g. "fs_"), so that several servers' tools do not clash. */
  readonly prefix?: string | undefined
  /** Only these upstream tools (by their upstream names). Each must exist upstream. */
  readonly include?: ReadonlyArray<string> | undefined
  /** Not these upstream tools (by their upstream names). Each must exist upstream: a typo would expose what it meant to hide. */
  readonly exclude?: ReadonlyArray<string> | undefined
  /** How errors name the server; default: the name it gives in initialize. */
  readonly name?: string | undefined
}

export type ToolsFromMcpOptions = (McpStdioServer | McpHttpServer) & McpBridgeOptions

/** An upstream tool whose sandbox name is not `prefix + its name` (it was not a valid identifier, or clashed). */
export interface RenamedTool {
  readonly upstream: string
  readonly name: string
}

/** An upstream tool that cannot be bridged, and why. */
export interface SkippedTool {
  readonly upstream: string
  readonly reason: string
}

export interface McpUpstream extends AsyncDisposable {
  /** Sandbox name → tool; each handler calls the upstream tool. */
  readonly tools: Tools
  /** What the server said it is in initialize. */
  readonly server: { readonly name: string; readonly version: string }
  readonly renamed: ReadonlyArray<RenamedTool>
  readonly skipped: ReadonlyArray<SkippedTool>
  /** Ends the connection (a stdio server's process ends; an HTTP session is deleted). Idempotent. */
  readonly close: () => Promise<void>
}

/** The bridge could not be set up: the options are wrong, the server did not start or answer, or its tool list could not be read. */
export class McpUpstreamFailed extends Schema.TaggedError<McpUpstreamFailed>()("McpUpstreamFailed", {
  upstream: Schema.String,
  reason: Schema.Literal("invalid-options", "connect-failed", "list-failed"),
  message: Schema.String
}) {}

/** A prefix that keeps every name it starts a valid identifier (and leaves room for one character). */
const PREFIX = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/
const MAX_NAME = 64
/** Guards against a server whose nextCursor never ends. */
const MAX_PAGES = 1000
/** What the server wrote last on standard error, for a failure to start. */
const STDERR_TAIL = 2000

/**
 * The sandbox's tool signal decides when a call ends (its callTimeoutMs, the run's end); the SDK's
 * own 60 s default would cut calls the user allowed longer, so the SDK gets the largest allowed.
 */
const CALL_TIMEOUT_MS = MAX_TOOL_LIMITS.callTimeoutMs

const isStdio = (options: ToolsFromMcpOptions): options is McpStdioServer & McpBridgeOptions => "command" in options

/**
 * Where the server is, without what may be secret (a command's arguments, a URL's query or
 * credentials): these strings reach sandboxed code in tool errors.
 */
const whereOf = (options: ToolsFromMcpOptions): string => {
  if (isStdio(options)) return options.command
  const url = new URL(options.url)
  return `${url.origin}${url.pathname}`
}

/** whereOf, or as given when it is not even a URL. */
const upstreamOf = (options: ToolsFromMcpOptions): string => {
  try {
    return whereOf(options)
  } catch {
    return String((options as McpHttpServer).url)
  }
}

const messageOf = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ""
    return `${error.message}${cause}`
  }
  return String(error)
}

/** A name planTools accepts: an identifier that neither language nor the generated modules reserve. */
const usable = (name: string): boolean => TOOL_NAME.test(name) && !RESERVED_TOOL_NAMES.has(name)

/**
 * The sandbox names of the upstream tools: `prefix + name` where that is usable; otherwise made
 * one (other characters → "_", "_" before a leading digit, cut to 64, "_" after a reserved word),
 * numbered on a clash ("_2", "_3", …).
 */
export const sandboxNames = (upstreamNames: ReadonlyArray<string>, prefix = ""): ReadonlyArray<string> => {
  const names: Array<string | undefined> = upstreamNames.map(() => undefined)
  const taken = new Set<string>()
  // Names usable as they are keep them, whatever order the server lists them in.
  upstreamNames.forEach((upstream, i) => {
    const name = prefix + upstream
    if (usable(name) && !taken.has(name)) {
      names[i] = name
      taken.add(name)
    }
  })
  upstreamNames.forEach((upstream, i) => {
    if (names[i] !== undefined) return
    let base = (prefix + upstream).replace(/[^A-Za-z0-9_]/g, "_")
    if (!/^[A-Za-z_]/.test(base)) base = `_${base}`
    base = base.slice(0, MAX_NAME)
    if (RESERVED_TOOL_NAMES.has(base)) base = `${base.slice(0, MAX_NAME - 1)}_`
    let name = base
    for (let n = 2; taken.has(name) || !usable(name); n++) name = `${base.slice(0, MAX_NAME - `_${n}`.length)}_${n}`
    names[i] = name
    taken.add(name)
  })
  return names as ReadonlyArray<string>
}

/** A tools/call result, as far as unwrapping it goes (the SDK's CallToolResult, or the 2024-10-07 `toolResult` form). */
export interface CallToolResultLike {
  readonly content?: ReadonlyArray<{ readonly type: string; readonly text?: unknown }> | undefined
  readonly structuredContent?: unknown
  readonly isError?: boolean | undefined
  readonly toolResult?: unknown
}

const parsedOrText = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * A tools/call result as the value sandboxed code gets: `isError` → throws an Error with the text
 * content; `structuredContent` when there is one; content that is all text → each text parsed as
 * JSON where it parses, else the text (one block → that value, several → an array); anything else
 * (images, audio, resources, links) → the content array as it is; no content → null.
 */
export const unwrapCallToolResult = (result: CallToolResultLike, tool = "the tool"): unknown => {
  const content = result.content ?? []
  const texts = content.flatMap((block) =>
    block.type === "text" && typeof block.text === "string" ? [block.text] : []
  )
  if (result.isError === true) {
    throw new Error(texts.length > 0 ? texts.join("\n") : `${tool} reported an error without a message`)
  }
  if (result.structuredContent !== undefined && result.structuredContent !== null) return result.structuredContent
  if (result.content === undefined && "toolResult" in result) return result.toolResult
  if (content.length === 0) return null
  if (texts.length === content.length) return texts.length === 1 ? parsedOrText(texts[0]!) : texts.map(parsedOrText)
  return content
}

interface UpstreamTool {
  readonly name: string
  readonly description?: string | undefined
  readonly title?: string | undefined
  readonly inputSchema: { readonly [key: string]: unknown }
  readonly execution?: { readonly taskSupport?: string | undefined } | undefined
}

const listAllTools = async (client: Client): Promise<ReadonlyArray<UpstreamTool>> => {
  const tools: Array<UpstreamTool> = []
  const seen = new Set<string>()
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await client.listTools(cursor === undefined ? undefined : { cursor })
    tools.push(...result.tools)
    cursor = result.nextCursor
    if (cursor === undefined) return tools
    if (seen.has(cursor)) throw new Error(`tools/list returned the cursor ${JSON.stringify(cursor)} twice`)
    seen.add(cursor)
  }
  throw new Error(`tools/list did not end within ${MAX_PAGES} pages`)
}

const validateOptions = (options: ToolsFromMcpOptions): void => {
  const upstream = upstreamOf(options)
  const fail = (message: string) => {
    throw new McpUpstreamFailed({ upstream, reason: "invalid-options", message })
  }
  if (options.prefix !== undefined && options.prefix !== "" && !PREFIX.test(options.prefix)) {
    fail(`prefix ${JSON.stringify(options.prefix)} is not an identifier prefix (${PREFIX.source})`)
  }
  if (!isStdio(options)) {
    let url: URL | undefined
    try {
      url = new URL(options.url)
    } catch {
      fail(`${JSON.stringify(String(options.url))} is not a URL`)
    }
    if (url !== undefined && url.protocol !== "http:" && url.protocol !== "https:")
      fail(`${url.protocol} URLs are not Streamable HTTP`)
  }
}

/** Connects, lists the tools and maps them; any failure closes what was opened. */
export const toolsFromMcp = async (options: ToolsFromMcpOptions): Promise<McpUpstream> => {
  validateOptions(options)
  const where = whereOf(options)
  let stderrTail = ""
  let transport: StdioClientTransport | StreamableHTTPClientTransport
  if (isStdio(options)) {
    const stdio = new StdioClientTransport({
      command: options.command,
      args: [...(options.args ?? [])],
      ...(options.env === undefined ? {} : { env: { ...options.env } }),
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      // Piped (not inherited) so that a server that dies at start can be told about with its last words.
      stderr: "pipe"
    })
    const forward = options.stderr !== "ignore"
    stdio.stderr?.on("data", (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL)
      if (forward) process.stderr.write(chunk)
    })
    transport = stdio
  } else {
    transport = new StreamableHTTPClientTransport(new URL(options.url), {
      requestInit: { headers: { ...options.headers } }
    })
  }

  const client = new Client({ name: "hermes-sandbox", version: VERSION }, { capabilities: {} })
  let closedBy: "us" | "upstream" | undefined
  client.onclose = () => {
    closedBy ??= "upstream"
  }
  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      closedBy ??= "us"
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
        // Ends the server's session now rather than at its idle expiry; a server may refuse (405).
        await transport.terminateSession().catch(() => undefined)
      }
      await client.close().catch(() => undefined)
    })())

  const failed = async (reason: "connect-failed" | "list-failed", error: unknown): Promise<never> => {
    await close()
    const said = stderrTail.trim() === "" ? "" : `; its standard error ended with: ${stderrTail.trim()}`
    const what = reason === "connect-failed" ? "could not be connected to" : "did not list its tools"
    throw new McpUpstreamFailed({
      upstream: where,
      reason,
      message: `the MCP server ${where} ${what}: ${messageOf(error)}${said}`
    })
  }

  try {
    await client.connect(transport)
  } catch (error) {
    return failed("connect-failed", error)
  }
  const info = client.getServerVersion()
  const server = { name: info?.name ?? where, version: info?.version ?? "" }
  const label = `"${options.name ?? server.name}" (${where})`

  let listed: ReadonlyArray<UpstreamTool>
  try {
    listed = await listAllTools(client)
  } catch (error) {
    return failed("list-failed", error)
  }

  const known = new Set(listed.map((t) => t.name))
  const unknown = [...(options.include ?? []), ...(options.exclude ?? [])].filter((n) => !known.has(n))
  if (unknown.length > 0) {
    await close()
    throw new McpUpstreamFailed({
      upstream: where,
      reason: "invalid-options",
      message: `the MCP server ${label} has no tool ${unknown.map((n) => JSON.stringify(n)).join(", ")} (include/exclude name upstream tools; it has ${[...known].map((n) => JSON.stringify(n)).join(", ")})`
    })
  }
  const include = options.include === undefined ? undefined : new Set(options.include)
  const exclude = new Set(options.exclude ?? [])
  const chosen = listed.filter((t) => (include === undefined || include.has(t.name)) && !exclude.has(t.name))
  const skipped: Array<SkippedTool> = []
  const bridged = chosen.filter((t) => {
    // tools/call refuses these (the SDK's client insists on its experimental tasks API for them).
    if (t.execution?.taskSupport !== "required") return true
    skipped.push({
      upstream: t.name,
      reason: "it requires task-based execution (MCP tasks), which the bridge does not speak"
    })
    return false
  })
  if (include !== undefined && skipped.length > 0) {
    await close()
    throw new McpUpstreamFailed({
      upstream: where,
      reason: "invalid-options",
      message: `the MCP server ${label}'s tool ${skipped.map((s) => JSON.stringify(s.upstream)).join(", ")} cannot be bridged: ${skipped[0]!.reason}`
    })
  }

  const lost = () =>
    closedBy === "us"
      ? `the connection to the MCP server ${label} has been closed`
      : `the MCP server ${label} closed the connection`
  const call =
    (upstreamName: string) =>
    async (args: unknown, context?: ToolContext): Promise<unknown> => {
      if (closedBy !== undefined) throw new Error(lost())
      const signal = context?.signal
      let result: CallToolResultLike
      try {
        result = await client.callTool(
          { name: upstreamName, arguments: (args ?? {}) as Record<string, unknown> },
          undefined,
          { ...(signal === undefined ? {} : { signal }), timeout: CALL_TIMEOUT_MS }
        )
      } catch (error) {
        if (signal?.aborted === true)
          throw new Error(`the call to ${upstreamName} on the MCP server ${label} was cancelled`)
        if (closedBy !== undefined || (error instanceof McpError && error.code === ErrorCode.ConnectionClosed))
          throw new Error(lost())
        // A JSON-RPC error the server answered with (invalid params, unknown tool, ...).
        if (error instanceof McpError) throw new Error(`the MCP server ${label}: ${error.message}`)
        // The request did not get through (an HTTP server gone, refused, answering garbage).
        throw new Error(`the MCP server ${label} could not be reached: ${messageOf(error)}`)
      }
      return unwrapCallToolResult(result, `the MCP server ${label}'s tool ${upstreamName}`)
    }

  const names = sandboxNames(
    bridged.map((t) => t.name),
    options.prefix ?? ""
  )
  const tools: Record<string, Tool> = {}
  const renamed: Array<RenamedTool> = []
  bridged.forEach((t, i) => {
    const name = names[i]!
    if (name !== (options.prefix ?? "") + t.name) renamed.push({ upstream: t.name, name })
    const description = t.description ?? t.title
    tools[name] = {
      ...(description === undefined ? {} : { description }),
      parameters: t.inputSchema,
      handler: call(t.name)
    }
  })

  return { tools, server, renamed, skipped, close, [Symbol.asyncDispose]: close }
}

/** The bridge in Effect: the connection lives as long as the Scope. */
export const McpTools = {
  scoped: (options: ToolsFromMcpOptions): Effect.Effect<McpUpstream, McpUpstreamFailed, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.tryPromise({
        try: () => toolsFromMcp(options),
        catch: (error) =>
          error instanceof McpUpstreamFailed
            ? error
            : new McpUpstreamFailed({
                upstream: upstreamOf(options),
                reason: "connect-failed",
                message: messageOf(error)
              })
      }),
      (upstream) => Effect.promise(() => upstream.close())
    )
} as const
