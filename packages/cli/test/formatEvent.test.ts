/** The timeline line of a tagged run names its tags (an MCP call shows its session and tool in `hermes-sandbox events`). */
import { describe, expect, it } from "vitest"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { formatEvent } from "../src/formatEvent.js"

const requested = (data: Record<string, unknown>) => ({
  id: "e",
  sequence: 7,
  streamId: "01a23261-e690-75bb-95e7-a93c6a6de2d8",
  version: 1,
  timestamp: Date.UTC(2026, 11, 1),
  type: "ExecutionRequested",
  schemaVersion: 1,
  metadata: { executorId: "x", host: "h", pid: 1 },
  data: { language: "python", image: "hermes-sandbox/python:latest", codeBytes: 8, timeoutMs: 50000, ...data }
}) as unknown as EventEnvelope

describe("formatEvent", () => {
  it("an execution's tags and session follow its facts", () => {
    expect(formatEvent(requested({ sessionId: "01a2-0000-aaaabbbbcccc", tags: { "mcp.session": "s1", "mcp.tool": "terminal" } }))).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ExecutionRequested    python 8 B code, timeout 50000 ms, image hermes-sandbox/python:latest, session aaaabbbbcccc [mcp.session=s1 mcp.tool=terminal]"
    )
  })
  it("an untagged one is as before", () => {
    expect(formatEvent(requested({}))).toBe("2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ExecutionRequested    python 8 B code, timeout 50000 ms, image hermes-sandbox/python:latest")
  })
})
