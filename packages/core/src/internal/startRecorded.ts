/**
 * How a created sandbox is started and its start recorded, shared by the executor, the warm pool
 * and sessions.
 */
import { Effect } from "effect"
import type { JournalEvent } from "@hermes-sandbox/events"
import type { SandboxRef, SandboxRuntime } from "../SandboxRuntime.js"

/**
 * Start the sandbox and record `ContainerStarted` in one uninterruptible step, as a create and its
 * record are (bounded by the start call's own deadline): the program may print before the engine
 * answers the start, so an interruption in between would record as never started a sandbox that ran.
 */
export const startRecorded = <E, R>(
  runtime: SandboxRuntime["Type"],
  container: SandboxRef,
  record: (event: JournalEvent) => Effect.Effect<unknown, E, R>
) =>
  runtime.start(container).pipe(
    Effect.zipRight(record({ type: "ContainerStarted", data: { containerId: container.id } })),
    Effect.uninterruptible
  )
