/**
 * @hermes-sandbox/kubernetes — the SandboxRuntime port over the Kubernetes API: one hardened bare
 * Pod per sandbox. docs/kubernetes.md says how to run it; Guarantees.ts what a pod cannot give.
 */
export * as Doctor from "./Doctor.js"
export * as Guarantees from "./Guarantees.js"
export * as KubernetesExecutor from "./KubernetesExecutor.js"
export * as KubernetesRuntime from "./KubernetesRuntime.js"
export * as PodSpec from "./PodSpec.js"
