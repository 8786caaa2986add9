/**
 * A process's kernel start time: with host and pid, the identity of the process that wrote
 * an event (EventMetadata.started) or owns a container, safe against pid reuse — a live
 * process with the same pid but another start time is another process.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"

/**
 * Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), or undefined
 * when the process does not exist or /proc is not available.
 *
 * @since 0.1.0
 * @category constructors
 */
export const startTimeOf = (pid: number): string | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    // Field 2 (comm) may contain spaces and parentheses: fields restart after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}
