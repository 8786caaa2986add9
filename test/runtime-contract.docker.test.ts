import { DockerExecutor } from "@hermes-sandbox/docker"
import { PYTHON_PROGRAMS, runtimeContract } from "./support/runtimeContract.js"

// The same contract, on the real engine (started by .ci/run / scripts/ensure-engine.sh).
runtimeContract("docker", DockerExecutor.runtimeLayer(), PYTHON_PROGRAMS, { seesOomKillsInside: true })
