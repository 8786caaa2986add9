/** One readable timeline line per event: time, sequence, execution, type, the facts that matter. */
import type { EventEnvelope } from "@hermes-sandbox/events"

const short = (id: string) => id.slice(-12)

/** A caller's tags (the MCP server's session and tool, for one), as `key=value` pairs. */
const tagsOf = (d: Record<string, unknown>): string => {
  const tags = d.tags as Record<string, string> | undefined
  return tags === undefined ? "" : ` [${Object.entries(tags).map(([k, v]) => `${k}=${v}`).join(" ")}]`
}

const details = (e: EventEnvelope): string => {
  const d = e.data as Record<string, unknown>
  switch (e.type) {
    case "ExecutionRequested":
      return `${d.language} ${d.codeBytes} B code, timeout ${d.timeoutMs} ms, image ${d.image}${d.sessionId === undefined ? "" : `, session ${short(String(d.sessionId))}`}${tagsOf(d)}`
    case "ContainerCreated":
      return `${d.containerName}${d.pooled ? " (pooled)" : ""}`
    case "ContainerStarted":
      return ""
    case "ContainerClaimed":
      return `${d.containerName} from pool stream ${short(String(d.poolStreamId))}`
    case "ContainerExited":
      return `exit ${d.exitCode}${d.oomKilled ? " (OOM killed)" : ""} after ${d.durationMs} ms`
    case "ExecutionTimedOut":
      return `after ${d.timeoutMs} ms (killed)`
    case "ExecutionInterrupted":
      return String(d.reason)
    case "ExecutionFailed":
      return `${d.errorTag}: ${d.message}`
    case "ContainerDestroyed":
      return `${d.containerName} (${d.reason})`
    default:
      return JSON.stringify(d)
  }
}

export const formatEvent = (e: EventEnvelope): string =>
  `${new Date(e.timestamp).toISOString()}  #${String(e.sequence).padStart(6)}  ${short(e.streamId)}  ${e.type.padEnd(20)}  ${details(e)}`.trimEnd()
