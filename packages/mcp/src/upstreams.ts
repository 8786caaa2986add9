/**
 * The upstream MCP servers of one hermes-sandbox MCP server: each connected once, at start, through
 * the bridge (toolsFromMcp), their tools merged into the one set execute_code's code may call, and
 * all of them closed together. One connection per upstream server serves every MCP session and
 * every run (as the Hermes agent keeps one per configured server).
 */
import type { Tools } from "@hermes-sandbox/core"
import {
  McpUpstreamFailed,
  type McpUpstream,
  type RenamedTool,
  type SkippedTool,
  toolsFromMcp
} from "./toolsFromMcp.js"
import type { UpstreamServers } from "./upstreamConfig.js"

export interface ConnectedUpstream {
  /** Its name in the configuration. */
  readonly name: string
  /** What it said it is in initialize. */
  readonly server: { readonly name: string; readonly version: string }
  /** Its tools, by the names the code calls them by. */
  readonly tools: Tools
  readonly renamed: ReadonlyArray<RenamedTool>
  readonly skipped: ReadonlyArray<SkippedTool>
}

export interface Upstreams extends AsyncDisposable {
  readonly servers: ReadonlyArray<ConnectedUpstream>
  /** Every server's tools in one set (no two share a name). */
  readonly tools: Tools
  /** Ends every connection (each stdio server's process ends). Idempotent. */
  readonly close: () => Promise<void>
}

/** `<name>_` with what an identifier cannot hold made "_" (a server "my-fs" gets "my_fs_"). */
export const defaultPrefix = (name: string): string => {
  const prefix = `${name.replace(/[^A-Za-z0-9_]/g, "_")}_`
  return /^[A-Za-z_]/.test(prefix) ? prefix : `_${prefix}`
}

/**
 * Tools of several sources as one set; a name two sources give is an error naming both (give one
 * of them another prefix, or exclude the tool).
 */
export const mergeTools = (sources: ReadonlyArray<readonly [source: string, tools: Tools]>): Tools => {
  const merged: Record<string, Tools[string]> = {}
  const from = new Map<string, string>()
  for (const [source, tools] of sources) {
    for (const [name, tool] of Object.entries(tools)) {
      const first = from.get(name)
      if (first !== undefined) {
        throw new McpUpstreamFailed({
          upstream: source,
          reason: "invalid-options",
          message: `the tool name ${JSON.stringify(name)} is given by both ${first} and ${source}: give one of them another prefix, or exclude the tool from one`
        })
      }
      from.set(name, source)
      merged[name] = tool
    }
  }
  return merged
}

export const upstreamLabel = (name: string) => `the upstream MCP server ${JSON.stringify(name)}`

/**
 * Connect to every server at once. Any that fails (it does not start, does not answer, its tools
 * cannot be listed, include/exclude name tools it lacks, names clash) closes the others and
 * fails with McpUpstreamFailed naming it.
 */
export const connectUpstreams = async (servers: UpstreamServers): Promise<Upstreams> => {
  const names = Object.keys(servers)
  const settled = await Promise.allSettled(
    names.map((name) => {
      const server = servers[name]!
      return toolsFromMcp({ ...server, name, prefix: server.prefix ?? defaultPrefix(name) })
    })
  )
  const opened = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []))
  const closeAll = async () => {
    await Promise.allSettled(opened.map((u) => u.close()))
  }
  const failures = settled.flatMap((s, i) =>
    s.status === "rejected" ? [{ name: names[i]!, error: s.reason as unknown }] : []
  )
  if (failures.length > 0) {
    await closeAll()
    const { name, error } = failures[0]!
    const message = error instanceof Error ? error.message : String(error)
    const others =
      failures.length > 1
        ? ` (also failed: ${failures
            .slice(1)
            .map((f) => JSON.stringify(f.name))
            .join(", ")})`
        : ""
    throw new McpUpstreamFailed({
      upstream: name,
      reason: error instanceof McpUpstreamFailed ? error.reason : "connect-failed",
      message: `${upstreamLabel(name)} could not be used: ${message}${others}`
    })
  }

  const connected = opened.map(
    (u: McpUpstream, i): ConnectedUpstream => ({
      name: names[i]!,
      server: u.server,
      tools: u.tools,
      renamed: u.renamed,
      skipped: u.skipped
    })
  )
  let tools: Tools
  try {
    tools = mergeTools(connected.map((c) => [upstreamLabel(c.name), c.tools] as const))
  } catch (error) {
    await closeAll()
    throw error
  }
  let closing: Promise<void> | undefined
  const close = () => (closing ??= closeAll())
  return { servers: connected, tools, close, [Symbol.asyncDispose]: close }
}
