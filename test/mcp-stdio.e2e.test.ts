/**
 * The built `hermes-sandbox mcp` over stdio, driven by real clients against the real engine: the
 * SDK's own Client spawning it (plain Node, no TypeScript loader) for python, javascript and bash,
 * a timeout, a cancel; a client process SIGKILLed mid-run and a server process SIGKILLed mid-run;
 * two clients at once; raw JSON-RPC over its pipes (nothing but the protocol on stdout); and the
 * MCP Inspector's CLI, a client this project did not write. Each test's servers write a journal
 * file of the test's own, which is where it finds the execution it asked for and checks its lifecycle.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { isClosed } from "@hermes-sandbox/events/Projection"
import { containerExists, waitFor } from "./support/docker.js"
import { mcpServerCommand, runInspector } from "./support/mcp.js"
import {
  childClient,
  containersOfExecutors,
  executeCodeRuns,
  lifecycleOf,
  processGone,
  readJournal,
  serverEnv,
  type StdioClient,
  stdioClient
} from "./support/mcpClient.js"

const dir = mkdtempSync(join(tmpdir(), "mcp-stdio-e2e-"))
let journals = 0
const newJournal = (name: string) => join(dir, `${name}-${++journals}.sqlite`)

/** Every executor (server) this file started, and every server process, for the final checks. */
const executors = new Set<string>()
/** Server process id → its journal file (unique to it: what tells that pid is still our server, not a recycled one). */
const serverPids = new Map<number, string>()
const clients: Array<StdioClient> = []
const start = async (args: ReadonlyArray<string>, name?: string) => {
  const c = await stdioClient(args, name)
  clients.push(c)
  executors.add(c.executorId)
  serverPids.set(c.pid, args[args.indexOf("--journal") + 1]!)
  return c
}
const commandLineOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8")
  } catch {
    return ""
  }
}
const executorOf = (stderr: string) => /serving MCP over stdio \(executor (\S+)\)/.exec(stderr)?.[1]

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()))
  for (const [pid, journal] of serverPids)
    if (!processGone(pid) && commandLineOf(pid).includes(journal)) process.kill(pid, "SIGKILL")
  try {
    // Removals of the last results run in the background; give them a moment, then nothing of ours may remain.
    await waitFor(async () => (await containersOfExecutors(executors)).length === 0, 20_000, 250)
    expect(await containersOfExecutors(executors)).toEqual([])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

type Structured = Record<string, unknown>
const textOf = (result: unknown) => (result as { content?: Array<{ text?: string }> }).content?.[0]?.text ?? ""
/** The tags of a run's ExecutionRequested. */
const tagsOf = (events: ReadonlyArray<{ readonly type: string; readonly data: unknown }>): Record<string, string> =>
  (events.find((e) => e.type === "ExecutionRequested")?.data as { tags?: Record<string, string> } | undefined)?.tags ??
  {}
const gone = (name: string, ms: number) => waitFor(async () => !(await containerExists(name)), ms, 100)

/** The execute_code run this journal gained after `before` (the newest), once it is recorded. */
const newRun = async (journal: string, before: ReadonlyArray<string> = []) => {
  let id: string | undefined
  await waitFor(
    async () =>
      (id = executeCodeRuns(await readJournal(journal))
        .filter((r) => !before.includes(r))
        .at(-1)) !== undefined,
    20_000,
    100
  )
  if (id === undefined) throw new Error(`no new execute_code run in ${journal}`)
  return id
}

/** The newest execute_code run of this journal once its program has started (its ContainerStarted is recorded). */
const startedRun = async (journal: string) => {
  const id = await newRun(journal)
  if (
    !(await waitFor(
      async () => (await lifecycleOf(journal, id)).events.some((e) => e.type === "ContainerStarted"),
      30_000,
      100
    ))
  )
    throw new Error(`run ${id} never started`)
  return id
}

/** Waits until the lifecycle of `id` is closed (every event it needs recorded), then returns it. */
const closedLifecycle = async (journal: string, id: string, ms: number) => {
  await waitFor(
    async () => {
      const { state } = await lifecycleOf(journal, id)
      return state !== undefined && isClosed(state)
    },
    ms,
    200
  )
  return lifecycleOf(journal, id)
}

describe("the SDK's Client spawning the built server over stdio", () => {
  const journal = newJournal("client")
  let server: StdioClient
  const connect = async () => (server ??= await start(["--journal", journal]))

  it("execute_code in python, javascript and bash: success, the same JSON as text, the container removed, each run journaled with the MCP session and tool", async () => {
    const { client } = await connect()
    const sessions = new Set<string>()
    for (const [language, code] of [
      ["python", "print(6*7)"],
      ["javascript", "console.log(6*7)"],
      ["bash", "echo $((6*7))"]
    ] as const) {
      const result = await client.callTool({ name: "execute_code", arguments: { code, language } })
      const structured = result.structuredContent as Structured
      expect(result.isError, language).toBeFalsy()
      expect(JSON.parse(textOf(result))).toEqual(structured)
      expect(structured).toMatchObject({ status: "success", output: "42", stdout: "42\n", stderr: "", exit_code: 0 })
      const id = String(structured.execution_id)
      expect(structured.container_name).toBe(`hermes-sandbox-${id}`)
      expect(await gone(`hermes-sandbox-${id}`, 10_000), language).toBe(true)
      const { events, state } = await closedLifecycle(journal, id, 10_000)
      expect(state && isClosed(state), language).toBe(true)
      const tags = tagsOf(events)
      expect(tags).toMatchObject({
        "mcp.tool": "execute_code",
        "mcp.transport": "stdio",
        "mcp.client_name": "e2e-stdio 1.0.0"
      })
      sessions.add(tags["mcp.session"]!)
    }
    // One stdio connection is one MCP session.
    expect(sessions.size).toBe(1)
  })

  it("a timeout: status timeout, isError, output says so, the container gone", async () => {
    const { client } = await connect()
    const result = await client.callTool({
      name: "execute_code",
      arguments: { language: "python", code: "while True: pass", timeout_s: 1 }
    })
    const structured = result.structuredContent as Structured
    expect(result.isError).toBe(true)
    expect(structured.status).toBe("timeout")
    expect(structured.output).toMatch(/Timed out after 1 s/)
    expect(await gone(String(structured.container_name), 10_000)).toBe(true)
    const { events } = await closedLifecycle(journal, String(structured.execution_id), 10_000)
    expect(events.map((e) => e.type)).toContain("ExecutionTimedOut")
  })

  it("a cancel mid-run: the call rejects, the container is gone within seconds, the journal closes the lifecycle (interrupted, destroyed); the server keeps serving", async () => {
    const { client } = await connect()
    const before = executeCodeRuns(await readJournal(journal))
    const abort = new AbortController()
    const progress: Array<string> = []
    const pending = client.callTool(
      {
        name: "execute_code",
        arguments: { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(120)", timeout_s: 150 }
      },
      undefined,
      {
        signal: abort.signal,
        onprogress: (p) => void progress.push(p.message ?? "")
      }
    )
    pending.catch(() => {})
    expect(await waitFor(async () => progress.includes("program started"), 30_000, 50)).toBe(true)
    const id = await newRun(journal, before)
    expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)
    // What the final check looks for (containers by their executor's label) does see a live one.
    expect(await containersOfExecutors([server.executorId])).toContain(`hermes-sandbox-${id}`)
    abort.abort("the user pressed stop")
    await expect(pending).rejects.toThrow()
    expect(await gone(`hermes-sandbox-${id}`, 10_000)).toBe(true)
    const { events, state } = await closedLifecycle(journal, id, 10_000)
    expect(state && isClosed(state)).toBe(true)
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["ExecutionInterrupted", "ContainerDestroyed"]))
    expect(events.find((e) => e.type === "ContainerDestroyed")?.data).toMatchObject({ reason: "interrupted" })
    // Recorded by the server itself (its executor), not left for a later sweep.
    expect(events.find((e) => e.type === "ContainerDestroyed")?.metadata.executorId).toBe(server.executorId)
    const after = await client.callTool({
      name: "execute_code",
      arguments: { language: "bash", code: "echo still-serving" }
    })
    expect((after.structuredContent as Structured).stdout).toBe("still-serving\n")
  })
})

