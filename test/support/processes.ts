/**
 * Processes found by a marker argument on their command line (read from /proc), for tests that
 * start a process through something else (an MCP server started by the bridge, or by the server
 * under test) and must show it is gone afterwards.
 */
import { readdirSync, readFileSync } from "node:fs"
import { waitFor } from "./docker.js"

/** A marker argument unique to this test process and call. */
export const processMarker = (name: string) => `--hermes-${name}-${process.pid}-${Math.random().toString(36).slice(2)}`

/** Processes (other than this one) whose command line has `marker` as one of its arguments. */
export const pidsWith = (marker: string): Array<number> =>
  readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) return []
    try {
      return readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(marker) ? [Number(entry)] : []
    } catch {
      return []
    }
  })

/** Whether every process with `marker` has ended within `ms`. */
export const goneWithin = (marker: string, ms = 10_000) => waitFor(async () => pidsWith(marker).length === 0, ms)
