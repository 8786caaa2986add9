/**
 * The MCP bridge (toolsFromMcp, issue 18 item 6) against the real reference server
 * @modelcontextprotocol/server-everything (installed in the test package), over stdio and over
 * Streamable HTTP: its tools listed and mapped to sandbox names, called through the handlers
 * (directly: the sandbox's side is tested where the tool channel is), results unwrapped, errors,
 * cancellation, include/exclude/prefix, and the upstream's life (closing ends it; its death is a
 * tool error naming it). One small server written here serves only what the reference server
 * does not do: a paginated tools/list and names that clash once mapped.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { planTools, resolveToolLimits } from "@hermes-sandbox/core/Tools"
import { type ToolContext } from "@hermes-sandbox/core"
import { McpTools, McpUpstreamFailed, type McpUpstream, toolsFromMcp } from "@hermes-sandbox/mcp"
import { unwrapCallToolResult } from "@hermes-sandbox/mcp/toolsFromMcp"
import { waitFor } from "./support/docker.js"
import { goneWithin, pidsWith, processMarker } from "./support/processes.js"

const testDir = new URL(".", import.meta.url).pathname
const everything = `${testDir}node_modules/@modelcontextprotocol/server-everything/dist/index.js`

/** The reference server over stdio, with a marker argument (it ignores arguments after the transport) to find its process by. */
const stdioServer = (env: Record<string, string> = {}) => {
  const marker = processMarker("bridge-test")
  return {
    marker,
    spec: { command: process.execPath, args: [everything, "stdio", marker], env, stderr: "ignore" as const }
  }
}

const gone = (marker: string) => goneWithin(marker, 10_000)

const context = (signal: AbortSignal = new AbortController().signal): ToolContext => ({
  signal,
  executionId: "bridge-test",
  callId: 1,
  tool: "test"
})
const callOn = (upstream: McpUpstream, name: string, args: Record<string, unknown> = {}, signal?: AbortSignal) => {
  const tool = upstream.tools[name]
  if (tool === undefined) throw new Error(`no tool ${name}; have ${Object.keys(upstream.tools).join(", ")}`)
  return Promise.resolve(tool.handler(args, context(signal))) as Promise<unknown>
}

const opened: Array<McpUpstream> = []
const open = async (options: Parameters<typeof toolsFromMcp>[0]) => {
  const upstream = await toolsFromMcp(options)
  opened.push(upstream)
  return upstream
}
afterAll(async () => {
  await Promise.all(opened.map((u) => u.close()))
})

// server-everything 2026.8.31 with a client that declares no capabilities (no roots, sampling,
// elicitation: its conditional tools for those are not registered).
const EVERYTHING_TOOLS = [
  "echo",
  "get-annotated-message",
  "get-env",
  "get-resource-links",
  "get-resource-reference",
  "get-structured-content",
  "get-sum",
  "get-tiny-image",
  "gzip-file-as-resource",
  "toggle-simulated-logging",
  "toggle-subscriber-updates",
  "trigger-long-running-operation"
]

