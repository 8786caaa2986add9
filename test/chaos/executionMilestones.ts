/**
 * The milestones of executions in an executor's event stream, whether or not it keeps a warm
 * pool: a sandbox exists ("created") and runs ("started"). Pooled sandboxes are created and
 * started in their own streams before any request (not executions' milestones); an execution
 * that claims one gets a running sandbox at once, so its claim is both.
 */
import type { EventEnvelope } from "@hermes-sandbox/events"

export interface Milestone {
  readonly executionId: string
  readonly containerName: string
  readonly containerId: string
  /** A warm sandbox claimed from the pool. */
  readonly claimed: boolean
}

export const executionMilestones = (on: {
  readonly created?: (m: Milestone) => void
  readonly started?: (m: { readonly executionId: string; readonly claimed: boolean }) => void
}): ((event: EventEnvelope) => void) => {
  const poolStreams = new Set<string>()
  return (e) => {
    if (e.type === "ContainerCreated" && e.data.pooled === true) poolStreams.add(e.streamId)
    else if (e.type === "ContainerCreated")
      on.created?.({
        executionId: e.streamId,
        containerName: e.data.containerName,
        containerId: e.data.containerId,
        claimed: false
      })
    if (e.type === "ContainerStarted" && !poolStreams.has(e.streamId))
      on.started?.({ executionId: e.streamId, claimed: false })
    if (e.type === "ContainerClaimed") {
      on.created?.({
        executionId: e.streamId,
        containerName: e.data.containerName,
        containerId: e.data.containerId,
        claimed: true
      })
      on.started?.({ executionId: e.streamId, claimed: true })
    }
  }
}
