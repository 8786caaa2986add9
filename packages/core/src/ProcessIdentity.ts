/**
 * Who owns a container: host, pid and the process's start time. The start
 * time makes the identity safe against pid reuse: a live process with the
 * owner's pid but another start time is not the owner. The host is the host
 * id (`HostIdentity`: `HERMES_SANDBOX_HOST_ID`, else the hostname), the same
 * one the journal's metadata records.
 */
import { HostIdentity, ProcessStart } from "@hermes-sandbox/events"

export interface ProcessIdentity {
  readonly host: string
  readonly pid: number
  /** Kernel start time in clock ticks since boot (/proc/<pid>/stat field 22); "" where unknown. */
  readonly started: string
}

/** Kernel start time of `pid` (clock ticks since boot), undefined if it does not exist. */
export const startTimeOf = ProcessStart.startTimeOf

export const self: ProcessIdentity = {
  host: HostIdentity.current,
  pid: process.pid,
  started: startTimeOf(process.pid) ?? ""
}

/**
 * Whether the process is provably gone. Only a process on this host can be
 * proven gone from its pid; for another host the answer is false (callers then
 * ask its ownership lease, OwnerLease.ts, and last the container's deadline label).
 */
export const isGone = (owner: {
  readonly host?: string | undefined
  readonly pid?: number | undefined
  readonly started?: string | undefined
}): boolean => {
  if (owner.host !== self.host || owner.pid === undefined || !Number.isInteger(owner.pid) || owner.pid <= 0)
    return false
  if (owner.pid === self.pid && (owner.started === undefined || owner.started === "" || owner.started === self.started))
    return false
  if (!ProcessStart.isRunning(owner.pid)) return true
  if (owner.started !== undefined && owner.started !== "") {
    const now = startTimeOf(owner.pid)
    return now !== undefined && now !== owner.started
  }
  return false
}
