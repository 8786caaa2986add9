/**
 * Property tests of the service on the fake executor: no engine, a few milliseconds a run. The fake
 * does not run Python: each test scripts what "the program" does, and checks what the service makes of it.
 */
import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { DockerUnavailable, ExecutionAborted } from "@hermes-sandbox/core"
import { arbFakeProgram, createFakeExecutor } from "@hermes-sandbox/docker/testing"
import { evaluate } from "./evaluate.js"

describe("evaluate", () => {
  it("sends the expression on stdin and answers with what the program printed", async () => {
    // echoStdin: the scripted program prints its standard input back.
    await using executor = await createFakeExecutor({ program: () => ({ echoStdin: true }) })
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 1 }).filter((s) => s.trim() !== ""),
        async (expression) => {
          expect(await evaluate(executor, expression)).toEqual({ ok: true, value: expression.trim() })
        }
      )
    )
  })

  it("any program that fails is an error carrying stderr's last line, never a value", async () => {
    const failing = arbFakeProgram.filter((p) => p.oom === true || (p.exitCode ?? 0) !== 0)
    await fc.assert(
      fc.asyncProperty(failing, fc.string(), async (program, expression) => {
        await using executor = await createFakeExecutor({ program: () => program })
        const answer = await evaluate(executor, expression)
        const exitCode = program.oom ? 137 : program.exitCode
        const lastLine = (program.stderr ?? "").trim().split("\n").at(-1)
        expect(answer).toEqual({ ok: false, reason: "error", detail: lastLine || `exit code ${exitCode}` })
        // close() (which await using calls too) leaves no sandbox behind.
        await executor.close()
        expect(await executor.alive()).toEqual([])
      })
    )
  })

  it("a program that never answers is a timeout within the budget", async () => {
    await using executor = await createFakeExecutor({ program: () => ({ hang: true }) })
    const started = Date.now()
    expect(await evaluate(executor, "9**9**9", { timeoutMs: 100 })).toMatchObject({ ok: false, reason: "timeout" })
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("a caller's abort reaches the sandbox", async () => {
    await using executor = await createFakeExecutor({ program: () => ({ hang: true }) })
    const answer = evaluate(executor, "1", { signal: AbortSignal.timeout(50) })
    await expect(answer).rejects.toBeInstanceOf(ExecutionAborted)
    expect(await executor.alive()).toEqual([])
  })

  it("an engine that is down is the SDK's typed error, not an answer", async () => {
    await using executor = await createFakeExecutor({ program: () => ({ stdout: "2\n" }) })
    await executor.setFaults({ engineDown: true })
    await expect(evaluate(executor, "1+1")).rejects.toBeInstanceOf(DockerUnavailable)
    await executor.setFaults({})
    expect(await evaluate(executor, "1+1")).toEqual({ ok: true, value: "2" })
  })
})
