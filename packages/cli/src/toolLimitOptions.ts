/**
 * The upstream flags `run` and `mcp` share, and --tool-max-calls / --tool-timeout checked as tool
 * limits before anything loads (usage errors stay fast). Apart from upstreamOptions.ts, which
 * imports the MCP client code on use, so that the daemon's client (daemon/client.ts) holds none of it.
 */
import type { ToolLimits } from "@hermes-sandbox/core"
import { UsageError } from "./errors.js"
import { durationOption, numberOption } from "./sandboxOptions.js"

export interface UpstreamCommandOptions {
  readonly upstreamConfig?: string
  readonly toolMaxCalls?: string
  readonly toolTimeout?: string
}

/** --tool-max-calls and --tool-timeout as tool limits (undefined when neither is given); they need --upstream-config. */
export const toolLimitsOf = (options: UpstreamCommandOptions): Partial<ToolLimits> | undefined => {
  const maxCalls = numberOption("--tool-max-calls", options.toolMaxCalls, true)
  const callTimeoutMs = durationOption("--tool-timeout", options.toolTimeout)
  if (options.upstreamConfig === undefined && (maxCalls ?? callTimeoutMs) !== undefined)
    throw new UsageError("--tool-max-calls and --tool-timeout: only with --upstream-config")
  if (callTimeoutMs !== undefined && callTimeoutMs < 1)
    throw new UsageError(`--tool-timeout: at least 1ms, got ${JSON.stringify(options.toolTimeout)}`)
  if ((maxCalls ?? callTimeoutMs) === undefined) return undefined
  return { ...(maxCalls === undefined ? {} : { maxCalls }), ...(callTimeoutMs === undefined ? {} : { callTimeoutMs }) }
}