describe("toolsFromMcp over stdio (server-everything)", () => {
  let server: ReturnType<typeof stdioServer>
  let upstream: McpUpstream
  beforeAll(async () => {
    server = stdioServer({ HERMES_BRIDGE_TEST: "passed-on" })
    upstream = await open(server.spec)
  })

  it("lists every tool, maps the names that are not identifiers ('-' → '_') and reports it; a task-only tool is skipped", () => {
    expect(upstream.server).toEqual({ name: "mcp-servers/everything", version: "2.0.0" })
    expect(Object.keys(upstream.tools).sort()).toEqual(EVERYTHING_TOOLS.map((n) => n.replaceAll("-", "_")).sort())
    expect(upstream.renamed).toEqual(
      EVERYTHING_TOOLS.filter((n) => n.includes("-")).map((n) => ({ upstream: n, name: n.replaceAll("-", "_") }))
    )
    expect(upstream.skipped).toEqual([
      { upstream: "simulate-research-query", reason: expect.stringContaining("task-based execution") }
    ])
    const echo = upstream.tools.echo!
    expect(echo.description).toBe("Echoes back the input string")
    // The upstream's inputSchema as it is: what the sandbox checks arguments against and shows the code.
    expect(echo.parameters).toMatchObject({
      type: "object",
      properties: { message: { type: "string" } },
      required: ["message"]
    })
    expect(upstream.tools.get_sum!.parameters).toMatchObject({ required: ["a", "b"] })
  })

  it("calls through the handlers: text that is not JSON is the string, JSON text is parsed", async () => {
    expect(await callOn(upstream, "echo", { message: "hello bridge" })).toBe("Echo: hello bridge")
    expect(await callOn(upstream, "get_sum", { a: 2, b: 40 })).toBe("The sum of 2 and 40 is 42.")
    // get-env answers with JSON.stringify(process.env): parsed. Its environment is the SDK's few
    // safe variables plus `env`, not this process's.
    const env = (await callOn(upstream, "get_env")) as Record<string, string>
    expect(env.HERMES_BRIDGE_TEST).toBe("passed-on")
    expect(env.PATH).toBe(process.env.PATH)
    expect(process.env.VITEST).toBeDefined()
    expect(env.VITEST).toBeUndefined()
  })

  it("structuredContent is the result where the tool gives it", async () => {
    expect(await callOn(upstream, "get_structured_content", { location: "Chicago" })).toEqual({
      temperature: 36,
      conditions: "Light rain / drizzle",
      humidity: 82
    })
  })

  it("content that is not all text (an image, an embedded resource, resource links) is the content array as it is", async () => {
    const image = (await callOn(upstream, "get_annotated_message", {
      messageType: "success",
      includeImage: true
    })) as Array<Record<string, unknown>>
    expect(image.map((b) => b.type)).toEqual(["text", "image"])
    expect(image[1]).toMatchObject({ type: "image", mimeType: "image/png", data: expect.stringMatching(/^iVBOR/) })
    const reference = (await callOn(upstream, "get_resource_reference", {
      resourceType: "Text",
      resourceId: 2
    })) as Array<Record<string, unknown>>
    expect(reference.map((b) => b.type)).toEqual(["text", "resource", "text"])
    expect(reference[1]).toMatchObject({ resource: { uri: expect.stringContaining("2"), mimeType: "text/plain" } })
    const links = (await callOn(upstream, "get_resource_links", { count: 2 })) as Array<Record<string, unknown>>
    expect(links.map((b) => b.type)).toEqual(["text", "resource_link", "resource_link"])
  })

  it("an isError result is a thrown Error with the tool's text", async () => {
    await expect(callOn(upstream, "echo", {})).rejects.toThrow(
      /Input validation error: Invalid arguments for tool echo/
    )
    await expect(callOn(upstream, "get_resource_reference", { resourceType: "Neither" })).rejects.toThrow(
      /expected one of "Text"\|"Blob"/
    )
    // The connection is still good afterwards.
    expect(await callOn(upstream, "echo", { message: "still here" })).toBe("Echo: still here")
  })

  it("an aborted signal ends a slow call at once; the connection stays usable", async () => {
    const controller = new AbortController()
    const started = Date.now()
    const call = callOn(upstream, "trigger_long_running_operation", { duration: 30, steps: 30 }, controller.signal)
    setTimeout(() => controller.abort(new Error("the run ended")), 300)
    await expect(call).rejects.toThrow(
      /the call to trigger-long-running-operation on the MCP server "mcp-servers\/everything" .* was cancelled/
    )
    expect(Date.now() - started).toBeLessThan(5_000)
    // A signal already aborted: no call at all.
    await expect(callOn(upstream, "echo", { message: "x" }, AbortSignal.abort())).rejects.toThrow(/was cancelled/)
    expect(await callOn(upstream, "get_sum", { a: 1, b: 1 })).toBe("The sum of 1 and 1 is 2.")
  })

  it("calls run concurrently over the one connection", async () => {
    const sums = await Promise.all(Array.from({ length: 8 }, (_, i) => callOn(upstream, "get_sum", { a: i, b: 100 })))
    expect(sums).toEqual(Array.from({ length: 8 }, (_, i) => `The sum of ${i} and 100 is ${i + 100}.`))
  })
})

