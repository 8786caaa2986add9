import { Layer } from "effect"
import { Session } from "@hermes-sandbox/core"
import { MemoryJournal } from "@hermes-sandbox/events"
import { KubernetesRuntime } from "@hermes-sandbox/kubernetes"
import { liveTime } from "../support/contractTime.js"
import { runtimeOptions } from "../support/kubernetes.js"
import { bashCommand, pythonCell, pythonSnippet, sessionContract } from "../support/sessionContract.js"

// The sessions contract on the live cluster (test/session-contract.docker.test.ts on Docker): calls,
// files, lifecycles and the kernel's cells, every call an exec whose stdin cannot end (stream
// protocol v4). A quarter CPU each: a pod's CPU limit is its request, reserved on this 2-core node.
sessionContract("kubernetes", {
  base: Layer.merge(KubernetesRuntime.layer(runtimeOptions()), MemoryJournal.layer()),
  sessions: (options) => Session.layer({ cpus: 0.25, ...options }),
  command: bashCommand,
  snippet: pythonSnippet,
  cell: pythonCell,
  time: liveTime,
  bindMounts: false
})
