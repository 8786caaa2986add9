/**
 * One MCP session of an in-process server (McpSandbox + createServer) and the official SDK's
 * Client on the other end of the SDK's InMemoryTransport: the protocol without a process boundary.
 */
import { randomUUID } from "node:crypto"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import type { McpSandbox } from "@hermes-sandbox/mcp"
import { createServer } from "@hermes-sandbox/mcp/server"

export const connectInMemory = async (
  on: McpSandbox,
  options: { readonly transport?: "stdio" | "http"; readonly clientName: string; readonly clientVersion?: string }
) => {
  const session = on.openSession({ id: randomUUID(), transport: options.transport ?? "stdio" })
  const server = createServer(session)
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  const client = new Client({ name: options.clientName, version: options.clientVersion ?? "1" })
  await client.connect(clientSide)
  return {
    client,
    session,
    close: async () => {
      await client.close()
      await session.close("test done")
    }
  }
}
