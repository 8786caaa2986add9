/**
 * Can the engine apply a sandbox's hard limits (memory and swap, pids, CPU quota)? Docker does
 * not refuse a limit it cannot apply, in two ways found on real engines:
 * - a kernel without a cgroup controller: `docker info` says so (`PidsLimit: false`…), and each
 *   create succeeds with a warning ("… PIDs limit discarded.") that dockerode's createContainer
 *   throws away;
 * - a rootless engine on cgroup v1 (cgroup driver "none"): `docker info` says so too, but the
 *   create succeeds WITHOUT any warning and even records the limits, which are never applied
 *   (a program allocates 700 MiB under a 512 MiB limit).
 * So the runtime asks `info` once, and still reads every create's warnings.
 */

export type Limit = "memory" | "swap" | "pids" | "cpu"

/** The `docker info` fields that say which limits the engine applies. */
export interface EngineLimitInfo {
  readonly MemoryLimit?: boolean
  readonly SwapLimit?: boolean
  readonly PidsLimit?: boolean
  readonly CpuCfsQuota?: boolean
  readonly CgroupDriver?: string
  readonly Warnings?: ReadonlyArray<string> | null
}

/** The sandbox limits (the SDK sets all four on every sandbox) that the engine cannot apply. */
export const unsupported = (info: EngineLimitInfo): ReadonlyArray<Limit> => {
  const supported: ReadonlyArray<readonly [Limit, boolean | undefined]> = [
    ["memory", info.MemoryLimit],
    ["swap", info.SwapLimit],
    ["pids", info.PidsLimit],
    ["cpu", info.CpuCfsQuota]
  ]
  return supported.filter(([, ok]) => ok !== true).map(([limit]) => limit)
}

/** Why, in the engine's words when it gave any (e.g. rootless without cgroups). */
const engineReason = (info: EngineLimitInfo): string => {
  const said = (info.Warnings ?? []).filter((w) => /cgroup/i.test(w)).map((w) => w.replace(/^WARNING:\s*/, ""))
  return said.length > 0
    ? said.join(" ")
    : `its kernel or cgroup setup lacks the controllers (cgroup driver ${info.CgroupDriver ?? "unknown"})`
}

export const unsupportedMessage = (info: EngineLimitInfo, missing: ReadonlyArray<Limit>): string =>
  `the engine cannot apply the sandbox's ${missing.join(", ")} limits: ${engineReason(info)}`

/** A create's warnings that say a limit was dropped (moby's all end in "… discarded." or "Memory limited without swap."). */
export const discardedByCreate = (warnings: ReadonlyArray<string>): ReadonlyArray<string> =>
  warnings.filter((w) => /discarded|without swap/i.test(w))

export const WARN_OPTION = 'limitsUnsupported: "warn"'
