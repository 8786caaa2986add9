import { describe, expect, it } from "@effect/vitest"
import type { McpSandbox } from "../src/McpSandbox.js"
import { McpSession } from "../src/McpSession.js"

describe("McpSession's journal tags", () => {
  // The client names itself in initialize: every event its runs cause carries the name, so it is bounded.
  it("an MCP client's self-reported name and version are kept to 200 characters; the server's own tags are whole", () => {
    const session = new McpSession(
      undefined as unknown as McpSandbox,
      { id: "s-1", transport: "http", client: "127.0.0.1" },
      () => {}
    )
    expect(session.tags("execute_code")).toEqual({
      "mcp.session": "s-1",
      "mcp.transport": "http",
      "mcp.tool": "execute_code",
      "mcp.client": "127.0.0.1"
    })
    session.clientInfo = { name: "n".repeat(100_000), version: "v".repeat(100_000) }
    const tags = session.tags("terminal")
    expect(tags["mcp.client_name"]).toBe("n".repeat(200))
    expect(tags["mcp.tool"]).toBe("terminal")
    session.clientInfo = { name: "inspector", version: "0.17.2" }
    expect(session.tags("terminal")["mcp.client_name"]).toBe("inspector 0.17.2")
  })
})
