import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Event from "../src/Event.js"
import type { EventEnvelope, JournalEvent } from "../src/Event.js"
import * as Projection from "../src/Projection.js"
import { arbEvent, arbJournalHistory, arbLifecycle, lifecyclePaths, toEnvelopes } from "../src/testing.js"
import { localImplementations } from "./helpers.js"
import { replayEqualsLive } from "./support/projectionReplay.js"

const E = Event.make
const container = { containerName: "hermes-sandbox-1", containerId: "c1" }
const request = E("ExecutionRequested", {
  language: "python",
  image: "python:3.12-slim",
  codeBytes: 10,
  codeSha256: "ab",
  stdinBytes: 0,
  fileCount: 0,
  timeoutMs: 1000,
  limits: { memoryBytes: 1, nanoCpus: 1, pidsLimit: 1, outputLimitBytes: 1 },
  network: false,
  runtime: "fake"
})

const fold = (events: ReadonlyArray<JournalEvent>, id = "x") =>
  toEnvelopes(id, events).reduce<Projection.ExecutionState | undefined>(Projection.evolve, undefined)!

/** Groups a history by stream, keeping order. */
const byStream = (history: ReadonlyArray<EventEnvelope>) => {
  const streams = new Map<string, Array<EventEnvelope>>()
  for (const e of history) {
    const list = streams.get(e.streamId) ?? []
    list.push(e)
    streams.set(e.streamId, list)
  }
  return streams
}

