/**
 * The MCP server over Streamable HTTP end to end: the BUILT `hermes-sandbox mcp --http` (plain
 * Node, loopback, against the real engine) driven by raw node:http requests (they may set any
 * header, Host included), the SDK's own Client and the MCP Inspector's CLI (a client this project
 * did not write); the per-client MCP session cap and the idle expiry through serveHttp in-process
 * (the CLI has no flag for them), which is the same real HTTP server.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { type IncomingHttpHeaders, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { lastValueFrom, toArray } from "rxjs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openJournal, Projection } from "@hermes-sandbox/events"
import { type HttpServing, McpSandbox, serveHttp } from "@hermes-sandbox/mcp"
import { containerExists, docker, waitFor } from "./support/docker.js"
import { type HttpServerProcess, mcpServerCommand, startHttpServer } from "./support/mcp.js"
import { byLabels, expectedExecutions, histogramCounts, parseFamilies } from "./support/prometheus.js"

const root = new URL("..", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "mcp-http-e2e-"))
const token = "e2e-token-0123456789abcdef"
const tokenFile = join(dir, "token")
const journal = join(dir, "journal.sqlite")
writeFileSync(tokenFile, `${token}\n`)

// What the tests made, removed in afterAll whatever happened.
const servers: Array<HttpServerProcess> = []
const clients: Array<Connected> = []
const servings: Array<HttpServing> = []
const sandboxes: Array<McpSandbox> = []
/** Executor ids of every server started here: their containers are this file's. */
const executors: Array<string> = []

const start = async (args: ReadonlyArray<string>) => {
  const server = await startHttpServer(args)
  servers.push(server)
  const executor = /\(executor ([0-9a-f-]+)\)/.exec(server.stderr())?.[1]
  if (executor === undefined) throw new Error(`no executor id in: ${server.stderr()}`)
  executors.push(executor)
  return { ...server, executor }
}

/** This executor's containers (any state): the executor label every sandbox carries. */
const containersOf = async (executor: string) =>
  (await docker.listContainers({ all: true, filters: { label: [`org.hermes-sandbox.executor=${executor}`] } })).map(
    (c) => c.Names[0] ?? ""
  )

let s1: Awaited<ReturnType<typeof start>>
beforeAll(async () => {
  s1 = await start(["--port", "0", "--token-file", tokenFile, "--journal", journal])
})
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()))
  await Promise.allSettled(servings.map((s) => s.close()))
  await Promise.allSettled(sandboxes.map((s) => s.close()))
  const codes = await Promise.all(servers.map((s) => s.stop()))
  const left = (await Promise.all(executors.map(containersOf))).flat()
  rmSync(dir, { recursive: true, force: true })
  expect(left).toEqual([])
  expect(codes.every((c) => c === 130)).toBe(true)
})

interface Raw {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly text: string
}
/** One HTTP request with exactly these headers (node:http: Host too, which fetch will not set). */
const raw = (
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer; localAddress?: string } = {}
) =>
  new Promise<Raw>((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? "POST",
        headers: options.headers ?? {},
        ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress })
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") })
        )
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.end(options.body)
  })

const jsonHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }
const authed = { ...jsonHeaders, authorization: `Bearer ${token}` }
const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
})
const toolsList = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} })
/** The JSON-RPC message of a response, plain JSON or one SSE event. */
const messageOf = (r: Raw) =>
  JSON.parse(r.text.startsWith("event:") ? /^data: (.*)$/m.exec(r.text)![1]! : r.text) as {
    result?: unknown
    error?: { code: number; message: string }
  }

interface Connected {
  readonly client: Client
  readonly transport: StreamableHTTPClientTransport
  readonly sessionId: string
  readonly close: () => Promise<void>
}
/** The SDK's client over Streamable HTTP with the bearer token: one MCP session. */
const connect = async (url: string, name = "http-e2e"): Promise<Connected> => {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } }
  })
  const client = new Client({ name, version: "1.0.0" })
  await client.connect(transport)
  const connected: Connected = {
    client,
    transport,
    sessionId: transport.sessionId!,
    close: async () => {
      await transport.terminateSession().catch(() => {})
      await client.close()
    }
  }
  clients.push(connected)
  return connected
}

