/** One readable timeline line per event: time, sequence, execution, type, the facts that matter. */
import type { EventEnvelope } from "@hermes-sandbox/events"

const short = (id: string) => id.slice(-12)

const details = (e: EventEnvelope): string => {
  const d = e.data as Record<string, unknown>
  switch (e.type) {
    case "ExecutionRequested":
      return `${d.language} ${d.codeBytes} B code, timeout ${d.timeoutMs} ms, image ${d.image}`
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