describe("toolsFromMcp: prefix, include, exclude", () => {
  it("prefix goes before every name (then mapped); include keeps only the named upstream tools", async () => {
    const { spec } = stdioServer()
    const upstream = await open({ ...spec, prefix: "ev_", include: ["echo", "get-sum"] })
    expect(Object.keys(upstream.tools).sort()).toEqual(["ev_echo", "ev_get_sum"])
    expect(upstream.renamed).toEqual([{ upstream: "get-sum", name: "ev_get_sum" }])
    expect(await callOn(upstream, "ev_get_sum", { a: 1, b: 2 })).toBe("The sum of 1 and 2 is 3.")
    await upstream.close()
  })

  it("exclude drops the named upstream tools", async () => {
    const { spec } = stdioServer()
    const upstream = await open({ ...spec, exclude: ["get-env", "gzip-file-as-resource"] })
    expect(Object.keys(upstream.tools)).not.toContain("get_env")
    expect(Object.keys(upstream.tools)).not.toContain("gzip_file_as_resource")
    expect(Object.keys(upstream.tools)).toHaveLength(EVERYTHING_TOOLS.length - 2)
    await upstream.close()
  })

  it("a name in include or exclude that the server does not have fails, and the upstream process ends", async () => {
    for (const options of [{ include: ["echo", "get_sum"] }, { exclude: ["get_env"] }]) {
      const { marker, spec } = stdioServer()
      const failure = await toolsFromMcp({ ...spec, ...options }).catch((e: unknown) => e)
      expect(failure).toBeInstanceOf(McpUpstreamFailed)
      expect(failure).toMatchObject({ _tag: "McpUpstreamFailed", reason: "invalid-options" })
      expect((failure as Error).message).toMatch(/has no tool "get_(sum|env)" .*it has "echo", "get-annotated-message"/)
      expect(await gone(marker)).toBe(true)
    }
  })

  it("including a tool that cannot be bridged (task-only) fails rather than leaving it out", async () => {
    const { marker, spec } = stdioServer()
    await expect(toolsFromMcp({ ...spec, include: ["echo", "simulate-research-query"] })).rejects.toMatchObject({
      reason: "invalid-options",
      message: expect.stringContaining("simulate-research-query")
    })
    expect(await gone(marker)).toBe(true)
  })

  it("a prefix that is not an identifier's start is refused before anything starts", async () => {
    const { marker, spec } = stdioServer()
    for (const prefix of ["9_", "fs-", "a b"]) {
      await expect(toolsFromMcp({ ...spec, prefix })).rejects.toMatchObject({
        _tag: "McpUpstreamFailed",
        reason: "invalid-options"
      })
    }
    expect(pidsWith(marker)).toEqual([])
  })
})

