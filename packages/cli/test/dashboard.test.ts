/**
 * The dashboard (`hermes-sandbox dashboard`) over a SQLite journal written by real executor runs on
 * the fake runtime: its projection agrees with the journal's own (`Projection.summarize`), its lists
 * and histories are paged, what it keeps is bounded, and its HTTP API refuses what the MCP HTTP
 * server refuses (no token, a wrong one, a foreign Origin, a Host that is not its own).
 */
import * as fs from "node:fs"
import { request } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Ref, TestClock, TestContext } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, type JournalClient, openJournal, Projection, SqliteJournal } from "@hermes-sandbox/events"
import { dashboard } from "../src/commands/dashboard.js"
import { mcp } from "../src/commands/mcp.js"
import { COMMAND_CHARS, MAX_PROCESSES, makeDashboardProjection, OUTCOMES } from "../src/dashboard/projection.js"
import { type DashboardServing, serveDashboard } from "../src/dashboard/server.js"
import { settle, withFakeExecutor } from "../../core/test/support/fakeExecutor.js"
import { withFakeSessions } from "../../core/test/support/fakeSessions.js"

const TOKEN = "a-dashboard-token-of-32-characters"
const HOSTILE_TOOL = `<img src=x onerror="window.pwned=1">`
const HOSTILE_PATH = `<svg onload="window.pwned=2">.csv`

/**
 * A known mix of runs into the SQLite journal at `file` (every outcome, tool calls with a hostile
 * name, a collected file with a hostile path, a warm-pool claim), then `whileOpen` while the
 * executor still holds its refilled warm sandbox.
 */
const populate = <A>(file: string, whileOpen: () => Promise<A>) =>
  withFakeExecutor(
    { warmPool: { size: 1, languages: ["python"] }, timeoutMs: 5_000 },
    ({ executor, control }) =>
      Effect.gen(function* () {
        const poolReady = Effect.gen(function* () {
          while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("1 millis")
        })
        yield* poolReady
        const tools = { add: { handler: ({ a, b }: { a: number; b: number }) => a + b } }
        const toolCalls = [{ tool: "add", args: { a: 1, b: 2 } }, { tool: HOSTILE_TOOL }]
        const runs = [
          { language: "python", code: fakeProgram({ stdout: "ok\n" }) },
          { language: "javascript", code: fakeProgram({ exitCode: 3 }) },
          { language: "bash", code: fakeProgram({ oom: true }) },
          { language: "bash", code: fakeProgram({ hang: true }), timeoutMs: 1_000 },
          { language: "javascript", code: fakeProgram({ toolCalls }), tools },
          {
            language: "python",
            code: "#!fake {}\n",
            files: { [HOSTILE_PATH]: "a,b\n" },
            collect: ["*.csv"],
            env: { X: "1" }
          },
          { language: "python", code: fakeProgram({ exitCode: 0 }) }
        ] as const
        for (const run of runs) yield* settle(executor.executeCode(run))
        // ExecutionFailed (a create the engine refuses), then ExecutionInterrupted (its caller gave up).
        yield* Ref.set(control.faults, { createFails: true })
        yield* settle(executor.executeCode({ language: "javascript", code: fakeProgram({}) }))
        yield* Ref.set(control.faults, {})
        const gaveUp = executor.executeCode({ language: "bash", code: fakeProgram({ hang: true }), env: { X: "1" } })
        yield* settle(Effect.timeout(gaveUp, "300 millis"))
        yield* executor.idle
        yield* poolReady
        return yield* Effect.promise(whileOpen)
      }),
    SqliteJournal.layer({ path: file, synchronous: "normal" })
  )

interface Reply {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: string
}

/** A GET with exactly these headers (node's http: Host and Origin as given). */
const get = (port: number, target: string, headers: Record<string, string> = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: target, method: "GET", headers: { host: `127.0.0.1:${port}`, ...headers } },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") })
        )
      }
    )
    req.on("error", reject)
    req.end()
  })
const auth = { authorization: `Bearer ${TOKEN}` }
const api = async <A>(port: number, target: string): Promise<A> => {
  const reply = await get(port, target, auth)
  expect(reply.status, reply.body).toBe(200)
  return JSON.parse(reply.body) as A
}