type Structured = Record<string, unknown>
const call = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  const text = (result.content as Array<{ type: string; text: string }>)[0]?.text ?? ""
  return {
    result,
    json: JSON.parse(text) as Structured,
    structured: result.structuredContent as Structured | undefined
  }
}

/** ExecutionRequested events in the server's journal (read from the file, as another process would). */
const requested = async () => {
  const client = await openJournal({ path: journal })
  try {
    const events = await lastValueFrom(client.replay().pipe(toArray()))
    return events.flatMap((e) =>
      e.type === "ExecutionRequested" ? [{ streamId: e.streamId, tags: e.data.tags ?? {} }] : []
    )
  } finally {
    await client.close()
  }
}

/** A process to its end (killed after 30 s): exit code, standard output and error. */
const runProcess = (command: string, args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

/** The built `hermes-sandbox mcp ...args` to its end. */
const runCli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const { command, args: full } = mcpServerCommand(args)
  return runProcess(command, full, env)
}

const gone = (name: string) => waitFor(async () => !(await containerExists(name)), 5_000)

describe("MCP over HTTP: authentication", () => {
  it("401 with WWW-Authenticate without the token, with a wrong one of the same length, with a shorter one, with another scheme; nothing ran", async () => {
    const a = await connect(s1.url)
    const execute = JSON.stringify({
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: { name: "execute_code", arguments: { language: "bash", code: "echo ran" } }
    })
    const session = { "mcp-session-id": a.sessionId, "mcp-protocol-version": "2025-06-18" }
    const wrongSameLength = token.slice(0, -1) + (token.endsWith("x") ? "y" : "x")
    const refusals: Array<[string, Record<string, string>, string]> = [
      ["no Authorization", { ...jsonHeaders, ...session }, execute],
      [
        "a wrong token of the same length",
        { ...jsonHeaders, ...session, authorization: `Bearer ${wrongSameLength}` },
        execute
      ],
      ["a shorter token", { ...jsonHeaders, ...session, authorization: "Bearer e2e-token" }, execute],
      ["the token plus more", { ...jsonHeaders, ...session, authorization: `Bearer ${token}0` }, execute],
      [
        "another scheme",
        { ...jsonHeaders, ...session, authorization: `Basic ${Buffer.from(`u:${token}`).toString("base64")}` },
        execute
      ],
      ["the token without a scheme", { ...jsonHeaders, ...session, authorization: token }, execute],
      ["an initialize without Authorization", jsonHeaders, initialize]
    ]
    for (const [what, headers, body] of refusals) {
      const r = await raw(s1.url, { headers, body })
      expect(r.status, what).toBe(401)
      expect(r.headers["www-authenticate"], what).toMatch(/^Bearer /)
      expect(r.headers["mcp-session-id"], what).toBeUndefined()
      expect(messageOf(r).error?.message, what).toMatch(/unauthorized/)
    }
    // Nothing ran: no execution asked for by that session, no container of this server.
    await new Promise((r) => setTimeout(r, 500))
    expect((await requested()).filter((e) => e.tags["mcp.session"] === a.sessionId)).toEqual([])
    expect(await containersOf(s1.executor)).toEqual([])
    // The same call with the token runs (the session id was valid; the journal check sees it).
    const ran = await call(a.client, "execute_code", { language: "bash", code: "echo ran" })
    expect(ran.structured).toMatchObject({ status: "success", stdout: "ran\n" })
    expect((await requested()).filter((e) => e.tags["mcp.session"] === a.sessionId)).toEqual([
      {
        streamId: ran.structured?.execution_id,
        tags: expect.objectContaining({
          "mcp.tool": "execute_code",
          "mcp.transport": "http",
          "mcp.client": "127.0.0.1"
        })
      }
    ])
    await a.close()
  })
})

