/**
 * @hermes-sandbox/mcp: a Model Context Protocol server whose tools run in hermes-sandbox's
 * single-use, hardened Docker sandboxes. `hermes-sandbox mcp` (the CLI) starts it; in code:
 *
 *   const sandbox = await McpSandbox.open({ journal: "default" })
 *   await serveStdio(sandbox)               // or: await serveHttp(sandbox, { token })
 *
 * Tools: execute_code (one fresh sandbox per call), terminal, read_file, write_file and
 * reset_session (one sandbox per MCP session). Resource templates: sandbox://executions/{id}/events,
 * and sandbox://executions/{id}/files/{+path} (what execute_code's `collect` brought back, kept a while).
 *
 * Also the other way round: `toolsFromMcp({ command } | { url })` turns an upstream MCP server's
 * tools into sandbox tools that sandboxed code may call, and `McpSandbox.open({ upstream })`
 * (`loadUpstreamConfig(file)`: an `mcpServers` file) gives them to every execute_code run.
 */
export {
  FileOperationFailed,
  InvalidArguments,
  McpSessionClosed,
  SessionLimitReached,
  UpstreamConfigError
} from "./errors.js"
export { type HttpOptions, type HttpServing, serveHttp } from "./http.js"
export { isLoopback } from "./loopback.js"
export { McpSandbox, type McpSandboxOptions, type McpToolLimits, resolveLimits } from "./McpSandbox.js"
export { McpSession, type McpSessionContext } from "./McpSession.js"
export { FileStore, type FileStoreLimits, type StoredExecution } from "./fileStore.js"
export { EVENTS_TEMPLATE, FILES_TEMPLATE, fileOfUri, fileUri } from "./resources.js"
// createServer (one MCP session's SDK Server, for a transport of one's own) is the entry point
// "@hermes-sandbox/mcp/server", not this one: its declarations name the SDK's, and the SDK 1.x's
// name the DOM-only HeadersInit (modelcontextprotocol/typescript-sdk#2568), which a strict
// Node-only consumer (skipLibCheck: false, no "DOM" lib) cannot compile. This entry keeps clear of them.
export { serveStdio, type StdioOptions, type StdioServing } from "./stdio.js"
export { tools } from "./tools/definitions.js"
export {
  type CallToolResultLike,
  type McpBridgeOptions,
  type McpHttpServer,
  type McpStdioServer,
  McpTools,
  type McpUpstream,
  McpUpstreamFailed,
  type RenamedTool,
  sandboxNames,
  type SkippedTool,
  toolsFromMcp,
  type ToolsFromMcpOptions,
  unwrapCallToolResult
} from "./toolsFromMcp.js"
export { type ConnectedUpstream, connectUpstreams, defaultPrefix, type Upstreams } from "./upstreams.js"
export {
  loadUpstreamConfig,
  parseUpstreamConfig,
  type UpstreamConfig,
  upstreamConfigOf,
  type UpstreamServer,
  type UpstreamServers
} from "./upstreamConfig.js"
export * as ToolSchemas from "./tools/schemas.js"
export { DEFAULT_RESULT_CAPS, headTail, type ResultCaps } from "./tools/results.js"
export { VERSION } from "./version.js"
