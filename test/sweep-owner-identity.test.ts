/**
 * The journal records who wrote each event by host, pid AND the pid's kernel start time, so the
 * startup sweep can tell a dead writer whose pid was reused by another process from a live one
 * (pids wrap within minutes on a busy host). Fake runtime, SQLite journal; the reuse is simulated
 * by editing the recorded start time, since a real pid cannot be made to recur on demand.
 */
import Database from "better-sqlite3"
import { mkdtempSync, rmSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Effect, Layer, Stream } from "effect"
import fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { Executor, ProcessIdentity, SandboxRuntime, Sweep } from "@hermes-sandbox/core"
import { Label, ProjectName } from "@hermes-sandbox/core/Labels"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { Journal, type JournalEvent, SqliteJournal } from "@hermes-sandbox/events"
import { arbEventOf } from "@hermes-sandbox/events/testing"
import { byLabels, parseFamilies } from "./support/prometheus.js"

const dir = mkdtempSync(join(tmpdir(), "hermes-owner-identity-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const requested = fc.sample(arbEventOf("ExecutionRequested"), { numRuns: 1, seed: 7 })[0]!

const run = <A, E>(path: string, program: Effect.Effect<A, E, Journal.Journal | SandboxRuntime>) =>
  Effect.runPromise(program.pipe(Effect.provide(Layer.merge(FakeRuntime.layer(), SqliteJournal.layer({ path })))))

/** Append events to one stream as executor `executorId` in this process. */
const appendTo = (path: string, streamId: string, executorId: string, events: ReadonlyArray<JournalEvent>) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) => j.append({ streamId, executorId, events }))
  )

/** Open a lifecycle (a request, nothing after it) as if executor `executorId` in this process wrote it. */
const openLifecycle = (path: string, executionId: string, executorId: string) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) => j.append({ streamId: executionId, executorId, events: [requested] }))
  )

const eventsOf = (path: string, executionId: string) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) => Stream.runCollect(j.read({ streamId: executionId }))).pipe(
      Effect.map((c) => [...c])
    )
  )

const sweep = (path: string) => run(path, Sweep.sweep({ executorId: "sweeper" }))

/** Rewrite the recorded writer of a stream's events (what a crashed writer's pid being reused amounts to). */
const rewriteStarted = (path: string, executionId: string, started: string | undefined) => {
  const db = new Database(path)
  try {
    const sql =
      started === undefined
        ? "UPDATE events SET metadata = json_remove(metadata, '$.started') WHERE execution_id = ?"
        : "UPDATE events SET metadata = json_set(metadata, '$.started', ?) WHERE execution_id = ?"
    const changed =
      started === undefined
        ? db.prepare(sql).run(executionId).changes
        : db.prepare(sql).run(started, executionId).changes
    expect(changed).toBeGreaterThan(0)
  } finally {
    db.close()
  }
}

describe("the journal's writer identity survives pid reuse", () => {
  it("every event records the writing process's kernel start time next to its host and pid", async () => {
    const path = join(dir, "metadata.sqlite")
    await openLifecycle(path, "exec-metadata", "writer")
    const events = await eventsOf(path, "exec-metadata")
    expect(ProcessIdentity.self.started).toMatch(/^\d+$/)
    expect(events.map((e) => e.metadata)).toEqual([
      { executorId: "writer", host: hostname(), pid: process.pid, started: ProcessIdentity.self.started }
    ])
  })

  it("the startup sweep closes the lifecycle of a writer whose pid now belongs to another process, and leaves a live writer's open", async () => {
    const path = join(dir, "reuse.sqlite")
    await openLifecycle(path, "exec-live", "writer-live")
    await openLifecycle(path, "exec-reused", "writer-dead")
    await openLifecycle(path, "exec-legacy", "writer-legacy")
    // "exec-reused" was written by a process that had this pid but started earlier: it is dead, and
    // this process merely got its pid. "exec-legacy" was written before start times were recorded.
    rewriteStarted(path, "exec-reused", String(Number(ProcessIdentity.self.started) - 1))
    rewriteStarted(path, "exec-legacy", undefined)

    const report = await sweep(path)
    expect([...report.closed].sort()).toEqual(["exec-reused"])
    const closing = await eventsOf(path, "exec-reused")
    expect(closing.map((e) => e.type)).toEqual(["ExecutionRequested", "ExecutionInterrupted"])
    // Without a start time a writer with this pid cannot be told from this process: it stays open
    // (the conservative answer) until its pid is dead, as before start times were recorded.
    const legacy = await eventsOf(path, "exec-legacy")
    expect(legacy.map((e) => e.type)).toEqual(["ExecutionRequested"])
    expect((await sweep(path)).closed).toEqual([])
  })
})

