/**
 * MCP over stdio: the protocol alone on standard output (every log line goes to standard error),
 * one MCP session for the connection. When the client goes away (standard input ends or errors,
 * the client process is killed), the session closes: its calls are interrupted, their containers
 * removed, its session sandbox removed.
 */
import { randomUUID } from "node:crypto"
import type { Readable, Writable } from "node:stream"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import type { McpSandbox } from "./McpSandbox.js"
import { createServer } from "./server.js"

export interface StdioOptions {
  readonly stdin?: Readable
  readonly stdout?: Writable
  /** Largest message accepted (one JSON-RPC line), in bytes. Default 64 MiB. */
  readonly maxMessageBytes?: number
}

export interface StdioServing {
  readonly sessionId: string
  /** Resolves once the session has closed (the client left, or close() was called) and its sandboxes are gone. */
  readonly closed: Promise<void>
  close(reason?: string): Promise<void>
}

export const serveStdio = async (sandbox: McpSandbox, options: StdioOptions = {}): Promise<StdioServing> => {
  const stdin = options.stdin ?? process.stdin
  const stdout = options.stdout ?? process.stdout
  const session = sandbox.openSession({ id: randomUUID(), transport: "stdio" })
  const server = createServer(session)
  const transport = new StdioServerTransport(stdin, stdout, {
    maxBufferSize: options.maxMessageBytes ?? 64 * 1024 * 1024
  })
  let closing: Promise<void> | undefined
  let resolveClosed: () => void = () => {}
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve))
  const close = (reason = "the server is stopping") =>
    (closing ??= (async () => {
      stdin.off("end", onEnd)
      stdin.off("close", onEnd)
      try {
        await session.close(reason)
        await server.close().catch(() => {})
      } finally {
        resolveClosed()
      }
    })())
  const onEnd = () => void close("the client closed the connection (standard input ended)")
  stdin.on("end", onEnd)
  stdin.on("close", onEnd)
  transport.onclose = () => void close("the transport closed")
  // A stdout that cannot be written (the client is gone: EPIPE) ends the session too.
  stdout.on("error", () => void close("the client closed the connection (standard output)"))
  await server.connect(transport)
  return {
    sessionId: session.id,
    closed,
    close
  }
}