describe("a client that disappears mid-run", () => {
  const sleeper = { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(120)", timeout_s: 150 }

  it("the client process SIGKILLed (no progress asked, so nothing but its stdin's end tells the server; its stderr a pipe that breaks): the server removes the run's container and its session sandbox, records both, and exits", async () => {
    const journal = newJournal("killed-client")
    const child = childClient(["--journal", journal], sleeper, { terminal: "echo opened", serverStderr: "pipe" })
    try {
      const serverPid = Number((await child.line((l) => l.serverPid !== undefined, 30_000)).serverPid)
      serverPids.set(serverPid, journal)
      const sessionId = String((await child.line((l) => l.sessionId !== undefined, 30_000)).sessionId)
      expect(await containerExists(`hermes-sandbox-${sessionId}`)).toBe(true)
      await child.line((l) => l.calling === true, 30_000)
      const id = await startedRun(journal)
      // The server's stderr is the child's pipe: its executor id comes from the journal.
      const executorId = (await lifecycleOf(journal, id)).events[0]?.metadata.executorId
      expect(executorId).toBeDefined()
      executors.add(executorId!)
      expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)

      child.child.kill("SIGKILL")
      await child.exited
      expect(await gone(`hermes-sandbox-${id}`, 15_000)).toBe(true)
      expect(await gone(`hermes-sandbox-${sessionId}`, 15_000)).toBe(true)
      expect(await waitFor(async () => processGone(serverPid), 15_000)).toBe(true)
      // The server closed both lifecycles itself before exiting: no sweep needed.
      const session = await lifecycleOf(journal, sessionId)
      expect(session.state && isClosed(session.state), JSON.stringify(session.events.map((e) => e.type))).toBe(true)
      expect(session.events.find((e) => e.type === "SessionClosed")?.metadata.executorId).toBe(executorId)
      const { events, state } = await lifecycleOf(journal, id)
      expect(state && isClosed(state), JSON.stringify(events.map((e) => e.type))).toBe(true)
      expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["ExecutionInterrupted", "ContainerDestroyed"]))
      const destroyed = events.find((e) => e.type === "ContainerDestroyed")!
      expect(destroyed.data).toMatchObject({ reason: "interrupted" })
      expect(destroyed.metadata.executorId).toBe(executorId)
      expect(await containersOfExecutors([executorId!])).toEqual([])
    } finally {
      if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill("SIGKILL")
    }
  })

  it("the server process SIGKILLed: the watchdog removes the container; the next executor's startup sweep closes the lifecycle", async () => {
    const journal = newJournal("killed-server")
    const server = await start(["--journal", journal])
    const progress: Array<string> = []
    const pending = server.client.callTool({ name: "execute_code", arguments: sleeper }, undefined, {
      onprogress: (p) => void progress.push(p.message ?? ""),
      timeout: 300_000
    })
    pending.catch(() => {})
    expect(await waitFor(async () => progress.includes("program started"), 30_000, 50)).toBe(true)
    const id = await newRun(journal)
    expect(await containerExists(`hermes-sandbox-${id}`)).toBe(true)

    process.kill(server.pid, "SIGKILL")
    await expect(pending).rejects.toThrow()
    expect(await gone(`hermes-sandbox-${id}`, 20_000)).toBe(true)
    // Nobody was left to write the journal: the watchdog removes containers only.
    const open = await lifecycleOf(journal, id)
    expect(open.state && isClosed(open.state)).toBe(false)

    // The user starts their agent again: the new server's executor sweeps at startup (and exits when its stdin ends at once).
    const { command, args } = mcpServerCommand(["--journal", journal])
    const next = spawn(command, args, { env: serverEnv(), stdio: ["pipe", "pipe", "pipe"] })
    serverPids.set(next.pid!, journal)
    let stderr = ""
    next.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    next.stdout.resume()
    const exited = new Promise<number | null>((resolve) => next.once("exit", (code) => resolve(code)))
    await waitFor(async () => executorOf(stderr) !== undefined || next.exitCode !== null, 30_000)
    executors.add(executorOf(stderr) ?? "")
    next.stdin.end()
    expect(await exited, stderr).toBe(0)
    const { events, state } = await lifecycleOf(journal, id)
    expect(state && isClosed(state), JSON.stringify(events.map((e) => e.type))).toBe(true)
    expect(events.find((e) => e.type === "ContainerDestroyed")?.data).toMatchObject({ reason: "orphan-reaped" })
    expect(events.find((e) => e.type === "ExecutionInterrupted")?.data).toMatchObject({
      reason: expect.stringMatching(/owning process died/)
    })
  })
})