/** The durable journal's sweep mark (Journal.sweepMark), as the next sweep will read it. */
const markOf = (path: string) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) =>
      j.sweepMark === undefined ? Effect.die("no sweep mark on a SQLite journal") : j.sweepMark.get
    )
  )
const lastOf = (path: string) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) => j.lastSequence)
  )

/** `count` closed lifecycles (requested, then failed before any container), as a busy journal holds. */
const closedLifecycles = (path: string, count: number) =>
  run(
    path,
    Effect.flatMap(Journal.Journal, (j) =>
      Effect.forEach(
        Array.from({ length: count }, (_, i) => `exec-closed-${i}-${Math.random()}`),
        (streamId) =>
          j.append({
            streamId,
            executorId: "busy",
            events: [requested, { type: "ExecutionFailed", data: { errorTag: "ContainerFailed", message: "x" } }]
          })
      )
    )
  )

describe("the sweep's mark: a durable journal's replay does not grow with its length", () => {
  it("after a sweep that leaves nothing open the mark is past the last event; the next sweep starts there", async () => {
    const path = join(dir, "mark-closed.sqlite")
    await closedLifecycles(path, 40)
    expect(await markOf(path)).toBeUndefined()
    await sweep(path)
    expect(await markOf(path)).toBe((await lastOf(path)) + 1)
    await closedLifecycles(path, 5)
    await sweep(path)
    expect(await markOf(path)).toBe((await lastOf(path)) + 1)
  })

  it("a lifecycle a live owner left open holds the mark at its start; once its owner is gone a later sweep still closes it, however much came between", async () => {
    const path = join(dir, "mark-open.sqlite")
    await closedLifecycles(path, 10)
    await openLifecycle(path, "exec-held", "writer-held")
    const [held] = await eventsOf(path, "exec-held")
    await closedLifecycles(path, 30)
    expect((await sweep(path)).closed).toEqual([])
    expect(await markOf(path)).toBe(held!.sequence)
    await closedLifecycles(path, 30)
    expect((await sweep(path)).closed).toEqual([])
    expect(await markOf(path)).toBe(held!.sequence)
    // Its writer dies (its pid now another process's): the next sweep, replaying from the mark, closes it.
    rewriteStarted(path, "exec-held", String(Number(ProcessIdentity.self.started) - 1))
    expect((await sweep(path)).closed).toEqual(["exec-held"])
    expect((await eventsOf(path, "exec-held")).map((e) => e.type)).toEqual([
      "ExecutionRequested",
      "ExecutionInterrupted"
    ])
    // Nothing is open any more: the mark moves past it (to the end of what that sweep read).
    expect(await markOf(path)).toBeGreaterThan((await eventsOf(path, "exec-held"))[1]!.sequence - 1)
  })

  it("a session whose container is not recorded yet (SessionOpened only) holds the mark too: once its owner is gone, its container's close also closes the session", async () => {
    // A sweep can run between a session's SessionOpened and its ContainerCreated (another
    // executor's periodic sweep, at any moment). Had the mark moved past SessionOpened, later
    // sweeps would not know the stream is a session and would close its container but never the session.
    const path = join(dir, "mark-session.sqlite")
    const sessionId = "sess-held"
    const containerName = `hermes-sandbox-${sessionId}`
    const append = (...events: ReadonlyArray<JournalEvent>) =>
      run(
        path,
        Effect.flatMap(Journal.Journal, (j) => j.append({ streamId: sessionId, executorId: "writer-session", events }))
      )
    await closedLifecycles(path, 10)
    await append({ type: "SessionOpened", data: { sessionId, scope: "session", containerName } })
    const [opened] = await eventsOf(path, sessionId)
    expect((await sweep(path)).closed).toEqual([])
    expect(await markOf(path)).toBe(opened!.sequence)
    await append(
      { type: "ContainerCreated", data: { containerName, containerId: "c-held", imageId: "i" } },
      { type: "ContainerStarted", data: { containerId: "c-held" } }
    )
    await closedLifecycles(path, 10)
    expect((await sweep(path)).closed).toEqual([])
    // Its owner dies (its pid now another process's): the sweep closes the container and the session.
    rewriteStarted(path, sessionId, String(Number(ProcessIdentity.self.started) - 1))
    expect((await sweep(path)).closed).toEqual([sessionId])
    const closing = await eventsOf(path, sessionId)
    expect(closing.map((e) => e.type)).toEqual([
      "SessionOpened",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerDestroyed",
      "SessionClosed"
    ])
    // A session whose owner died before its container was recorded ends with SessionClosed alone.
    await appendTo(path, "sess-orphan", "writer-session", [
      {
        type: "SessionOpened",
        data: { sessionId: "sess-orphan", scope: "session", containerName: "hermes-sandbox-sess-orphan" }
      }
    ])
    expect((await sweep(path)).closed).toEqual([])
    rewriteStarted(path, "sess-orphan", String(Number(ProcessIdentity.self.started) - 1))
    expect((await sweep(path)).closed).toEqual(["sess-orphan"])
    expect((await eventsOf(path, "sess-orphan")).map((e) => e.type)).toEqual(["SessionOpened", "SessionClosed"])
    // A persistent session outlives its owner by design: held (it holds the mark), never closed by the sweep.
    await appendTo(path, "sess-persistent", "writer-session", [
      {
        type: "SessionOpened",
        data: {
          sessionId: "sess-persistent",
          scope: "persistent",
          containerName: "hermes-sandbox-sess-persistent"
        }
      }
    ])
    rewriteStarted(path, "sess-persistent", String(Number(ProcessIdentity.self.started) - 1))
    expect((await sweep(path)).closed).toEqual([])
    const [persistentOpened] = await eventsOf(path, "sess-persistent")
    expect(await markOf(path)).toBe(persistentOpened!.sequence)
    await appendTo(path, "sess-persistent", "writer-session", [
      { type: "SessionClosed", data: { sessionId: "sess-persistent", reason: "closed" } }
    ])
    // A session closed before its container was made (failed to start) holds nothing.
    await appendTo(path, "sess-failed", "writer-session", [
      {
        type: "SessionOpened",
        data: { sessionId: "sess-failed", scope: "session", containerName: "hermes-sandbox-sess-failed" }
      },
      { type: "SessionClosed", data: { sessionId: "sess-failed", reason: "failed to start: ImageNotFound" } }
    ])
    await sweep(path)
    expect(await markOf(path)).toBe((await lastOf(path)) + 1)
  })
})

