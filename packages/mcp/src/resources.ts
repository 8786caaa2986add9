/**
 * The resource template for an execution's lifecycle events, read from the journal (the same
 * events `hermes-sandbox events --execution ID` prints). Over HTTP a session reads only the
 * executions its own calls made (their ExecutionRequested carries its `mcp.session` tag); over
 * stdio the one local client may read any in the journal.
 */
import { Chunk, Effect, Stream } from "effect"
import { Journal } from "@hermes-sandbox/events"
import type { McpSession } from "./McpSession.js"

export const EVENTS_TEMPLATE = {
  uriTemplate: "sandbox://executions/{id}/events",
  name: "execution-events",
  title: "An execution's lifecycle events",
  description: "The journal's events of one execution (execute_code, terminal, read_file or write_file call): requested, created, started, exited or timed out, removed, completed; as a JSON array.",
  mimeType: "application/json"
} as const

const URI = /^sandbox:\/\/executions\/([A-Za-z0-9-]{1,64})\/events$/

export const executionIdOfUri = (uri: string): string | undefined => URI.exec(uri)?.[1]

/** The execution's events as JSON, or undefined when there is none this session may read. */
export const eventsResource = (session: McpSession, executionId: string): Promise<string | undefined> =>
  session.owner.runtime.runPromise(Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const events = Chunk.toReadonlyArray(yield* Stream.runCollect(journal.read({ streamId: executionId })))
    const requested = events.find((e) => e.type === "ExecutionRequested")
    if (requested === undefined) return undefined
    const tags = requested.type === "ExecutionRequested" ? requested.data.tags : undefined
    if (session.context.transport === "http" && tags?.["mcp.session"] !== session.id) return undefined
    return JSON.stringify(events)
  }))
