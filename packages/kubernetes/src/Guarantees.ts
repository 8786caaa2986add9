/**
 * What a Docker sandbox is given that a pod cannot be. The Kubernetes runtime refuses a sandbox that
 * needs one of these, before anything is created, unless the executor was created with
 * `allowDegraded` naming it: a guarantee is never dropped silently. `doctor` lists them.
 */
import { ContainerFailed, type SandboxSpec } from "@hermes-sandbox/core"

export const DEGRADED_GUARANTEES = {
  "pids-limit":
    "a pids limit per sandbox (a pod has none; fork bombs stop only at the kubelet's node-wide --pod-max-pids, if the node sets it)",
  ulimits: "per-process ulimits (nofile 1024, fsize 256 MiB, no core dumps): the pod API has no ulimits",
  "tmpfs-options":
    "nosuid, nodev, noexec on /tmp and an inode cap on /tmp and /workspace (an emptyDir of medium Memory is a plain tmpfs, bounded by its sizeLimit and the pod's memory)",
  "masked-paths":
    "the host information Docker sandboxes mask on top of the runtime's defaults (/proc/cmdline, the boot id, interrupts, disk and pressure statistics, /sys/block) and the empty /dev/pts",
  "network-none":
    "no network at all: a pod always has a network namespace with an interface; only a CNI that enforces a deny-all NetworkPolicy (or, on the local cluster, the in-netns veth plugin) keeps it off the network",
  "logging-off":
    "no engine-side log: the kubelet keeps each container's stdout and stderr under /var/log/pods (rotated at --container-log-max-size)"
} as const

export type DegradedGuarantee = keyof typeof DEGRADED_GUARANTEES

export const isDegradedGuarantee = (value: unknown): value is DegradedGuarantee =>
  typeof value === "string" && Object.hasOwn(DEGRADED_GUARANTEES, value)

/** What `spec` needs that a pod cannot give (every sandbox needs all but network-none, which only one without network needs). */
export const neededBy = (spec: SandboxSpec): ReadonlyArray<DegradedGuarantee> =>
  (Object.keys(DEGRADED_GUARANTEES) as Array<DegradedGuarantee>).filter((g) => g !== "network-none" || !spec.network)

/** Fails, naming every guarantee `spec` needs that is not in `allowed`. */
export const refuseUnallowed = (spec: SandboxSpec, allowed: ReadonlySet<DegradedGuarantee>) => {
  const missing = neededBy(spec).filter((g) => !allowed.has(g))
  return missing.length === 0
    ? undefined
    : new ContainerFailed({
        operation: "create",
        containerName: spec.name,
        reason: "guarantee-unavailable",
        message:
          `a pod cannot give ${missing.length === 1 ? "this guarantee" : "these guarantees"} of a sandbox: ` +
          missing.map((g) => `${g} (${DEGRADED_GUARANTEES[g]})`).join("; ") +
          `. Create the executor with runtime.kubernetes.allowDegraded: ${JSON.stringify(missing)} to run without ${
            missing.length === 1 ? "it" : "them"
          }`
      })
}