describe("what the sweeps tell the metrics (hermes_sandbox_leaked_containers_removed_total{by})", () => {
  it("the orphans an executor's startup sweep removes (by sweep) and a dead owner's containers it finds removed when it closes their lifecycles (by watchdog), each once", async () => {
    const path = join(dir, "leaked.sqlite")
    // A container lifecycle whose writer is dead (its pid now this process's) and whose container is
    // gone: its watchdog removed it and could not say so in the journal.
    await appendTo(path, "hermes-sandbox-gone", "writer-dead", [
      {
        type: "ContainerCreated",
        data: { containerName: "hermes-sandbox-gone", containerId: "c-gone", imageId: "i" }
      },
      { type: "ContainerStarted", data: { containerId: "c-gone" } }
    ])
    rewriteStarted(path, "hermes-sandbox-gone", String(Number(ProcessIdentity.self.started) - 1))
    const leaked = (text: string) =>
      byLabels(parseFamilies(text).get("hermes_sandbox_leaked_containers_removed_total"), ["by"])
    const executorMetrics = Effect.scoped(
      Effect.gen(function* () {
        const base = yield* Layer.build(Layer.merge(FakeRuntime.layer(), SqliteJournal.layer({ path })))
        // On the engine, an orphan past its deadline label (another host's, no lease): the sweep's to remove.
        yield* Effect.flatMap(SandboxRuntime, (r) =>
          r.create({
            name: "hermes-sandbox-late",
            image: "fake",
            command: ["sleep"],
            env: {},
            workingDir: "/workspace",
            user: "1001:1001",
            labels: {
              [Label.project]: ProjectName,
              [Label.executor]: "exec-elsewhere",
              [Label.ownerHost]: "host-elsewhere",
              [Label.ownerPid]: "4242",
              [Label.deadline]: String(Math.floor(Date.now() / 1000) - 60)
            },
            limits: { memoryBytes: 1, nanoCpus: 1, pidsLimit: 1, tmpBytes: 1, workspaceBytes: 1 },
            network: false,
            openStdin: false,
            capAdd: [],
            mounts: []
          })
        ).pipe(Effect.provide(base))
        const context = yield* Layer.build(Executor.layer({}).pipe(Layer.provide(Layer.succeedContext(base))))
        return yield* Context.get(context, Executor.Executor).metrics
      })
    )
    expect(leaked(await Effect.runPromise(executorMetrics))).toEqual({ sweep: 1, watchdog: 1 })
    expect((await eventsOf(path, "hermes-sandbox-gone")).at(-1)).toMatchObject({
      type: "ContainerDestroyed",
      data: { reason: "orphan-reaped" }
    })
    // Another executor sweeping the same journal (on an engine with such an orphan again): the
    // lifecycle is closed already, so only its own removal counts.
    expect(leaked(await Effect.runPromise(executorMetrics))).toEqual({ sweep: 1 })
  })
})
