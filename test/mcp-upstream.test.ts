/**
 * Upstream MCP servers behind `hermes-sandbox mcp --upstream-config FILE` (issue 18 item 6), end to
 * end: the built server started over stdio by the SDK's Client (and once by the MCP Inspector's
 * CLI), its upstream the real reference server @modelcontextprotocol/server-everything (installed
 * in the test package), execute_code's code on the real engine calling its tools. execute_code's
 * description lists them; Python, JavaScript and bash call them as it says; tool_calls_made; an
 * upstream isError reaching the code as ToolError; the journal's ToolCall* events; the limits;
 * every upstream process gone when the server stops (its client leaving, a signal) or fails to
 * start. The configuration file's parsing is tested at the end, without an engine.
 */
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EventEnvelope } from "@hermes-sandbox/events"
import { isClosed } from "@hermes-sandbox/events/Projection"
import { McpSandbox, McpUpstreamFailed, UpstreamConfigError, Upstreams } from "@hermes-sandbox/mcp"
import { parseUpstreamConfig } from "@hermes-sandbox/mcp/upstreamConfig"
import { waitFor } from "./support/docker.js"
import { mcpServerCommand, runInspector, startHttpServer } from "./support/mcp.js"
import { connectInMemory } from "./support/mcpInMemory.js"
import {
  containersOfExecutors,
  lifecycleOf,
  processGone,
  serverEnv,
  type StdioClient,
  stdioClient
} from "./support/mcpClient.js"
import { goneWithin, pidsWith, processMarker } from "./support/processes.js"

const testDir = new URL(".", import.meta.url).pathname
const everything = `${testDir}node_modules/@modelcontextprotocol/server-everything/dist/index.js`
const dir = mkdtempSync(join(tmpdir(), "mcp-upstream-"))
let files = 0
const newFile = (name: string) => join(dir, `${name}-${++files}`)

/** A configuration file with server-everything as "everything" (its process found by `marker`), plus `more` entries. */
const configFile = (
  marker: string,
  everythingEntry: Record<string, unknown> = {},
  more: Record<string, unknown> = {}
) => {
  const path = newFile("upstream.json")
  writeFileSync(
    path,
    JSON.stringify({
      mcpServers: {
        everything: { command: process.execPath, args: [everything, "stdio", marker], ...everythingEntry },
        ...more
      }
    })
  )
  return path
}