describe("toolsFromMcp: the upstream's life", () => {
  it("close() ends the upstream process; a call after it is a tool error; close is idempotent; await using closes", async () => {
    const { marker, spec } = stdioServer()
    const upstream = await toolsFromMcp(spec)
    expect(pidsWith(marker)).toHaveLength(1)
    await upstream.close()
    expect(await gone(marker)).toBe(true)
    await expect(callOn(upstream, "echo", { message: "x" })).rejects.toThrow(
      /^the connection to the MCP server "mcp-servers\/everything" \(.*node.*\) has been closed$/
    )
    await upstream.close()

    const second = stdioServer()
    {
      await using disposable = await toolsFromMcp(second.spec)
      expect(await callOn(disposable, "echo", { message: "using" })).toBe("Echo: using")
      expect(pidsWith(second.marker)).toHaveLength(1)
    }
    expect(await gone(second.marker)).toBe(true)
  })

  effectIt.effect("McpTools.scoped: the connection lives as long as its Scope", () =>
    Effect.gen(function* () {
      const { marker, spec } = stdioServer()
      const result = yield* Effect.scoped(
        Effect.gen(function* () {
          const upstream = yield* McpTools.scoped({ ...spec, name: "everything" })
          expect(pidsWith(marker)).toHaveLength(1)
          return yield* Effect.promise(() => callOn(upstream, "echo", { message: "scoped" }))
        })
      )
      expect(result).toBe("Echo: scoped")
      expect(yield* Effect.promise(() => gone(marker))).toBe(true)
      // A failure to connect is McpUpstreamFailed in the error channel.
      const failure = yield* Effect.flip(Effect.scoped(McpTools.scoped({ command: "/nonexistent/mcp-server" })))
      expect(failure).toMatchObject({ _tag: "McpUpstreamFailed", reason: "connect-failed" })
    })
  )

  it("the upstream dying is a tool error naming it, for the call in flight and the calls after", async () => {
    const { marker, spec } = stdioServer()
    const upstream = await open({ ...spec, name: "everything" })
    const [pid] = pidsWith(marker)
    const inFlight = callOn(upstream, "trigger_long_running_operation", { duration: 30, steps: 30 })
    await new Promise((r) => setTimeout(r, 200))
    process.kill(pid!, "SIGKILL")
    await expect(inFlight).rejects.toThrow(/^the MCP server "everything" \(.*node.*\) closed the connection$/)
    await expect(callOn(upstream, "echo", { message: "x" })).rejects.toThrow(
      /^the MCP server "everything" \(.*\) closed the connection$/
    )
  })

  it("a server that cannot start, or exits at once, is McpUpstreamFailed with what it said", async () => {
    await expect(toolsFromMcp({ command: "/nonexistent/mcp-server" })).rejects.toMatchObject({
      _tag: "McpUpstreamFailed",
      reason: "connect-failed",
      message: expect.stringContaining("ENOENT")
    })
    await expect(
      toolsFromMcp({
        command: process.execPath,
        args: ["-e", "console.error('no config file, giving up'); process.exit(3)"],
        stderr: "ignore"
      })
    ).rejects.toMatchObject({ reason: "connect-failed", message: expect.stringContaining("no config file, giving up") })
  })
})

describe("toolsFromMcp: paginated tools/list, names that clash once mapped", () => {
  // server-everything lists its tools in one page and its names map without clashes; this
  // server (the SDK's low-level Server, written here for that alone) lists 2 tools per page.
  const paginating = `
    import { Server } from "@modelcontextprotocol/sdk/server/index.js"
    import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
    import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
    const names = ["a-b", "a_b", "9lives", "${"x".repeat(70)}", "ok", "a.b", "class"]
    const server = new Server({ name: "paginating", version: "1" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, (request) => {
      const start = Number(request.params?.cursor ?? 0)
      const tools = names.slice(start, start + 2).map((name) => ({ name, inputSchema: { type: "object" } }))
      return start + 2 < names.length ? { tools, nextCursor: String(start + 2) } : { tools }
    })
    server.setRequestHandler(CallToolRequestSchema, (request) => ({ content: [{ type: "text", text: "called " + request.params.name }, { type: "text", text: JSON.stringify(request.params.arguments) }] }))
    await server.connect(new StdioServerTransport())
  `
  it("follows nextCursor to the last page; usable names keep theirs, mapped ones are numbered on a clash and reported", async () => {
    const upstream = await open({
      command: process.execPath,
      args: ["--input-type=module", "-e", paginating],
      cwd: testDir
    })
    const long = "x".repeat(64)
    expect(Object.keys(upstream.tools).sort()).toEqual(
      ["_9lives", "a_b", "a_b_2", "a_b_3", "class_", "ok", long].sort()
    )
    expect(upstream.renamed).toEqual([
      { upstream: "a-b", name: "a_b_2" },
      { upstream: "9lives", name: "_9lives" },
      { upstream: "x".repeat(70), name: long },
      { upstream: "a.b", name: "a_b_3" },
      // A reserved word (here of both languages) cannot be a function's name in the generated modules.
      { upstream: "class", name: "class_" }
    ])
    // Several text blocks: an array, each parsed where it is JSON.
    expect(await callOn(upstream, "a_b_2", { n: 1 })).toEqual(["called a-b", { n: 1 }])
    expect(await callOn(upstream, "a_b", {})).toEqual(["called a_b", {}])
    expect(await callOn(upstream, long)).toEqual([`called ${"x".repeat(70)}`, {}])
  })
})

