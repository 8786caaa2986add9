/**
 * The one place where a SandboxSpec becomes a Pod: packages/docker's ContainerSpec.ts, said in
 * securityContext. What a pod cannot say is in Guarantees.ts, and refused unless allowed.
 * SECURITY.md ("Kubernetes") maps each line to its Docker counterpart.
 */
import type { V1Pod } from "@kubernetes/client-node"
import { Labels, type SandboxSpec } from "@hermes-sandbox/core"
import { SANDBOX_BASE_ENV } from "@hermes-sandbox/core/SandboxRuntime"

/** The container's name in every sandbox pod (attach and exec name it). */
export const CONTAINER = "main"

/** The seccomp profile's file name under the kubelet's seccomp root (`hermes-sandbox kubernetes install-seccomp`). */
export const DEFAULT_SECCOMP_PROFILE = "hermes-sandbox.json"

export interface PodOptions {
  readonly namespace: string
  /** A RuntimeClass (gVisor: one whose handler is runsc); none = the node's default runtime. */
  readonly runtimeClassName?: string | undefined
  readonly imagePullPolicy: "Never" | "IfNotPresent" | "Always"
  /** `Localhost` profile under the kubelet's seccomp root. */
  readonly seccompProfile: string
}

/** A label value Kubernetes accepts (≤ 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends). */
export const isLabelValue = (value: string): boolean =>
  value === "" || (value.length <= 63 && /^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/.test(value))

/** Label keys: ours have no `/`, so the name part alone must fit (≤ 63 characters). */
const isLabelKey = (key: string): boolean => key.length <= 63 && /^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/.test(key)

/**
 * A sandbox's labels as the pod carries them: all of them as annotations (any value), and those a
 * label may hold also as labels, so a label selector finds them (list).
 */
export const podLabels = (labels: Readonly<Record<string, string>>) => ({
  annotations: { ...labels },
  labels: Object.fromEntries(Object.entries(labels).filter(([k, v]) => isLabelKey(k) && isLabelValue(v)))
})

/**
 * The kubelet gives every container the API server's address (KUBERNETES_SERVICE_HOST and the
 * Docker-link style KUBERNETES_PORT_*), whatever enableServiceLinks says. A sandbox has no business
 * with it (and no network to reach it): each is set empty, which the container's own env wins over.
 */
const API_SERVER_VARIABLES = [
  "KUBERNETES_SERVICE_HOST",
  "KUBERNETES_SERVICE_PORT",
  "KUBERNETES_SERVICE_PORT_HTTPS",
  "KUBERNETES_PORT",
  "KUBERNETES_PORT_443_TCP",
  "KUBERNETES_PORT_443_TCP_PROTO",
  "KUBERNETES_PORT_443_TCP_PORT",
  "KUBERNETES_PORT_443_TCP_ADDR"
]

/** Whole millicores, rounded up: a quota of at least what was asked. */
const millicores = (nanoCpus: number) => `${Math.max(1, Math.ceil(nanoCpus / 1e6))}m`

/** Seconds until the sandbox's `deadline` label (epoch seconds), at least 1: the pod's own backstop. */
const secondsUntilDeadline = (labels: Readonly<Record<string, string>>, nowMs: number): number | undefined => {
  const deadline = Number(labels[Labels.Label.deadline])
  return Number.isFinite(deadline) && deadline > 0 ? Math.max(1, Math.ceil(deadline - nowMs / 1000)) : undefined
}

export const toPod = (spec: SandboxSpec, options: PodOptions, nowMs: number = Date.now()): V1Pod => {
  const [uid = 1001, gid = uid] = spec.user.split(":").map(Number)
  const resources = { memory: String(spec.limits.memoryBytes), cpu: millicores(spec.limits.nanoCpus) }
  const backstop = secondsUntilDeadline(spec.labels, nowMs)
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: spec.name, namespace: options.namespace, ...podLabels(spec.labels) },
    spec: {
      // A single-use sandbox is never restarted (CIS 5.15).
      restartPolicy: "Never",
      // The pod's own end, should this SDK be gone: the sandbox's deadline label, as on Docker the watchdog's.
      ...(backstop === undefined ? {} : { activeDeadlineSeconds: backstop }),
      terminationGracePeriodSeconds: 0,
      // Nothing of the cluster reaches the sandbox: no token, no service variables.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostname: "sandbox",
      ...(options.runtimeClassName === undefined ? {} : { runtimeClassName: options.runtimeClassName }),
      securityContext: {
        // Never root: uid/gid 1001 from the seeds (OWASP #2).
        runAsUser: uid,
        runAsGroup: gid,
        runAsNonRoot: true,
        // The shipped allow-list, on the node (OWASP #6, CIS 5.22).
        seccompProfile: { type: "Localhost", localhostProfile: options.seccompProfile }
      },
      containers: [
        {
          name: CONTAINER,
          image: spec.image,
          imagePullPolicy: options.imagePullPolicy,
          command: [...spec.command],
          env: Object.entries({
            ...Object.fromEntries(API_SERVER_VARIABLES.map((name) => [name, ""])),
            ...SANDBOX_BASE_ENV,
            ...spec.env
          }).map(([name, value]) => ({ name, value })),
          workingDir: spec.workingDir,
          // The supervisor reads its header from stdin; no TTY, so stdout and stderr stay apart.
          stdin: spec.openStdin,
          stdinOnce: spec.openStdin,
          tty: false,
          securityContext: {
            // No privilege gain (OWASP #4, CIS 5.26); every capability dropped (OWASP #3, CIS 5.4).
            allowPrivilegeEscalation: false,
            privileged: false,
            capabilities: { drop: ["ALL"], ...(spec.capAdd.length === 0 ? {} : { add: [...spec.capAdd] }) },
            // Nothing in the image can change; writable space is the two sized volumes (OWASP #8, CIS 5.13).
            readOnlyRootFilesystem: true
          },
          // Limits = requests (Guaranteed QoS): a quota, not a share (OWASP #7, CIS 5.11, 5.12).
          resources: { limits: resources, requests: resources },
          volumeMounts: [
            { name: "tmp", mountPath: "/tmp" },
            { name: "workspace", mountPath: "/workspace" }
          ]
        }
      ],
      // Memory-backed: counted against the pod's memory, gone with the pod.
      volumes: [
        { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: String(spec.limits.tmpBytes) } },
        { name: "workspace", emptyDir: { medium: "Memory", sizeLimit: String(spec.limits.workspaceBytes) } }
      ]
    }
  }
}