const executors = new Set<string>()
const markers: Array<string> = []
const clients: Array<StdioClient> = []
/** The built server over stdio with server-everything upstream; its journal file. */
const start = async (extraArgs: ReadonlyArray<string> = [], everythingEntry: Record<string, unknown> = {}) => {
  const marker = processMarker("upstream-test")
  markers.push(marker)
  const journal = newFile("journal.sqlite")
  const c = await stdioClient(
    ["--journal", journal, "--upstream-config", configFile(marker, everythingEntry), ...extraArgs],
    "upstream-e2e"
  )
  clients.push(c)
  executors.add(c.executorId)
  return { ...c, marker, journal }
}

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()))
  try {
    await waitFor(async () => (await containersOfExecutors(executors)).length === 0, 20_000, 250)
    expect(await containersOfExecutors(executors)).toEqual([])
    for (const marker of markers)
      expect(await goneWithin(marker, 10_000), `an upstream process with ${marker} is left`).toBe(true)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

type Structured = Record<string, unknown>
const textOf = (result: unknown) => (result as { content?: Array<{ text?: string }> }).content?.[0]?.text ?? ""

const executeCode = async (c: StdioClient, language: string, code: string) => {
  const result = await c.client.callTool({ name: "execute_code", arguments: { language, code } }, undefined, {
    timeout: 90_000
  })
  return { result, structured: result.structuredContent as Structured }
}

/** One execution's events once its lifecycle is closed (every event recorded). */
const closedEvents = async (journal: string, id: string): Promise<ReadonlyArray<EventEnvelope>> => {
  let events: ReadonlyArray<EventEnvelope> = []
  const closed = await waitFor(
    async () => {
      const l = await lifecycleOf(journal, id)
      events = l.events
      return l.state !== undefined && isClosed(l.state)
    },
    20_000,
    100
  )
  if (!closed) throw new Error(`the lifecycle of ${id} did not close: ${events.map((e) => e.type).join(", ")}`)
  return events
}

describe("hermes-sandbox mcp --upstream-config: server-everything's tools in execute_code", () => {
  let server: Awaited<ReturnType<typeof start>>
  beforeAll(async () => {
    server = await start()
  })

  it("starts the upstream, says which tools it offers; tools/list: execute_code's description lists them one line each and how to call them", async () => {
    expect(pidsWith(server.marker)).toHaveLength(1)
    expect(server.stderr()).toMatch(
      /upstream MCP server "everything" \(mcp-servers\/everything 2\.0\.0\): 12 tools for execute_code: everything_echo, /
    )
    expect(server.stderr()).toMatch(/tool simulate-research-query not offered: it requires task-based execution/)

    const { tools } = await server.client.listTools()
    // The server's own tools are unchanged; the upstream's are not MCP tools of this server.
    expect(tools.map((t) => t.name).sort()).toEqual([
      "execute_code",
      "patch",
      "process",
      "read_file",
      "reset_session",
      "run_python",
      "search_files",
      "terminal",
      "write_file"
    ])
    const description = tools.find((t) => t.name === "execute_code")!.description!
    expect(description).toContain("The code can call these 12 host tools")
    expect(description).toContain("at most 50 calls per run, 60 s per call")
    const lines = description.split("\n").filter((l) => l.startsWith("- "))
    expect(lines).toHaveLength(12)
    expect(lines).toContain("- everything_echo(message): Echoes back the input string")
    expect(lines).toContain("- everything_get_sum(a, b): Returns the sum of two numbers")
    expect(lines).toContain(
      "- everything_get_resource_reference(resourceType=…, resourceId=…): Returns a resource reference that can be used by MCP clients"
    )
    expect(description).not.toMatch(/simulate.research.query/)
    expect(description).toContain(
      'Python: `from hermes_tools import everything_echo`, then `result = everything_echo(message="...")`'
    )
    expect(description).toContain(
      'JavaScript: `const { everything_echo } = require("hermes_tools")`, then `await everything_echo({ message: "..." })`'
    )
    expect(description).toContain(`bash: \`hermes-tool everything_echo '{"message":"..."}'\``)
    // execute_code's outputSchema names the new field.
    const outputSchema = tools.find((t) => t.name === "execute_code")!.outputSchema as {
      properties: Record<string, unknown>
    }
    expect(outputSchema.properties.tool_calls_made).toBeDefined()
  })

  it("python calls everything_echo and everything_get_sum; an upstream isError is a ToolError with its text, a bad argument a ToolRefused; tool_calls_made; the journal's ToolCall* events", async () => {
    const { result, structured } = await executeCode(
      server,
      "python",
      String.raw`
from hermes_tools import everything_echo, everything_get_sum, everything_get_resource_reference, ToolError, ToolRefused
print(everything_echo(message="hi"))
print(everything_get_sum(a=2, b=3))
try:
    everything_get_resource_reference(resourceId=0)
except ToolRefused as e:
    print("refused?!", e)
except ToolError as e:
    print("ToolError:", e)
try:
    everything_get_sum(a="two", b=3)
except ToolRefused as e:
    print("ToolRefused:", str(e).split(":")[0])
`
    )
    expect(result.isError, textOf(result)).toBeFalsy()
    expect(structured.status).toBe("success")
    expect(String(structured.stdout).split("\n")).toEqual([
      "Echo: hi",
      "The sum of 2 and 3 is 5.",
      "ToolError: Invalid resourceId: 0. Must be a finite positive integer.",
      "ToolRefused: invalid arguments for everything_get_sum",
      ""
    ])
    // The refused call was never dispatched: it does not count.
    expect(structured.tool_calls_made).toBe(3)
    expect(JSON.parse(textOf(result))).toMatchObject({ tool_calls_made: 3 })

    const events = await closedEvents(server.journal, String(structured.execution_id))
    const calls = events
      .filter((e) => e.type.startsWith("ToolCall"))
      .map((e): Record<string, unknown> => ({ type: e.type, ...(e.data as Record<string, unknown>) }))
    expect(calls.filter((c) => c.type === "ToolCallRequested").map((c) => [c.callId, c.tool])).toEqual([
      [1, "everything_echo"],
      [2, "everything_get_sum"],
      [3, "everything_get_resource_reference"],
      [4, "everything_get_sum"]
    ])
    expect(calls.filter((c) => c.type === "ToolCallCompleted").map((c) => [c.callId, c.tool])).toEqual([
      [1, "everything_echo"],
      [2, "everything_get_sum"]
    ])
    expect(calls.filter((c) => c.type === "ToolCallFailed")).toEqual([
      expect.objectContaining({
        callId: 3,
        tool: "everything_get_resource_reference",
        reason: "error",
        message: "Invalid resourceId: 0. Must be a finite positive integer."
      })
    ])
    expect(calls.filter((c) => c.type === "ToolCallRefused")).toEqual([
      expect.objectContaining({ callId: 4, tool: "everything_get_sum", reason: "invalid-arguments" })
    ])
    // The arguments themselves are not journaled (only their size and hash).
    const requested = calls.find((c) => c.type === "ToolCallRequested")!
    expect(requested.arguments).toBeUndefined()
    expect(requested.argumentsSha256).toMatch(/^[0-9a-f]{64}$/)
    // Every call settled before the run's end.
    const types = events.map((e) => e.type)
    expect(types.lastIndexOf("ToolCallCompleted")).toBeLessThan(types.indexOf("ContainerExited"))
  })

  it("javascript and bash call them as the description says; structuredContent comes back as an object", async () => {
    const js = await executeCode(
      server,
      "javascript",
      String.raw`
const { everything_get_sum, everything_get_structured_content } = require("hermes_tools")
;(async () => {
  const [sum, weather] = await Promise.all([everything_get_sum({ a: 40, b: 2 }), everything_get_structured_content({ location: "Chicago" })])
  console.log(sum, JSON.stringify(weather))
})()
`
    )
    expect(js.structured.stdout).toBe(
      'The sum of 40 and 2 is 42. {"temperature":36,"conditions":"Light rain / drizzle","humidity":82}\n'
    )
    expect(js.structured.tool_calls_made).toBe(2)

    const bash = await executeCode(
      server,
      "bash",
      `hermes-tool everything_echo '{"message":"from bash"}'
hermes-tool everything_get_resource_reference '{"resourceId":0}'; echo "exit=$?"`
    )
    expect(bash.structured.stdout).toBe('"Echo: from bash"\nexit=1\n')
    expect(bash.structured.stderr).toContain("Invalid resourceId: 0")
    expect(bash.structured.tool_calls_made).toBe(2)
  })

  it("closing the client ends the server and its upstream process", async () => {
    expect(pidsWith(server.marker)).toHaveLength(1)
    await server.close()
    expect(await waitFor(async () => processGone(server.pid), 20_000)).toBe(true)
    expect(await goneWithin(server.marker, 10_000)).toBe(true)
  })
})

describe("--upstream-config: limits, prefix, include; a signal", () => {
  it("--tool-max-calls: the call past the budget is refused (the code sees ToolRefused); a prefix and include of the entry apply; SIGTERM ends the upstream too", async () => {
    const server = await start(["--tool-max-calls", "2", "--tool-timeout", "5s"], {
      prefix: "ev_",
      include: ["echo", "get-sum"]
    })
    const { tools } = await server.client.listTools()
    const description = tools.find((t) => t.name === "execute_code")!.description!
    expect(description).toContain(
      "The code can call these 2 host tools (they run outside the sandbox, on the server; at most 2 calls per run, 5 s per call"
    )
    expect(description.split("\n").filter((l) => l.startsWith("- "))).toEqual([
      "- ev_echo(message): Echoes back the input string",
      "- ev_get_sum(a, b): Returns the sum of two numbers"
    ])

    const { structured } = await executeCode(
      server,
      "python",
      String.raw`
from hermes_tools import ev_get_sum, ToolRefused
for i in range(3):
    try:
        print(ev_get_sum(a=i, b=1))
    except ToolRefused as e:
        print("refused:", e)
`
    )
    const lines = String(structured.stdout).trim().split("\n")
    expect(lines.slice(0, 2)).toEqual(["The sum of 0 and 1 is 1.", "The sum of 1 and 1 is 2."])
    expect(lines[2]).toMatch(/^refused: .*2/)
    expect(structured.tool_calls_made).toBe(2)
    const events = await closedEvents(server.journal, String(structured.execution_id))
    expect(
      events.filter((e) => e.type === "ToolCallRefused").map((e) => (e.data as { reason: string }).reason)
    ).toEqual(["budget-exhausted"])

    expect(pidsWith(server.marker)).toHaveLength(1)
    process.kill(server.pid, "SIGTERM")
    expect(await waitFor(async () => processGone(server.pid), 20_000)).toBe(true)
    expect(await goneWithin(server.marker, 10_000)).toBe(true)
  })
})

describe("--upstream-config over Streamable HTTP (--http)", () => {
  it("two MCP sessions' code calls the one upstream; each run counts its own calls; SIGINT ends the server (130), every session sandbox and the upstream process", async () => {
    const marker = processMarker("upstream-http")
    markers.push(marker)
    const tokenFile = newFile("token")
    const token = `upstream-http-${Math.random().toString(36).slice(2)}-0123456789`
    writeFileSync(tokenFile, `${token}\n`)
    const journal = newFile("journal.sqlite")
    const server = await startHttpServer([
      "--port",
      "0",
      "--token-file",
      tokenFile,
      "--journal",
      journal,
      "--upstream-config",
      configFile(marker)
    ])
    const executor = /\(executor ([0-9a-f-]+)\)/.exec(server.stderr())?.[1]
    expect(executor, server.stderr()).toBeDefined()
    executors.add(executor!)
    const sessions: Array<Client> = []
    try {
      expect(server.stderr()).toMatch(/upstream MCP server "everything" .*: 12 tools for execute_code/)
      for (const name of ["http-one", "http-two"]) {
        const client = new Client({ name, version: "1.0.0" })
        await client.connect(
          new StreamableHTTPClientTransport(new URL(server.url), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } }
          })
        )
        sessions.push(client)
      }
      const description = (await sessions[0]!.listTools()).tools.find((t) => t.name === "execute_code")!.description!
      expect(description).toContain("- everything_echo(message): Echoes back the input string")
      const runs = await Promise.all(
        sessions.map(async (client, i) => {
          const result = await client.callTool(
            {
              name: "execute_code",
              arguments: {
                language: "python",
                code: `from hermes_tools import everything_echo, everything_get_sum\nprint(everything_echo(message="session ${i}"))\nprint(everything_get_sum(a=${i}, b=${i}))\n`
              }
            },
            undefined,
            { timeout: 90_000 }
          )
          return result.structuredContent as Structured
        })
      )
      expect(runs.map((r) => r.stdout)).toEqual([
        "Echo: session 0\nThe sum of 0 and 0 is 0.\n",
        "Echo: session 1\nThe sum of 1 and 1 is 2.\n"
      ])
      expect(runs.map((r) => r.tool_calls_made)).toEqual([2, 2])
      // One upstream process for the server, whatever the number of MCP sessions.
      expect(pidsWith(marker)).toHaveLength(1)
      const events = await closedEvents(journal, String(runs[1]!.execution_id))
      expect(
        events.filter((e) => e.type === "ToolCallCompleted").map((e) => (e.data as { tool: string }).tool)
      ).toEqual(["everything_echo", "everything_get_sum"])
    } finally {
      await Promise.allSettled(sessions.map((c) => c.close()))
      expect(await server.stop()).toBe(130)
    }
    expect(await goneWithin(marker, 10_000), "the upstream process ends with the server").toBe(true)
    expect(await containersOfExecutors([executor!])).toEqual([])
  }, 180_000)
})

