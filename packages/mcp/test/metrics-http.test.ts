/**
 * GET /metrics over serveHttp (a real HTTP server on loopback, the fake runtime behind it): behind
 * the Host/Origin checks and the bearer token on the main port, or on a loopback listener of its
 * own without a token (`metricsPort`); the text parses with a Prometheus parser, and its counts are
 * the journal's (execute_code runs and the terminal's session call) and its sessions gauge the
 * server's session sandboxes.
 */
import { request } from "node:http"
import { Chunk, Effect, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Metrics } from "@hermes-sandbox/core"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { Journal, Projection } from "@hermes-sandbox/events"
import { type HttpServing, serveHttp } from "../src/http.js"
import { McpSandbox } from "../src/McpSandbox.js"
import { byLabels, expectedExecutions, parseFamilies, sampleValue } from "../../../test/support/prometheus.js"
import { callJson, connectInMemory, fakeServices } from "./support/fakeMcp.js"

const token = "metrics-test-token-0123456789abcdef"
let sandbox: McpSandbox
let serving: HttpServing
beforeAll(async () => {
  sandbox = await McpSandbox.open({ limits: { defaultTimeoutS: 30 } }, fakeServices())
  serving = await serveHttp(sandbox, { token })
})
afterAll(async () => {
  await serving?.close()
  await sandbox?.close()
})

/** One request with the headers as given (Host included), resolving with status, headers and body. */
const get = (url: string, headers: Record<string, string> = {}, method = "GET") =>
  new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      let body = ""
      res.on("data", (d) => (body += d))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on("error", reject)
    req.end()
  })

describe("GET /metrics (serveHttp, fake runtime)", () => {
  it("behind the token and the Host check on the main port; counts are the journal's", async () => {
    const { client, close } = await connectInMemory(sandbox, "metrics-test")
    try {
      expect(
        (await callJson(client, "execute_code", { language: "python", code: fakeProgram({ stdout: "hi" }) })).isError
      ).toBe(false)
      await callJson(client, "execute_code", { language: "python", code: fakeProgram({ exitCode: 2 }) })
      await callJson(client, "terminal", { command: "true" })

      const url = serving.metricsUrl
      expect(url).toBe(serving.url.replace(/\/mcp$/, "/metrics"))
      const none = await get(url)
      expect(none.status).toBe(401)
      expect(none.body).not.toContain("hermes_sandbox")
      const wrong = await get(url, { authorization: "Bearer not-the-token-at-all-0123456789" })
      expect(wrong.status).toBe(401)
      const rebound = await get(url, { authorization: `Bearer ${token}`, host: "evil.example:80" })
      expect(rebound.status).toBe(403)
      const foreign = await get(url, { authorization: `Bearer ${token}`, origin: "https://evil.example" })
      expect(foreign.status).toBe(403)
      expect((await get(url, { authorization: `Bearer ${token}` }, "POST")).status).toBe(405)

      const ok = await get(url, { authorization: `Bearer ${token}` })
      expect(ok.status).toBe(200)
      expect(ok.headers["content-type"]).toBe(Metrics.CONTENT_TYPE)
      const families = parseFamilies(ok.body)

      const events = await sandbox.runtime.runPromise(
        Effect.flatMap(Journal.Journal, (j) => Stream.runCollect(j.read())).pipe(Effect.map(Chunk.toReadonlyArray))
      )
      const expected = expectedExecutions(Projection.project(events).values())
      const got = byLabels(families.get("hermes_sandbox_executions_total"), ["language", "outcome"])
      expect(got).toEqual(expected)
      // Two execute_code runs and the terminal's call (a session's call, in bash).
      expect(expected).toEqual({ "python/ok": 1, "python/error": 1, "bash/ok": 1 })
      expect(sampleValue(families, "hermes_sandbox_sessions_open")).toBe(sandbox.liveSessionSandboxes)
      expect(sandbox.liveSessionSandboxes).toBe(1)
    } finally {
      await close()
    }
  })

  it("with metricsPort: on its own loopback port without a token, and not on the main port", async () => {
    const other = await serveHttp(sandbox, { token, metricsPort: 0 })
    try {
      expect(other.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:[0-9]+\/metrics$/)
      expect(other.metricsUrl).not.toBe(other.url.replace(/\/mcp$/, "/metrics"))
      const open = await get(other.metricsUrl)
      expect(open.status).toBe(200)
      expect(open.body).toContain("# TYPE hermes_sandbox_executions_total counter")
      expect(open.body).toContain("# TYPE hermes_sandbox_execution_phase_seconds histogram")
      expect((await get(other.metricsUrl.replace(/\/metrics$/, "/mcp"))).status).toBe(404)
      expect((await get(other.metricsUrl, { host: "evil.example" })).status).toBe(403)
      expect((await get(other.metricsUrl, {}, "DELETE")).status).toBe(405)
      // The main port no longer serves it, with the token or without.
      const main = other.url.replace(/\/mcp$/, "/metrics")
      expect((await get(main, { authorization: `Bearer ${token}` })).status).toBe(404)
    } finally {
      await other.close()
    }
    // Closed with the server.
    await expect(get(other.metricsUrl)).rejects.toThrow()
  })
})
