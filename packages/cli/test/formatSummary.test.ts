/** The text of `events summary`: the facts as before, then tool calls one line per tool. */
import { describe, expect, it } from "vitest"
import type { Summary } from "@hermes-sandbox/events/Projection"
import { formatSummary } from "../src/formatSummary.js"

const summary: Summary = {
  total: 3,
  byOutcome: { exited: 2, timedOut: 1, interrupted: 0, failed: 0, open: 0 },
  durationMs: { count: 3, p50: 40, p95: 90, p99: 90, max: 90 },
  exitCodes: { "0": 2 },
  containersAlive: 0,
  openLifecycles: 0,
  toolCalls: {}
}

const facts = [
  "executions        3",
  "outcomes          exited 2, timedOut 1, interrupted 0, failed 0, open 0",
  "duration (ms)     p50 40, p95 90, p99 90, max 90 (n=3)",
  "exit codes        0: 2",
  "containers alive  0",
  "open lifecycles   0"
]

describe("formatSummary", () => {
  it("no tool calls: a dash", () => {
    expect(formatSummary(summary)).toBe([...facts, "tool calls        -", ""].join("\n"))
  })

  it("tool calls per tool: requested, completed, failed, refused; one tool a line, aligned", () => {
    expect(
      formatSummary({
        ...summary,
        toolCalls: {
          add: { requested: 1, completed: 0, failed: 1, refused: 0 },
          web_search: { requested: 3, completed: 1, failed: 0, refused: 2 }
        }
      })
    ).toBe(
      [
        ...facts,
        "tool calls        add: 1 requested, 0 completed, 1 failed, 0 refused",
        "                  web_search: 3 requested, 1 completed, 0 failed, 2 refused",
        ""
      ].join("\n")
    )
  })
  it("a tool name the sandbox chose is printed neutralized, on its own line (hostile review 2, #5)", () => {
    const text = formatSummary({
      ...summary,
      toolCalls: { "\u001b]0;T\u0007x\ny": { requested: 1, completed: 0, failed: 0, refused: 1 } }
    })
    expect(text).toContain("tool calls        \\x1b]0;T\\x07x\\x0ay: 1 requested, 0 completed, 0 failed, 1 refused\n")
    expect(text).not.toMatch(/[\u001b\u0007]/)
  })
})
