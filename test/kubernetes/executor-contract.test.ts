import { Layer } from "effect"
import { MemoryJournal } from "@hermes-sandbox/events"
import { KubernetesExecutor, KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { liveTime } from "../support/contractTime.js"
import { executorContract, pythonProgram } from "../support/executorContract.js"
import { runtimeOptions } from "../support/kubernetes.js"

// The executor's contract on the live cluster, with and without a warm pool. A pod's CPU limit is
// also its request, which the scheduler reserves on the node: at a CPU each, this 2-core node would
// schedule two sandboxes at once, and the contract runs up to four (a warm pool's included).
for (const warmPool of [false, true]) {
  executorContract(warmPool ? "kubernetes, warm pool of 1" : "kubernetes", {
    base: Layer.merge(KubernetesRuntime.layer(runtimeOptions()), MemoryJournal.layer()),
    executor: (options) =>
      KubernetesExecutor.layer({
        cpus: 0.25,
        // The pool of the contract's language: the others' pods would only be made and deleted again.
        ...(warmPool && options.warmPool === undefined
          ? { ...options, warmPool: { size: 1, languages: ["python"] } }
          : options),
        kubernetes: runtimeOptions()
      }),
    language: "python",
    program: pythonProgram,
    time: liveTime,
    warmPool
  })
}
