/**
 * createFakeExecutor is createExecutor's facade over the fake runtime: results mirror the scripted
 * program, deadlines and aborts behave as on the engine, events$ closes every lifecycle and
 * completes on close, close leaves no sandbox, and injected faults reject with the typed errors.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { filter, firstValueFrom, lastValueFrom, toArray } from "rxjs"
import {
  ContainerFailed,
  DockerUnavailable,
  ExecutionAborted,
  ExecutorClosed,
  ImageNotFound,
  InvalidRequest
} from "@hermes-sandbox/core"
import { type EventEnvelope, Projection } from "@hermes-sandbox/events"
import { arbExecuteRequest, arbFakeProgram, createFakeExecutor, fakeProgram } from "../src/testing.js"

const byStream = (events: ReadonlyArray<EventEnvelope>) => {
  const streams = new Map<string, Array<EventEnvelope>>()
  for (const e of events) streams.set(e.streamId, [...(streams.get(e.streamId) ?? []), e])
  return streams
}

describe("createFakeExecutor", () => {
  it("invalid executor options reject with InvalidRequest, as createExecutor's do", async () => {
    await expect(createFakeExecutor({ maxConcurrency: 0 })).rejects.toBeInstanceOf(InvalidRequest)
  })

  it("a result mirrors the code's #!fake program", async () => {
    await using executor = await createFakeExecutor()
    const r = await executor.executeCode({
      language: "python",
      code: fakeProgram({ stdout: "42\n", stderr: "warn\n", exitCode: 3 }),
      stdin: "in"
    })
    expect(r).toMatchObject({
      stdout: "42\n",
      stderr: "warn\n",
      exitCode: 3,
      timedOut: false,
      oomKilled: false,
      stdoutBytes: 3
    })
    expect(r.executionId).not.toBe("")
    const echoed = await executor.executeCode({
      language: "bash",
      code: fakeProgram({ echoStdin: true }),
      stdin: "hello"
    })
    expect(echoed.stdout).toBe("hello")
    const oom = await executor.executeCode({ language: "javascript", code: fakeProgram({ oom: true }) })
    expect(oom).toMatchObject({ exitCode: 137, oomKilled: true })
    // Code without a #!fake line is a program that prints nothing and exits 0.
    expect(await executor.executeCode({ language: "python", code: "print(1)" })).toMatchObject({
      stdout: "",
      exitCode: 0
    })
  })

  it("the program option scripts each request; undefined keeps the code's own line", async () => {
    const seen: Array<string> = []
    await using executor = await createFakeExecutor({
      program: (request) => {
        seen.push(request.code)
        return request.code === "keep" || request.code.startsWith("#!fake")
          ? undefined
          : { stdout: `ran ${request.language}\n` }
      }
    })
    expect((await executor.executeCode({ language: "python", code: "print(6*7)" })).stdout).toBe("ran python\n")
    expect((await executor.executeCode({ language: "bash", code: fakeProgram({ exitCode: 9 }) })).exitCode).toBe(9)
    expect((await executor.executeCode({ language: "bash", code: "keep" })).stdout).toBe("")
    expect(seen).toEqual(["print(6*7)", fakeProgram({ exitCode: 9 }), "keep"])
  })

  it("an error the program option throws rejects the call as itself", async () => {
    await using executor = await createFakeExecutor({
      program: () => {
        throw new RangeError("no script for this")
      }
    })
    await expect(executor.executeCode({ language: "python", code: "x" })).rejects.toThrow(RangeError)
  })

  it("property: the result mirrors any scripted program that ends by itself", async () => {
    await using executor = await createFakeExecutor()
    await fc.assert(
      fc.asyncProperty(arbFakeProgram, fc.string({ maxLength: 50 }), async (program, stdin) => {
        const r = await executor.executeCode({ language: "python", code: fakeProgram(program), stdin })
        expect(r.stdout).toBe(`${program.stdout ?? ""}${program.echoStdin ? stdin : ""}`)
        expect(r.stderr).toBe(program.stderr ?? "")
        expect(r.exitCode).toBe(program.oom ? 137 : (program.exitCode ?? 0))
        expect(r.oomKilled).toBe(program.oom === true)
        expect(r.timedOut).toBe(false)
      }),
      { numRuns: 100 }
    )
    expect(await executor.alive()).toEqual([])
  })

  it("property: any valid request is a result or InvalidRequest, never another error", async () => {
    await using executor = await createFakeExecutor()
    await fc.assert(
      fc.asyncProperty(arbExecuteRequest, async (request) => {
        expect(Object.values(request)).not.toContain(undefined)
        try {
          expect(typeof (await executor.executeCode(request)).exitCode).toBe("number")
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidRequest)
        }
      }),
      { numRuns: 50 }
    )
  })

  it("a deadline kills a hanging program: timedOut, 137, ExecutionTimedOut, the container destroyed", async () => {
    await using executor = await createFakeExecutor({ timeoutMs: 5_000 })
    const events: Array<EventEnvelope> = []
    const subscription = executor.events$.subscribe((e) => events.push(e))
    const started = Date.now()
    const r = await executor.executeCode({
      language: "python",
      code: fakeProgram({ stdout: "partial", hang: true }),
      timeoutMs: 150
    })
    expect(Date.now() - started).toBeGreaterThanOrEqual(140)
    expect(r).toMatchObject({ timedOut: true, exitCode: 137, stdout: "partial" })
    await executor.close()
    subscription.unsubscribe()
    const types = events.filter((e) => e.streamId === r.executionId).map((e) => e.type)
    expect(types).toContain("ExecutionTimedOut")
    expect(types.at(-1) === "ContainerDestroyed" || types.at(-2) === "ContainerDestroyed").toBe(true)
  })

  it("an AbortSignal rejects with ExecutionAborted naming the execution, and removes its sandbox", async () => {
    await using executor = await createFakeExecutor()
    const controller = new AbortController()
    let executionId = ""
    const started = firstValueFrom(executor.events$.pipe(filter((e) => e.type === "ContainerStarted")))
    const running = executor.executeCode(
      { language: "python", code: fakeProgram({ hang: true }) },
      {
        signal: controller.signal,
        onExecutionId: (id) => {
          executionId = id
        }
      }
    )
    await started
    controller.abort(new Error("user pressed stop"))
    const error = await running.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ExecutionAborted)
    expect(error).toMatchObject({ executionId, reason: "user pressed stop" })
    expect(executionId).not.toBe("")
    expect(await executor.alive()).toEqual([])
    await expect(
      executor.executeCode({ language: "python", code: "x" }, { signal: AbortSignal.abort() })
    ).rejects.toBeInstanceOf(ExecutionAborted)
  })

  it("events$ closes every lifecycle with ContainerDestroyed and completes on close", async () => {
    const executor = await createFakeExecutor()
    const all = lastValueFrom(executor.events$.pipe(toArray()))
    const results = await Promise.all([
      executor.executeCode({ language: "python", code: fakeProgram({ stdout: "a" }) }),
      executor.executeCode({ language: "bash", code: fakeProgram({ exitCode: 1 }) }),
      executor.executeCode({ language: "javascript", code: fakeProgram({ hang: true }), timeoutMs: 50 })
    ])
    await executor.close()
    const streams = byStream(await all)
    for (const r of results) {
      const stream = streams.get(r.executionId) ?? []
      expect(Projection.checkLifecycle(stream)).toEqual([])
      expect(stream.map((e) => e.type)).toContain("ContainerDestroyed")
    }
    // Subscribing after close completes at once.
    expect(await lastValueFrom(executor.events$.pipe(toArray()))).toEqual([])
  })

  it("close interrupts running executions, leaves no sandbox, and refuses new calls", async () => {
    const executor = await createFakeExecutor()
    const running = [1, 2, 3].map(() =>
      executor.executeCode({ language: "python", code: fakeProgram({ hang: true }) }).catch((e: unknown) => e)
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect((await executor.stats()).inFlight).toBe(3)
    expect(await executor.alive()).toHaveLength(3)
    await executor.close()
    for (const outcome of await Promise.all(running)) expect(outcome).toBeInstanceOf(ExecutionAborted)
    expect(await executor.alive()).toEqual([])
    expect(await executor.createdCount()).toBe(3)
    await expect(executor.executeCode({ language: "python", code: "x" })).rejects.toBeInstanceOf(ExecutorClosed)
    await executor.close() // idempotent
  })

  it("await using closes the executor", async () => {
    let alive: () => Promise<ReadonlyArray<unknown>>
    {
      await using executor = await createFakeExecutor()
      alive = executor.alive
      void executor.executeCode({ language: "python", code: fakeProgram({ hang: true }) }).catch(() => undefined)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(await alive()).toEqual([])
  })

  it("injected faults reject with the typed errors, and clearing them recovers", async () => {
    await using executor = await createFakeExecutor({ faults: { createFails: true } })
    const run = () => executor.executeCode({ language: "python", code: fakeProgram({ stdout: "ok" }) })
    const createFailed = await run().catch((e: unknown) => e)
    expect(createFailed).toBeInstanceOf(ContainerFailed)
    expect(createFailed).toMatchObject({ operation: "create" })
    await executor.setFaults({ startFails: true })
    await expect(run()).rejects.toMatchObject({ _tag: "ContainerFailed", operation: "start" })
    await executor.setFaults({ engineDown: true })
    await expect(run()).rejects.toBeInstanceOf(DockerUnavailable)
    await executor.setFaults({ missingImages: ["hermes-sandbox/python:latest"] })
    const missing = await executor
      .executeCode({ language: "python", code: "x", image: "hermes-sandbox/python:latest" })
      .catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ImageNotFound)
    await executor.setFaults({})
    expect((await run()).stdout).toBe("ok")
    await expect(executor.executeCode({ language: "cobol", code: "x" })).rejects.toBeInstanceOf(InvalidRequest)
    expect(await executor.alive()).toEqual([])
  })

  it("an engine crash fails the running execution with DockerUnavailable", async () => {
    await using executor = await createFakeExecutor()
    const running = executor
      .executeCode({ language: "python", code: fakeProgram({ hang: true }) })
      .catch((e: unknown) => e)
    await new Promise((resolve) => setTimeout(resolve, 30))
    await executor.crashEngine()
    // Back soon: the execution's removal waits for the engine (up to a minute) before it settles.
    setTimeout(() => void executor.setFaults({}), 50)
    expect(await running).toBeInstanceOf(DockerUnavailable)
    expect(await executor.alive()).toEqual([])
  })

  it("faults in effect from the start: an executor whose engine is down still opens, its calls fail", async () => {
    await using executor = await createFakeExecutor({ faults: { engineDown: true } })
    await expect(executor.executeCode({ language: "python", code: "x" })).rejects.toBeInstanceOf(DockerUnavailable)
    // Cleared before close, which otherwise waits for the engine to confirm the removal.
    await executor.setFaults({})
  })
})