describe("MCP over HTTP: Host and Origin (DNS rebinding)", () => {
  it("a foreign Host is refused even with the token; a foreign Origin is refused; loopback names on any port are accepted (a local web client runs on its own)", async () => {
    const port = new URL(s1.url).port
    const otherPort = Number(port) === 6274 ? 6275 : 6274
    for (const host of [
      "evil.example",
      `evil.example:${port}`,
      `127.0.0.1.evil.example:${port}`,
      `localhost.evil.example:${port}`,
      `127.0.0.1:${port}@evil.example`
    ]) {
      const r = await raw(s1.url, { headers: { ...authed, host }, body: initialize })
      expect(r.status, host).toBe(403)
      expect(messageOf(r).error?.message, host).toMatch(/Host/)
      expect(r.headers["mcp-session-id"], host).toBeUndefined()
    }
    // The Host check comes before the token check: a rebinding page learns nothing about it.
    expect((await raw(s1.url, { headers: { ...jsonHeaders, host: "evil.example" }, body: initialize })).status).toBe(
      403
    )
    for (const origin of [
      "http://evil.example",
      `http://evil.example:${port}`,
      `http://localhost.evil.example:${port}`,
      "null",
      `http://127.0.0.1:${port}/x`
    ]) {
      const r = await raw(s1.url, { headers: { ...authed, origin }, body: initialize })
      expect(r.status, origin).toBe(403)
      expect(messageOf(r).error?.message, origin).toMatch(/Origin/)
    }
    for (const [host, origin] of [
      [`127.0.0.1:${port}`, `http://127.0.0.1:${port}`],
      [`localhost:${port}`, `http://localhost:${port}`],
      [`localhost:${otherPort}`, `http://localhost:${otherPort}`],
      [`[::1]:${port}`, `https://127.0.0.1:${otherPort}`],
      ["localhost", "http://[::1]"]
    ] as const) {
      const r = await raw(s1.url, { headers: { ...authed, host, origin }, body: initialize })
      expect(r.status, origin).toBe(200)
      expect((messageOf(r).result as { serverInfo: { name: string } }).serverInfo.name).toBe("hermes-sandbox")
      const id = String(r.headers["mcp-session-id"])
      expect((await raw(s1.url, { method: "DELETE", headers: { ...authed, "mcp-session-id": id } })).status).toBe(200)
    }
  })
})

