/** How a run's output is cut for a result: at most the cap, head and tail of the original, never a split character. */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { headTail, runResult } from "../src/tools/results.js"

describe("headTail", () => {
  it("keeps at most cap bytes of the original: a prefix and a suffix, whole UTF-8 characters, the omitted count marked", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 400 }), fc.integer({ min: 4, max: 300 }), (text, cap) => {
        const { text: out, captured } = headTail(text, cap)
        const total = Buffer.byteLength(text)
        if (total <= cap) {
          expect(out).toBe(text)
          expect(captured).toBe(total)
          return
        }
        expect(captured).toBeLessThanOrEqual(cap)
        const match = /^([\s\S]*)\n\[\.\.\. (\d+) bytes omitted \.\.\.\]\n([\s\S]*)$/.exec(out)
        expect(match).not.toBeNull()
        const [, head, omitted, tail] = match!
        expect(text.startsWith(head!)).toBe(true)
        expect(text.endsWith(tail!)).toBe(true)
        expect(Buffer.byteLength(head!) + Buffer.byteLength(tail!)).toBe(captured)
        expect(Number(omitted)).toBe(total - captured)
        expect(out.includes("\ufffd")).toBe(text.includes("\ufffd"))
      })
    )
  })
})

describe("runResult", () => {
  const base = {
    executionId: "e",
    containerName: "hermes-sandbox-e",
    exitCode: 0,
    stdout: "",
    stderr: "",
    timedOut: false,
    oomKilled: false,
    stdoutTruncated: false,
    stderrTruncated: false,
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: 1500,
    startedAt: "",
    finishedAt: ""
  }
  const caps = { stdoutBytes: 50_000, stderrBytes: 10_000 }
  const context = { timeoutS: 50, maxTimeoutS: 300, killedOnTimeout: "sandbox" } as const
  it("an empty success says so: output is never empty", () => {
    expect(runResult(base, caps, context)).toMatchObject({
      status: "success",
      output: "(no output)",
      duration_seconds: 1.5
    })
  })
  it("the sandbox's own capture cap counts as omitted bytes", () => {
    const r = runResult({ ...base, stdout: "x".repeat(100), stdoutBytes: 5000, stdoutTruncated: true }, caps, context)
    expect(r).toMatchObject({
      stdout_truncated: true,
      stdout_bytes_total: 5000,
      stdout_bytes_captured: 100,
      stdout_bytes_omitted: 4900
    })
  })
  it("a timeout's words name what was killed: execute_code's sandbox, or only terminal's command", () => {
    const timedOut = { ...base, exitCode: 137, timedOut: true }
    expect(runResult(timedOut, caps, context).output).toMatch(/^⏰ Timed out after 50 s: the sandbox was killed/)
    const command = runResult(timedOut, caps, { ...context, killedOnTimeout: "command" }).output
    expect(command).toMatch(/^⏰ Timed out after 50 s: the command was killed, not the session's sandbox/)
    expect(command).not.toMatch(/the sandbox was killed/)
    expect(command).toMatch(/at most 300/)
  })
  it("status: timeout before oom before the exit code", () => {
    expect(runResult({ ...base, exitCode: 137, timedOut: true, oomKilled: true }, caps, context).status).toBe("timeout")
    expect(runResult({ ...base, exitCode: 137, oomKilled: true }, caps, context).status).toBe("oom")
    expect(runResult({ ...base, exitCode: 1 }, caps, context).status).toBe("error")
  })
})
