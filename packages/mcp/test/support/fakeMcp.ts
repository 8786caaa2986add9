/**
 * The MCP suites' common ground on the fake runtime: the services an McpSandbox runs on (an
 * executor and sessions over the fake engine and an in-memory journal), and one MCP session of an
 * in-process server with the official SDK's Client on the other end of its InMemoryTransport.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { Layer } from "effect"
import { Executor, Metrics, Session } from "@hermes-sandbox/core"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import type { McpSandbox } from "../../src/McpSandbox.js"
import { createServer } from "../../src/server.js"

/** As DockerExecutor.layerWithSessions composes them: one Prometheus registry for both services. */
export const fakeServices = () =>
  Layer.mergeAll(Executor.layer(), Session.layer({ sweepOnStart: false })).pipe(
    Layer.provide(Metrics.layer()),
    Layer.provideMerge(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
  )

export const connectInMemory = async (on: McpSandbox, clientName: string, transport: "stdio" | "http" = "stdio") => {
  const session = on.openSession({ id: crypto.randomUUID(), transport })
  const server = createServer(session)
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  const client = new Client({ name: clientName, version: "1" })
  await client.connect(clientSide)
  return { client, session, close: () => client.close().then(() => session.close("test done")) }
}

/** A tool call through the client: whether it is an error, and the JSON its first text block holds (every tool's result). */
export const callJson = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  const text = (result.content as Array<{ text?: string }>)[0]?.text ?? ""
  return { isError: result.isError === true, json: JSON.parse(text) as Record<string, any> }
}