describe("MCP over HTTP: sessions", () => {
  it("two MCP sessions are isolated: their own session sandbox, their own executions' events", async () => {
    const a = await connect(s1.url, "client-a")
    const b = await connect(s1.url, "client-b")
    expect(a.sessionId).not.toBe(b.sessionId)
    expect((await call(a.client, "write_file", { path: "/workspace/owner", content: "a" })).structured).toMatchObject({
      bytes_written: 1
    })
    expect((await call(b.client, "read_file", { path: "/workspace/owner" })).json.error).toMatchObject({
      _tag: "FileOperationFailed",
      reason: "not-found"
    })
    expect((await call(a.client, "read_file", { path: "/workspace/owner" })).structured?.content).toBe("a")
    const ida = String((await call(a.client, "terminal", { command: "true" })).structured?.session_id)
    const idb = String((await call(b.client, "terminal", { command: "true" })).structured?.session_id)
    expect(ida).not.toBe(idb)
    expect(await containerExists(`hermes-sandbox-${ida}`)).toBe(true)
    expect(await containerExists(`hermes-sandbox-${idb}`)).toBe(true)

    const run = String(
      (await call(a.client, "execute_code", { language: "bash", code: "echo mine" })).structured?.execution_id
    )
    const uri = `sandbox://executions/${run}/events`
    const own = await a.client.readResource({ uri })
    expect(
      (JSON.parse(String((own.contents[0] as { text: string }).text)) as Array<{ type: string }>).map((e) => e.type)
    ).toContain("ExecutionRequested")
    expect((await a.client.listResources()).resources.map((r) => r.uri)).toContain(uri)
    await expect(b.client.readResource({ uri })).rejects.toThrow(/not found/i)
    expect((await b.client.listResources()).resources.map((r) => r.uri)).not.toContain(uri)

    await a.close()
    await b.close()
    expect(await gone(`hermes-sandbox-${ida}`)).toBe(true)
    expect(await gone(`hermes-sandbox-${idb}`)).toBe(true)
  })

  it("a session's DELETE removes its session sandbox; that Mcp-Session-Id then gets 404; other sessions carry on", async () => {
    const c = await connect(s1.url)
    const other = await connect(s1.url)
    const id = String((await call(c.client, "terminal", { command: "echo hi" })).structured?.session_id)
    const otherId = String((await call(other.client, "terminal", { command: "true" })).structured?.session_id)
    expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)
    await c.transport.terminateSession()
    expect(await gone(`hermes-sandbox-${id}`)).toBe(true)
    const after = await raw(s1.url, {
      headers: { ...authed, "mcp-session-id": c.sessionId, "mcp-protocol-version": "2025-06-18" },
      body: toolsList
    })
    expect(after.status).toBe(404)
    expect(messageOf(after).error?.message).toMatch(/no such MCP session/)
    expect(
      (await raw(s1.url, { method: "DELETE", headers: { ...authed, "mcp-session-id": c.sessionId } })).status
    ).toBe(404)
    expect(await containerExists(`hermes-sandbox-${otherId}`)).toBe(true)
    expect((await call(other.client, "terminal", { command: "echo still" })).structured?.stdout).toBe("still\n")
    await c.client.close()
    await other.close()
    expect(await gone(`hermes-sandbox-${otherId}`)).toBe(true)
  })

  it("the server's shutdown (SIGINT) removes every session's sandbox before it exits, with 130 as every CLI command interrupted by SIGINT", async () => {
    const s2 = await start(["--port", "0", "--token-file", tokenFile, "--no-journal"])
    const a = await connect(s2.url)
    const b = await connect(s2.url)
    const ids = await Promise.all(
      [a, b].map(async (c) => String((await call(c.client, "terminal", { command: "true" })).structured?.session_id))
    )
    for (const id of ids) expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)
    expect(await s2.stop()).toBe(130)
    expect(s2.stderr()).toMatch(/SIGINT: stopping/)
    // Removed before the process exited, not by a sweep after.
    for (const id of ids) expect(await containerExists(`hermes-sandbox-${id}`), id).toBe(false)
    expect(await containersOf(s2.executor)).toEqual([])
    await Promise.all([a.client.close(), b.client.close()])
  })
})

