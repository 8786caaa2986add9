/** The text of `hermes-sandbox events summary`: one line per fact, tool calls one line per tool. */
import type { Summary } from "@hermes-sandbox/events/Projection"
import { journalText } from "./terminal.js"

const label = (name: string) => name.padEnd(18)

export const formatSummary = (summary: Summary): string => {
  const tools = Object.entries(summary.toolCalls).map(
    ([tool, n]) =>
      `${journalText(tool)}: ${n.requested} requested, ${n.completed} completed, ${n.failed} failed, ${n.refused} refused`
  )
  const lines = [
    `${label("executions")}${summary.total}`,
    `${label("outcomes")}${Object.entries(summary.byOutcome)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
    `${label("duration (ms)")}p50 ${summary.durationMs.p50}, p95 ${summary.durationMs.p95}, p99 ${summary.durationMs.p99}, max ${summary.durationMs.max} (n=${summary.durationMs.count})`,
    `${label("exit codes")}${
      Object.entries(summary.exitCodes)
        .map(([k, v]) => `${k}: ${v}`)
        .join(", ") || "-"
    }`,
    `${label("containers alive")}${summary.containersAlive}`,
    `${label("open lifecycles")}${summary.openLifecycles}`,
    // Only when the journal holds ownership leases (see ARCHITECTURE.md, "Ownership across hosts").
    ...(summary.executors === undefined
      ? []
      : [`${label("executors")}${summary.executors.open} open, ${summary.executors.closed} closed`]),
    // The first tool on the label's line, the others aligned under it.
    `${label("tool calls")}${tools.length === 0 ? "-" : tools.join(`\n${label("")}`)}`
  ]
  return `${lines.join("\n")}\n`
}
