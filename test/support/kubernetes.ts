/**
 * What the cluster tier's files share: the runtime's options for this run's namespace, as the
 * ServiceAccount the global setup made (test/kubernetes-global-setup.ts), and an admin client for
 * what a test does as someone else (deleting a pod "from outside", counting what is left).
 */
import * as k8s from "@kubernetes/client-node"
import { type CreateExecutorOptions, createExecutor } from "@hermes-sandbox/docker"
import type { KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { Label } from "@hermes-sandbox/core/Labels"
import { Guarantees } from "@hermes-sandbox/kubernetes"
import { expect } from "vitest"
import { type HostileExecutor, hostileOver } from "../hostile/support.js"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "")
    throw new Error(`${name} is not set: run this file in the cluster tier (vitest --project cluster)`)
  return value
}

export const namespace = (): string => env("HERMES_SANDBOX_TEST_K8S_NAMESPACE")

/** Every guarantee a pod cannot give: the tier's executors accept them all, except where a test says otherwise. */
export const ALL_DEGRADED = Object.keys(Guarantees.DEGRADED_GUARANTEES) as Array<Guarantees.DegradedGuarantee>

export const runtimeOptions = (
  more: Partial<KubernetesRuntime.KubernetesRuntimeOptions> = {}
): KubernetesRuntime.KubernetesRuntimeOptions => ({
  kubeconfig: env("HERMES_SANDBOX_TEST_KUBECONFIG"),
  namespace: namespace(),
  imagePullPolicy: "Never",
  allowDegraded: ALL_DEGRADED,
  ...more
})

export const adminCore = (): k8s.CoreV1Api => {
  const kc = new k8s.KubeConfig()
  kc.loadFromFile(env("HERMES_SANDBOX_TEST_K8S_ADMIN"))
  return kc.makeApiClient(k8s.CoreV1Api)
}

/** The pods of one executor (its label) in this run's namespace right now. */
export const podsOfExecutor = async (executorId: string): Promise<Array<string>> =>
  (
    await adminCore().listNamespacedPod({ namespace: namespace(), labelSelector: `${Label.executor}=${executorId}` })
  ).items.map((p) => p.metadata?.name ?? "")

/** The sandbox pods in this run's namespace right now. */
export const podsLeft = async (): Promise<Array<string>> =>
  (await adminCore().listNamespacedPod({ namespace: namespace() })).items.map((p) => p.metadata?.name ?? "")

/**
 * A HostileExecutor (test/hostile/support.ts) over the cluster through the public Promise API,
 * createExecutor({ runtime: { kubernetes } }), so the hostile core cases run here unchanged. Its
 * `finish` checks that every pod it created is gone.
 */
export const kubernetesHostileExecutor = async (
  options: Omit<CreateExecutorOptions, "runtime"> = {},
  kubernetes: Partial<KubernetesRuntime.KubernetesRuntimeOptions> = {}
): Promise<HostileExecutor> =>
  hostileOver(
    await createExecutor({
      timeoutMs: 30_000,
      maxConcurrency: 4,
      awaitRemoval: true,
      cpus: 0.25,
      ...options,
      runtime: { kubernetes: runtimeOptions(kubernetes) }
    }),
    "runc",
    async (created) => {
      const left = await podsLeft()
      expect(
        created.map((c) => c.name).filter((name) => left.includes(name)),
        "pods left behind"
      ).toEqual([])
    }
  )