describe("--upstream-config: the server killed", () => {
  it("SIGKILL: the upstream process sees its standard input end and exits too", async () => {
    const server = await start()
    expect(pidsWith(server.marker)).toHaveLength(1)
    process.kill(server.pid, "SIGKILL")
    expect(await waitFor(async () => processGone(server.pid), 20_000)).toBe(true)
    expect(await goneWithin(server.marker, 10_000)).toBe(true)
  })
})

/** The built server run to its end (it is expected to fail at start): exit code and stderr. */
const runToExit = (args: ReadonlyArray<string>): Promise<{ code: number | null; stderr: string }> =>
  new Promise((resolve, reject) => {
    const { command, args: full } = mcpServerCommand(args)
    const child = spawn(command, full, { env: serverEnv(), stdio: ["pipe", "pipe", "pipe"] })
    let stderr = ""
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`the server did not exit within 60 s; stderr: ${stderr}`))
    }, 60_000)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    })
  })

describe("--upstream-config: failing fast", () => {
  it("an upstream that cannot start stops the server's start, naming it (exit 125); the upstreams that did start are closed", async () => {
    const marker = processMarker("upstream-test")
    markers.push(marker)
    const config = configFile(marker, {}, { broken: { command: "/nonexistent/mcp-server" } })
    const run = await runToExit(["--no-journal", "--upstream-config", config])
    expect(run.code, run.stderr).toBe(125)
    expect(run.stderr).toMatch(
      /the upstream MCP server "broken" could not be used: the MCP server \/nonexistent\/mcp-server could not be connected to: .*ENOENT/
    )
    expect(run.stderr).not.toContain("serving MCP")
    expect(await goneWithin(marker, 10_000)).toBe(true)
  })

  it("an include naming a tool the server lacks is a usage error (exit 2) naming the server and the tool; the upstream is closed", async () => {
    const marker = processMarker("upstream-test")
    markers.push(marker)
    const run = await runToExit([
      "--no-journal",
      "--upstream-config",
      configFile(marker, { include: ["echo", "get_sum"] })
    ])
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr).toMatch(/the upstream MCP server "everything" could not be used: .*has no tool "get_sum"/)
    expect(await goneWithin(marker, 10_000)).toBe(true)
  })

  it("a file that is not a configuration, and tool limits without one, are usage errors (exit 2) before anything starts", async () => {
    const bad = newFile("bad.yaml")
    writeFileSync(bad, "mcpServers:\n  fs:\n    command: npx\n    exlude: [write_file]\n")
    const run = await runToExit(["--no-journal", "--upstream-config", bad])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain(`--upstream-config ${bad}: mcpServers.fs: unknown key "exlude"`)
    const missing = await runToExit(["--no-journal", "--upstream-config", join(dir, "nope.json")])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("nope.json: no such file")
    const limits = await runToExit(["--no-journal", "--tool-max-calls", "5"])
    expect(limits.code).toBe(2)
    expect(limits.stderr).toContain("--tool-max-calls and --tool-timeout: only with --upstream-config")
  })
})