describe("two clients at once", () => {
  it("two servers, one journal: each client's session sandbox is its own (its files, its session id), and each is removed when its client closes", async () => {
    const journal = newJournal("two")
    const [a, b] = await Promise.all([
      start(["--journal", journal], "client-a"),
      start(["--journal", journal], "client-b")
    ])
    const call = async (c: StdioClient, name: string, args: Record<string, unknown>) =>
      (await c.client.callTool({ name, arguments: args })).structuredContent as Structured
    const [wroteA, wroteB] = await Promise.all([
      call(a, "write_file", { path: "/workspace/mine.txt", content: "from a" }),
      call(b, "write_file", { path: "/workspace/mine.txt", content: "from b" })
    ])
    expect(wroteA).toMatchObject({ bytes_written: 6 })
    expect(wroteB).toMatchObject({ bytes_written: 6 })
    const [inA, inB] = await Promise.all([
      call(a, "terminal", { command: "touch /workspace/only-a; cat /workspace/mine.txt; echo; ls /workspace" }),
      call(b, "terminal", { command: "cat /workspace/mine.txt; echo; ls /workspace" })
    ])
    expect(inA).toMatchObject({ status: "success", stdout: "from a\nmine.txt\nonly-a\n" })
    expect(inB).toMatchObject({ status: "success", stdout: "from b\nmine.txt\n" })
    const read = await b.client.callTool({ name: "read_file", arguments: { path: "/workspace/only-a" } })
    expect(read.isError).toBe(true)
    expect(JSON.parse(textOf(read)).error).toMatchObject({ reason: "not-found" })
    const sandboxA = `hermes-sandbox-${inA.session_id}`
    const sandboxB = `hermes-sandbox-${inB.session_id}`
    expect(inA.session_id).not.toBe(inB.session_id)
    expect(await containerExists(sandboxA)).toBe(true)
    expect(await containerExists(sandboxB)).toBe(true)

    await a.close()
    expect(await gone(sandboxA, 10_000)).toBe(true)
    expect(await containerExists(sandboxB)).toBe(true)
    expect((await call(b, "terminal", { command: "cat /workspace/mine.txt" })).stdout).toBe("from b")
    await b.close()
    expect(await gone(sandboxB, 10_000)).toBe(true)
    const closed = (await readJournal(journal)).filter((e) => e.type === "SessionClosed").map((e) => e.streamId)
    expect(closed).toEqual(expect.arrayContaining([inA.session_id, inB.session_id]))
  })
})

