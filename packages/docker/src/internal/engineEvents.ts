/**
 * The engine's event API (`GET /events`), for the two ways the runtime reads it: a bounded
 * query of its log (`since`..`until`, which the engine answers and ends) and a long-lived
 * subscription (no `until`). Times are in the ENGINE's clock (epoch ms).
 */
import type { IncomingMessage } from "node:http"
import type Docker from "dockerode"
import { forEachLine } from "./lines.js"

export interface EngineEvent {
  readonly Action?: string
  readonly id?: string
  readonly Actor?: { readonly ID?: string; readonly Attributes?: Record<string, string> }
}

export interface EventFilter {
  readonly actions: ReadonlyArray<string>
  readonly container?: string
  readonly label?: string
}

/** The container an event is about. */
export const containerOf = (event: EngineEvent): string | undefined => event.Actor?.ID ?? event.id

/**
 * Open `GET /events`; `onEvent` gets each event of the stream, `onEnd` its end (or why it could
 * not be opened). The engine (20.10) sends the response headers only with its first event.
 */
export const streamEvents = (
  docker: Docker,
  query: {
    readonly filter: EventFilter
    readonly sinceMs: number
    readonly untilMs?: number
    readonly signal: AbortSignal
  },
  onEvent: (event: EngineEvent) => void,
  onEnd: (error: string | undefined) => void
): void => {
  const { filter } = query
  docker.modem.dial(
    {
      path: "/events?",
      method: "GET",
      isStream: true,
      abortSignal: query.signal,
      statusCodes: { 200: true, 400: "bad parameter", 500: "server error" },
      options: {
        since: (query.sinceMs / 1000).toFixed(3),
        ...(query.untilMs === undefined ? {} : { until: (query.untilMs / 1000).toFixed(3) }),
        filters: JSON.stringify({
          type: ["container"],
          event: filter.actions,
          ...(filter.container === undefined ? {} : { container: [filter.container] }),
          ...(filter.label === undefined ? {} : { label: [filter.label] })
        })
      }
    },
    (error: unknown, res: unknown) => {
      if (error) return onEnd(error instanceof Error ? error.message : String(error))
      const stream = res as IncomingMessage
      let ended = false
      const end = (why: string | undefined) => {
        if (ended) return
        ended = true
        onEnd(why)
      }
      forEachLine(stream, (line) => {
        if (line.trim() === "") return
        let event: EngineEvent
        try {
          event = JSON.parse(line)
        } catch {
          return // not an event line
        }
        if (!ended) onEvent(event)
      })
      stream.on("end", () => end(undefined))
      stream.on("close", () => end("the connection closed"))
      stream.on("error", (e) => end(e.message))
    }
  )
}

/** The events the engine logged between two times (a query it answers and ends). */
export const queryEvents = (
  docker: Docker,
  query: {
    readonly filter: EventFilter
    readonly sinceMs: number
    readonly untilMs: number
    readonly signal: AbortSignal
  }
): Promise<ReadonlyArray<EngineEvent>> =>
  new Promise((resolve, reject) => {
    const events: Array<EngineEvent> = []
    streamEvents(
      docker,
      query,
      (e) => events.push(e),
      (error) => (error === undefined ? resolve(events) : reject(new Error(error)))
    )
  })
