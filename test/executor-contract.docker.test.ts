import { Layer } from "effect"
import { DockerExecutor } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"
import { liveTime } from "./support/contractTime.js"
import { executorContract, pythonProgram } from "./support/executorContract.js"
import { poolOn, warmPoolSize } from "./support/executor.js"

// The same contract on the real engine (started by .ci/run / scripts/ensure-engine.sh); with
// HERMES_SANDBOX_TEST_WARM_POOL=N (the engine-pool project) every executor keeps a warm pool of N.
executorContract(poolOn ? `docker, warm pool of ${warmPoolSize}` : "docker", {
  base: Layer.merge(DockerExecutor.runtimeLayer(), MemoryJournal.layer()),
  executor: (options) =>
    DockerExecutor.layer(
      poolOn && options.warmPool === undefined ? { ...options, warmPool: { size: warmPoolSize } } : options
    ),
  language: "python",
  program: pythonProgram,
  time: liveTime,
  warmPool: poolOn
})
