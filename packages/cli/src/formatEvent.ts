/** One readable timeline line per event: time, sequence, execution, type, the facts that matter. */
import type { EventEnvelope } from "@hermes-sandbox/events"

const short = (id: string) => id.slice(-12)

/** A caller's tags (the MCP server's session and tool, for one), as `key=value` pairs. */
const tagsOf = (d: Record<string, unknown>): string => {
  const tags = d.tags as Record<string, string> | undefined
  return tags === undefined ? "" : ` [${Object.entries(tags).map(([k, v]) => `${k}=${v}`).join(" ")}]`
}

/** ArtifactsCollected: how many files, their bytes, what was skipped and why, whether the walk ended. */
const artifacts = (d: Record<string, unknown>): string => {
  const files = (d.files as Array<{ size: number }> | undefined) ?? []
  const skipped = (d.skipped as Array<{ reason: string }> | undefined) ?? []
  const bytes = files.reduce((sum, f) => sum + f.size, 0)
  const reasons = new Map<string, number>()
  for (const s of skipped) reasons.set(s.reason, (reasons.get(s.reason) ?? 0) + 1)
  const why = [...reasons].map(([reason, n]) => `${n} ${reason}`).join(", ")
  return `${files.length} ${files.length === 1 ? "file" : "files"}, ${bytes} B` +
    (skipped.length === 0 ? "" : `, ${skipped.length} skipped (${why})`) +
    (d.truncated === true ? ", truncated" : "") +
    (d.status === "complete" ? "" : `, ${d.status}${d.reason === undefined ? "" : ` (${d.reason})`}`)
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
    case "ArtifactsCollected":
      return artifacts(d)
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
