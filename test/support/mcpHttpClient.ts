/** The official SDK's Client over Streamable HTTP to one of this project's MCP servers, with a bearer token. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"

/** Connect to `url` (http://…/mcp) as `name`; close() ends the MCP session (DELETE), then the client. */
export const connectHttp = async (url: string, token: string, name: string) => {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } }
  })
  const client = new Client({ name, version: "1" })
  await client.connect(transport)
  return {
    client,
    close: async () => {
      await transport.terminateSession().catch(() => {})
      await client.close()
    }
  }
}