describe("a client this project did not write: the MCP Inspector's CLI", () => {
  it("tools/call execute_code whose Python calls an upstream tool: its result, tool_calls_made; the upstream process ends with the server", async () => {
    const marker = processMarker("upstream-test")
    markers.push(marker)
    const { command, args } = mcpServerCommand(["--no-journal", "--upstream-config", configFile(marker)])
    const cwd = join(dir, "inspector")
    mkdirSync(cwd, { recursive: true })
    const code = "from hermes_tools import everything_get_sum\nprint(everything_get_sum(a=20, b=22))"
    const run = await runInspector(
      [
        command,
        ...args,
        "--method",
        "tools/call",
        "--tool-name",
        "execute_code",
        "--tool-arg",
        `code=${code}`,
        "--tool-arg",
        "language=python"
      ],
      { cwd, env: serverEnv() }
    )
    executors.add(/serving MCP over stdio \(executor (\S+)\)/.exec(run.stderr)?.[1] ?? "")
    expect(run.code, run.stderr).toBe(0)
    const result = JSON.parse(run.stdout) as { structuredContent: Structured; isError?: boolean }
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent).toMatchObject({
      status: "success",
      stdout: "The sum of 20 and 22 is 42.\n",
      tool_calls_made: 1
    })
    expect(await goneWithin(marker, 10_000)).toBe(true)
  })
})

