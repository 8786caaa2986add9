import { KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { runtimeOptions } from "../support/kubernetes.js"
import { PYTHON_PROGRAMS, runtimeContract } from "../support/runtimeContract.js"

// The runtime's contract on the live cluster (test/runtime-contract.docker.test.ts on Docker). A
// pod's CPU is reserved on its node: at a whole CPU each this 2-core node would schedule only two of
// the three sandboxes a case holds.
runtimeContract("kubernetes", KubernetesRuntime.layer(runtimeOptions()), PYTHON_PROGRAMS, {
  startsOnCreate: true,
  nanoCpus: 0.25e9
})
