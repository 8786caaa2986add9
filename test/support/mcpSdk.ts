/**
 * The MCP SDK's client side and the MCP server package, for bench/mcp.ts. A bench module
 * resolves packages from the repository root, where neither @modelcontextprotocol/sdk nor
 * @hermes-sandbox/mcp is a dependency; the test package depends on both, so they are imported
 * from here. Loaded on demand, so a process that only needs the client loads no server.
 */
export const clientSide = async () => {
  const [{ Client }, { StdioClientTransport }, { InMemoryTransport }] = await Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/inMemory.js")
  ])
  return { Client, StdioClientTransport, InMemoryTransport }
}

export const serverSide = async () => ({
  ...(await import("@hermes-sandbox/mcp")),
  ...(await import("@hermes-sandbox/mcp/server"))
})
