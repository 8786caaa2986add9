/**
 * A process's kernel start time: with host and pid, the identity of the process that wrote
 * an event (EventMetadata.started) or owns a container, safe against pid reuse — a live
 * process with the same pid but another start time is another process.
 */
import { readFileSync } from "node:fs"

/**
 * Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), or undefined
 * when the process does not exist or /proc is not available.
 *
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

/**
 * Whether `pid` is a running process: it exists (or exists under another user: EPERM) and is
 * not a zombie. A killed process whose parent died too stays a zombie until init reaps it,
 * which some inits do only every few seconds; it holds nothing and will never run again.
 *
 * @category predicates
 */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z" && state !== "X"
  } catch {
    // No /proc (not Linux): kill(0) is all there is to know.
    return true
  }
}
