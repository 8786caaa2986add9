/**
 * Helpers for the chaos suites: victims to kill, leak checks by label, the journal's verdict.
 * Every check is scoped to what the test itself created (executor ids, execution ids):
 * other suites create hermes-sandbox containers on the same engine at the same time.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import Docker from "dockerode"
import { Effect, Stream } from "effect"
import { ProcessIdentity } from "@hermes-sandbox/core"
import { checkLifecycle, isClosed, project } from "@hermes-sandbox/events/Projection"
import { type EventEnvelope, ProcessStart, SqliteJournal } from "@hermes-sandbox/events"
import { fixtureCommand } from "../support/nodeFixture.js"

export const root = new URL("../..", import.meta.url).pathname
export const victimScript = join(root, "test/chaos/fixtures/victim.ts")
export const ExecutorLabel = "org.hermes-sandbox.executor"

export const docker = new Docker({ socketPath: "/var/run/docker.sock" })

export const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), `hermes-chaos-${prefix}-`))

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const waitFor = async (
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  intervalMs = 50
): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return true
    await sleep(intervalMs)
  }
  return check()
}

/** Containers (any state) labelled with one of these executor ids. */
export const containersOf = async (executorIds: ReadonlyArray<string>, client: Docker = docker) => {
  if (executorIds.length === 0) return []
  const lists = await Promise.all(
    executorIds.map((id) => client.listContainers({ all: true, filters: { label: [`${ExecutorLabel}=${id}`] } }))
  )
  return lists.flat().map((c) => ({ id: c.Id, name: (c.Names[0] ?? "").replace(/^\//, ""), state: c.State }))
}

export const containerExists = async (nameOrId: string, client: Docker = docker): Promise<boolean> => {
  try {
    await client.getContainer(nameOrId).inspect()
    return true
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return false
    throw error
  }
}

export const containerState = async (nameOrId: string, client: Docker = docker): Promise<string | undefined> => {
  try {
    return (await client.getContainer(nameOrId).inspect()).State.Status
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return undefined
    throw error
  }
}

/** A zombie (killed, not yet reaped by its parent) is as good as dead. */
export const pidAlive = ProcessStart.isRunning

export type VictimMessage =
  | { type: "ready"; pid: number; executorId: string; watchdogPid: number | null }
  | { type: "created"; executionId: string; containerName: string; containerId: string; claimed?: boolean }
  | { type: "started"; executionId: string; claimed?: boolean }
  | { type: "result"; executionId: string; exitCode: number }
  | { type: "error"; tag: string }

export interface Victim {
  readonly child: ChildProcess
  readonly messages: Array<VictimMessage>
  /** The first message of this type (already received or to come). */
  readonly next: <T extends VictimMessage["type"]>(
    type: T,
    timeoutMs?: number
  ) => Promise<Extract<VictimMessage, { type: T }>>
  readonly stderr: () => string
  readonly exited: Promise<number | null>
}

export interface VictimConfig {
  readonly mode?: "run" | "stall-start"
  readonly journal?: string
  readonly socketPath?: string
  readonly watchdog?: boolean
  readonly sweepOnStart?: boolean
  readonly executions?: number
}

export const spawnVictim = (config: VictimConfig = {}): Victim => {
  const [node, ...args] = fixtureCommand(victimScript)
  const child = spawn(node!, [...args, JSON.stringify(config)], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const messages: Array<VictimMessage> = []
  const waiters: Array<() => void> = []
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  createInterface({ input: child.stdout! }).on("line", (line) => {
    try {
      messages.push(JSON.parse(line) as VictimMessage)
    } catch {
      return
    }
    for (const w of waiters.splice(0)) w()
  })
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const next = <T extends VictimMessage["type"]>(type: T, timeoutMs = 60_000) =>
    new Promise<Extract<VictimMessage, { type: T }>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`victim: no "${type}" within ${timeoutMs} ms; stderr:\n${stderr}`)),
        timeoutMs
      )
      const look = () => {
        const found = messages.find((m) => m.type === type)
        if (found !== undefined) {
          clearTimeout(timer)
          resolve(found as Extract<VictimMessage, { type: T }>)
          return
        }
        waiters.push(look)
      }
      exited.then((code) => {
        if (messages.find((m) => m.type === type) === undefined) {
          clearTimeout(timer)
          reject(new Error(`victim exited (${code}) before "${type}"; stderr:\n${stderr}`))
        }
      })
      look()
    })
  return { child, messages, next, stderr: () => stderr, exited }
}

