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
 *
 * Modules are exported as namespaces (`Upstreams.connectUpstreams`, `Resources.fileUri`,
 * `ToolSchemas.ExecuteCodeResult`). Flat, and nowhere else on this entry: the error classes, the
 * entry points and their option and result types (McpSandbox, McpSession, serveStdio, serveHttp,
 * toolsFromMcp and its Effect face McpTools, loadUpstreamConfig), the result caps' and image mode's types and VERSION.
 * Those modules' other exports are entries of their own (`@hermes-sandbox/mcp/toolsFromMcp`'s
 * unwrapCallToolResult, `@hermes-sandbox/mcp/upstreamConfig`'s parseUpstreamConfig), as is every
 * top-level module; `tools/` is not exported.
 */
export * as FileStore from "./fileStore.js"
export * as Loopback from "./loopback.js"
export * as Resources from "./resources.js"
export * as ToolSchemas from "./tools/schemas.js"
export * as Upstreams from "./upstreams.js"

// The errors (each a Schema.TaggedError; `catchTag` names them).
export {
  FileOperationFailed,
  InvalidArguments,
  McpSessionClosed,
  SessionLimitReached,
  UpstreamConfigError
} from "./errors.js"
export { McpUpstreamFailed } from "./toolsFromMcp.js"

// The entry points, and the types users write with them.
export { McpSandbox, type McpSandboxOptions, type McpToolLimits } from "./McpSandbox.js"
export { McpSession, type McpSessionContext } from "./McpSession.js"
// createServer (one MCP session's SDK Server, for a transport of one's own) is the entry point
// "@hermes-sandbox/mcp/server", not this one: its declarations name the SDK's, and the SDK 1.x's
// name the DOM-only HeadersInit (modelcontextprotocol/typescript-sdk#2568), which a strict
// Node-only consumer (skipLibCheck: false, no "DOM" lib) cannot compile. This entry keeps clear of them.
export { serveStdio, type StdioOptions, type StdioServing } from "./stdio.js"
export { type HttpMount, type HttpMountContext, type HttpOptions, type HttpServing, serveHttp } from "./http.js"
export { McpTools, type McpUpstream, toolsFromMcp, type ToolsFromMcpOptions } from "./toolsFromMcp.js"
export { loadUpstreamConfig, type UpstreamConfig, type UpstreamServer, type UpstreamServers } from "./upstreamConfig.js"
export type { ImageMode } from "./tools/images.js"
export type { ResultCaps } from "./tools/results.js"
export { VERSION } from "./version.js"