describe("Projection", () => {
  it("a session's kernel events: folded into its stream's counts; accepted there, never in an execution's stream or after the sandbox is gone", () => {
    const started = E("KernelStarted", {
      kernelId: "k1",
      generation: 1,
      language: "python",
      startMs: 300,
      preload: [],
      preloadFailed: []
    })
    const cell = (status: "ok" | "timeout", stateLost: boolean) =>
      E("CellExecuted", {
        cellId: "c",
        kernelId: "k1",
        executionCount: 1,
        status,
        durationMs: 1,
        timeoutMs: 1000,
        codeBytes: 1,
        codeSha256: "ab",
        stdoutBytes: 0,
        stderrBytes: 0,
        stdoutTruncated: false,
        stderrTruncated: false,
        outputs: [],
        outputsOmitted: 0,
        displaysOmitted: 0,
        stateLost,
        oomKilled: false,
        toolCallsMade: 0
      })
    const restarted = E("KernelRestarted", { kernelId: "k1", generation: 1, reason: "timeout", cellId: "c" })
    const session = [
      E("SessionOpened", { sessionId: "s", scope: "session", containerName: container.containerName }),
      E("ContainerCreated", { ...container, imageId: "i" }),
      E("ContainerStarted", { containerId: "c1" }),
      started,
      cell("ok", false),
      cell("timeout", true),
      restarted,
      started,
      cell("ok", true),
      E("ContainerDestroyed", { ...container, reason: "session-closed" }),
      E("SessionClosed", { sessionId: "s", reason: "closed" })
    ]
    expect(Projection.checkLifecycle(toEnvelopes("s", session))).toEqual([])
    expect(Projection.project(toEnvelopes("s", session)).get("s")?.kernel).toEqual({
      started: 2,
      cells: 3,
      byStatus: { ok: 2, timeout: 1 },
      stateLost: 2,
      restarts: { timeout: 1 }
    })
    expect(Projection.checkLifecycle(toEnvelopes("x", [request, cell("ok", false)]))).toEqual([
      "CellExecuted in an execution's stream (sequence 2)"
    ])
    expect(
      Projection.checkLifecycle(
        toEnvelopes("s", [
          ...session.slice(0, 3),
          E("ContainerDestroyed", { ...container, reason: "session-closed" }),
          started
        ])
      )
    ).toEqual(["KernelStarted after ContainerDestroyed (sequence 5)"])
    // A cell's tool calls: in the session's stream with its cellId (ids per cell), settled before its CellExecuted.
    const call = (cellId: string) => [
      E("ToolCallRequested", { callId: 1, cellId, tool: "add", argumentBytes: 2, argumentsSha256: "ab" }),
      E("ToolCallCompleted", { callId: 1, cellId, tool: "add", durationMs: 1, resultBytes: 1 })
    ]
    const withCalls = [
      ...session.slice(0, 4),
      ...call("c"),
      { ...cell("ok", false), data: { ...cell("ok", false).data, cellId: "c" } },
      ...call("d"),
      { ...cell("ok", false), data: { ...cell("ok", false).data, cellId: "d" } }
    ] as ReadonlyArray<JournalEvent>
    expect(Projection.checkLifecycle(toEnvelopes("s", withCalls))).toEqual([])
    expect(Projection.project(toEnvelopes("s", withCalls)).get("s")?.kind).toBe("container")
    const unsettled = [
      ...session.slice(0, 4),
      call("c")[0]!,
      { ...cell("ok", false), data: { ...cell("ok", false).data, cellId: "c" } }
    ]
    expect(Projection.checkLifecycle(toEnvelopes("s", unsettled))).toEqual([
      "CellExecuted with tool calls left without an outcome: c/1 (add) (sequence 6)"
    ])
    expect(Projection.checkLifecycle(toEnvelopes("e", [E("ExecutorLease", { leaseMs: 1000 }), started]))).toEqual([
      "KernelStarted (sequence 2) in an executor's lease stream"
    ])
  })

  it("a normal run: requested → created → started → exited → destroyed, closed", () => {
    const events = [
      request,
      E("ContainerCreated", { ...container, imageId: "sha256:i" }),
      E("ContainerStarted", { containerId: "c1" }),
      E("ContainerExited", { exitCode: 3, oomKilled: false, durationMs: 5 }),
      E("ContainerDestroyed", { ...container, reason: "completed" })
    ]
    const phases = toEnvelopes("x", events).reduce<Array<string>>((acc, _e, i, all) => {
      acc.push(all.slice(0, i + 1).reduce<Projection.ExecutionState | undefined>(Projection.evolve, undefined)!.phase)
      return acc
    }, [])
    expect(phases).toEqual(["requested", "created", "started", "exited", "destroyed"])
    const state = fold(events)
    expect(state).toMatchObject({
      kind: "execution",
      phase: "destroyed",
      outcome: "exited",
      exitCode: 3,
      oomKilled: false,
      language: "python",
      containerId: "c1",
      destroyReason: "completed",
      violations: []
    })
    expect(Projection.isClosed(state)).toBe(true)
    expect(Projection.isClosed(fold(events.slice(0, 4)))).toBe(false)
  })

  it("ArtifactsCollected: counted between the start and the terminal event; anywhere else a violation", () => {
    const artifacts = E("ArtifactsCollected", {
      files: [
        { path: "chart.png", size: 10, sha256: "0".repeat(64), mime: "image/png" },
        { path: "a.csv", size: 5, sha256: "1".repeat(64), mime: "text/csv" }
      ],
      skipped: [{ path: "big.bin", size: 99, reason: "too-large" }],
      truncated: true,
      status: "complete"
    })
    const started = [
      request,
      E("ContainerCreated", { ...container, imageId: "sha256:i" }),
      E("ContainerStarted", { containerId: "c1" })
    ]
    const exited = E("ContainerExited", { exitCode: 0, oomKilled: false, durationMs: 5 })
    const destroyed = E("ContainerDestroyed", { ...container, reason: "completed" })
    const state = fold([...started, artifacts, exited, destroyed])
    expect(state).toMatchObject({
      artifacts: { files: 2, bytes: 15, skipped: 1, status: "complete" },
      violations: [],
      outcome: "exited"
    })
    expect(Projection.isClosed(state)).toBe(true)
    expect(fold([...started, exited, artifacts, destroyed]).violations).toEqual([
      "ArtifactsCollected after the terminal event (sequence 5)"
    ])
    expect(fold([request, artifacts]).violations).toEqual([
      "ArtifactsCollected before the container started (sequence 2)"
    ])
  })

  describe("tool calls", () => {
    const started = [
      request,
      E("ContainerCreated", { ...container, imageId: "sha256:i" }),
      E("ContainerStarted", { containerId: "c1" })
    ]
    const exited = E("ContainerExited", { exitCode: 0, oomKilled: false, durationMs: 5 })
    const destroyed = E("ContainerDestroyed", { ...container, reason: "completed" })
    const asked = (callId: number, tool = "web_search") =>
      E("ToolCallRequested", { callId, tool, argumentBytes: 15, argumentsSha256: "0".repeat(64) })
    const completed = (callId: number, tool = "web_search") =>
      E("ToolCallCompleted", { callId, tool, durationMs: 3, resultBytes: 120 })
    const failed = (callId: number, tool = "web_search") =>
      E("ToolCallFailed", { callId, tool, durationMs: 60_000, reason: "timed-out", message: "no answer in 60 s" })
    const refused = (callId: number, tool: string) =>
      E("ToolCallRefused", { callId, tool, reason: "unknown-tool", message: `no tool ${tool}` })

    it("counted per tool: requested, completed, failed, refused; concurrent calls settle in any order", () => {
      const state = fold([
        ...started,
        asked(1),
        asked(2, "add"),
        asked(3),
        completed(2, "add"),
        failed(1),
        completed(3),
        asked(4, "nope"),
        refused(4, "nope"),
        exited,
        destroyed
      ])
      expect(state.violations).toEqual([])
      expect(state.toolCalls).toEqual({
        web_search: { requested: 2, completed: 1, failed: 1, refused: 0 },
        add: { requested: 1, completed: 1, failed: 0, refused: 0 },
        nope: { requested: 1, completed: 0, failed: 0, refused: 1 }
      })
      // The per-call bookkeeping ends with the run: a closed stream holds the counts only.
      expect(state.toolCallsById).toBeUndefined()
      expect(Projection.isClosed(state)).toBe(true)
      // While the run is going: which calls are in flight.
      expect(fold([...started, asked(1), asked(2, "add"), completed(2, "add")]).toolCallsById).toEqual({
        1: { tool: "web_search" },
        2: { tool: "add", outcome: "completed" }
      })
      expect(fold([...started, exited]).toolCalls).toBeUndefined()
    })

    it("in a session's call (no container start of its own) as in a one-shot run", () => {
      const inSession = E("ExecutionRequested", { ...request.data, scope: "session", sessionId: "s1" })
      const state = fold([inSession, asked(1), completed(1), exited])
      expect(state.violations).toEqual([])
      expect(state.toolCalls).toEqual({ web_search: { requested: 1, completed: 1, failed: 0, refused: 0 } })
    })

    it("an outcome without its request, a second outcome, a second request: violations", () => {
      expect(fold([...started, completed(1), exited, destroyed]).violations).toEqual([
        "ToolCallCompleted for call 1 without ToolCallRequested (sequence 4)"
      ])
      expect(fold([...started, asked(1), completed(1), failed(1), exited, destroyed]).violations).toEqual([
        "ToolCallFailed for call 1, already completed (sequence 6)"
      ])
      expect(fold([...started, asked(1), asked(1), completed(1), exited, destroyed]).violations).toEqual([
        "second ToolCallRequested for call 1 (sequence 5)"
      ])
      expect(fold([...started, asked(1), completed(1, "add"), exited, destroyed]).violations).toEqual([
        "ToolCallCompleted for call 1 names add, requested as web_search (sequence 5)"
      ])
    })

    it("before the container started, after the terminal event, or left without an outcome: violations", () => {
      expect(fold([request, asked(1)]).violations).toEqual([
        "ToolCallRequested before the container started (sequence 2)"
      ])
      expect(fold([...started, exited, asked(1), destroyed]).violations).toEqual([
        "ToolCallRequested after the terminal event (sequence 5)"
      ])
      expect(fold([...started, asked(1), exited, completed(1), destroyed]).violations).toEqual([
        "ContainerExited with tool calls left without an outcome: 1 (web_search) (sequence 5)",
        "ToolCallCompleted after the terminal event (sequence 6)"
      ])
      expect(fold([...started, exited, destroyed, refused(1, "x")]).violations).toEqual([
        "ToolCallRefused after ContainerDestroyed (sequence 6)",
        "ToolCallRefused after the terminal event (sequence 6)"
      ])
      expect(
        fold([
          ...started,
          asked(1),
          asked(2, "add"),
          asked(3),
          completed(2, "add"),
          E("ExecutionTimedOut", { timeoutMs: 1, durationMs: 2 }),
          destroyed
        ]).violations
      ).toEqual([
        "ExecutionTimedOut with tool calls left without an outcome: 1 (web_search), 3 (web_search) (sequence 8)"
      ])
      // checkLifecycle reports the same.
      expect(Projection.checkLifecycle(toEnvelopes("x", [...started, asked(1), exited, destroyed]))).toEqual([
        "ContainerExited with tool calls left without an outcome: 1 (web_search) (sequence 5)"
      ])
    })

    it("a tool named like an Object.prototype member is counted as any other", () => {
      const state = fold([
        ...started,
        asked(1, "toString"),
        completed(1, "toString"),
        asked(2, "__proto__"),
        completed(2, "__proto__"),
        exited
      ])
      expect(state.violations).toEqual([])
      expect(Object.hasOwn(state.toolCalls!, "toString")).toBe(true)
      expect(state.toolCalls!["toString"]).toEqual({ requested: 1, completed: 1, failed: 0, refused: 0 })
      expect(Object.getOwnPropertyDescriptor(state.toolCalls!, "__proto__")?.value).toEqual({
        requested: 1,
        completed: 1,
        failed: 0,
        refused: 0
      })
      expect(Projection.summarize([state]).toolCalls).toEqual(state.toolCalls)
    })

    it("summarize: tool calls per tool over executions, sorted by name", () => {
      const a = fold([...started, asked(1), completed(1), asked(2, "add"), failed(2, "add"), exited, destroyed], "a")
      const b = fold([...started, asked(1), refused(1, "web_search"), exited, destroyed], "b")
      const summary = Projection.summarize([a, b, fold(started, "c")])
      expect(summary.toolCalls).toEqual({
        add: { requested: 1, completed: 0, failed: 1, refused: 0 },
        web_search: { requested: 2, completed: 1, failed: 0, refused: 1 }
      })
      expect(Object.keys(summary.toolCalls)).toEqual(["add", "web_search"])
      expect(Projection.summarize([]).toolCalls).toEqual({})
    })
  })

  it("a claim counts as created + started; the pool stream hands the container over", () => {
    const pool = toEnvelopes("pool-1", [
      E("ContainerCreated", { ...container, imageId: "i", pooled: true }),
      E("ContainerStarted", { containerId: "c1" })
    ])
    const exec = toEnvelopes(
      "x",
      [
        request,
        E("ContainerClaimed", { ...container, poolStreamId: "pool-1" }),
        E("ExecutionTimedOut", { timeoutMs: 1000, durationMs: 1001 })
      ],
      { startSequence: 3, timestamp: 1_700_000_000_100 }
    )
    const projector = Projection.makeProjector()
    for (const e of [...pool, ...exec]) projector.apply(e)
    expect(projector.get("x")).toMatchObject({
      phase: "timedOut",
      pooled: true,
      poolStreamId: "pool-1",
      violations: []
    })
    expect(projector.get("x")!.startedAt).toBe(1_700_000_000_101)
    expect(projector.get("pool-1")).toMatchObject({ kind: "container", claimedBy: "x" })
    expect(Projection.isClosed(projector.get("pool-1")!)).toBe(true)
    // One container alive (held by x), not two.
    expect(projector.summary()).toMatchObject({
      total: 1,
      containersAlive: 1,
      openLifecycles: 1,
      byOutcome: { timedOut: 1 }
    })
  })

  it("records out-of-order events as violations instead of throwing", () => {
    expect(fold([request, E("ContainerStarted", { containerId: "c1" })]).violations).toEqual([
      "ContainerStarted before ContainerCreated (sequence 2)"
    ])
    const twice = fold([
      request,
      E("ExecutionInterrupted", { reason: "a" }),
      E("ExecutionFailed", { errorTag: "T", message: "m" })
    ])
    expect(twice.outcome).toBe("interrupted")
    expect(twice.violations).toEqual(["ExecutionFailed after the terminal event (interrupted) (sequence 3)"])
    const after = fold([
      request,
      E("ContainerCreated", { ...container, imageId: "i" }),
      E("ExecutionFailed", { errorTag: "StartFailed", message: "m" }),
      E("ContainerDestroyed", { ...container, reason: "failed" }),
      E("ContainerStarted", { containerId: "c1" })
    ])
    expect(after.phase).toBe("destroyed")
    expect(after.outcome).toBe("failed")
    expect(after.violations).toContain("ContainerStarted after ContainerDestroyed (sequence 5)")
    expect(
      fold([
        request,
        E("ContainerCreated", { ...container, imageId: "i" }),
        E("ContainerDestroyed", { ...container, reason: "completed" })
      ]).violations
    ).toEqual(["ContainerDestroyed (completed) before the terminal event (sequence 3)"])
  })

  it("a re-delivered event (sequence not increasing) is ignored and noted", () => {
    const [a, b] = toEnvelopes("x", [request, E("ContainerCreated", { ...container, imageId: "i" })])
    const state = [a!, b!, b!].reduce<Projection.ExecutionState | undefined>(Projection.evolve, undefined)!
    expect(state.phase).toBe("created")
    expect(state.violations).toHaveLength(1)
  })

  it("session and executor events are not lifecycles", () => {
    const history = [
      ...toEnvelopes("s1", [E("SessionOpened", { sessionId: "s1", scope: "session", containerName: "n" })]),
      ...toEnvelopes("ex", [E("ExecutorStats", { inFlight: 1, queued: 0 })], { startSequence: 2 })
    ]
    expect(Projection.project(history).size).toBe(0)
  })

  it("summarize: outcomes, exit-code histogram, duration percentiles, alive containers", () => {
    const t0 = 1_700_000_000_000
    const envelopes: Array<EventEnvelope> = []
    const add = (id: string, events: ReadonlyArray<JournalEvent>, times: ReadonlyArray<number>) => {
      toEnvelopes(id, events, { startSequence: envelopes.length + 1 }).forEach((e, i) => {
        envelopes.push({ ...e, timestamp: t0 + times[i]! })
      })
    }
    const run = (code: number, oom = false) => [
      request,
      E("ContainerCreated", { ...container, imageId: "i" }),
      E("ContainerStarted", { containerId: "c1" }),
      E("ContainerExited", { exitCode: code, oomKilled: oom, durationMs: 1 }),
      E("ContainerDestroyed", { ...container, reason: "completed" })
    ]
    for (let i = 1; i <= 100; i++) add(`ok${i}`, run(i % 10 === 0 ? 137 : 0, i % 10 === 0), [0, 1, 10, 10 + i, 200])
    add("open", run(0).slice(0, 3), [0, 1, 2])
    add("failed", [request, E("ExecutionFailed", { errorTag: "CreateFailed", message: "x" })], [0, 1])
    const summary = Projection.summarize(Projection.project(envelopes))
    expect(summary.total).toBe(102)
    expect(summary.byOutcome).toEqual({ exited: 100, timedOut: 0, interrupted: 0, failed: 1, open: 1 })
    expect(summary.exitCodes).toEqual({ "0": 90, "137": 10 })
    expect(summary.durationMs).toEqual({ count: 100, p50: 50, p95: 95, p99: 99, max: 100 })
    expect(summary.containersAlive).toBe(1)
    expect(summary.openLifecycles).toBe(1)
  })

  it.prop(
    "checkLifecycle accepts every generated lifecycle",
    [arbLifecycle()],
    ([lifecycle]) => {
      expect(Projection.checkLifecycle(toEnvelopes(lifecycle.executionId, lifecycle.events))).toEqual([])
      const state = fold(lifecycle.events, lifecycle.executionId)
      expect(state.outcome).toBeDefined()
      expect(Projection.isClosed(state)).toBe(true)
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("arbLifecycle covers every path", () => {
    const seen = new Set(fc.sample(arbLifecycle(), 500).map((l) => l.path))
    expect([...seen].sort()).toEqual([...lifecyclePaths].sort())
  })

  it("arbLifecycle makes tool calls, some in flight at once, with every outcome", () => {
    const sample = fc.sample(arbLifecycle(), 500)
    const types = new Set(sample.flatMap((l) => l.events.map((e) => e.type)))
    for (const type of ["ToolCallRequested", "ToolCallCompleted", "ToolCallFailed", "ToolCallRefused"])
      expect(types).toContain(type)
    // Two requests in a row: the first was still in flight.
    expect(
      sample.some((l) =>
        l.events.some((e, i) => e.type === "ToolCallRequested" && l.events[i + 1]?.type === "ToolCallRequested")
      )
    ).toBe(true)
    expect(sample.some((l) => !l.events.some((e) => e.type === "ToolCallRequested"))).toBe(true)
  })

  it.prop(
    "checkLifecycle accepts every stream of a generated history; all executions end closed",
    [arbJournalHistory],
    ([history]) => {
      for (const [, events] of byStream(history)) expect(Projection.checkLifecycle(events)).toEqual([])
      const states = Projection.project(history)
      for (const state of states.values()) expect(Projection.isClosed(state)).toBe(true)
      const summary = Projection.summarize(states)
      expect(summary.openLifecycles).toBe(0)
      expect(summary.containersAlive).toBe(0)
      expect(summary.byOutcome.open).toBe(0)
    },
    { fastCheck: { numRuns: 200 } }
  )

  it.prop(
    "checkLifecycle rejects a stream with a dropped or swapped event",
    [arbLifecycle(), fc.nat()],
    ([lifecycle, n]) => {
      const envelopes = toEnvelopes(lifecycle.executionId, lifecycle.events)
      fc.pre(envelopes.length >= 2)
      const i = n % envelopes.length
      const dropped = envelopes.filter((_, j) => j !== i)
      // Dropping anything but the last event breaks version contiguity.
      if (i < envelopes.length - 1) expect(Projection.checkLifecycle(dropped)).not.toEqual([])
      // Swapping two events, even with versions and sequences renumbered, breaks the order —
      // except two events of different tool calls, which concurrent calls may record either way.
      const j = (i + 1) % envelopes.length
      const callOf = (e: JournalEvent) =>
        e.type.startsWith("ToolCall") ? (e.data as { callId: number }).callId : undefined
      const [a, b] = [callOf(lifecycle.events[i]!), callOf(lifecycle.events[j]!)]
      fc.pre(a === undefined || b === undefined || a === b)
      const swapped = [...lifecycle.events]
      ;[swapped[i], swapped[j]] = [swapped[j]!, swapped[i]!]
      expect(Projection.checkLifecycle(toEnvelopes(lifecycle.executionId, swapped))).not.toEqual([])
    }
  )

  it.prop(
    "evolve is deterministic and total, even on arbitrary (invalid) event sequences",
    [fc.array(arbEvent, { maxLength: 30 })],
    ([events]) => {
      const envelopes = toEnvelopes("x", events)
      const a = Projection.project(envelopes)
      const b = Projection.project(envelopes)
      expect(a).toEqual(b)
      expect(Projection.checkLifecycle(envelopes)).toEqual(Projection.checkLifecycle(envelopes))
    },
    { fastCheck: { numRuns: 300 } }
  )

  for (const impl of localImplementations) replayEqualsLive(impl)
})
