/**
 * The executor model of packages/core/test/model.test.ts, shorter, on the real engine: real
 * python programs (exit codes, sleeps, hangs, output), aborts, real time, close. No fault
 * injection here (the shared engine is not ours to break: see engine-restart.test.ts), so
 * every outcome is held to the program's own.
 */
import Docker from "dockerode"
import { Context, Effect, Exit, Layer, Runtime, Scope } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Executor } from "@hermes-sandbox/core"
import { DockerExecutor } from "@hermes-sandbox/docker"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"
import {
  commands,
  finish,
  initialModel,
  initialReal,
  type ModelSystem,
  type ProgramSpec
} from "../../packages/core/test/support/executorModel.js"
import { ExecutorLabel, removeContainersOf } from "./support.js"

const docker = new Docker({ socketPath: "/var/run/docker.sock" })

const pythonFor = (program: ProgramSpec): string => {
  switch (program.kind) {
    case "exit":
      return `import sys, time\ntime.sleep(${program.sleepMs / 1000})\nsys.stdout.write(${JSON.stringify(program.stdout)})\nsys.exit(${program.exitCode})\n`
    case "hang":
      return `import sys, time\nsys.stdout.write(${JSON.stringify(program.stdout)})\nsys.stdout.flush()\nwhile True:\n    time.sleep(1)\n`
    case "oom":
      throw new Error("not generated for the real engine")
  }
}

const realSystem = async (options: {
  maxConcurrency: number
  maxQueue: number
  whenQueueFull: "fail" | "wait"
  awaitRemoval: boolean
}) => {
  const runtime = Runtime.defaultRuntime
  return Runtime.runPromise(runtime)(
    Effect.gen(function* () {
      const journalScope = yield* Scope.make()
      const journalContext = yield* Layer.buildWithScope(MemoryJournal.layer(), journalScope)
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        DockerExecutor.layer({ ...options, timeoutMs: 3_000 }).pipe(
          Layer.provide(Layer.succeedContext(journalContext))
        ),
        scope
      )
      const executor = Context.get(context, Executor.Executor)
      const system: ModelSystem = {
        runtime,
        maxConcurrency: options.maxConcurrency,
        executeCode: executor.executeCode,
        stats: executor.stats,
        journal: Context.get(journalContext, Journal.Journal),
        alive: Effect.promise(() =>
          docker.listContainers({ all: true, filters: { label: [`${ExecutorLabel}=${executor.executorId}`] } })
        ).pipe(Effect.map((list) => list.map((c) => `${c.Names[0]} (${c.State})`))),
        advance: (ms) => Effect.sleep(`${ms} millis`),
        settle: () => new Promise((resolve) => setTimeout(resolve, 30)),
        close: Scope.close(scope, Exit.void),
        request: (program, timeoutMs) => ({ language: "python", code: pythonFor(program), timeoutMs })
      }
      return { system, executorId: executor.executorId, dispose: Scope.close(journalScope, Exit.void) }
    })
  )
}

// Sleeps far from the deadlines (3 s default, 2.5 s or 6 s per request), so load cannot flip an outcome.
const program: fc.Arbitrary<ProgramSpec> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("exit" as const),
      exitCode: fc.constantFrom(0, 3, 137),
      sleepMs: fc.constantFrom(0, 300, 12_000),
      stdout: fc.constantFrom("", "out\n", "ünï\n")
    })
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("hang" as const), stdout: fc.constantFrom("", "partial") }) }
)

describe("executor model (real engine, short)", () => {
  it("random executions, aborts, time and close on the engine: no leak, lifecycles closed, results agree with events and programs", async () => {
    const executorIds: Array<string> = []
    let runs = 0
    const t0 = Date.now()
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            maxConcurrency: fc.integer({ min: 1, max: 3 }),
            maxQueue: fc.integer({ min: 0, max: 2 }),
            whenQueueFull: fc.constantFrom("fail" as const, "wait" as const),
            awaitRemoval: fc.boolean()
          }),
          commands(
            {
              program,
              timeoutMs: fc.constantFrom(2_500, 6_000),
              advanceMs: fc.constantFrom(100, 700, 3_500),
              faults: false
            },
            8
          ),
          async (options, cmds) => {
            runs++
            const { dispose, executorId, system } = await realSystem(options)
            executorIds.push(executorId)
            const real = initialReal(system)
            try {
              await fc.asyncModelRun(() => ({ model: initialModel(), real }), cmds)
              await finish(real, { checkDurations: true })
            } finally {
              await Runtime.runPromise(Runtime.defaultRuntime)(dispose)
            }
          }
        ),
        { numRuns: 4, endOnFailure: true }
      )
    } finally {
      await removeContainersOf(executorIds)
    }
    console.log(`executor model (real engine): ${runs} runs in ${Date.now() - t0} ms`)
    expect(runs).toBe(4)
  }, 600_000)
})