describe("MCP over HTTP: abuse", () => {
  it("a body over the limit is 413 and the server keeps serving; a non-JSON body is a JSON-RPC parse error; no Mcp-Session-Id on a non-initialize is 400", async () => {
    const big = await raw(s1.url, { headers: authed, body: Buffer.alloc(17 * 1024 * 1024, 0x20) })
    expect(big.status).toBe(413)
    expect(messageOf(big).error?.message).toMatch(/over 16777216 bytes/)
    const parse = await raw(s1.url, { headers: authed, body: "{not json" })
    expect(parse.status).toBe(400)
    expect(messageOf(parse)).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 }, id: null })
    const noSession = await raw(s1.url, { headers: authed, body: toolsList })
    expect(noSession.status).toBe(400)
    expect(messageOf(noSession).error?.message).toMatch(/must be initialize/)
    expect((await raw(s1.url, { method: "GET", headers: { ...authed, accept: "text/event-stream" } })).status).toBe(400)
    expect((await raw(s1.url.replace(/\/mcp$/, "/other"), { headers: authed, body: initialize })).status).toBe(404)
    // Still serving.
    const c = await connect(s1.url)
    expect((await call(c.client, "execute_code", { language: "python", code: "print(6*7)" })).structured?.stdout).toBe(
      "42\n"
    )
    await c.close()
  })

  it("--host 0.0.0.0 is refused without --allow-remote (a usage error naming it); with it the server listens", async () => {
    const refused = await runCli([
      "--http",
      "--host",
      "0.0.0.0",
      "--port",
      "0",
      "--token-file",
      tokenFile,
      "--no-journal"
    ])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/--allow-remote/)
    expect(refused.stderr).not.toMatch(/serving MCP/)
    const remote = await start([
      "--host",
      "0.0.0.0",
      "--allow-remote",
      "--port",
      "0",
      "--token-file",
      tokenFile,
      "--no-journal"
    ])
    expect(remote.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+\/mcp$/)
    const port = new URL(remote.url).port
    expect((await raw(`http://127.0.0.1:${port}/mcp`, { headers: jsonHeaders, body: initialize })).status).toBe(401)
    expect(await remote.stop()).toBe(130)
  })

  it("a --token-file with a token under 16 characters, or missing, is a usage error (exit 2) before anything listens", async () => {
    const short = join(dir, "short")
    writeFileSync(short, "too-short\n")
    const r = await runCli(["--http", "--token-file", short, "--no-journal"])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/at least 16 characters/)
    expect(r.stderr).not.toMatch(/serving MCP/)
    const missing = await runCli(["--http", "--token-file", join(dir, "missing"), "--no-journal"])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/no such file/)
    const env = await runCli(["--http", "--no-journal"], { HERMES_SANDBOX_MCP_TOKEN: "short" })
    expect(env.code).toBe(2)
    expect(env.stderr).toMatch(/HERMES_SANDBOX_MCP_TOKEN: the token must be at least 16 characters/)
  })
})

describe("MCP over HTTP: Prometheus metrics (GET /metrics)", () => {
  const familiesOf = parseFamilies

  it("behind the token (401 without, 403 for a foreign Host); its counters and phase counts are the journal's", async () => {
    const metricsUrl = s1.url.replace(/\/mcp$/, "/metrics")
    const c = await connect(s1.url, "metrics-e2e")
    await call(c.client, "execute_code", { language: "python", code: "print(1)" })
    await call(c.client, "execute_code", { language: "bash", code: "exit 3" })
    await call(c.client, "execute_code", { language: "bash", code: "sleep 30", timeout_s: 1 })
    await c.close()

    expect((await raw(metricsUrl, { method: "GET" })).status).toBe(401)
    expect(
      (await raw(metricsUrl, { method: "GET", headers: { authorization: `Bearer ${token}`, host: "evil.example" } }))
        .status
    ).toBe(403)
    const read = () => raw(metricsUrl, { method: "GET", headers: { authorization: `Bearer ${token}` } })
    const first = await read()
    expect(first.status).toBe(200)
    expect(first.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8")

    // The journal as another process reads it, folded by its own projection.
    const client = await openJournal({ path: journal })
    const events = await lastValueFrom(client.replay().pipe(toArray())).finally(() => client.close())
    const states = [...Projection.project(events).values()].filter((s) => s.kind === "execution")
    // Every call returned: each execution's terminal event is in the journal and was counted.
    expect(Projection.summarize(states).byOutcome.open).toBe(0)
    const text = (await read()).text
    const families = familiesOf(text)
    const expected = expectedExecutions(states)
    const got = byLabels(families.get("hermes_sandbox_executions_total"), ["language", "outcome"])
    expect(got).toEqual(expected)
    expect(got["bash/timeout"]).toBeGreaterThanOrEqual(1)
    expect(got["bash/error"]).toBeGreaterThanOrEqual(1)
    expect(histogramCounts(text, "hermes_sandbox_execution_phase_seconds", "phase", ["run"])["run"]).toBe(
      states.filter((s) => s.sessionId === undefined && s.startedAt !== undefined && s.finishedAt !== undefined).length
    )
  })

  it("--metrics-port: on 127.0.0.1 without a token, and no longer on the main port", async () => {
    const s = await start(["--port", "0", "--token-file", tokenFile, "--no-journal", "--metrics-port", "0"])
    expect(
      await waitFor(async () => /Prometheus metrics at http:\/\/127\.0\.0\.1:[0-9]+\/metrics/.test(s.stderr()), 5_000)
    ).toBe(true)
    const metricsUrl = /Prometheus metrics at (\S+)/.exec(s.stderr())![1]!
    const open = await raw(metricsUrl, { method: "GET" })
    expect(open.status).toBe(200)
    expect(familiesOf(open.text).get("hermes_sandbox_in_flight")?.type).toBe("GAUGE")
    expect(
      (await raw(s.url.replace(/\/mcp$/, "/metrics"), { method: "GET", headers: { authorization: `Bearer ${token}` } }))
        .status
    ).toBe(404)
  })
})

describe("MCP over HTTP: a client this project did not write", () => {
  const inspector = `${root}test/node_modules/.bin/mcp-inspector`
  // Its own HOME: it keeps OAuth state there, and must not try to open a browser.
  const env = () => ({ HOME: mkdtempSync(join(dir, "home-")), MCP_AUTO_OPEN_ENABLED: undefined })
  const args = [
    "--transport",
    "http",
    "--method",
    "tools/call",
    "--tool-name",
    "execute_code",
    "--tool-arg",
    "code=print(6*7)",
    "--tool-arg",
    "language=python"
  ]

  it("the MCP Inspector's CLI with the bearer token runs execute_code; without it, it fails", async () => {
    const ok = await runProcess(
      inspector,
      ["--cli", s1.url, "--header", `Authorization: Bearer ${token}`, ...args],
      env()
    )
    expect(ok.code, ok.stderr).toBe(0)
    const result = JSON.parse(ok.stdout) as { structuredContent: Structured; isError?: boolean }
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent).toMatchObject({ status: "success", stdout: "42\n", exit_code: 0 })
    const id = String(result.structuredContent.execution_id)
    expect((await requested()).find((e) => e.streamId === id)?.tags).toMatchObject({
      "mcp.transport": "http",
      "mcp.tool": "execute_code"
    })
    expect(await gone(`hermes-sandbox-${id}`)).toBe(true)

    const before = (await requested()).length
    const refused = await runProcess(inspector, ["--cli", s1.url, ...args], env())
    expect(refused.code).not.toBe(0)
    expect(refused.stdout).not.toMatch(/"status": ?"success"/)
    expect((await requested()).length).toBe(before)
  })
})

