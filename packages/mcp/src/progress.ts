/**
 * Progress notifications for a call whose client sent a progress token: one as the lifecycle
 * advances (requested, sandbox created, started) and "still running" every few seconds, so a
 * client that resets its timeout on progress survives runs longer than its 60 s default. Without
 * a token nothing is sent.
 */
import type { EventEnvelope } from "@hermes-sandbox/events"

export interface ProgressExtra {
  readonly _meta?: { readonly progressToken?: string | number | undefined } | undefined
  readonly sendNotification: (n: {
    method: "notifications/progress"
    params: { progressToken: string | number; progress: number; message?: string }
  }) => Promise<void>
}

export interface Progress {
  /** Follow this execution's events (the call's onExecutionId). */
  readonly follow: (executionId: string) => void
  /** Say something (e.g. "opening the session sandbox"). */
  readonly say: (message: string) => void
  readonly stop: () => void
}

const NONE: Progress = { follow: () => {}, say: () => {}, stop: () => {} }

const words: Partial<Record<EventEnvelope["type"], string>> = {
  ExecutionRequested: "requested",
  ContainerCreated: "sandbox created",
  ContainerClaimed: "warm sandbox claimed",
  ContainerStarted: "program started",
  ContainerExited: "program exited",
  ExecutionTimedOut: "timed out",
  ContainerDestroyed: "sandbox removed"
}

export const progressFor = (
  extra: ProgressExtra,
  subscribe: (listener: (event: EventEnvelope) => void) => () => void,
  intervalMs: number
): Progress => {
  const token = extra._meta?.progressToken
  if (token === undefined) return NONE
  let count = 0
  let stopped = false
  const started = Date.now()
  const send = (message: string) => {
    if (stopped) return
    // A notification that cannot be sent (the client went away) is not the call's failure.
    extra
      .sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: ++count, message }
      })
      .catch(() => {})
  }
  const unsubscribes: Array<() => void> = []
  const timer = setInterval(() => send(`still running (${Math.round((Date.now() - started) / 1000)} s)`), intervalMs)
  timer.unref()
  return {
    follow: (executionId) => {
      unsubscribes.push(
        subscribe((event) => {
          const said = event.streamId === executionId ? words[event.type] : undefined
          if (said !== undefined) send(said)
        })
      )
    },
    say: send,
    stop: () => {
      stopped = true
      clearInterval(timer)
      for (const u of unsubscribes) u()
    }
  }
}
