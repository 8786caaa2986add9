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
  it("ArtifactsCollected: how many files and bytes, what was skipped and why, a cut-short walk", () => {
    const collected = (data: Record<string, unknown>) => ({ ...requested({}), type: "ArtifactsCollected", data }) as unknown as EventEnvelope
    expect(formatEvent(collected({
      files: [{ path: "a.png", size: 1000, sha256: "x", mime: "image/png" }, { path: "b.csv", size: 24, sha256: "y", mime: "text/csv" }],
      skipped: [{ path: "big", size: 1 << 30, reason: "too-large" }, { path: "l", size: 0, reason: "symlink" }, { path: "m", size: 0, reason: "symlink" }],
      truncated: true,
      status: "complete"
    }))).toBe("2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ArtifactsCollected    2 files, 1024 B, 3 skipped (1 too-large, 2 symlink), truncated")
    expect(formatEvent(collected({ files: [], skipped: [], truncated: true, status: "none", reason: "timed-out" }))).toMatch(/ArtifactsCollected {4}0 files, 0 B, truncated, none \(timed-out\)$/)
  })
})
