/**
 * What the cluster tier's files share: the runtime's options for this run's namespace, as the
 * ServiceAccount the global setup made (test/kubernetes-global-setup.ts), and an admin client for
 * what a test does as someone else (deleting a pod "from outside", counting what is left).
 */
import * as k8s from "@kubernetes/client-node"
import type { KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { Guarantees } from "@hermes-sandbox/kubernetes"

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

/** The sandbox pods in this run's namespace right now. */
export const podsLeft = async (): Promise<Array<string>> =>
  (await adminCore().listNamespacedPod({ namespace: namespace() })).items.map((p) => p.metadata?.name ?? "")
