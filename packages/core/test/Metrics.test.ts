/**
 * The executor's Prometheus registry (Metrics.ts) on the fake runtime: after a known mix of runs
 * (ok, error exit, OOM, timeout, interrupted, a failed create, tool calls completed, failed and
 * refused, collected files, warm-pool claims) the scraped text parses with a Prometheus parser and
 * its counters and histogram counts equal what the journal's own projection and summary count.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Ref, Scope, Stream, TestClock } from "effect"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { Executor, type ExecutorOptions, Metrics } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, MemoryJournal, Projection } from "@hermes-sandbox/events"

const withExecutor = <A, E>(
  options: ExecutorOptions,
  f: (ctx: {
    executor: Executor.Executor["Type"]
    control: FakeRuntimeControl["Type"]
    journal: Journal.Journal["Type"]
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      Executor.layer({ awaitRemoval: true, ...options }).pipe(
        Layer.provideMerge(FakeRuntime.layer()),
        Layer.provideMerge(MemoryJournal.layer())
      ),
      scope
    )
    const executor = yield* Effect.provide(Executor.Executor, context)
    const control = yield* Effect.provide(FakeRuntimeControl, context)
    const journal = yield* Effect.provide(Journal.Journal, context)
    return yield* f({ executor, control, journal }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

/** Run to its end, the TestClock moved along (the fake's sleeps and the deadline). */
const settle = <A, E>(run: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(Effect.either(run))
    while (fiber.unsafePoll() === null) yield* TestClock.adjust("100 millis")
    return yield* Fiber.join(fiber)
  })

interface Sample {
  readonly labels?: Readonly<Record<string, string>>
  readonly value?: string
  readonly count?: string
  readonly sum?: string
  readonly buckets?: Readonly<Record<string, string>>
}
interface Family {
  readonly name: string
  readonly type: string
  readonly metrics: ReadonlyArray<Sample>
}

const parse = (text: string): ReadonlyMap<string, Family> =>
  new Map((parsePrometheusTextFormat(text) as ReadonlyArray<Family>).map((f) => [f.name, f]))

/** The samples of a family, by their labels' values joined with "/" (in `keys` order). */
const byLabels = (family: Family | undefined, keys: ReadonlyArray<string>, field: "value" | "count") =>
  Object.fromEntries(
    (family?.metrics ?? [])
      .map((m) => [keys.map((k) => m.labels?.[k] ?? "").join("/"), Number(m[field])] as const)
      .filter(([, n]) => n > 0)
  )

/**
 * A labelled histogram's count per label value, read with the same parser. parse-prometheus-text-format
 * 1.1.1 folds a histogram's samples into one, keeping only the buckets of the last label set (their
 * other labels, `_count` and `_sum` dropped), so each label value's lines are parsed alone and its
 * count is its `+Inf` bucket.
 */
const histogramCounts = (text: string, name: string, label: string, values: ReadonlyArray<string>) =>
  Object.fromEntries(
    values
      .map((v) => {
        const lines = text
          .split("\n")
          .filter(
            (l) =>
              l === `# TYPE ${name} histogram` || (l.startsWith(`${name}_bucket{`) && l.includes(`${label}="${v}"`))
          )
        const family = parse(`${lines.join("\n")}\n`).get(name)
        expect(family?.metrics.length).toBe(1)
        return [v, Number(family?.metrics[0]?.buckets?.["+Inf"])] as const
      })
      .filter(([, n]) => n > 0)
  )

const add = (counts: Record<string, number>, key: string, n = 1) => {
  counts[key] = (counts[key] ?? 0) + n
}

describe("Prometheus metrics (fake runtime)", () => {
  it.effect(
    "after a known mix of runs, the scrape parses and its counters and histogram counts are the journal's",
    () =>
      withExecutor(
        { warmPool: { size: 1, languages: ["python"] }, timeoutMs: 5_000 },
        ({ control, executor, journal }) =>
          Effect.gen(function* () {
            while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* TestClock.adjust("1 millis")
            const tools = {
              add: { handler: ({ a, b }: { a: number; b: number }) => a + b },
              boom: {
                handler: () => {
                  throw new Error("boom")
                }
              }
            }
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
            const states = Projection.project(events)
            const summary = Projection.summarize(states)
            const executions = [...states.values()].filter((s) => s.kind === "execution")
            const expected: Record<string, number> = {}
            for (const s of executions) {
              const outcome =
                s.outcome === "exited"
                  ? s.oomKilled === true
                    ? "oom"
                    : s.exitCode === 0
                      ? "ok"
                      : "error"
                  : s.outcome === "timedOut"
                    ? "timeout"
                    : (s.outcome ?? "open")
              add(expected, `${s.language}/${outcome}`)
            }
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

            // Phases: counted from the execution streams' events.
            const execution = new Set(executions.map((s) => s.streamId))
            const phases: Record<string, number> = {}
            for (const e of events) {
              if (!execution.has(e.streamId)) continue
              if (e.type === "ContainerCreated") add(phases, "create"), add(phases, "queue")
              if (e.type === "ContainerClaimed") add(phases, "claim"), add(phases, "queue")
              if (e.type === "ContainerStarted") add(phases, "start")
              if (e.type === "ArtifactsCollected") add(phases, "collect")
            }
            // run: what the summary's durations count (start or claim to the terminal event).
            add(phases, "run", summary.durationMs.count)
            add(
              phases,
              "removal",
              executions.filter((s) => s.finishedAt !== undefined && s.destroyedAt !== undefined).length
            )
            const phaseCounts = histogramCounts(text, "hermes_sandbox_execution_phase_seconds", "phase", Metrics.PHASES)
            expect(phaseCounts).toEqual(phases)
            expect(phases["claim"]).toBeGreaterThanOrEqual(1)
            expect(phases["collect"]).toBe(1)
            expect(families.get("hermes_sandbox_execution_phase_seconds")?.type).toBe("HISTOGRAM")

            // Tool calls: the summary's, a name the host does not serve counted as "other".
            const toolsExpected: Record<string, number> = {}
            for (const [tool, c] of Object.entries(summary.toolCalls)) {
              const label = tool in tools ? tool : "other"
              if (c.completed > 0) add(toolsExpected, `${label}/completed`, c.completed)
              if (c.failed > 0) add(toolsExpected, `${label}/failed`, c.failed)
              if (c.refused > 0) add(toolsExpected, `${label}/refused`, c.refused)
            }
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
            const gauge = (name: string) => Number(families.get(name)?.metrics[0]?.value)
            expect(gauge("hermes_sandbox_in_flight")).toBe(stats.inFlight + stats.removing)
            expect(gauge("hermes_sandbox_queued")).toBe(stats.queued)
            expect(byLabels(families.get("hermes_sandbox_pool_ready"), ["language"], "value")).toEqual(
              Object.fromEntries(Object.entries(stats.warm).filter(([, n]) => n > 0))
            )
            expect(gauge("hermes_sandbox_sessions_open")).toBe(0)
            expect(gauge("hermes_sandbox_leaked_containers_removed_total")).toBe(0)
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