describe("in code: McpSandbox.open({ upstream, tools, toolLimits })", () => {
  const everythingServer = (marker: string) => ({
    command: process.execPath,
    args: [everything, "stdio", marker],
    stderr: "ignore" as const
  })

  it("the upstream's tools and tools of one's own, listed and callable; toolLimits apply; close() ends the upstream process", async () => {
    const marker = processMarker("upstream-test")
    markers.push(marker)
    const sandbox = await McpSandbox.open({
      journal: "memory",
      upstream: { everything: { ...everythingServer(marker), include: ["echo"] } },
      tools: {
        now: {
          description: "The host's time (ISO 8601)\nMore words the list leaves out.",
          handler: () => "2026-12-01T00:00:00.000Z"
        }
      },
      toolLimits: { maxCalls: 10 }
    })
    try {
      executors.add(sandbox.executorId)
      expect(sandbox.toolSpecs.map((t) => t.name)).toEqual(["now", "everything_echo"])
      expect(sandbox.upstreams.map((u) => [u.name, u.server.name, Object.keys(u.tools)])).toEqual([
        ["everything", "mcp-servers/everything", ["everything_echo"]]
      ])
      const { client, close } = await connectInMemory(sandbox, { clientName: "in-code" })
      try {
        const description = (await client.listTools()).tools.find((t) => t.name === "execute_code")!.description!
        expect(description).toContain(
          "The code can call these 2 host tools (they run outside the sandbox, on the server; at most 10 calls per run"
        )
        expect(description).toContain(
          "\n- now(): The host's time (ISO 8601)\n- everything_echo(message): Echoes back the input string\n"
        )
        const result = await client.callTool({
          name: "execute_code",
          arguments: {
            language: "python",
            code: "from hermes_tools import now, everything_echo\nprint(now(), everything_echo(message='x'))"
          }
        })
        expect(result.structuredContent).toMatchObject({
          status: "success",
          stdout: "2026-12-01T00:00:00.000Z Echo: x\n",
          tool_calls_made: 2
        })
        // terminal runs in the session sandbox: the tools are execute_code's alone.
        const terminal = await client.callTool({
          name: "terminal",
          arguments: { command: "echo ${HERMES_TOOLS_SOCKET:-none}" }
        })
        expect(terminal.structuredContent).toMatchObject({ status: "success", stdout: "none\n" })
        expect(terminal.structuredContent).not.toHaveProperty("tool_calls_made")
      } finally {
        await close()
      }
    } finally {
      await sandbox.close()
    }
    expect(await goneWithin(marker, 10_000)).toBe(true)
  })

  it("a name given twice (a tool of one's own and an upstream's), or a tool that cannot be offered, fails open; the upstream is closed", async () => {
    const marker = processMarker("upstream-test")
    markers.push(marker)
    const clash = await McpSandbox.open({
      journal: "memory",
      upstream: { everything: everythingServer(marker) },
      tools: { everything_echo: { handler: () => "mine" } }
    }).catch((e: unknown) => e)
    expect(clash).toBeInstanceOf(McpUpstreamFailed)
    expect((clash as Error).message).toBe(
      'the tool name "everything_echo" is given by both the tools option and the upstream MCP server "everything": give one of them another prefix, or exclude the tool from one'
    )
    expect(await goneWithin(marker, 10_000)).toBe(true)

    const second = processMarker("upstream-test")
    markers.push(second)
    const invalid = await McpSandbox.open({
      journal: "memory",
      upstream: { everything: everythingServer(second) },
      tools: { "not-a-name": { handler: () => 1 } }
    }).catch((e: unknown) => e)
    expect(invalid).toMatchObject({ _tag: "InvalidRequest", field: "tools.not-a-name" })
    expect(await goneWithin(second, 10_000)).toBe(true)
  })
})