describe("standard output carries the protocol alone", () => {
  it("raw JSON-RPC over the server's pipes: every stdout line is a JSON-RPC message, the log line is on stderr, and stdin's end exits 0", async () => {
    const journal = newJournal("raw")
    const { command, args } = mcpServerCommand(["--journal", journal])
    const child = spawn(command, args, { env: serverEnv(), stdio: ["pipe", "pipe", "pipe"] })
    serverPids.set(child.pid!, journal)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    const send = (message: Record<string, unknown>) =>
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`)
    const messages = () =>
      stdout
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    const answered = (id: number) => waitFor(async () => messages().some((m) => m.id === id), 30_000, 50)

    send({
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } }
    })
    expect(await answered(1), stderr).toBe(true)
    send({ method: "notifications/initialized" })
    send({ id: 2, method: "tools/list" })
    // A run too, with progress: the executor, the journal and the engine all get to log while the protocol flows.
    send({
      id: 3,
      method: "tools/call",
      params: {
        name: "execute_code",
        arguments: { language: "bash", code: "echo hi; echo err >&2" },
        _meta: { progressToken: "p" }
      }
    })
    send({ id: 4, method: "no/such/method" })
    expect(await answered(2)).toBe(true)
    expect(await answered(3)).toBe(true)
    expect(await answered(4)).toBe(true)
    child.stdin.end()
    expect(await exited, stderr).toBe(0)
    executors.add(executorOf(stderr) ?? "")

    const lines = stdout.split("\n")
    expect(lines.at(-1)).toBe("")
    for (const line of lines.slice(0, -1)) {
      const message = JSON.parse(line) as Record<string, unknown>
      expect(message.jsonrpc, line).toBe("2.0")
      expect("id" in message || "method" in message, line).toBe(true)
    }
    const byId = new Map(
      messages()
        .filter((m) => "id" in m)
        .map((m) => [m.id, m])
    )
    const resultOf = (id: number) => (byId.get(id)?.result ?? {}) as Structured
    expect(resultOf(1)).toMatchObject({ serverInfo: { name: "hermes-sandbox" } })
    expect(resultOf(2).tools).toHaveLength(9)
    expect(resultOf(3).structuredContent).toMatchObject({ status: "success", stdout: "hi\n", stderr: "err\n" })
    const run = String((resultOf(3).structuredContent as Structured).execution_id)
    expect(tagsOf((await lifecycleOf(journal, run)).events)).toMatchObject({
      "mcp.tool": "execute_code",
      "mcp.transport": "stdio",
      "mcp.client_name": "raw 0"
    })
    expect(byId.get(4)?.error).toMatchObject({ code: -32601 })
    expect(messages().filter((m) => m.method === "notifications/progress").length).toBeGreaterThan(0)
    expect(stderr).toMatch(/^hermes-sandbox mcp: serving MCP over stdio \(executor \S+\)$/m)
    expect(stdout).not.toContain("hermes-sandbox mcp:")
  })
})

describe("a client this project did not write: the MCP Inspector's CLI", () => {
  const inspect = async (args: ReadonlyArray<string>) => {
    const run = await runInspector(args, { cwd: mkdtempSync(join(dir, "inspector-")), env: serverEnv() })
    executors.add(executorOf(run.stderr) ?? "")
    return run
  }

  it("tools/list: the nine tools; tools/call execute_code: success, stdout 42, journaled under the inspector's name, the container removed", async () => {
    const journal = newJournal("inspector")
    const { command, args } = mcpServerCommand(["--journal", journal])
    const list = await inspect([command, ...args, "--method", "tools/list"])
    expect(list.code, list.stderr).toBe(0)
    const tools = (JSON.parse(list.stdout) as { tools: Array<{ name: string }> }).tools
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

    const called = await inspect([
      command,
      ...args,
      "--method",
      "tools/call",
      "--tool-name",
      "execute_code",
      "--tool-arg",
      "code=print(6*7)",
      "--tool-arg",
      "language=python"
    ])
    expect(called.code, called.stderr).toBe(0)
    const result = JSON.parse(called.stdout) as {
      structuredContent: Structured
      content: Array<{ text: string }>
      isError?: boolean
    }
    expect(result.isError).toBeFalsy()
    expect(result.structuredContent).toMatchObject({ status: "success", stdout: "42\n", exit_code: 0 })
    expect(JSON.parse(result.content[0]!.text)).toEqual(result.structuredContent)
    const id = String(result.structuredContent.execution_id)
    expect(await gone(`hermes-sandbox-${id}`, 10_000)).toBe(true)
    const { events, state } = await closedLifecycle(journal, id, 10_000)
    expect(state && isClosed(state)).toBe(true)
    const tags = tagsOf(events)
    expect(tags["mcp.transport"]).toBe("stdio")
    expect(tags["mcp.client_name"]).toBeDefined()
    expect(tags["mcp.client_name"]).not.toMatch(/^e2e/)
  })
})
