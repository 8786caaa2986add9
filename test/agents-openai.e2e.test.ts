/**
 * A real agent framework from npm driving the built `hermes-sandbox mcp` over stdio (issue 29's
 * framework test): the OpenAI Agents SDK (`@openai/agents`, pinned in test/package.json at the
 * version that runs on Node 20) with its own MCP client (MCPServerStdio) and its own model client
 * (OpenAIProvider, Chat Completions), against a scripted model: an OpenAI-compatible server on
 * 127.0.0.1 that answers each request with the next predetermined tool call, then a final message,
 * and records every request body. Nothing but the model is scripted: the framework's loop, its MCP
 * client, the server and the engine are real. The run writes, patches and searches a file, charts
 * with execute_code, runs a cell, and starts a server with terminal (background: true) that it
 * polls, kills and reads the log of with process. The test checks what the framework passed to the
 * model (under `--images link` the chart reached it as a resource's name, with no base64) and that
 * nothing is left running once the agent's run and the server's close are over.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent, MCPServerStdio, OpenAIProvider, Runner, setTracingDisabled } from "@openai/agents"
import { afterAll, describe, expect, it } from "vitest"
import { cliCommand } from "./support/cli.js"
import { waitFor } from "./support/docker.js"
import { childrenWith, containersOfExecutors, containersOwnedBy, processGone, serverEnv } from "./support/mcpClient.js"

// The SDK's traces go to api.openai.com unless disabled: every endpoint of this test is on loopback.
setTracingDisabled(true)

const IMAGE = "hermes-sandbox/python-data:latest"

const CHART = [
  "import matplotlib",
  'matplotlib.use("Agg")',
  "import matplotlib.pyplot as plt",
  "fig, ax = plt.subplots(figsize=(6.4, 4.8))",
  "ax.plot([1, 2, 3, 4], [1, 4, 9, 16])",
  'ax.set_title("squares")',
  'fig.savefig("chart.png")',
  'print("chart saved")'
].join("\n")

const GREET = "def greet(name):\n    return 'Hello, ' + name\n"

/** The model's script: one tool call per turn, in order, then a final message. A step's arguments may come from the results so far (a process id). */
type Step = {
  readonly name: string
  readonly args: Record<string, unknown> | ((results: ReadonlyArray<Value>) => Record<string, unknown>)
}
/** Fetches the background server's page from inside the sandbox, trying until it listens (no network: loopback only). */
const FETCH = [
  "for i in $(seq 100); do",
  "  python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:8000/app/greet.py\").read().decode())' 2>/dev/null && exit 0",
  "  sleep 0.1",
  "done",
  "exit 1"
].join("\n")
const processIdOf = (results: ReadonlyArray<Value>) => ({ id: results[5]?.["process_id"] })
const SCRIPT: ReadonlyArray<Step> = [
  { name: "write_file", args: { path: "/workspace/app/greet.py", content: GREET } },
  { name: "patch", args: { path: "/workspace/app/greet.py", old_string: "'Hello, '", new_string: "'Goodbye, '" } },
  { name: "search_files", args: { pattern: "Goodbye", path: "/workspace" } },
  { name: "execute_code", args: { language: "python", code: CHART, collect: ["chart.png"] } },
  { name: "run_python", args: { code: "exec(open('/workspace/app/greet.py').read())\ngreet('world')" } },
  {
    name: "terminal",
    args: { command: "python3 -u -m http.server 8000 --bind 127.0.0.1 --directory /workspace", background: true }
  },
  { name: "terminal", args: { command: FETCH } },
  { name: "process", args: (results) => ({ action: "poll", ...processIdOf(results) }) },
  { name: "process", args: (results) => ({ action: "kill", ...processIdOf(results) }) },
  { name: "process", args: (results) => ({ action: "log", ...processIdOf(results) }) }
]
const FINAL = "All done: greet.py edited, found, run and served; the chart is a resource."

interface ChatMessage {
  readonly role: string
  readonly content?: unknown
  readonly tool_call_id?: string
  readonly tool_calls?: ReadonlyArray<{ readonly id: string; readonly function: { readonly name: string } }>
}
interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools?: ReadonlyArray<{ readonly function: { readonly name: string } }>
}

