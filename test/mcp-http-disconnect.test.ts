/**
 * A client that disappears mid-call over Streamable HTTP (its response stream dropped) leaves
 * nothing running: the request is cancelled at once — the container killed and removed, the
 * journal's lifecycle closed — instead of running on to its deadline with nobody to read it.
 * In-process server (serveHttp, a real HTTP server on loopback), a raw node:http client.
 */
import { request } from "node:http"
import { Chunk, Effect, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Journal } from "@hermes-sandbox/events"
import { type HttpServing, McpSandbox, serveHttp } from "@hermes-sandbox/mcp"
import { containerExists, sandboxContainers, waitFor } from "./support/docker.js"

const token = "disconnect-test-token-0123456789"
let sandbox: McpSandbox
let serving: HttpServing
beforeAll(async () => {
  sandbox = await McpSandbox.open({ journal: "memory" })
  serving = await serveHttp(sandbox, { token })
})
afterAll(async () => {
  await serving.close()
  await sandbox.close()
})

/** POST one JSON-RPC message; resolves with the response's status, headers and the request (to destroy it). */
const post = (body: unknown, sessionId?: string) =>
  new Promise<{ status: number; headers: Record<string, unknown>; text: Promise<string>; destroy: () => void }>(
    (resolve, reject) => {
      const req = request(
        serving.url,
        {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...(sessionId === undefined ? {} : { "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18" })
          }
        },
        (res) => {
          let text = ""
          const done = new Promise<string>((ok) => {
            res.on("data", (d) => (text += d))
            res.on("end", () => ok(text))
            res.on("close", () => ok(text))
          })
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: done, destroy: () => req.destroy() })
        }
      )
      req.on("error", (e) => ((e as { code?: string }).code === "ECONNRESET" ? undefined : reject(e)))
      req.end(JSON.stringify(body))
    }
  )

const journal = () =>
  sandbox.runtime.runPromise(
    Effect.flatMap(Journal.Journal, (j) => Stream.runCollect(j.read())).pipe(Effect.map(Chunk.toReadonlyArray))
  )

describe("MCP over HTTP: a client that disconnects mid-call", () => {
  it("its execution is cancelled at once: container removed, ExecutionInterrupted recorded", async () => {
    const init = await post({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } }
    })
    expect(init.status).toBe(200)
    const sessionId = String(init.headers["mcp-session-id"])
    await init.text
    await (await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sessionId)).text
    // This server's containers only: other files' sandboxes come and go beside this one.
    const ours = () => sandboxContainers({ executorId: sandbox.executorId })
    const before = new Set(await ours())
    const call = await post(
      {
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: {
          name: "execute_code",
          arguments: { language: "python", code: "import time\ntime.sleep(60)", timeout_s: 120 }
        }
      },
      sessionId
    )
    let name: string | undefined
    expect(
      await waitFor(async () => {
        name = (await ours()).find((n) => !before.has(n))
        return name !== undefined
      }, 20_000)
    ).toBe(true)
    const startedAt = Date.now()
    call.destroy()
    expect(await waitFor(async () => !(await containerExists(name!)), 15_000)).toBe(true)
    // Well before the program's 60 s (and its 120 s deadline).
    expect(Date.now() - startedAt).toBeLessThan(15_000)
    const executionId = name!.replace("hermes-sandbox-", "")
    expect(
      await waitFor(
        async () => (await journal()).some((e) => e.streamId === executionId && e.type === "ContainerDestroyed"),
        10_000
      )
    ).toBe(true)
    const events = (await journal()).filter((e) => e.streamId === executionId)
    expect(
      String((events.find((e) => e.type === "ExecutionInterrupted")?.data as { reason?: string } | undefined)?.reason)
    ).toMatch(/the client disconnected/)
    expect(events.find((e) => e.type === "ContainerDestroyed")?.data).toMatchObject({ reason: "interrupted" })
    // The session itself lives on (the client may reconnect): a new call in it works.
    const again = await post(
      {
        jsonrpc: "2.0",
        id: 3,
        method: "tools/call",
        params: { name: "execute_code", arguments: { language: "bash", code: "echo back" } }
      },
      sessionId
    )
    expect(await again.text).toContain("back")
  })
})
