/** One readable timeline line per event: time, sequence, execution, type, the facts that matter. */
import type { EventEnvelope } from "@hermes-sandbox/events"
import { journalText } from "./terminal.js"

const short = (id: string) => id.slice(-12)

/** A caller's tags (the MCP server's session and tool, for one), as `key=value` pairs. */
const tagsOf = (d: Record<string, unknown>): string => {
  const tags = d.tags as Record<string, string> | undefined
  return tags === undefined
    ? ""
    : ` [${Object.entries(tags)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ")}]`
}

/** ArtifactsCollected: how many files, their bytes, what was skipped and why, whether the walk ended. */
const artifacts = (d: Record<string, unknown>): string => {
  const files = (d.files as Array<{ size: number }> | undefined) ?? []
  const skipped = (d.skipped as Array<{ reason: string }> | undefined) ?? []
  const bytes = files.reduce((sum, f) => sum + f.size, 0)
  const reasons = new Map<string, number>()
  for (const s of skipped) reasons.set(s.reason, (reasons.get(s.reason) ?? 0) + 1)
  const omitted = typeof d.skippedOmitted === "number" ? d.skippedOmitted : 0
  const why =
    [...reasons].map(([reason, n]) => `${n} ${reason}`).join(", ") +
    (omitted > 0 ? `${reasons.size > 0 ? ", " : ""}${omitted} not listed` : "")
  return (
    `${files.length} ${files.length === 1 ? "file" : "files"}, ${bytes} B` +
    (skipped.length + omitted === 0 ? "" : `, ${skipped.length + omitted} skipped (${why})`) +
    (d.truncated === true ? ", truncated" : "") +
    (d.status === "complete" ? "" : `, ${d.status}${d.reason === undefined ? "" : ` (${d.reason})`}`)
  )
}

/** A tool's message as part of one line (a handler's message may span several). */
const oneLine = (message: unknown): string =>
  String(message)
    .replace(/\s*[\r\n]+\s*/g, " ")
    .trim()

/** Recorded arguments (when the caller opted in) are shown up to this many characters; `--json` has them all. */
const argumentsShown = 120
const clip = (text: string): string => (text.length <= argumentsShown ? text : `${text.slice(0, argumentsShown)}…`)

/** Recorded code and output (recordCode) are shown up to this many characters, as a JSON string (one line); `--json` has all that was recorded. */
const recordedShown = 200
const recorded = (text: unknown): string => {
  const quoted = JSON.stringify(String(text))
  return quoted.length <= recordedShown ? quoted : `${quoted.slice(0, recordedShown)}…`
}
const cellOf = (d: Record<string, unknown>): string =>
  d.cellId === undefined ? "" : `cell ${short(String(d.cellId))}, `

/** The call a ToolCall* event is about: its number and tool. */
const toolCall = (d: Record<string, unknown>): string => `call ${d.callId} ${d.tool}`

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
    case "ToolCallRequested":
      return `${toolCall(d)}, ${d.argumentBytes} B arguments${typeof d.argumentsSha256 === "string" ? ` (sha256 ${d.argumentsSha256.slice(0, 12)})` : " (not kept: too large)"}${d.arguments === undefined ? "" : ` ${clip(JSON.stringify(d.arguments))}`}`
    case "ToolCallCompleted":
      return `${toolCall(d)}, ${d.resultBytes} B result after ${d.durationMs} ms`
    case "ToolCallFailed":
      return `${toolCall(d)} ${d.reason} after ${d.durationMs} ms: ${oneLine(d.message)}`
    case "ToolCallRefused":
      return `${toolCall(d)} refused (${d.reason}): ${oneLine(d.message)}`
    case "CodeRecorded":
      return `${cellOf(d)}${d.codeBytes} B code${d.truncated === true ? " (head recorded)" : ""}: ${recorded(d.code)}`
    case "OutputRecorded":
      return (
        `${cellOf(d)}stdout ${d.stdoutBytes} B ${recorded(d.stdout)}, stderr ${d.stderrBytes} B ${recorded(d.stderr)}` +
        (d.truncated === true ? " (heads recorded)" : "")
      )
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
    case "SessionClaimed":
      return `from the pool, after ${d.waitedMs} ms ready`
    case "KernelStarted": {
      const failed = d.preloadFailed as Array<string>
      const preload = d.preload as Array<string>
      return `kernel ${short(String(d.kernelId))} #${d.generation} ready in ${d.startMs} ms${preload.length === 0 ? "" : `, preload ${preload.join(" ")}`}${failed.length === 0 ? "" : ` (failed: ${failed.join(" ")})`}`
    }
    case "CellExecuted": {
      const outputs = d.outputs as Array<{ kind: string; mime: Array<{ type: string; bytes: number }> }>
      const types = [...new Set(outputs.flatMap((o) => o.mime.map((m) => m.type)))]
      const omitted = (d.outputsOmitted as number) + (d.displaysOmitted as number)
      return (
        `cell ${short(String(d.cellId))} [${d.executionCount}] ${d.status} after ${d.durationMs} ms, ${d.codeBytes} B code, ` +
        `stdout ${d.stdoutBytes} B${d.stdoutTruncated ? " (truncated)" : ""}, stderr ${d.stderrBytes} B${d.stderrTruncated ? " (truncated)" : ""}` +
        (outputs.length === 0
          ? ""
          : `, ${outputs.length} ${outputs.length === 1 ? "output" : "outputs"} (${types.join(" ")})`) +
        (omitted === 0 ? "" : `, ${omitted} omitted`) +
        (d.toolCallsMade === 0 ? "" : `, ${d.toolCallsMade} tool calls`) +
        (d.oomKilled === true ? ", OOM killed" : "") +
        (d.stateLost === true ? ", state lost" : "")
      )
    }
    case "KernelRestarted":
      return `kernel ${short(String(d.kernelId))} #${d.generation} ended (${d.reason})${d.signal === undefined ? "" : `, signal ${d.signal}`}${d.oomKilled === true ? ", OOM killed" : ""}${d.cellId === undefined ? "" : ` under cell ${short(String(d.cellId))}`}`
    case "ProcessStarted":
      return `process ${short(String(d.processId))} pid ${d.pid}, command ${d.commandBytes} B sha256 ${String(d.commandSha256).slice(0, 12)}`
    case "ProcessExited":
      return (
        `process ${short(String(d.processId))} ` +
        (d.exitCode !== undefined ? `exit ${d.exitCode}` : "ended") +
        (d.signal === undefined ? "" : ` (kill ${d.signal})`) +
        (d.reason === undefined ? "" : ` (${d.reason})`) +
        ` after ${Math.round(Number(d.durationMs))} ms, ${d.stdoutBytes} B out, ${d.stderrBytes} B err`
      )
    case "ExecutorLease":
      return `${d.leaseMs} ms, host ${e.metadata.host} pid ${e.metadata.pid}`
    case "ExecutorClosed":
      return ""
    default:
      return JSON.stringify(d)
  }
}

/** The line, its journal-sourced text neutralized (terminal.ts, journalText): one line, whatever the names hold. */
export const formatEvent = (e: EventEnvelope): string =>
  `${new Date(e.timestamp).toISOString()}  #${String(e.sequence).padStart(6)}  ${short(e.streamId)}  ${e.type.padEnd(20)}  ${journalText(details(e))}`.trimEnd()
