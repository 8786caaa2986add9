import { Layer } from "effect"
import { DockerExecutor, DockerSessions } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"
import { RUNTIMES } from "./hostile/support.js"
import { liveTime } from "./support/contractTime.js"
import {
  bashCommand,
  pythonCell,
  pythonSnippet,
  type SessionWorld,
  sessionContract
} from "./support/sessionContract.js"

// The same contract on the real engine (started by .ci/run / scripts/ensure-engine.sh).
const world: SessionWorld = {
  base: Layer.merge(DockerExecutor.runtimeLayer(), MemoryJournal.layer()),
  sessions: (options) => DockerSessions.layer(options),
  command: bashCommand,
  snippet: pythonSnippet,
  cell: pythonCell,
  time: liveTime
}
sessionContract("docker", world)
// The cells again under gVisor, where the kernel's supervisor, its freezing and its interrupts meet
// another kernel (the calls' cases are runtime-independent here; the hostile suites run both).
if (RUNTIMES.includes("runsc"))
  sessionContract("docker (runsc), cells", {
    ...world,
    sessions: (options) => DockerSessions.layer({ ...options, runtime: "runsc" }),
    parts: "cells"
  })
