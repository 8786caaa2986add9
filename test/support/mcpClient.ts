/**
 * Real MCP clients of the built `hermes-sandbox mcp` over stdio, for the end-to-end tests: the
 * SDK's Client in this process, the same Client in a process of its own (mcpClientChild.mjs, so a
 * test can SIGKILL it), and what the tests check afterwards: the journal the server wrote, the
 * containers its executor left, whether a process is gone.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { lastValueFrom, toArray } from "rxjs"
import { Label } from "@hermes-sandbox/core/Labels"
import { type EventEnvelope, openJournal } from "@hermes-sandbox/events"
import { type ExecutionState, project } from "@hermes-sandbox/events/Projection"
import { docker, waitFor } from "./docker.js"
import { mcpServerCommand } from "./mcp.js"

/** The test process's environment as strings (DOCKER_HOST and the like reach the server, as the docs tell clients to pass them). */
export const serverEnv = (): Record<string, string> =>
  Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined))

/** The executor id the server names on its "serving MCP over stdio" line. */
const executorIdOf = (stderr: string): string | undefined =>
  /serving MCP over stdio \(executor (\S+)\)/.exec(stderr)?.[1]

export interface StdioClient {
  readonly client: Client
  /** The server's process id. */
  readonly pid: number
  /** What the server printed on standard error so far. */
  readonly stderr: () => string
  /** The server's executor id (its containers carry it as a label). */
  readonly executorId: string
  /** Close the client (the server's stdin ends); idempotent. */
  readonly close: () => Promise<void>
}

/** The SDK's Client and StdioClientTransport spawning the built server with `mcp ...args`. */
export const stdioClient = async (args: ReadonlyArray<string>, name = "e2e-stdio"): Promise<StdioClient> => {
  const { command, args: full } = mcpServerCommand(args)
  const transport = new StdioClientTransport({ command, args: full, env: serverEnv(), stderr: "pipe" })
  let stderr = ""
  transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()))
  const client = new Client({ name, version: "1.0.0" })
  await client.connect(transport)
  const pid = transport.pid!
  if (!(await waitFor(async () => executorIdOf(stderr) !== undefined, 20_000)))
    throw new Error(`no "serving" line on the server's stderr: ${stderr}`)
  let closing: Promise<void> | undefined
  return {
    client,
    pid,
    stderr: () => stderr,
    executorId: executorIdOf(stderr)!,
    close: () => (closing ??= client.close())
  }
}

export interface ChildClient {
  readonly child: ChildProcess
  /** The JSON lines the child printed so far. */
  readonly lines: () => ReadonlyArray<Record<string, unknown>>
  readonly stderr: () => string
  /** Resolves with the first line `test` accepts (rejects after `timeoutMs`). */
  readonly line: (
    test: (line: Record<string, unknown>) => boolean,
    timeoutMs: number
  ) => Promise<Record<string, unknown>>
  readonly exited: Promise<void>
}

const childScript = new URL("./mcpClientChild.mjs", import.meta.url).pathname

/**
 * mcpClientChild.mjs in a Node process of its own: it spawns the built server with `mcp ...args`,
 * runs `options.terminal` first when given (the session sandbox), then calls execute_code with `call`.
 */
export const childClient = (
  args: ReadonlyArray<string>,
  call: Record<string, unknown>,
  options: { readonly terminal?: string; readonly serverStderr?: "pipe" | "inherit" } = {}
): ChildClient => {
  const server = mcpServerCommand(args)
  const child = spawn(
    process.execPath,
    [childScript, JSON.stringify({ ...server, env: serverEnv(), call, ...options })],
    { stdio: ["ignore", "pipe", "pipe"] }
  )
  const lines: Array<Record<string, unknown>> = []
  let pending = ""
  let stderr = ""
  child.stdout!.on("data", (d: Buffer) => {
    pending += d.toString()
    const complete = pending.split("\n")
    pending = complete.pop()!
    for (const l of complete) if (l !== "") lines.push(JSON.parse(l) as Record<string, unknown>)
  })
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const line = async (test: (line: Record<string, unknown>) => boolean, timeoutMs: number) => {
    if (!(await waitFor(async () => lines.some(test), timeoutMs, 50))) {
      throw new Error(
        `the child client printed no such line within ${timeoutMs} ms: ${JSON.stringify(lines)}; stderr: ${stderr}`
      )
    }
    return lines.find(test)!
  }
  return { child, lines: () => lines, stderr: () => stderr, line, exited }
}

/** Every event of the journal at `path`, oldest first (opened and closed for this read). */
export const readJournal = async (path: string): Promise<ReadonlyArray<EventEnvelope>> => {
  const journal = await openJournal({ path })
  try {
    return await lastValueFrom(journal.replay().pipe(toArray()))
  } finally {
    await journal.close()
  }
}

/** The ids of execute_code runs in the journal, oldest first. */
export const executeCodeRuns = (events: ReadonlyArray<EventEnvelope>): Array<string> =>
  events
    .filter(
      (e) =>
        e.type === "ExecutionRequested" &&
        (e.data as { tags?: Record<string, string> }).tags?.["mcp.tool"] === "execute_code"
    )
    .map((e) => e.streamId)

/** One execution's events and its projected state. */
export const lifecycleOf = async (
  path: string,
  streamId: string
): Promise<{ readonly events: ReadonlyArray<EventEnvelope>; readonly state: ExecutionState | undefined }> => {
  const events = (await readJournal(path)).filter((e) => e.streamId === streamId)
  return { events, state: project(events).get(streamId) }
}

/** Names of the containers (any state) that carry one of these executor ids. */
export const containersOfExecutors = async (executorIds: Iterable<string>): Promise<Array<string>> => {
  const ids = new Set(executorIds)
  const all = await docker.listContainers({ all: true, filters: { label: [Label.executor] } })
  return all.filter((c) => ids.has(c.Labels[Label.executor] ?? "")).map((c) => (c.Names[0] ?? "").replace(/^\//, ""))
}

/** Whether process `pid` has exited: no such process, or a zombie nobody reaped yet. */
export const processGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
  try {
    // /proc/PID/stat: "pid (comm) state ..."; comm may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return true
  }
}

/** Pids of this process's children whose command line has all of `parts` (the MCP server the SDK spawned). */
export const childrenWith = (parts: ReadonlyArray<string>): Array<number> =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, "utf8")
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
        const cmdline = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0")
        return ppid === process.pid && parts.every((p) => cmdline.includes(p))
      } catch {
        return false
      }
    })
    .map(Number)

/** The containers (any state) that process `pid` owns (the owner label every sandbox carries): name and executor id. */
export const containersOwnedBy = async (pid: number): Promise<Array<{ name: string; executor: string }>> =>
  (await docker.listContainers({ all: true, filters: { label: [`${Label.ownerPid}=${pid}`] } })).map((c) => ({
    name: (c.Names[0] ?? "").replace(/^\//, ""),
    executor: c.Labels[Label.executor] ?? ""
  }))