describe("an upstream tool's JSON Schema takes the bounded refusal path (hostile review 2, #1)", () => {
  // Map-shaped parameters (additionalProperties, patternProperties) put the data's own keys in the
  // validator's paths: 5 keys of 150 KB made a 750,163-character refusal before.
  const mapShaped = `
    import { Server } from "@modelcontextprotocol/sdk/server/index.js"
    import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
    import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
    const server = new Server({ name: "map-shaped", version: "1" }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [
      { name: "headers", inputSchema: { type: "object", additionalProperties: { type: "string", maxLength: 10 } } },
      { name: "env", inputSchema: { type: "object", patternProperties: { "^[A-Z]": { type: "integer" } } } }
    ] }))
    server.setRequestHandler(CallToolRequestSchema, () => ({ content: [{ type: "text", text: "ok" }] }))
    await server.connect(new StdioServerTransport())
  `
  it("5 keys of 150 KB each: the refusal is bounded, names at most 5 problems, each path cut", async () => {
    const upstream = await open({
      command: process.execPath,
      args: ["--input-type=module", "-e", mapShaped],
      cwd: testDir
    })
    const plan = await Effect.runPromise(Effect.scoped(planTools(upstream.tools, resolveToolLimits(undefined), false)))
    const big = (prefix: string) =>
      Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`${prefix}${i}${"k".repeat(150_000)}`, "v".repeat(20)]))
    for (const [tool, value] of [
      ["headers", big("h")],
      ["env", big("E")]
    ] as const) {
      const checked = plan!.tools.get(tool)!.check(value)
      expect(checked._tag, tool).toBe("Left")
      const message = (checked as { left: string }).left
      expect(message.length, tool).toBeLessThan(8192)
      expect(message, tool).toMatch(/k{10}/) // the path is named, cut
    }
  })
})

describe("unwrapCallToolResult", () => {
  it("prefers structuredContent over the text, parses JSON text, keeps other content as it is", () => {
    expect(
      unwrapCallToolResult({ content: [{ type: "text", text: "a summary for people" }], structuredContent: { n: 1 } })
    ).toEqual({ n: 1 })
    expect(unwrapCallToolResult({ content: [{ type: "text", text: "[1,2]" }] })).toEqual([1, 2])
    expect(unwrapCallToolResult({ content: [{ type: "text", text: "42" }] })).toBe(42)
    expect(unwrapCallToolResult({ content: [{ type: "text", text: "{not json" }] })).toBe("{not json")
    expect(
      unwrapCallToolResult({
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "true" }
        ]
      })
    ).toEqual(["a", true])
    const mixed = [
      { type: "text", text: "x" },
      { type: "audio", data: "AAAA", mimeType: "audio/wav" }
    ]
    expect(unwrapCallToolResult({ content: mixed })).toBe(mixed)
    expect(unwrapCallToolResult({ content: [] })).toBeNull()
    expect(unwrapCallToolResult({ toolResult: { old: "protocol" } })).toEqual({ old: "protocol" })
  })

  it("isError throws the text content (every block), even when there is structuredContent", () => {
    expect(() =>
      unwrapCallToolResult({
        isError: true,
        content: [
          { type: "text", text: "no such file" },
          { type: "text", text: "at /x" }
        ],
        structuredContent: { a: 1 }
      })
    ).toThrow(/^no such file\nat \/x$/)
    expect(() => unwrapCallToolResult({ isError: true, content: [] }, "the tool t")).toThrow(
      "the tool t reported an error without a message"
    )
  })
})

/**
 * server-everything's Streamable HTTP server listens on every interface (app.listen(PORT)) and has
 * no option for the host: a preload makes its listen() bind 127.0.0.1 (port 0: any free one) and
 * print the address it got.
 */