describe("MCP over HTTP, in-process (serveHttp): per-client session cap, idle expiry", () => {
  let sandbox: McpSandbox
  beforeAll(async () => {
    sandbox = await McpSandbox.open({ journal: "memory" })
    sandboxes.push(sandbox)
    executors.push(sandbox.executorId)
  })

  it("a client's third MCP session is refused with 429 and a clear message; after one DELETE a new one is accepted", async () => {
    const serving = await serveHttp(sandbox, { token, maxSessionsPerClient: 2 })
    servings.push(serving)
    const a = await connect(serving.url)
    const b = await connect(serving.url)
    const third = await raw(serving.url, { headers: authed, body: initialize })
    expect(third.status).toBe(429)
    expect(messageOf(third).error?.message).toMatch(
      /this token has 2 MCP sessions open \(at most 2 per client\): end one \(DELETE\) first/
    )
    expect(third.headers["mcp-session-id"]).toBeUndefined()
    expect(serving.sessions()).toBe(2)
    // Through the SDK's client the refusal is an error at connect.
    await expect(
      new Client({ name: "third", version: "1" }).connect(
        new StreamableHTTPClientTransport(new URL(serving.url), {
          requestInit: { headers: { Authorization: `Bearer ${token}` } }
        })
      )
    ).rejects.toThrow(/429|at most 2/)
    await a.transport.terminateSession()
    expect(await waitFor(async () => serving.sessions() === 1, 5_000)).toBe(true)
    const c = await connect(serving.url)
    expect((await c.client.listTools()).tools).toHaveLength(9)
    await Promise.all([a.client.close(), b.close(), c.close()])
    await serving.close()
    expect(serving.sessions()).toBe(0)
  })

  it("the cap counts credentials, not source addresses: 127.0.0.2 and up are the same client; another token has its own share and cannot use the first one's sessions (hostile review 2, #6)", async () => {
    const other = "second-client-token-0123456789"
    const serving = await serveHttp(sandbox, {
      token,
      clients: { ci: other },
      maxSessionsPerClient: 3,
      maxSessionsPerAddress: 5
    })
    servings.push(serving)
    const opened: Array<string> = []
    const statuses: Array<number> = []
    for (const from of ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"]) {
      const r = await raw(serving.url, { headers: authed, body: initialize, localAddress: from })
      statuses.push(r.status)
      if (r.status === 429)
        expect(messageOf(r).error?.message).toMatch(/this token has 3 MCP sessions open \(at most 3 per client\)/)
      const id = r.headers["mcp-session-id"]
      if (typeof id === "string") opened.push(id)
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
    // The other credential is not locked out, even from the same machine; the address guard (5 from loopback) is the second line.
    const second = { ...jsonHeaders, authorization: `Bearer ${other}` }
    const theirs = await raw(serving.url, { headers: second, body: initialize, localAddress: "127.0.0.9" })
    expect(theirs.status).toBe(200)
    expect((await raw(serving.url, { headers: second, body: initialize })).status).toBe(200)
    const third = await raw(serving.url, { headers: second, body: initialize })
    expect(third.status).toBe(429)
    expect(messageOf(third).error?.message).toMatch(/this machine has 5 MCP sessions open \(at most 5 per address\)/)
    // A session id is bound to the credential that opened it.
    const foreign = await raw(serving.url, {
      headers: { ...second, "mcp-session-id": opened[0]!, "mcp-protocol-version": "2025-06-18" },
      body: toolsList
    })
    expect(foreign.status).toBe(404)
    expect(serving.sessions()).toBe(5)
    await serving.close()
    expect(serving.sessions()).toBe(0)
  })

  it("a session that never calls a tool is closed after unusedSessionIdleS; one that called is kept to sessionIdleS", async () => {
    const serving = await serveHttp(sandbox, { token, unusedSessionIdleS: 3 })
    servings.push(serving)
    const unused = await raw(serving.url, { headers: authed, body: initialize })
    expect(unused.status).toBe(200)
    const used = await connect(serving.url)
    expect(
      (await call(used.client, "execute_code", { language: "python", code: "print(1)" })).structured
    ).toMatchObject({ status: "success" })
    expect(await waitFor(async () => serving.sessions() === 1, 15_000)).toBe(true)
    const late = await raw(serving.url, {
      headers: {
        ...authed,
        "mcp-session-id": String(unused.headers["mcp-session-id"]),
        "mcp-protocol-version": "2025-06-18"
      },
      body: toolsList
    })
    expect(late.status).toBe(404)
    expect((await used.client.listTools()).tools).toHaveLength(9)
    await used.close()
    await serving.close()
  })

  it("an idle MCP session is closed and its session sandbox removed; a request running longer than the idle limit is not cut", async () => {
    const serving = await serveHttp(sandbox, { token, sessionIdleS: 1 })
    servings.push(serving)
    const c = await connect(serving.url)
    // Busy for 2.5 s (longer than the idle limit): a running call is activity, not idleness.
    const busy = await call(c.client, "terminal", { command: "sleep 2.5; echo awake" })
    expect(busy.structured).toMatchObject({ status: "success", stdout: "awake\n" })
    const id = String(busy.structured?.session_id)
    expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)
    expect(await waitFor(async () => serving.sessions() === 0, 5_000)).toBe(true)
    expect(await gone(`hermes-sandbox-${id}`)).toBe(true)
    const after = await raw(serving.url, {
      headers: { ...authed, "mcp-session-id": c.sessionId, "mcp-protocol-version": "2025-06-18" },
      body: toolsList
    })
    expect(after.status).toBe(404)
    await c.client.close()
    await serving.close()
  })
})
