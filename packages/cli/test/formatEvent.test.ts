/** The timeline line of a tagged run names its tags (an MCP call shows its session and tool in `hermes-sandbox events`). */
import { describe, expect, it } from "vitest"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { formatEvent } from "../src/formatEvent.js"

const requested = (data: Record<string, unknown>) =>
  ({
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
    expect(
      formatEvent(
        requested({ sessionId: "01a2-0000-aaaabbbbcccc", tags: { "mcp.session": "s1", "mcp.tool": "terminal" } })
      )
    ).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ExecutionRequested    python 8 B code, timeout 50000 ms, image hermes-sandbox/python:latest, session aaaabbbbcccc [mcp.session=s1 mcp.tool=terminal]"
    )
  })
  it("an untagged one is as before", () => {
    expect(formatEvent(requested({}))).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ExecutionRequested    python 8 B code, timeout 50000 ms, image hermes-sandbox/python:latest"
    )
  })
  it("ArtifactsCollected: how many files and bytes, what was skipped and why, a cut-short walk", () => {
    const collected = (data: Record<string, unknown>) =>
      ({ ...requested({}), type: "ArtifactsCollected", data }) as unknown as EventEnvelope
    expect(
      formatEvent(
        collected({
          files: [
            { path: "a.png", size: 1000, sha256: "x", mime: "image/png" },
            { path: "b.csv", size: 24, sha256: "y", mime: "text/csv" }
          ],
          skipped: [
            { path: "big", size: 1 << 30, reason: "too-large" },
            { path: "l", size: 0, reason: "symlink" },
            { path: "m", size: 0, reason: "symlink" }
          ],
          truncated: true,
          status: "complete"
        })
      )
    ).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ArtifactsCollected    2 files, 1024 B, 3 skipped (1 too-large, 2 symlink), truncated"
    )
    expect(
      formatEvent(collected({ files: [], skipped: [], truncated: true, status: "none", reason: "timed-out" }))
    ).toMatch(/ArtifactsCollected {4}0 files, 0 B, truncated, none \(timed-out\)$/)
  })
  it("the audit trail (recordCode): code and output heads as one JSON-quoted line, at most 200 characters, escapes neutralized", () => {
    const of = (type: string, data: Record<string, unknown>) =>
      ({ ...requested({}), type, data }) as unknown as EventEnvelope
    expect(formatEvent(of("CodeRecorded", { code: 'print("hi")\nx = 1', codeBytes: 17, truncated: false }))).toBe(
      '2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  CodeRecorded          17 B code: "print(\\"hi\\")\\nx = 1"'
    )
    const long = formatEvent(
      of("CodeRecorded", {
        cellId: "0000-1111-aaaabbbbcccc",
        code: "y".repeat(65536),
        codeBytes: 10 << 20,
        truncated: true
      })
    )
    expect(long).toContain(`cell aaaabbbbcccc, ${10 << 20} B code (head recorded): "${"y".repeat(199)}…`)
    expect(long.length).toBeLessThan(400)
    const output = formatEvent(
      of("OutputRecorded", {
        stdout: "\u001b[31mred\n",
        stderr: "x".repeat(16384),
        stdoutBytes: 9,
        stderrBytes: 1 << 30,
        truncated: true
      })
    )
    // No raw escape reaches the terminal, and the flood prints as 200 characters.
    expect(output).not.toContain("\u001b")
    expect(output).toMatch(/OutputRecorded {8}stdout 9 B ".*red\\n", stderr 1073741824 B "x{199}… \(heads recorded\)$/)
  })
  it("tool calls: one line each with the call, its tool, the sizes, the duration and why it failed or was refused", () => {
    const call = (type: string, data: Record<string, unknown>) =>
      ({ ...requested({}), type, data }) as unknown as EventEnvelope
    const prefix = (type: string) => `2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ${type.padEnd(20)}  `
    const sha = "1a2b3c4d5e6f".padEnd(64, "0")
    expect(
      formatEvent(call("ToolCallRequested", { callId: 1, tool: "web_search", argumentBytes: 15, argumentsSha256: sha }))
    ).toBe(`${prefix("ToolCallRequested")}call 1 web_search, 15 B arguments (sha256 1a2b3c4d5e6f)`)
    // Recorded arguments (opted in) follow, on the same line, cut after 120 characters.
    expect(
      formatEvent(
        call("ToolCallRequested", {
          callId: 2,
          tool: "add",
          argumentBytes: 13,
          argumentsSha256: sha,
          arguments: { a: 1, b: "x\ny" }
        })
      )
    ).toBe(`${prefix("ToolCallRequested")}call 2 add, 13 B arguments (sha256 1a2b3c4d5e6f) {"a":1,"b":"x\\ny"}`)
    const long = formatEvent(
      call("ToolCallRequested", {
        callId: 3,
        tool: "t",
        argumentBytes: 1000,
        argumentsSha256: sha,
        arguments: { q: "q".repeat(1000) }
      })
    )
    expect(long).toMatch(/ \{"q":"q+…$/)
    expect(long.length).toBeLessThan(prefix("ToolCallRequested").length + 200)
    expect(
      formatEvent(call("ToolCallCompleted", { callId: 1, tool: "web_search", durationMs: 3, resultBytes: 120 }))
    ).toBe(`${prefix("ToolCallCompleted")}call 1 web_search, 120 B result after 3 ms`)
    expect(
      formatEvent(
        call("ToolCallFailed", {
          callId: 1,
          tool: "web_search",
          durationMs: 60000,
          reason: "timed-out",
          message: "no answer\r\n  in 60 s\n"
        })
      )
    ).toBe(`${prefix("ToolCallFailed")}call 1 web_search timed-out after 60000 ms: no answer in 60 s`)
    expect(
      formatEvent(
        call("ToolCallRefused", { callId: 4, tool: "nope", reason: "unknown-tool", message: "no tool named nope" })
      )
    ).toBe(`${prefix("ToolCallRefused")}call 4 nope refused (unknown-tool): no tool named nope`)
  })
  it("names the sandbox or an MCP client chose never reach the terminal as controls or as lines of their own (hostile review 2, #5)", () => {
    const call = (type: string, data: Record<string, unknown>) =>
      ({ ...requested({}), type, data }) as unknown as EventEnvelope
    const hostile = "\u001b]0;PWNED\u0007\u001b[2J\u001b[31mX\n2026-12-01T00:00:00.000Z  #     8  forged\u202e"
    const line = formatEvent(
      call("ToolCallRefused", { callId: 1, tool: hostile, reason: "unknown-tool", message: "no tool" })
    )
    expect(line).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  ToolCallRefused       call 1 \\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mX\\x0a2026-12-01T00:00:00.000Z  #     8  forged\\u202e refused (unknown-tool): no tool"
    )
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/)
    const tagged = formatEvent(requested({ tags: { "mcp.client_name": "\u001b[2Jevil\r\nclient" } }))
    expect(tagged).toContain("[mcp.client_name=\\x1b[2Jevil\\x0aclient]")
    expect(tagged.split("\n")).toHaveLength(1)
  })
  it("a session's kernel events: the kernel's start, a cell's facts (sizes and types, never code or data), its end", () => {
    const ev = (type: string, data: Record<string, unknown>) =>
      ({ ...requested({}), type, data }) as unknown as EventEnvelope
    const k = "01a24263-0000-7000-8000-0000kernel001"
    expect(
      formatEvent(
        ev("KernelStarted", {
          kernelId: k,
          generation: 2,
          language: "python",
          startMs: 412,
          preload: ["pandas", "nosuch"],
          preloadFailed: ["nosuch"]
        })
      )
    ).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  KernelStarted         kernel 000kernel001 #2 ready in 412 ms, preload pandas nosuch (failed: nosuch)"
    )
    expect(
      formatEvent(
        ev("CellExecuted", {
          cellId: "01a24263-0000-7000-8000-000000cell01",
          kernelId: k,
          executionCount: 3,
          status: "timeout",
          durationMs: 1500,
          timeoutMs: 1500,
          codeBytes: 40,
          codeSha256: "ab",
          stdoutBytes: 5000,
          stderrBytes: 0,
          stdoutTruncated: true,
          stderrTruncated: false,
          outputs: [
            {
              kind: "display",
              mime: [
                { type: "image/png", bytes: 100 },
                { type: "text/plain", bytes: 20 }
              ]
            },
            { kind: "result", mime: [{ type: "text/plain", bytes: 3 }] }
          ],
          outputsOmitted: 0,
          displaysOmitted: 2,
          stateLost: true,
          oomKilled: false,
          toolCallsMade: 0
        })
      )
    ).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  CellExecuted          cell 000000cell01 [3] timeout after 1500 ms, 40 B code, stdout 5000 B (truncated), stderr 0 B, 2 outputs (image/png text/plain), 2 omitted, state lost"
    )
    expect(
      formatEvent(
        ev("KernelRestarted", {
          kernelId: k,
          generation: 2,
          reason: "crashed",
          signal: 9,
          oomKilled: true,
          cellId: "c"
        })
      )
    ).toBe(
      "2026-12-01T00:00:00.000Z  #     7  a93c6a6de2d8  KernelRestarted       kernel 000kernel001 #2 ended (crashed), signal 9, OOM killed under cell c"
    )
  })
})