/** The text a tool message carries (a string, or text parts). */
const textOfMessage = (m: ChatMessage): string =>
  typeof m.content === "string"
    ? m.content
    : Array.isArray(m.content)
      ? m.content.map((p: { text?: string }) => p.text ?? "").join("")
      : ""

/**
 * The tool's result value (the JSON of the first text block) from what the framework put in the tool
 * message: the MCP content array, one block, or the text itself, each as the SDK serializes it.
 */
type Value = Record<string, unknown>
const resultValue = (text: string): Value => {
  const parsed: unknown = JSON.parse(text)
  const blocks = Array.isArray(parsed) ? parsed : [parsed]
  const first = blocks.find((b): b is { type: "text"; text: string } => b?.type === "text")
  return first === undefined ? (parsed as Value) : JSON.parse(first.text)
}

/**
 * The scripted model: POST /v1/chat/completions answers with SCRIPT's step N, N being how many tool
 * results the request already carries (a retried request gets the same answer), then FINAL. Every
 * request's body is kept, as received.
 */
const scriptedModel = async (): Promise<{ server: Server; baseURL: string; bodies: Array<string> }> => {
  const bodies: Array<string> = []
  const answer = (req: IncomingMessage, res: ServerResponse, body: string) => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}')
      return
    }
    bodies.push(body)
    const request = JSON.parse(body) as ChatRequest
    const tools = request.messages.filter((m) => m.role === "tool")
    const step = tools.length
    const next = SCRIPT[step]
    const message =
      next === undefined
        ? { role: "assistant", content: FINAL }
        : {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: `call_${step + 1}`,
                type: "function",
                function: {
                  name: next.name,
                  arguments: JSON.stringify(
                    typeof next.args === "function"
                      ? next.args(tools.map((m) => resultValue(textOfMessage(m))))
                      : next.args
                  )
                }
              }
            ]
          }
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: `chatcmpl-${bodies.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: request.model,
        choices: [{ index: 0, message, finish_reason: next === undefined ? "stop" : "tool_calls" }],
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }
      })
    )
  }
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (d: string) => (body += d))
    req.on("end", () => answer(req, res, body))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies }
}

const [command, ...commandArgs] = cliCommand
const serverArgs = [...commandArgs, "mcp", "--image", IMAGE, "--images", "link", "--no-journal"]
const cleanups: Array<() => Promise<unknown>> = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
})

describe("the OpenAI Agents SDK (@openai/agents) driving hermes-sandbox mcp over stdio, with a scripted model", () => {
  it("writes, patches, searches, charts under --images link, runs a cell, serves in the background; the model is handed no base64; nothing is left running", async () => {
    const model = await scriptedModel()
    cleanups.push(() => new Promise((resolve) => model.server.close(resolve)))

    const mcp = new MCPServerStdio({
      name: "hermes-sandbox",
      command: command!,
      args: serverArgs,
      env: serverEnv(),
      clientSessionTimeoutSeconds: 120
    })
    let closed = false
    cleanups.push(() => (closed ? Promise.resolve() : mcp.close()))
    await mcp.connect()
    const [pid, ...others] = childrenWith(serverArgs)
    expect(pid, "the MCP server the SDK spawned, a child of this process").toBeDefined()
    expect(others).toEqual([])
    cleanups.push(async () => {
      if (!processGone(pid!)) process.kill(pid!, "SIGKILL")
    })

    const agent = new Agent({
      name: "scripted",
      instructions: "Use the sandbox's tools.",
      model: "scripted-model",
      mcpServers: [mcp]
    })
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ apiKey: "not-a-key", baseURL: model.baseURL, useResponses: false }),
      tracingDisabled: true
    })
    const result = await runner.run(agent, "Edit greet.py, find it, chart some squares, run it, serve it.", {
      maxTurns: 16
    })
    expect(result.finalOutput).toBe(FINAL)

    // The model was asked once per step and once more for the final message, offered every tool.
    expect(model.bodies).toHaveLength(SCRIPT.length + 1)
    const requests = model.bodies.map((b) => JSON.parse(b) as ChatRequest)
    const offered = requests[0]!.tools?.map((t) => t.function.name) ?? []
    for (const step of SCRIPT) expect(offered).toContain(step.name)

    // No base64 image data anywhere the model was sent: not the PNG signature's base64, not any long base64 run.
    for (const body of model.bodies) {
      expect(body.includes("iVBOR"), "a PNG's base64 in a request to the model").toBe(false)
      const runs = body.match(/[A-Za-z0-9+/]{200,}={0,2}/g) ?? []
      expect(runs.map((r) => `${r.length} characters: ${r.slice(0, 40)}…`)).toEqual([])
    }
    // What the framework handed the model as each tool's result (the last request carries them all).
    const last = requests.at(-1)!.messages
    const results = SCRIPT.map((step, i) => {
      const message = last.find((m) => m.role === "tool" && m.tool_call_id === `call_${i + 1}`)
      expect(message, `the tool message of ${step.name}`).toBeDefined()
      return { name: step.name, text: textOfMessage(message!) }
    })
    const values = results.map((r) => resultValue(r.text))
    const [written, patched, searched, charted, cell, started, fetched, polled, killed, logged] = values as [
      Value,
      Value,
      Value,
      Value,
      Value,
      Value,
      Value,
      Value,
      Value,
      Value
    ]

    expect(written).toMatchObject({ path: "/workspace/app/greet.py", bytes_written: Buffer.byteLength(GREET) })
    expect(patched).toMatchObject({ path: "/workspace/app/greet.py", replacements: 1 })
    expect(searched).toMatchObject({
      target: "content",
      matches: [{ path: "/workspace/app/greet.py", line: 2, text: "    return 'Goodbye, ' + name" }],
      count: 1,
      truncated: false
    })
    expect(charted).toMatchObject({ status: "success" })
    expect(charted["output"]).toContain("chart saved")
    // The chart is named with its resource, and said not to have been sent.
    const uri = /resource (sandbox:\/\/\S+\/chart\.png)/.exec(results[3]!.text)?.[1]
    expect(uri, results[3]!.text).toBeDefined()
    expect(results[3]!.text).toContain("not sent as an image (images: link)")
    expect(results[3]!.text).toMatch(/PNG 640×480/)
    expect(cell).toMatchObject({ status: "ok" })
    expect(cell["output"]).toContain("Goodbye, world")
    // A server started in the background answers a later terminal call and is still running when polled;
    // kill ends it, and its log then holds the request it served (its output reaches the host as it
    // streams: only once it has ended is all of it there).
    expect(started).toMatchObject({ status: "success", process_id: expect.any(String) })
    const id = started["process_id"]
    expect(fetched).toMatchObject({ status: "success" })
    expect(fetched["output"]).toContain("return 'Goodbye, ' + name")
    expect(polled).toMatchObject({
      action: "poll",
      process: { process_id: id, running: true },
      output: expect.any(String)
    })
    expect(killed).toMatchObject({ action: "kill", process: { process_id: id, running: false } })
    expect(logged).toMatchObject({ action: "log", process: { process_id: id, running: false } })
    expect(logged["output"]).toContain('"GET /app/greet.py HTTP/1.1" 200')

    // The chart exists all the same: the resource the text names holds the PNG, for a client that reads it.
    const read = await mcp.readResource(uri!)
    const blob = (read.contents[0] as { blob?: string }).blob
    expect(
      Buffer.from(blob ?? "", "base64")
        .subarray(0, 8)
        .toString("hex")
    ).toBe("89504e470d0a1a0a")

    // The session's sandbox is still up (the cell's kernel lives in it); execute_code's is gone.
    const before = await containersOwnedBy(pid!)
    expect(before).toHaveLength(1)
    const executors = [before[0]!.executor]

    await mcp.close()
    closed = true
    expect(await waitFor(async () => processGone(pid!), 20_000, 100), "the MCP server exited").toBe(true)
    const left = async () => [...(await containersOwnedBy(pid!)), ...(await containersOfExecutors(executors))]
    expect(await waitFor(async () => (await left()).length === 0, 20_000, 250)).toBe(true)
    expect(await left()).toEqual([])
  })
})