/** Every event of a SQLite journal file. */
export const readJournal = (path: string): Promise<Array<EventEnvelope>> =>
  Effect.runPromise(
    Effect.scoped(
      SqliteJournal.make({ path }).pipe(Effect.flatMap(({ journal }) => journal.read().pipe(Stream.runCollect)))
    ).pipe(Effect.map((chunk) => [...chunk]))
  )

/** What is wrong with the journal's lifecycles (empty when every one is closed and valid). */
export const journalProblems = (events: ReadonlyArray<EventEnvelope>, only?: ReadonlySet<string>): Array<string> => {
  const streams = new Map<string, Array<EventEnvelope>>()
  for (const e of events) {
    if (only !== undefined && !only.has(e.streamId)) continue
    const list = streams.get(e.streamId) ?? []
    list.push(e)
    streams.set(e.streamId, list)
  }
  const problems: Array<string> = []
  const states = project(events)
  for (const [id, list] of streams) {
    const violations = checkLifecycle(list)
    if (violations.length > 0) problems.push(`${id}: ${violations.join("; ")}`)
    const state = states.get(id)
    if (state !== undefined && !isClosed(state)) problems.push(`${id} is open: ${list.map((e) => e.type).join(", ")}`)
  }
  return problems
}

export const typesOf = (events: ReadonlyArray<EventEnvelope>, streamId: string) =>
  events.filter((e) => e.streamId === streamId).map((e) => e.type)

/** A process by pid and kernel start time: a later process given the same pid is not it. */
export interface TrackedProcess {
  readonly pid: number
  readonly started: string
}

/** Record a live process's identity (undefined if it is already gone). */
export const track = (pid: number | null | undefined): TrackedProcess | undefined => {
  if (pid === null || pid === undefined || !Number.isInteger(pid) || pid <= 0) return undefined
  const started = ProcessIdentity.startTimeOf(pid)
  return started === undefined ? undefined : { pid, started }
}

/** Whether this very process is still running (not exited, not a zombie, pid not reused). */
export const stillRunning = (p: TrackedProcess): boolean =>
  pidAlive(p.pid) && ProcessIdentity.startTimeOf(p.pid) === p.started

/**
 * Processes a suite started (victims, their watchdogs) to SIGKILL in afterAll if a failed test
 * left them alive. By afterAll most of them exited long ago and their pids may belong to
 * someone else, so only a process with the recorded start time is killed. (A bare
 * `kill(pid)` here once killed another suite's containerd-shim mid-start: "failed to create
 * shim task: ttrpc: closed".)
 */
export class Leftovers {
  private readonly processes: Array<TrackedProcess> = []

  add(...pids: ReadonlyArray<number | null | undefined>): void {
    for (const pid of pids) {
      const tracked = track(pid)
      if (tracked !== undefined) this.processes.push(tracked)
    }
  }

  killAll(): void {
    for (const p of this.processes) {
      if (!stillRunning(p)) continue
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {
        // exited between the check and the kill
      }
    }
  }
}

/** Force-remove containers of these executors (a failed test's leftovers; only ours). */
export const removeContainersOf = async (executorIds: ReadonlyArray<string>, client: Docker = docker) => {
  for (const c of await containersOf(executorIds, client).catch(() => [])) {
    await client
      .getContainer(c.id)
      .remove({ force: true })
      .catch(() => undefined)
  }
}

export const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0
}
