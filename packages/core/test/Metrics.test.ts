/**
 * The executor's Prometheus registry (Metrics.ts) on the fake runtime: after a known mix of runs
 * (ok, error exit, OOM, timeout, interrupted, a failed create, tool calls completed, failed and
 * refused, collected files, warm-pool claims) the scraped text parses with a Prometheus parser and
 * its counters and histogram counts equal what the journal's own projection and summary count.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref, Stream, TestClock } from "effect"
import { readFileSync } from "node:fs"
import { Executor, ExecutorWithSessions, Metrics, Session } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, MemoryJournal } from "@hermes-sandbox/events"
import {
  byLabels,
  histogramCounts,
  journalExpectations,
  parseFamilies as parse,
  sampleValue
} from "../../../test/support/prometheus.js"
import { addAndBoom, settle, withFakeExecutor as withExecutor } from "./support/fakeExecutor.js"
import { withFakeSessions } from "./support/fakeSessions.js"

describe("Prometheus metrics (fake runtime)", () => {
  it.effect(
    "after a known mix of runs, the scrape parses and its counters and histogram counts are the journal's",
    () =>
      withExecutor(
        { warmPool: { size: 1, languages: ["python"] }, timeoutMs: 5_000 },
        ({ control, executor, journal }) =>
          Effect.gen(function* () {
            while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("1 millis")
            const tools = addAndBoom
            const runs = [
              // python, eligible for the pool: claims the warm sandbox
              { language: "python", code: fakeProgram({ stdout: "ok\n" }) },
              { language: "javascript", code: fakeProgram({ exitCode: 3 }) },
              { language: "bash", code: fakeProgram({ oom: true }) },
              { language: "bash", code: fakeProgram({ hang: true }), timeoutMs: 1_000 },
              {
                language: "javascript",
                code: fakeProgram({
                  toolCalls: [
                    { tool: "add", args: { a: 1, b: 2 } },
                    { tool: "add", args: { a: 3, b: 4 } },
                    { tool: "boom" },
                    { tool: "no_such_tool_chosen_by_the_sandbox" },
                    { tool: "add", rawArgs: "not json" }
                  ]
                }),
                tools
              },
              {
                language: "python",
                code: fakeProgram({ writeFile: { path: "out.csv", content: "a,b\n" } }),
                collect: ["*.csv"],
                env: { NOT_POOLED: "1" }
              },
              { language: "python", code: fakeProgram({ exitCode: 0 }) }
            ] as const
            for (const request of runs) yield* settle(executor.executeCode(request))

            // A create the engine refuses: ExecutionFailed.
            yield* Ref.set(control.faults, { createFails: true })
            yield* settle(executor.executeCode({ language: "javascript", code: fakeProgram({}) }))
            yield* Ref.set(control.faults, {})

            // An execution interrupted while it runs: ExecutionInterrupted.
            const before = (yield* control.alive).length
            const hanging = yield* Effect.fork(
              executor.executeCode({ language: "bash", code: fakeProgram({ hang: true }), env: { X: "1" } })
            )
            while ((yield* control.alive).length <= before) yield* TestClock.adjust("1 millis")
            yield* Fiber.interrupt(hanging)
            yield* executor.idle
            // The pool refilled (in the background), so the stats and the scrape read the same.
            while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("1 millis")

            const text = yield* executor.metrics
            const families = parse(text)

            // What the journal says, folded by its own projection.
            const events: Array<EventEnvelope> = [...(yield* journal.read().pipe(Stream.runCollect))]
            const { summary, executions: expected, phases, toolCalls } = journalExpectations(events, Object.keys(tools))
            const got = byLabels(families.get("hermes_sandbox_executions_total"), ["language", "outcome"], "value")
            expect(got).toEqual(expected)
            // The mix is what it was meant to be (so the comparison above compared something).
            expect(Object.keys(expected).sort()).toEqual(
              [
                "bash/interrupted",
                "bash/oom",
                "bash/timeout",
                "javascript/error",
                "javascript/failed",
                "javascript/ok",
                "python/ok"
              ].sort()
            )
            expect(summary.total).toBe(runs.length + 2)
            expect(Object.values(got).reduce((a, b) => a + b, 0)).toBe(summary.total)

            // Phases: counted from the execution streams' events (run: the summary's durations).
            expect(phases["run"]).toBe(summary.durationMs.count)
            const phaseCounts = histogramCounts(text, "hermes_sandbox_execution_phase_seconds", "phase", Metrics.PHASES)
            expect(phaseCounts).toEqual(phases)
            expect(phases["claim"]).toBeGreaterThanOrEqual(1)
            expect(phases["collect"]).toBe(1)
            expect(families.get("hermes_sandbox_execution_phase_seconds")?.type).toBe("HISTOGRAM")

            // Tool calls: the summary's, a name the host does not serve counted as "other".
            const toolsExpected = toolCalls
            expect(byLabels(families.get("hermes_sandbox_tool_calls_total"), ["tool", "outcome"], "value")).toEqual(
              toolsExpected
            )
            expect(toolsExpected).toEqual({
              "add/completed": 2,
              "add/refused": 1,
              "boom/failed": 1,
              "other/refused": 1
            })
            expect(text).not.toContain("no_such_tool_chosen_by_the_sandbox")

            // Appends: one per committed batch at least once, never more than the events.
            const appends = Number(families.get("hermes_sandbox_journal_append_seconds")?.metrics[0]?.count)
            expect(appends).toBeGreaterThan(0)
            expect(appends).toBeLessThanOrEqual(events.length)

            // Gauges: the live state now.
            const stats = yield* executor.stats
            const gauge = (name: string) => sampleValue(families, name)
            expect(gauge("hermes_sandbox_in_flight")).toBe(stats.inFlight + stats.removing)
            expect(gauge("hermes_sandbox_queued")).toBe(stats.queued)
            expect(byLabels(families.get("hermes_sandbox_pool_ready"), ["language"], "value")).toEqual(
              Object.fromEntries(Object.entries(stats.warm).filter(([, n]) => n > 0))
            )
            expect(gauge("hermes_sandbox_sessions_open")).toBe(0)
            expect(byLabels(families.get("hermes_sandbox_leaked_containers_removed_total"), ["by"], "value")).toEqual(
              {}
            )
          })
      )
  )

  it.effect("each executor has a registry of its own; Metrics.layer() shares one between the services given it", () =>
    Effect.gen(function* () {
      const counted = (text: string) =>
        (parse(text).get("hermes_sandbox_executions_total")?.metrics ?? []).reduce((n, m) => n + Number(m.value), 0)
      const first = yield* withExecutor({}, ({ executor }) =>
        Effect.gen(function* () {
          yield* settle(executor.executeCode({ language: "python", code: fakeProgram({}) }))
          return yield* executor.metrics
        })
      )
      const second = yield* withExecutor({}, ({ executor }) => executor.metrics)
      expect([counted(first), counted(second)]).toEqual([1, 0])

      // Two executors given one Metrics layer count into one registry.
      const shared = yield* Effect.scoped(
        Effect.gen(function* () {
          const scope = yield* Effect.scope
          const context = yield* Layer.buildWithScope(
            Layer.merge(Executor.layer({ awaitRemoval: true }), Executor.layer({ awaitRemoval: true })).pipe(
              Layer.provideMerge(Metrics.layer()),
              Layer.provideMerge(FakeRuntime.layer()),
              Layer.provideMerge(MemoryJournal.layer())
            ),
            scope
          )
          const metrics = yield* Effect.provide(Metrics.Metrics, context)
          const executor = yield* Effect.provide(Executor.Executor, context)
          yield* settle(executor.executeCode({ language: "bash", code: fakeProgram({ exitCode: 1 }) }))
          return yield* metrics.text
        })
      )
      expect(counted(shared)).toBe(1)
      expect(shared).toContain(`hermes_sandbox_executions_total{language="bash",outcome="error"} 1`)
    })
  )

  it.effect(
    "phases: a new sandbox's is `create`, a warm one's `claim` (never both); the label values are Metrics.PHASES, as docs/observability.md lists them",
    () =>
      withExecutor({ warmPool: { size: 1, languages: ["python"] } }, ({ executor }) =>
        Effect.gen(function* () {
          while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("1 millis")
          // Eligible: claims the warm sandbox. With its own env: a new sandbox, created and started.
          yield* settle(executor.executeCode({ language: "python", code: fakeProgram({}) }))
          yield* settle(executor.executeCode({ language: "python", code: fakeProgram({}), env: { A: "1" } }))
          const text = yield* executor.metrics
          const name = "hermes_sandbox_execution_phase_seconds"
          expect(histogramCounts(text, name, "phase", Metrics.PHASES)).toEqual({
            queue: 2,
            claim: 1,
            create: 1,
            start: 1,
            run: 2,
            removal: 2
          })
          // Every phase's series is there from the start (at zero), and no other.
          const exposed = new Set(
            [...text.matchAll(new RegExp(`^${name}_count\\{phase="([^"]+)"\\}`, "gm"))].map((m) => m[1])
          )
          expect([...exposed].sort()).toEqual([...Metrics.PHASES].sort())
          // The docs' table names exactly these values for the phase label.
          const docs = readFileSync(new URL("../../../docs/observability.md", import.meta.url), "utf8")
          const row = docs.split("\n").find((l) => l.startsWith(`| \`${name}\``))
          const documented = new Set([...(row ?? "").matchAll(/`([a-z]+)` \(/g)].map((m) => m[1]))
          expect([...documented].sort()).toEqual([...Metrics.PHASES].sort())
        })
      )
  )

  it.effect(
    "a sessions service alone has a registry of its own; composed with an executor, one registry for both",
    () =>
      Effect.gen(function* () {
        const callOn = (sessions: Session.Sessions["Type"]) =>
          Effect.scoped(
            Effect.gen(function* () {
              const s = yield* Effect.acquireRelease(sessions.open(), (s) => s.close)
              yield* s.run(fakeProgram({ exitCode: 2 }))
              return yield* sessions.metrics
            })
          )
        // Alone (createSession's case): its calls and its open sessions in its own registry.
        const alone = yield* withFakeSessions(({ sessions }) =>
          Effect.gen(function* () {
            const s = yield* sessions.open()
            yield* s.run(fakeProgram({}))
            const open = parse(yield* sessions.metrics)
            yield* s.close
            return { open, after: yield* callOn(sessions) }
          })
        )
        expect(sampleValue(alone.open, "hermes_sandbox_sessions_open")).toBe(1)
        expect(byLabels(alone.open.get("hermes_sandbox_executions_total"), ["language", "outcome"])).toEqual({
          "bash/ok": 1
        })
        expect(byLabels(parse(alone.after).get("hermes_sandbox_executions_total"), ["language", "outcome"])).toEqual({
          "bash/ok": 1,
          "bash/error": 1
        })
        // Another service alone: nothing of the first.
        const other = yield* withFakeSessions(({ sessions }) => sessions.metrics)
        expect(byLabels(parse(other).get("hermes_sandbox_executions_total"), ["language", "outcome"])).toEqual({})

        // Composed: the executor's metrics count the sessions' calls, and say what the sessions' say.
        const composed = yield* Effect.scoped(
          Effect.gen(function* () {
            const context = yield* Layer.build(
              ExecutorWithSessions.layer({ executorId: "composed", awaitRemoval: true }).pipe(
                Layer.provideMerge(FakeRuntime.layer()),
                Layer.provideMerge(MemoryJournal.layer())
              )
            )
            const executor = yield* Effect.provide(Executor.Executor, context)
            const sessions = yield* Effect.provide(Session.Sessions, context)
            yield* settle(executor.executeCode({ language: "python", code: fakeProgram({}) }))
            const fromSessions = yield* callOn(sessions)
            return { fromSessions, fromExecutor: yield* executor.metrics }
          })
        )
        const counted = (text: string) =>
          byLabels(parse(text).get("hermes_sandbox_executions_total"), ["language", "outcome"])
        expect(counted(composed.fromExecutor)).toEqual({ "python/ok": 1, "bash/error": 1 })
        expect(counted(composed.fromSessions)).toEqual(counted(composed.fromExecutor))
      })
  )

  it("tool names as labels are bounded, and only names the host served", () => {
    const metrics = Metrics.makeMetrics()
    const envelope = (type: string, data: Record<string, unknown>, sequence: number) =>
      ({
        id: `e${sequence}`,
        type,
        data,
        streamId: "s",
        version: sequence,
        sequence,
        timestamp: sequence,
        schemaVersion: 1,
        metadata: { executorId: "x", host: "h", pid: 1 }
      }) as unknown as EventEnvelope
    let n = 0
    for (let i = 0; i < Metrics.MAX_TOOL_LABELS + 50; i++) {
      metrics.observe(envelope("ToolCallCompleted", { callId: i, tool: `t${i}`, durationMs: 1, resultBytes: 1 }, ++n))
      metrics.observe(
        envelope("ToolCallRefused", { callId: i, tool: `sandbox${i}`, reason: "unknown-tool", message: "no" }, ++n)
      )
    }
    return Effect.runPromise(metrics.text).then((text) => {
      const family = parse(text).get("hermes_sandbox_tool_calls_total")!
      const tools = new Set(family.metrics.map((m) => m.labels?.["tool"]))
      expect(tools.size).toBe(Metrics.MAX_TOOL_LABELS + 1)
      expect(tools.has("other")).toBe(true)
      expect([...tools].some((t) => t?.startsWith("sandbox"))).toBe(false)
      const other = family.metrics.filter((m) => m.labels?.["tool"] === "other")
      expect(Object.fromEntries(other.map((m) => [m.labels?.["outcome"], Number(m.value)]))).toEqual({
        completed: 50,
        refused: Metrics.MAX_TOOL_LABELS + 50
      })
    })
  })
})