describe("the dashboard over a journal of real runs (fake runtime)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-dashboard-"))
  const file = path.join(dir, "journal.sqlite")
  let journal: JournalClient
  let serving: DashboardServing
  let events: Array<EventEnvelope>

  /** While the executor was open: what runs now (its refilled warm sandbox). */
  let runningWhileOpen: {
    pool: number
    executions: number
    items: Array<{ kind: string; ageMs: number; since: number; deadline?: number }>
  }

  beforeAll(async () => {
    const overviewOf = async () => {
      const reading = await openJournal({ path: file })
      const open = await serveDashboard({ journal: reading, journalName: file, credentials: { default: TOKEN } })
      try {
        await open.caughtUp
        return (await api<{ running: typeof runningWhileOpen }>(open.port, "/api/overview")).running
      } finally {
        await open.close()
        await reading.close()
      }
    }
    runningWhileOpen = await Effect.runPromise(populate(file, overviewOf).pipe(Effect.provide(TestContext.TestContext)))
    journal = await openJournal({ path: file })
    events = []
    await new Promise<void>((resolve, reject) =>
      journal.replay().subscribe({ next: (e) => void events.push(e), error: reject, complete: resolve })
    )
    serving = await serveDashboard({
      journal,
      journalName: file,
      credentials: { default: TOKEN },
      maxWaiters: 2,
      waitMs: 60_000
    })
    await serving.caughtUp
  })
  afterAll(async () => {
    await serving?.close()
    await journal?.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("its summary is the journal's own projection's, and the charts count every ended execution", async () => {
    const summary = Projection.summarize(Projection.project(events))
    const o = await api<{
      position: number
      summary: { total: number; byOutcome: Record<string, number>; toolCalls: number; poolReady: number }
      running: { pool: number }
      charts: { outcomes: Record<string, Array<number>>; pool: { claims: Array<number>; creates: Array<number> } }
    }>(serving.port, "/api/overview")
    expect(o.position).toBe(events.at(-1)!.sequence)
    expect(o.summary.total).toBe(summary.total)
    expect(o.summary.total).toBe(9)
    // Projection's outcomes split as the metrics split them.
    const exited = o.summary.byOutcome["ok"]! + o.summary.byOutcome["error"]! + o.summary.byOutcome["oom"]!
    expect(exited).toBe(summary.byOutcome.exited)
    expect(o.summary.byOutcome["timeout"]).toBe(summary.byOutcome.timedOut)
    expect(o.summary.byOutcome["interrupted"]).toBe(summary.byOutcome.interrupted)
    expect(o.summary.byOutcome["failed"]).toBe(summary.byOutcome.failed)
    expect(o.summary.byOutcome["open"]).toBe(summary.byOutcome.open)
    expect({
      ok: o.summary.byOutcome["ok"],
      error: o.summary.byOutcome["error"],
      oom: o.summary.byOutcome["oom"]
    }).toEqual({
      ok: 4,
      error: 1,
      oom: 1
    })
    expect([o.summary.byOutcome["timeout"], o.summary.byOutcome["interrupted"], o.summary.byOutcome["failed"]]).toEqual(
      [1, 1, 1]
    )
    const toolCalls = Object.values(summary.toolCalls).reduce((n, c) => n + c.requested, 0)
    expect(o.summary.toolCalls).toBe(toolCalls)
    expect(toolCalls).toBe(2)
    // While the executor was open, its refilled warm sandbox was running; closed, it drained it.
    expect(runningWhileOpen.pool).toBe(1)
    expect(runningWhileOpen.items).toEqual([expect.objectContaining({ kind: "pool", deadlineKind: "recycle" })])
    // Its deadline as ContainerCreated recorded it: made (test clock) plus the pool's default idle TTL, 5 min.
    const pooled = runningWhileOpen.items[0]!
    expect(pooled.deadline! - pooled.since).toBe(300_000)
    expect(runningWhileOpen.executions).toBe(0)
    expect(o.running.pool).toBe(0)
    const charted = OUTCOMES.reduce((n, k) => n + o.charts.outcomes[k]!.reduce((a, b) => a + b, 0), 0)
    expect(charted).toBe(summary.total)
    // The first python run claimed the warm sandbox; the others were made cold.
    expect(o.charts.pool.claims.reduce((a, b) => a + b, 0)).toBe(
      [...Projection.project(events).values()].filter((s) => s.poolStreamId !== undefined).length
    )
    expect(o.charts.pool.claims.reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
  })

  it("pages the recent executions, the newest first, each once", async () => {
    const seen: Array<string> = []
    let before: number | null = null
    let pages = 0
    do {
      const page: { rows: Array<{ id: string; closedSequence: number }>; before: number | null } = await api(
        serving.port,
        `/api/executions?limit=2${before === null ? "" : `&before=${before}`}`
      )
      expect(page.rows.length).toBeLessThanOrEqual(2)
      const sequences = page.rows.map((r) => r.closedSequence)
      expect(sequences).toEqual([...sequences].sort((a, b) => b - a))
      seen.push(...page.rows.map((r) => r.id))
      before = page.before
      pages++
    } while (before !== null && pages < 20)
    const executions = [...Projection.project(events).values()].filter((s) => s.kind === "execution")
    expect(new Set(seen).size).toBe(seen.length)
    expect([...seen].sort()).toEqual(executions.map((s) => s.streamId).sort())
    expect(pages).toBe(5)
    expect((await get(serving.port, "/api/executions?limit=0", auth)).status).toBe(400)
    expect((await get(serving.port, "/api/executions?before=x", auth)).status).toBe(400)
  })

  it("an execution's detail lists its tool calls and files as recorded, its history paged", async () => {
    const withTools = events.find((e) => e.type === "ToolCallRequested" && e.data.tool === HOSTILE_TOOL)!.streamId
    const d = await api<{ toolCalls: Array<{ tool: string; outcome: string }>; row: { outcome: string } }>(
      serving.port,
      `/api/executions/${encodeURIComponent(withTools)}`
    )
    expect(d.toolCalls.map((c) => [c.tool, c.outcome])).toEqual([
      ["add", "completed"],
      [HOSTILE_TOOL, "refused"]
    ])
    const withFiles = events.find((e) => e.type === "ArtifactsCollected")!.streamId
    const f = await api<{ store: string; files: Array<{ path: string; size: number }> }>(
      serving.port,
      `/api/executions/${encodeURIComponent(withFiles)}`
    )
    expect(f.files).toEqual([{ path: HOSTILE_PATH, size: 4, mime: expect.any(String), held: false, image: false }])
    // The standalone dashboard holds no artifact store: the page says the images are not held here.
    expect(f).toMatchObject({ store: "elsewhere" })
    const notHere = await get(
      serving.port,
      `/api/executions/${encodeURIComponent(withFiles)}/files/${encodeURIComponent(HOSTILE_PATH)}`,
      auth
    )
    expect([notHere.status, JSON.parse(notHere.body).error]).toEqual([
      404,
      expect.stringContaining("not held by this process")
    ])

    // The whole stream, three events a page.
    const stream = events.filter((e) => e.streamId === withTools)
    const got: Array<EventEnvelope> = []
    let after: number | null = 0
    while (after !== null) {
      const page: { events: Array<EventEnvelope>; after: number | null } = await api(
        serving.port,
        `/api/executions/${encodeURIComponent(withTools)}/events?limit=3&after=${after}`
      )
      expect(page.events.length).toBeLessThanOrEqual(3)
      got.push(...page.events)
      after = page.after
    }
    expect(got).toEqual(stream)
    expect((await get(serving.port, "/api/executions/no-such-stream", auth)).status).toBe(404)
    expect((await get(serving.port, "/api/executions/x/events?limit=201", auth)).status).toBe(400)
  })

  it("refuses a request without the token, with a wrong one, from a foreign Origin or Host", async () => {
    const port = serving.port
    const none = await get(port, "/api/overview")
    expect(none.status).toBe(401)
    expect(none.headers["www-authenticate"]).toContain("Bearer")
    expect((await get(port, "/api/overview", { authorization: `Bearer ${TOKEN.replace("a", "b")}` })).status).toBe(401)
    expect((await get(port, "/api/overview", { ...auth, origin: "http://evil.example" })).status).toBe(403)
    expect((await get(port, "/api/overview", { ...auth, host: `evil.example:${port}` })).status).toBe(403)
    // The page needs no token (it holds no data) but the same Host and Origin.
    expect((await get(port, "/", { host: `evil.example:${port}` })).status).toBe(403)
    const page = await get(port, "/")
    expect(page.status).toBe(200)
    expect(page.headers["content-security-policy"]).toContain("script-src 'self'")
    expect(page.body).not.toContain(TOKEN)
    expect((await get(port, "/api/overview", { ...auth, origin: `http://localhost:${port}` })).status).toBe(200)
  })

  it("a long poll answers when the journal moves on; at most maxWaiters wait at once", async () => {
    const position = serving.projection.position()
    const first = api<{ position: number }>(serving.port, `/api/wait?after=${position}`)
    const second = api<{ position: number }>(serving.port, `/api/wait?after=${position}`)
    // Both are waiting (the server counts them before a third comes).
    await new Promise((resolve) => setTimeout(resolve, 100))
    const third = await get(serving.port, `/api/wait?after=${position}`, auth)
    expect(third.status).toBe(429)
    // Another process's append (the dashboard follows the file).
    const writer = await openJournal({ path: file })
    try {
      await writer.append({
        streamId: "late-executor",
        executorId: "late-executor",
        events: [{ type: "ExecutorLease", data: { leaseMs: 30_000 } }]
      })
    } finally {
      await writer.close()
    }
    expect((await first).position).toBe(position + 1)
    expect((await second).position).toBe(position + 1)
    // Already past: answered at once.
    expect((await api<{ position: number }>(serving.port, `/api/wait?after=${position}`)).position).toBe(position + 1)
  })
})

describe("running now: background processes, and the deadlines of sessions and warm sandboxes", () => {
  const HOSTILE_COMMAND = `<script>window.pwned=3</script> ${"x".repeat(400)}`

  it("a session's processes (command as recorded, cut), its deadline and idle limit; gone when they end", () =>
    Effect.runPromise(
      withFakeSessions(
        ({ sessions, events }) =>
          Effect.gen(function* () {
            const s = yield* sessions.open({ lifetimeSeconds: 600 })
            const command = `${fakeProgram({ hang: true })}# ${HOSTILE_COMMAND}`
            const p = yield* s.spawn(command)
            const q = yield* s.spawn(fakeProgram({ hang: true }))
            const running = async (now: number) => {
              const projection = makeDashboardProjection()
              for (const e of await Effect.runPromise(events(s.sessionId))) projection.apply(e)
              return projection.overview(now).running
            }
            const stream = yield* events(s.sessionId)
            const opened = stream.find((e) => e.type === "SessionOpened")!
            const started = stream.find((e) => e.type === "ProcessStarted" && e.data.processId === p.id)!
            // Recorded: the maximum lifetime's end (24 h by default) and the idle limit.
            // (its deadline read from the clock just before its append).
            expect(opened.data).toMatchObject({ idleMs: 600_000 })
            const deadline = (opened.data as { deadline: number }).deadline
            expect(deadline - opened.timestamp).toBeGreaterThan(86_400_000 - 1_000)
            expect(deadline - opened.timestamp).toBeLessThanOrEqual(86_400_000)
            expect(started.data).toMatchObject({ command, commandTruncated: false })
            const now = started.timestamp + 5_000
            const r = yield* Effect.promise(() => running(now))
            expect(r.sessions).toBe(1)
            expect(r.processes).toBe(2)
            const session = r.items.find((i) => i.kind === "session")!
            const last = stream.at(-1)!.timestamp
            // Idle for 600 s after its last event comes before its maximum lifetime.
            expect(session).toMatchObject({
              id: s.sessionId,
              idleMs: 600_000,
              deadline: last + 600_000,
              deadlineKind: "idle"
            })
            const proc = r.items.find((i) => i.kind === "process" && i.id === p.id)!
            expect(proc).toMatchObject({
              sessionId: s.sessionId,
              pid: p.pid,
              ageMs: 5_000,
              deadline,
              deadlineKind: "max-lifetime",
              commandBytes: new TextEncoder().encode(command).byteLength,
              commandCut: true
            })
            // Bounded: its first COMMAND_CHARS characters, as given (the page writes it as text).
            expect(proc.command).toBe(command.slice(0, COMMAND_CHARS))
            yield* p.kill()
            yield* p.wait()
            const afterKill = yield* Effect.promise(() => running(now))
            expect(afterKill.items.filter((i) => i.kind === "process").map((i) => i.id)).toEqual([q.id])
            yield* s.close
            const afterClose = yield* Effect.promise(() => running(now))
            expect([afterClose.sessions, afterClose.processes, afterClose.items]).toEqual([0, 0, []])
          }),
        { recordCode: true }
      )
    ))

  it("without recordCode a process's command is not shown; an old journal's session has no deadline", () => {
    const p = makeDashboardProjection()
    const at = (sequence: number, type: string, data: object) =>
      ({
        id: `e${sequence}`,
        sequence,
        streamId: "s1",
        version: sequence,
        timestamp: sequence * 1000,
        type,
        data,
        schemaVersion: 1,
        metadata: { executorId: "x", host: "h", pid: 1 }
      }) as unknown as EventEnvelope
    p.apply(at(1, "SessionOpened", { sessionId: "s1", scope: "session", containerName: "c1" }))
    p.apply(at(2, "ProcessStarted", { processId: "p1", pid: 7, commandBytes: 12, commandSha256: "00" }))
    const r = p.overview(10_000).running
    expect(r.items.find((i) => i.kind === "session")).not.toHaveProperty("deadline")
    const proc = r.items.find((i) => i.kind === "process")!
    expect(proc).toMatchObject({ id: "p1", pid: 7, commandBytes: 12, sessionId: "s1" })
    expect(proc).not.toHaveProperty("command")
    expect(proc).not.toHaveProperty("deadline")
  })

  it("tracks at most MAX_PROCESSES processes, counting the others", () => {
    const p = makeDashboardProjection()
    let sequence = 0
    const apply = (type: string, data: object) =>
      p.apply({
        id: `e${++sequence}`,
        sequence,
        streamId: "s1",
        version: sequence,
        timestamp: sequence,
        type,
        data,
        schemaVersion: 1,
        metadata: { executorId: "x", host: "h", pid: 1 }
      } as unknown as EventEnvelope)
    apply("SessionOpened", { sessionId: "s1", scope: "session", containerName: "c1" })
    for (let i = 0; i < MAX_PROCESSES + 5; i++)
      apply("ProcessStarted", { processId: `p${i}`, pid: i, commandBytes: 1, commandSha256: "00", command: "x" })
    const o = p.overview(sequence)
    expect([o.running.processes, o.summary.processesUntracked]).toEqual([MAX_PROCESSES, 5])
    // What the page gets: the oldest 50.
    expect(o.running.items.filter((i) => i.kind === "process")).toHaveLength(50)
    // One ends: another may be tracked.
    apply("ProcessExited", { processId: "p0", exitCode: 0, durationMs: 1, stdoutBytes: 0, stderrBytes: 0 })
    apply("ProcessStarted", { processId: "late", pid: 1, commandBytes: 1, commandSha256: "00" })
    expect(p.overview(sequence).running.processes).toBe(MAX_PROCESSES)
  })
})

describe("the dashboard's projection is bounded", () => {
  const envelope = (sequence: number, streamId: string, type: string, data: object, timestamp = sequence * 1000) =>
    ({
      id: `e${sequence}`,
      sequence,
      streamId,
      version: 1,
      timestamp,
      type,
      data,
      schemaVersion: 1,
      metadata: { executorId: "x", host: "h", pid: 1 }
    }) as unknown as EventEnvelope

  it("keeps the most recent executions, the open streams up to its bound, and 60 minutes of charts", () => {
    const p = makeDashboardProjection({ maxRecent: 3, maxActive: 2, minutes: 2 })
    let seq = 0
    const run = (id: string, at: number) => {
      p.apply(envelope(++seq, id, "ExecutionRequested", { language: "python", timeoutMs: 1000 }, at))
      p.apply(envelope(++seq, id, "ContainerCreated", { containerName: id, containerId: id, imageId: "i" }, at + 10))
      p.apply(envelope(++seq, id, "ContainerStarted", { containerId: id }, at + 20))
      p.apply(envelope(++seq, id, "ContainerExited", { exitCode: 0, oomKilled: false, durationMs: 5 }, at + 30))
      p.apply(
        envelope(++seq, id, "ContainerDestroyed", { containerName: id, containerId: id, reason: "completed" }, at + 40)
      )
    }
    for (let i = 0; i < 2000; i++) run(`run-${i}`, i * 60_000)
    const page = p.executions({ limit: 10 })
    expect(page.kept).toBe(3)
    expect(page.rows.map((r) => r.id)).toEqual(["run-1999", "run-1998", "run-1997"])
    expect(page.before).toBeNull()
    const o = p.overview(Date.now())
    expect(o.summary.total).toBe(2000)
    expect(o.summary.byOutcome["ok"]).toBe(2000)
    expect(o.charts.minutes).toHaveLength(2)
    expect(o.charts.outcomes.ok).toEqual([1, 1])
    expect(o.charts.latency.start.p50).toEqual([10, 10].map((v) => expect.closeTo(v, -1)))
    // Open streams past the bound: the oldest is dropped and counted; a late event of it changes nothing.
    p.apply(envelope(++seq, "s1", "SessionOpened", { sessionId: "s1", scope: "session", containerName: "c1" }))
    p.apply(
      envelope(++seq, "pool-1", "ContainerCreated", {
        containerName: "p",
        containerId: "p",
        imageId: "i",
        pooled: true
      })
    )
    p.apply(envelope(++seq, "hang", "ExecutionRequested", { language: "bash", timeoutMs: 5000 }, 7_000))
    const after = p.overview(10_000)
    expect(after.summary.untracked).toBe(1)
    expect(after.running.sessions + after.running.pool + after.running.executions).toBe(2)
    const hang = after.running.items.find((i) => i.id === "hang")!
    expect(hang).toMatchObject({ kind: "execution", ageMs: 3_000, deadline: 12_000 })
    p.apply(envelope(++seq, "s1", "SessionClosed", { sessionId: "s1", reason: "closed" }))
    expect(p.overview(10_000).summary.untracked).toBe(1)
  })
})

describe("hermes-sandbox dashboard's options", () => {
  it("refuses a non-loopback --host without --allow-remote, a bad --port, a journal that is not there; mcp --dashboard without --http", async () => {
    await expect(dashboard({ host: "0.0.0.0" })).rejects.toThrow(/not a loopback address; pass --allow-remote/)
    await expect(dashboard({ port: "70000" })).rejects.toThrow(/--port: expected 0/)
    await expect(dashboard({ port: "-1" })).rejects.toThrow(/--port: expected 0/)
    await expect(dashboard({ tokenFile: "/nonexistent/token" })).rejects.toThrow(
      /--token-file \/nonexistent\/token: no such file/
    )
    await expect(dashboard({ journal: "/nonexistent/journal.sqlite" })).rejects.toThrow(/no journal at \/nonexistent/)
    // Mounted on the MCP server: only over HTTP.
    await expect(mcp({ dashboard: true })).rejects.toThrow(/--dashboard: only with --http/)
    // It shows every client's executions: with named credentials, which may see it must be said.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-dashboard-clients-"))
    try {
      const named = path.join(dir, "clients")
      fs.writeFileSync(named, "alice alice-token-0123456789abcdef\nbob bob-token-0123456789abcdef01\n")
      await expect(mcp({ http: true, dashboard: true, tokenFile: named })).rejects.toThrow(
        /with named credentials, say which may see it \(--dashboard-client NAME; named: alice, bob\)/
      )
      await expect(mcp({ http: true, dashboard: true, tokenFile: named, dashboardClient: ["carol"] })).rejects.toThrow(
        /--dashboard-client: no credential named "carol"/
      )
      await expect(mcp({ http: true, tokenFile: named, dashboardClient: ["alice"] })).rejects.toThrow(
        /--dashboard-client: only with --dashboard/
      )
      const single = path.join(dir, "token")
      fs.writeFileSync(single, "one-token-0123456789abcdef\n")
      await expect(mcp({ http: true, dashboard: true, tokenFile: single, dashboardClient: ["alice"] })).rejects.toThrow(
        /--dashboard-client: names a credential of a --token-file of NAME TOKEN lines/
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