describe("the upstream configuration file (no engine)", () => {
  it("JSON in Claude Desktop's shape: stdio and Streamable HTTP entries with prefix, include, exclude; other top-level keys are left alone", () => {
    const { servers, warnings } = parseUpstreamConfig(
      JSON.stringify({
        globalShortcut: "Ctrl+Space",
        mcpServers: {
          fs: {
            command: "npx",
            args: ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
            env: { A: "1" },
            exclude: ["write_file"]
          },
          web: {
            type: "http",
            url: "http://127.0.0.1:3001/mcp",
            headers: { Authorization: "Bearer x" },
            prefix: "w_",
            include: ["search"]
          }
        }
      })
    )
    expect(servers).toEqual({
      fs: {
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
        env: { A: "1" },
        exclude: ["write_file"]
      },
      web: {
        url: "http://127.0.0.1:3001/mcp",
        headers: { Authorization: "Bearer x" },
        prefix: "w_",
        include: ["search"]
      }
    })
    expect(warnings).toEqual([])
  })

  it("YAML in the Hermes agent's shape: mcp_servers, enabled: false skips a server, tools.include, a single name; its timeouts are named as ignored; cwd is from the file's directory", () => {
    const { servers, warnings } = parseUpstreamConfig(
      `mcp_servers:
  github:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    cwd: tools
    timeout: 120
    tools:
      include: [search_repositories]
      resources: false
  off:
    url: https://mcp.example.com/mcp
    enabled: false
  time:
    command: uvx
    args: [mcp-server-time]
    exclude: convert_time
`,
      { path: "/etc/hermes-sandbox/upstream.yaml" }
    )
    expect(servers).toEqual({
      github: {
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-github"],
        cwd: "/etc/hermes-sandbox/tools",
        include: ["search_repositories"]
      },
      time: { command: "uvx", args: ["mcp-server-time"], exclude: ["convert_time"] }
    })
    expect(warnings).toEqual([
      "mcp_servers.github.timeout is ignored here: the sandbox's tool limits decide how long a call may take (--tool-timeout)",
      "mcp_servers.github.tools.resources is ignored here: sandboxed code calls tools only"
    ])
  })

  it("every mistake is an UpstreamConfigError naming the file, the server and the field", () => {
    const cases: Array<[string, RegExp]> = [
      ["[1, 2]", /^up\.json: expected an object with "mcpServers"/],
      ['{"servers": {}}', /no "mcpServers" \(or "mcp_servers"\) key; it has "servers"/],
      [
        '{"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}',
        /mcpServers\.a: give either "command" .* not both/
      ],
      ['{"mcpServers": {"a": {"args": []}}}', /mcpServers\.a: give either .*got neither/],
      [
        '{"mcpServers": {"a": {"command": "x", "args": "y"}}}',
        /mcpServers\.a\.args: expected a list of strings, got "y"/
      ],
      ['{"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}', /mcpServers\.a\.env\.N: expected a string, got 1/],
      ['{"mcpServers": {"a": {"command": "x", "headers": {}}}}', /mcpServers\.a\.headers: only with "url"/],
      ['{"mcpServers": {"a": {"url": "ftp://h/mcp"}}}', /mcpServers\.a\.url: expected an http:\/\/ or https:\/\/ URL/],
      ['{"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}', /"sse" .* is not supported/],
      ['{"mcpServers": {"a": {"command": "x", "auth": "oauth"}}}', /mcpServers\.a: unknown key "auth"/],
      ['{"mcpServers": {"a": {"command": "x", "include": ["p"], "tools": {"include": ["q"]}}}}', /give them once/],
      ["mcpServers: {a: {command: x}\n", /^up\.json:\d+: not valid JSON or YAML/]
    ]
    for (const [text, message] of cases) {
      let error: unknown
      try {
        parseUpstreamConfig(text, { path: "up.json" })
      } catch (e) {
        error = e
      }
      expect(error, text).toBeInstanceOf(UpstreamConfigError)
      expect((error as Error).message, text).toMatch(message)
    }
  })

  it("docs/mcp.md's example configuration is one", () => {
    const page = readFileSync(new URL("../docs/mcp.md", import.meta.url), "utf8")
    const block = /```json\n\/\/ upstream\.json[^\n]*\n([\s\S]*?)```/.exec(page)?.[1]
    expect(block, "no upstream.json example in docs/mcp.md").toBeDefined()
    const { servers, warnings } = parseUpstreamConfig(block!, { path: "upstream.json" })
    expect(Object.keys(servers)).toEqual(["fs", "web"])
    expect(servers.web).toMatchObject({ url: "http://127.0.0.1:3001/mcp", prefix: "web_", exclude: ["fetch_raw"] })
    expect(warnings).toEqual([])
  })

  it("the default prefix is the server's name made an identifier, then _", () => {
    expect(Upstreams.defaultPrefix("everything")).toBe("everything_")
    expect(Upstreams.defaultPrefix("my-fs")).toBe("my_fs_")
    expect(Upstreams.defaultPrefix("9lives")).toBe("_9lives_")
  })
})