const LOOPBACK_PRELOAD = `
import net from "node:net"
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\\d+$/.test(args[0]))) args.splice(1, typeof args[1] === "string" ? 1 : 0, "127.0.0.1")
  this.once("listening", () => { const a = this.address(); process.stderr.write("LISTENING " + a.address + " " + a.port + "\\n") })
  return listen.apply(this, args)
}
`

describe("toolsFromMcp over Streamable HTTP (server-everything streamableHttp)", () => {
  let dir: string
  let child: ChildProcess
  let url: string
  let stdout = ""
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "hermes-bridge-"))
    writeFileSync(join(dir, "loopback.mjs"), LOOPBACK_PRELOAD)
    child = spawn(process.execPath, ["--import", join(dir, "loopback.mjs"), everything, "streamableHttp"], {
      env: { ...process.env, PORT: "0" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()))
    url = await new Promise<string>((resolve, reject) => {
      let stderr = ""
      const timer = setTimeout(() => reject(new Error(`no LISTENING line within 30 s: ${stderr}`)), 30_000)
      child.stderr!.on("data", (d: Buffer) => {
        stderr += d.toString()
        const m = /LISTENING (\S+) (\d+)/.exec(stderr)
        if (m !== null) {
          clearTimeout(timer)
          expect(m[1]).toBe("127.0.0.1")
          resolve(`http://127.0.0.1:${m[2]}/mcp`)
        }
      })
      child.once("exit", (code) => reject(new Error(`the server exited (${code}): ${stderr}`)))
    })
  })
  afterAll(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r))
      child.kill("SIGINT")
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  })

  it("lists, calls, unwraps and cancels as over stdio; close() deletes the MCP session", async () => {
    const upstream = await toolsFromMcp({ url, headers: { "X-Hermes-Test": "1" }, prefix: "ev_", exclude: ["get-env"] })
    expect(upstream.server.name).toBe("mcp-servers/everything")
    expect(Object.keys(upstream.tools).sort()).toEqual(
      EVERYTHING_TOOLS.filter((n) => n !== "get-env")
        .map((n) => `ev_${n.replaceAll("-", "_")}`)
        .sort()
    )
    expect(await callOn(upstream, "ev_echo", { message: "over http" })).toBe("Echo: over http")
    expect(await callOn(upstream, "ev_get_structured_content", { location: "New York" })).toEqual({
      temperature: 33,
      conditions: "Cloudy",
      humidity: 82
    })
    await expect(callOn(upstream, "ev_echo", {})).rejects.toThrow(/Input validation error/)
    const controller = new AbortController()
    const slow = callOn(upstream, "ev_trigger_long_running_operation", { duration: 30, steps: 30 }, controller.signal)
    setTimeout(() => controller.abort(), 300)
    await expect(slow).rejects.toThrow(/was cancelled/)
    expect(await callOn(upstream, "ev_get_sum", { a: 3, b: 4 })).toBe("The sum of 3 and 4 is 7.")
    expect(stdout).not.toContain("Received session termination request")
    await upstream.close()
    expect(await waitFor(async () => stdout.includes("Received session termination request"), 5_000)).toBe(true)
    await expect(callOn(upstream, "ev_echo", { message: "x" })).rejects.toThrow(/has been closed/)
  })

  it("an HTTP server that has gone away is a tool error naming it", async () => {
    const upstream = await open({ url, name: "everything-http" })
    expect(await callOn(upstream, "echo", { message: "before" })).toBe("Echo: before")
    const exited = new Promise((r) => child.once("exit", r))
    child.kill("SIGINT")
    await exited
    await expect(callOn(upstream, "echo", { message: "after" })).rejects.toThrow(
      new RegExp(`^the MCP server "everything-http" \\(${url.replaceAll(".", "\\.")}\\) could not be reached: `)
    )
  })

  it("a URL nothing listens on is McpUpstreamFailed (connect-failed)", async () => {
    await expect(toolsFromMcp({ url: "http://127.0.0.1:9/mcp" })).rejects.toMatchObject({
      _tag: "McpUpstreamFailed",
      reason: "connect-failed"
    })
    await expect(toolsFromMcp({ url: "ftp://127.0.0.1/mcp" })).rejects.toMatchObject({ reason: "invalid-options" })
  })
})
