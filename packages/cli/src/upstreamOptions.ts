/**
 * The options `run` and `mcp` share for upstream MCP servers whose tools the sandboxed code may
 * call: --upstream-config FILE (JSON or YAML, mcpServers / mcp_servers), --tool-max-calls and
 * --tool-timeout (the limits on one run's calls, checked before the SDK loads: toolLimitOptions.ts);
 * the MCP client code (@hermes-sandbox/mcp, the MCP SDK) is imported only
 * when a file is given, so a command without the option does not pay for loading it.
 */
import type { UpstreamConfig, Upstreams } from "@hermes-sandbox/mcp"
import { UsageError } from "./errors.js"
import type { UpstreamCommandOptions } from "./toolLimitOptions.js"

/** The --upstream-config file, read (a mistake in it is a usage error); undefined without the flag. */
export const readUpstreamConfig = async (options: UpstreamCommandOptions): Promise<UpstreamConfig | undefined> => {
  if (options.upstreamConfig === undefined) return undefined
  const { loadUpstreamConfig, UpstreamConfigError } = await import("@hermes-sandbox/mcp")
  try {
    return loadUpstreamConfig(options.upstreamConfig)
  } catch (error) {
    throw error instanceof UpstreamConfigError ? new UsageError(`--upstream-config ${error.message}`) : error
  }
}

/**
 * How a failed start of the upstreams is reported: a configuration the servers refuse (include /
 * exclude naming tools they lack, names that clash, a tool that cannot be offered) is a usage error
 * (exit 2); a server that does not start or answer stays McpUpstreamFailed (exit 125). Both name it.
 */
export const upstreamStartError = async (options: UpstreamCommandOptions, error: unknown): Promise<unknown> => {
  const { McpUpstreamFailed } = await import("@hermes-sandbox/mcp")
  return error instanceof McpUpstreamFailed && error.reason === "invalid-options"
    ? new UsageError(`--upstream-config ${options.upstreamConfig}: ${error.message}`)
    : error
}

/**
 * Every upstream of the configuration connected (as `mcp` connects them at start: all at once,
 * one that cannot be used closing the others and failing, reported by upstreamStartError).
 */
export const connectUpstreamsOf = async (
  options: UpstreamCommandOptions,
  config: UpstreamConfig
): Promise<Upstreams.Upstreams> => {
  const { Upstreams } = await import("@hermes-sandbox/mcp")
  try {
    return await Upstreams.connectUpstreams(config.servers)
  } catch (error) {
    throw await upstreamStartError(options, error)
  }
}

/** What the connected upstreams offer, one line each (and each tool not offered, with why), for `forWhom` ("execute_code", "the program"). */
export const offeredLines = (
  options: UpstreamCommandOptions,
  upstreams: ReadonlyArray<Upstreams.ConnectedUpstream>,
  forWhom: string
): ReadonlyArray<string> => {
  if (upstreams.length === 0) return [`--upstream-config ${options.upstreamConfig}: no upstream MCP server enabled`]
  return upstreams.flatMap((u) => {
    const names = Object.keys(u.tools)
    return [
      `upstream MCP server "${u.name}" (${u.server.name} ${u.server.version}): ${names.length} tools for ${forWhom}: ${names.join(", ")}`,
      ...u.skipped.map((s) => `upstream MCP server "${u.name}": tool ${s.upstream} not offered: ${s.reason}`)
    ]
  })
}
