/**
 * Cancellation from agent frameworks (issue 29, item 6): what each framework's own MCP client does
 * when its caller aborts a tool call, over stdio and over Streamable HTTP, and what the server
 * makes of it. Real clients from npm (pinned in test/package.json): the OpenAI Agents SDK's
 * MCPServerStdio / MCPServerStreamableHttp (`callTool` with the run's signal, the path its runner
 * takes) and the Vercel AI SDK's MCP client (`@ai-sdk/mcp`: its tools' `execute` with
 * `abortSignal`, what `generateText` calls). Each call runs a program that sleeps past the test;
 * the caller aborts once the sandbox exists.
 *
 * - Agents SDK, both transports: it sends notifications/cancelled; the sandbox is gone at once.
 * - AI SDK over HTTP: it sends no notification but aborts the request's fetch; the server sees the
 *   response stream dropped and ends the run at once.
 * - AI SDK over stdio: nothing at all reaches the server (it only stops waiting), so the server
 *   cannot tell: the run goes on to its own deadline (timeout_s), where it ends as any run does.
 *   docs/mcp.md says so and what to do (HTTP, or a lower --timeout).
 */
import { createMCPClient } from "@ai-sdk/mcp"
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio"
import { MCPServerStdio, MCPServerStreamableHttp } from "@openai/agents"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HttpServing, McpSandbox, serveHttp } from "@hermes-sandbox/mcp"
import { cliCommand } from "./support/cli.js"
import { waitFor } from "./support/docker.js"
import { childrenWith, containersOfExecutors, containersOwnedBy, serverEnv } from "./support/mcpClient.js"

const token = "agents-cancel-token-0123456789abcdef"
/** Sleeps far past the test (its deadline 60 s, unless a case gives one). */
const SLEEPER = { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(120)", timeout_s: 60 }

/** One framework's MCP client, connected: its tool call with a signal, and its close. */
interface Framework {
  readonly call: (args: Record<string, unknown>, signal: AbortSignal) => Promise<unknown>
  readonly close: () => Promise<void>
}

/** The OpenAI Agents SDK's server object: callTool with the run's signal, as its runner calls it. */
const agentsSdk = async (mcp: MCPServerStdio | MCPServerStreamableHttp): Promise<Framework> => {
  await mcp.connect()
  return { call: (args, signal) => mcp.callTool("execute_code", args, undefined, { signal }), close: () => mcp.close() }
}

/** The Vercel AI SDK's MCP client: its tool's execute with abortSignal, as generateText calls it. */
const aiSdk = async (transport: Parameters<typeof createMCPClient>[0]["transport"]): Promise<Framework> => {
  const client = await createMCPClient({ transport })
  const tools = await client.tools()
  return {
    call: (args, abortSignal) =>
      tools["execute_code"]!.execute!(args, {
        toolCallId: "call-1",
        messages: [],
        abortSignal,
        context: {}
      }) as Promise<unknown>,
    close: () => client.close()
  }
}

/**
 * Start a call with an AbortController's signal, abort it once `sandboxes()` shows its sandbox,
 * and measure how long the sandbox outlives the abort (undefined: still there after `watchMs`).
 */
const abortOnceRunning = async (
  framework: Framework,
  args: Record<string, unknown>,
  sandboxes: () => Promise<ReadonlyArray<unknown>>,
  watchMs: number
) => {
  const controller = new AbortController()
  const startedAt = Date.now()
  const outcome = framework.call(args, controller.signal).then(
    (value) => ({ value }),
    (error: unknown) => ({ error })
  )
  expect(await waitFor(async () => (await sandboxes()).length === 1, 30_000, 100), "the sandbox started").toBe(true)
  const abortedAt = Date.now()
  controller.abort(new Error("the agent's run was aborted"))
  const settled = await outcome
  const gone = await waitFor(async () => (await sandboxes()).length === 0, watchMs, 100)
  return { settled, startedAt, goneAfterMs: gone ? Date.now() - abortedAt : undefined }
}

describe("agent frameworks' aborts over Streamable HTTP (serveHttp on loopback)", () => {
  let sandbox: McpSandbox
  let serving: HttpServing
  beforeAll(async () => {
    sandbox = await McpSandbox.open({ journal: "memory", limits: { maxTimeoutS: 120 } })
    serving = await serveHttp(sandbox, { token })
  })
  afterAll(async () => {
    await serving.close()
    await sandbox.close()
  })
  const headers = () => ({ authorization: `Bearer ${token}` })

  it.each([
    {
      name: "the OpenAI Agents SDK (MCPServerStreamableHttp) cancels",
      open: () => agentsSdk(new MCPServerStreamableHttp({ url: serving.url, requestInit: { headers: headers() } }))
    },
    {
      name: "the Vercel AI SDK (@ai-sdk/mcp) sends no cancel but aborts its fetch: the dropped response",
      open: () => aiSdk({ type: "http", url: serving.url, headers: headers() })
    }
  ])("$name: the run ends at once", async ({ open }) => {
    const framework = await open()
    try {
      const run = await abortOnceRunning(framework, SLEEPER, () => containersOfExecutors([sandbox.executorId]), 30_000)
      expect(run.settled).toHaveProperty("error")
      // Far before the run's own deadline (60 s): the server ended it.
      expect(run.goneAfterMs, "the sandbox outlived the abort").toBeLessThan(15_000)
    } finally {
      await framework.close()
    }
  })
})

describe("agent frameworks' aborts over stdio (the built hermes-sandbox mcp, spawned by the framework)", () => {
  const [command, ...commandArgs] = cliCommand
  /** The server's arguments; `marker` (an idle limit no other test uses) tells this server from others. */
  const serverArgs = (marker: number) => [
    ...commandArgs,
    "mcp",
    "--no-journal",
    "--max-timeout",
    "120",
    "--session-idle",
    String(marker)
  ]
  const spawned = (args: ReadonlyArray<string>) => {
    const pids = childrenWith(args)
    expect(pids, "the MCP server the framework spawned").toHaveLength(1)
    return pids[0]!
  }

  it("the OpenAI Agents SDK (MCPServerStdio) cancels: the run ends at once", async () => {
    const args = serverArgs(601)
    const framework = await agentsSdk(new MCPServerStdio({ command: command!, args, env: serverEnv() }))
    try {
      const pid = spawned(args)
      const run = await abortOnceRunning(framework, SLEEPER, () => containersOwnedBy(pid), 30_000)
      expect(run.settled).toHaveProperty("error")
      expect(run.goneAfterMs, "the sandbox outlived the abort").toBeLessThan(15_000)
    } finally {
      await framework.close()
    }
  })

  it("the Vercel AI SDK (@ai-sdk/mcp) sends nothing: the server cannot tell, and the run ends at its own deadline (timeout_s)", async () => {
    const args = serverArgs(602)
    const framework = await aiSdk(new Experimental_StdioMCPTransport({ command: command!, args, env: serverEnv() }))
    try {
      const pid = spawned(args)
      const run = await abortOnceRunning(framework, { ...SLEEPER, timeout_s: 6 }, () => containersOwnedBy(pid), 30_000)
      // The caller stopped waiting at once; the sandbox lived on to the deadline it was given.
      expect(run.settled).toHaveProperty("error")
      expect(run.goneAfterMs, "removed at its deadline").toBeDefined()
      expect(Date.now() - run.startedAt, "not before its 6 s deadline").toBeGreaterThanOrEqual(6_000)
    } finally {
      await framework.close()
    }
  })
})
