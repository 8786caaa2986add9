/**
 * Which hard limits an engine cannot apply, read from what real engines answered (captured on
 * this machine: the shared engine, a private one without the pids and memory cgroups, a rootless
 * one on cgroup v1), and which create warnings mean a limit was dropped.
 */
import { describe, expect, it } from "@effect/vitest"
import * as ResourceLimits from "../src/ResourceLimits.js"

const shared = {
  MemoryLimit: true,
  SwapLimit: true,
  PidsLimit: true,
  CpuCfsQuota: true,
  CgroupDriver: "cgroupfs",
  Warnings: null
}
const noPidsNoMemory = {
  MemoryLimit: false,
  SwapLimit: false,
  PidsLimit: false,
  CpuCfsQuota: true,
  CgroupDriver: "cgroupfs",
  Warnings: null
}
const rootlessV1 = {
  MemoryLimit: false,
  SwapLimit: false,
  PidsLimit: false,
  CpuCfsQuota: false,
  CgroupDriver: "none",
  Warnings: [
    "WARNING: Running in rootless-mode without cgroups. To enable cgroups in rootless-mode, you need to boot the system in cgroup v2 mode."
  ]
}

describe("ResourceLimits", () => {
  it("lists the limits an engine's info says it cannot apply", () => {
    expect(ResourceLimits.unsupported(shared)).toEqual([])
    expect(ResourceLimits.unsupported(noPidsNoMemory)).toEqual(["memory", "swap", "pids"])
    expect(ResourceLimits.unsupported(rootlessV1)).toEqual(["memory", "swap", "pids", "cpu"])
    // An engine too old to say counts as unable.
    expect(ResourceLimits.unsupported({})).toEqual(["memory", "swap", "pids", "cpu"])
  })

  it("explains why in the engine's words when it gave any", () => {
    expect(ResourceLimits.unsupportedMessage(rootlessV1, ResourceLimits.unsupported(rootlessV1))).toBe(
      "the engine cannot apply the sandbox's memory, swap, pids, cpu limits: Running in rootless-mode without cgroups. To enable cgroups in rootless-mode, you need to boot the system in cgroup v2 mode."
    )
    expect(ResourceLimits.unsupportedMessage(noPidsNoMemory, ["memory", "swap", "pids"])).toBe(
      "the engine cannot apply the sandbox's memory, swap, pids limits: its kernel or cgroup setup lacks the controllers (cgroup driver cgroupfs)"
    )
  })

  it("picks the create warnings that mean a limit was dropped, and only those", () => {
    const warnings = [
      "Your kernel does not support PIDs limit capabilities or the cgroup is not mounted. PIDs limit discarded.",
      "Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.",
      "Your kernel does not support memory limit capabilities or the cgroup is not mounted. Limitation discarded.",
      "IPv4 forwarding is disabled. Networking will not work."
    ]
    expect(ResourceLimits.discardedByCreate(warnings)).toEqual(warnings.slice(0, 3))
    expect(ResourceLimits.discardedByCreate([])).toEqual([])
  })
})
