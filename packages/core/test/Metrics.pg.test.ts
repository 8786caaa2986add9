/**
 * The Prometheus counters agree with the journal's own summary on a PostgreSQL journal too (the
 * journal tier: the run's throwaway cluster, a database of this file's own): after a mix of runs on
 * the fake runtime — a warm-pool claim, an error exit, a timeout, tool calls completed, failed and
 * refused — `executor.metrics` counts what Projection.project and summarize count of the rows.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { PostgresJournal } from "@hermes-sandbox/events"
import { createDatabase } from "../../../test/support/postgres.js"
import { byLabels, histogramCounts, journalExpectations, parseFamilies } from "../../../test/support/prometheus.js"
import { Metrics } from "@hermes-sandbox/core"
import { addAndBoom, withFakeExecutor } from "./support/fakeExecutor.js"

describe("Prometheus metrics on a PostgreSQL journal", () => {
  it.live("after a known mix of runs, the counters and phase counts are the journal's", () =>
    withFakeExecutor(
      { warmPool: { size: 1, languages: ["python"] }, timeoutMs: 10_000 },
      ({ executor, journal }) =>
        Effect.gen(function* () {
          while (((yield* executor.stats).warm["python"] ?? 0) < 1) yield* Effect.sleep("10 millis")
          const tools = addAndBoom
          const runs = [
            { language: "python", code: fakeProgram({ stdout: "claimed\n" }) },
            { language: "javascript", code: fakeProgram({ exitCode: 3 }) },
            { language: "bash", code: fakeProgram({ hang: true }), timeoutMs: 300 },
            {
              language: "javascript",
              code: fakeProgram({
                toolCalls: [{ tool: "add", args: { a: 1, b: 2 } }, { tool: "boom" }, { tool: "not_a_host_tool" }]
              }),
              tools
            }
          ] as const
          for (const request of runs) yield* Effect.either(executor.executeCode(request))
          yield* executor.idle

          const text = yield* executor.metrics
          const families = parseFamilies(text)
          const events = [...(yield* Stream.runCollect(journal.read()))]
          const expected = journalExpectations(events, Object.keys(tools))
          expect(expected.executions).toEqual({
            "python/ok": 1,
            "javascript/error": 1,
            "bash/timeout": 1,
            "javascript/ok": 1
          })
          expect(byLabels(families.get("hermes_sandbox_executions_total"), ["language", "outcome"])).toEqual(
            expected.executions
          )
          expect(expected.phases["claim"]).toBe(1)
          expect(histogramCounts(text, "hermes_sandbox_execution_phase_seconds", "phase", Metrics.PHASES)).toEqual(
            expected.phases
          )
          expect(expected.toolCalls).toEqual({ "add/completed": 1, "boom/failed": 1, "other/refused": 1 })
          expect(byLabels(families.get("hermes_sandbox_tool_calls_total"), ["tool", "outcome"])).toEqual(
            expected.toolCalls
          )
        }),
      PostgresJournal.layer({ url: createDatabase("metrics") })
    )
  )
})
