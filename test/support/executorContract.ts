/**
 * One contract for the Executor's behaviour, written once with the Effect API and run on the fake
 * runtime (executor-contract.fake.test.ts) and on the engine (executor-contract.docker.test.ts,
 * also with a warm pool: pnpm test:pool), as the runtime contract is (runtimeContract.ts).
 *
 * A world says how to build an executor over its runtime and journal, how its programs do a thing
 * and how time passes. What only one side can show stays in that side's suite: fault injection,
 * TestClock precision, gauges and the fake pool in packages/core/test/Executor.test.ts; hardening,
 * outside kills, images, languages and the Promise facade in test/execute.e2e.test.ts.
 */
import { createHash } from "node:crypto"
import { describe, expect } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Layer, Scope } from "effect"
import {
  ContainerNamePrefix,
  type ExecuteOptions,
  type ExecuteRequest,
  Executor,
  type ExecutorOptions,
  Label,
  SandboxRuntime
} from "@hermes-sandbox/core"
import { Journal } from "@hermes-sandbox/events"
import { eventsOf, gone, typesOf } from "./contractChecks.js"
import { type ContractTime, eventually, joinPassing } from "./contractTime.js"

/** What a program does, in the order given here; each world writes it in its own vocabulary. */
export interface Program {
  readonly stdout?: string
  /** Copies its stdin to stdout. */
  readonly echoStdin?: boolean
  /** Prints this file (an absolute path under /workspace). */
  readonly printFile?: string
  /** Then writes this many bytes ("x") to stdout. */
  readonly stdoutBytes?: number
  readonly stderr?: string
  /** Allocates memory until the kernel's OOM killer ends it (run it with a small memory limit). */
  readonly oom?: boolean
  /** Never exits by itself, sleeping. */
  readonly hang?: boolean
  /** Never exits by itself, busy on the CPU. */
  readonly spin?: boolean
  readonly sleepMs?: number
  readonly exitCode?: number
}

export interface ExecutorWorld {
  /** The runtime and journal of one case: its executors run over them, and the checks read them. */
  readonly base: Layer.Layer<SandboxRuntime | Journal.Journal, unknown>
  /** An executor with these options over the base (the world may add its own, e.g. a warm pool). */
  readonly executor: (options: ExecutorOptions) => Layer.Layer<Executor.Executor, unknown, SandboxRuntime | Journal.Journal>
  /** A language every program below is written in. */
  readonly language: string
  readonly program: (program: Program) => string
  readonly time: ContractTime
  /** Executions may claim a pre-started sandbox (other events, the pool's container name). */
  readonly warmPool: boolean
}

const NAME = /^hermes-sandbox-[0-9a-f-]{36}$/
const KiB = 1024

export const executorContract = (name: string, world: ExecutorWorld) => {
  const { time } = world
  const test = time.it

  /** An executor over a fresh base; closed with the case at the latest. */
  const withExecutor = <A, E>(
    options: ExecutorOptions,
    f: (ctx: {
      readonly executor: Executor.Executor["Type"]
      readonly runtime: SandboxRuntime["Type"]
      readonly journal: Journal.Journal["Type"]
      readonly close: Effect.Effect<void>
    }) => Effect.Effect<A, E, Scope.Scope>
  ) =>
    Effect.gen(function*() {
      const base = yield* Layer.build(world.base)
      const scope = yield* Scope.make()
      const close = Scope.close(scope, Exit.void)
      const context = yield* Layer.buildWithScope(world.executor({ awaitRemoval: true, ...options }), scope).pipe(Effect.provide(base))
      return yield* f({
        executor: Context.get(context, Executor.Executor),
        runtime: Context.get(base, SandboxRuntime),
        journal: Context.get(base, Journal.Journal),
        close
      }).pipe(Effect.ensuring(close))
    })

  /** The execution's lifecycle ending with `terminal`: created for it, or (with a pool) claimed. */
  const lifecycles = (terminal: string) => {
    const cold = ["ExecutionRequested", "ContainerCreated", "ContainerStarted", terminal, "ContainerDestroyed"]
    const warm = ["ExecutionRequested", "ContainerClaimed", terminal, "ContainerDestroyed"]
    // With a pool a ready sandbox is claimed; an empty pool (still filling) falls back to the cold path.
    return world.warmPool ? [cold, warm] : [cold]
  }

  /** The container an execution runs in (created for it or claimed), from its journal stream. */
  const containerOf = (journal: Journal.Journal["Type"], executionId: string) =>
    Effect.map(eventsOf(journal, executionId), (events) => {
      for (const e of events) if (e.type === "ContainerCreated" || e.type === "ContainerClaimed") return e.data.containerName
      return undefined
    })

  /** Forks a program that prints "up" and never ends; returns once it printed, with its container. */
  const started = (executor: Executor.Executor["Type"], journal: Journal.Journal["Type"], hooks: ExecuteOptions = {}) =>
    Effect.gen(function*() {
      let up = false
      let executionId = ""
      const fiber = yield* Effect.fork(executor.executeCode(
        { language: world.language, code: world.program({ stdout: "up\n", hang: true }) },
        { ...hooks, onStdout: () => void (up = true), onExecutionId: (id) => void (executionId = id) }
      ))
      yield* eventually(time, "the program printed", Effect.sync(() => up))
      const containerName = yield* containerOf(journal, executionId)
      expect(containerName).toMatch(NAME)
      return { fiber, executionId, containerName: containerName! }
    })

  /** The containers of this executor's executions (its pool's, ready or claimed, left out). */
  const executionContainers = (runtime: SandboxRuntime["Type"], executor: Executor.Executor["Type"]) =>
    Effect.map(runtime.list({ [Label.executor]: executor.executorId }), (all) => all.filter((c) => c.labels[Label.pool] !== "true"))

  describe(`Executor contract: ${name}`, () => {
    test("returns the program's output and exit code in a hermes-sandbox-<uuid v7> container, records the lifecycle and removes the container", () =>
      withExecutor({}, ({ executor, journal, runtime }) =>
        Effect.gen(function*() {
          const r = yield* executor.executeCode({ language: world.language, code: world.program({ stdout: "42\n", stderr: "warn\n", exitCode: 3 }) })
          expect(r).toMatchObject({ exitCode: 3, stdout: "42\n", stderr: "warn\n", timedOut: false, oomKilled: false })
          expect(r.containerName).toMatch(NAME)
          // UUID v7: version nibble 7.
          expect(r.containerName.slice(ContainerNamePrefix.length)[14]).toBe("7")
          // Cold: the name embeds the execution id. Warm: the pooled container's own id.
          if (!world.warmPool) expect(r.containerName).toBe(`${ContainerNamePrefix}${r.executionId}`)
          expect(Date.parse(r.finishedAt)).toBeGreaterThanOrEqual(Date.parse(r.startedAt))
          // awaitRemoval: the container is gone when the result is back.
          expect(yield* gone(runtime, r.containerName)).toBe(true)
          expect(lifecycles("ContainerExited")).toContainEqual(yield* typesOf(journal, r.executionId))
        })), 60_000)

    test("the host-side deadline kills a program that never ends: timedOut, 137, its output so far, ExecutionTimedOut, removed", () =>
      withExecutor({ timeoutMs: 2_000 }, ({ executor, journal, runtime }) =>
        Effect.gen(function*() {
          const t0 = yield* Clock.currentTimeMillis
          const fiber = yield* Effect.fork(executor.executeCode({ language: world.language, code: world.program({ stdout: "partial", spin: true }) }))
          const r = yield* joinPassing(time, fiber)
          const elapsed = (yield* Clock.currentTimeMillis) - t0
          expect(r).toMatchObject({ timedOut: true, exitCode: 137, oomKilled: false, stdout: "partial" })
          expect(elapsed).toBeGreaterThanOrEqual(2_000)
          expect(elapsed).toBeLessThan(2_000 + 5_000)
          expect(yield* gone(runtime, r.containerName)).toBe(true)
          expect(lifecycles("ExecutionTimedOut")).toContainEqual(yield* typesOf(journal, r.executionId))
        })), 60_000)

    test("a per-request timeout overrides the executor's", () =>
      withExecutor({ timeoutMs: 60_000 }, ({ executor }) =>
        Effect.gen(function*() {
          const t0 = yield* Clock.currentTimeMillis
          const fiber = yield* Effect.fork(executor.executeCode({ language: world.language, code: world.program({ hang: true }), timeoutMs: 1_000 }))
          const r = yield* joinPassing(time, fiber)
          expect(r.timedOut).toBe(true)
          expect((yield* Clock.currentTimeMillis) - t0).toBeLessThan(1_000 + 5_000)
        })), 60_000)

    test("an OOM kill is reported as oomKilled with exit 137, not as a timeout", () =>
      withExecutor({}, ({ executor }) =>
        Effect.gen(function*() {
          const r = yield* executor.executeCode({ language: world.language, code: world.program({ oom: true }), memory: "128m" })
          expect(r).toMatchObject({ exitCode: 137, oomKilled: true, timedOut: false })
        })), 60_000)

    test("interrupting an execution removes its container and records ExecutionInterrupted with the caller's reason", () =>
      withExecutor({}, ({ executor, journal, runtime }) =>
        Effect.gen(function*() {
          const { containerName, executionId, fiber } = yield* started(executor, journal, { interruptReason: () => "enough" })
          // Interrupting the caller waits until the container is gone.
          yield* Fiber.interrupt(fiber)
          expect(yield* gone(runtime, containerName)).toBe(true)
          const events = yield* eventsOf(journal, executionId)
          expect(events.find((e) => e.type === "ExecutionInterrupted")?.data).toEqual({ reason: "interrupted by the caller: enough" })
          expect(events.at(-1)?.type).toBe("ContainerDestroyed")
        })), 60_000)

    test("closing the executor interrupts every running execution and removes every container; later calls are ExecutorClosed", () =>
      withExecutor({ timeoutMs: 60_000 }, ({ close, executor, journal, runtime }) =>
        Effect.gen(function*() {
          const running = [yield* started(executor, journal), yield* started(executor, journal), yield* started(executor, journal)]
          expect(new Set(running.map((r) => r.containerName)).size).toBe(3)
          yield* close
          for (const { containerName, executionId, fiber } of running) {
            expect(yield* gone(runtime, containerName)).toBe(true)
            expect(Exit.isInterrupted(yield* Fiber.await(fiber))).toBe(true)
            const events = yield* eventsOf(journal, executionId)
            expect(events.find((e) => e.type === "ExecutionInterrupted")?.data).toEqual({ reason: "executor closed" })
          }
          // Nothing of the executor is left, its pool's sandboxes included.
          expect(yield* runtime.list({ [Label.executor]: executor.executorId })).toEqual([])
          const after = yield* Effect.flip(executor.executeCode({ language: world.language, code: world.program({}) }))
          expect(after._tag).toBe("ExecutorClosed")
        })), 60_000)

    test("rejects invalid requests before any container exists, naming the field, the value and what is allowed", () =>
      withExecutor({}, ({ executor, journal, runtime }) =>
        Effect.gen(function*() {
          const ok = world.program({})
          const cases: Array<[ExecuteRequest, string]> = [
            [{ language: "cobol", code: "" }, "language"],
            [{ language: "fortran", code: ok }, "language"],
            [{ language: world.language, code: ok, timeoutMs: 0 }, "timeoutMs"],
            [{ language: world.language, code: ok, timeoutMs: -5 }, "timeoutMs"],
            [{ language: world.language, code: ok, memory: "1m" }, "memory"],
            [{ language: world.language, code: ok, image: "" }, "image"],
            [{ language: world.language, code: "x".repeat(1024 * 1024 + 1) }, "code"],
            [{ language: world.language, code: ok, files: { "../escape": "x" } }, "files"],
            [{ language: world.language, code: ok, files: { "/etc/passwd": "x" } }, "files"]
          ]
          for (const [request, field] of cases) {
            const error = yield* Effect.flip(executor.executeCode(request))
            expect(error).toMatchObject({ _tag: "InvalidRequest" })
            if (error._tag !== "InvalidRequest") continue
            expect(error.field.startsWith(field)).toBe(true)
            expect(error.message).toContain(field)
            expect(error.allowed.length).toBeGreaterThan(0)
          }
          // Not even requested: no execution stream, no container created or claimed.
          const all = yield* eventsOf(journal)
          expect(all.filter((e) => e.type === "ExecutionRequested" || e.type === "ContainerClaimed" || (e.type === "ContainerCreated" && e.data.pooled !== true)))
            .toEqual([])
          expect(yield* executionContainers(runtime, executor)).toEqual([])
        })), 60_000)

    test("limits concurrency (one container at a time, FIFO); a full queue fails with QueueFull when asked not to wait", () =>
      withExecutor({ maxConcurrency: 1, maxQueue: 1, whenQueueFull: "fail" }, ({ executor, journal }) =>
        Effect.gen(function*() {
          const stats = Effect.map(executor.stats, ({ inFlight, queued, removing }) => ({ inFlight, queued, removing }))
          const first = yield* Effect.fork(executor.executeCode({ language: world.language, code: world.program({ sleepMs: 1_500, stdout: "1" }) }))
          yield* eventually(time, "the first runs", Effect.map(stats, (s) => s.inFlight === 1))
          let secondId = ""
          const second = yield* Effect.fork(executor.executeCode(
            { language: world.language, code: world.program({ sleepMs: 100, stdout: "2" }) },
            { onExecutionId: (id) => void (secondId = id) }
          ))
          yield* eventually(time, "the second waits", Effect.map(stats, (s) => s.queued === 1), 20_000, 1)
          expect(yield* stats).toEqual({ inFlight: 1, removing: 0, queued: 1 })
          if (!world.warmPool) expect((yield* executor.stats).warm).toEqual({})
          const third = yield* Effect.flip(executor.executeCode({ language: world.language, code: world.program({}) }))
          expect(third).toMatchObject({ _tag: "QueueFull", inFlight: 1, queued: 1, maxQueue: 1 })
          // Never more than one container at a time: the waiting one is requested, nothing more.
          expect(yield* typesOf(journal, secondId)).toEqual(["ExecutionRequested"])
          const a = yield* joinPassing(time, first)
          const b = yield* joinPassing(time, second)
          expect([a.stdout, b.stdout]).toEqual(["1", "2"])
          expect(Date.parse(b.startedAt)).toBeGreaterThanOrEqual(Date.parse(a.finishedAt))
          expect(yield* stats).toEqual({ inFlight: 0, removing: 0, queued: 0 })
        })), 60_000)

    test("feeds stdin to the program", () =>
      withExecutor({}, ({ executor }) =>
        Effect.gen(function*() {
          const stdin = "from stdin\nline\u0000two"
          const r = yield* executor.executeCode({ language: world.language, code: world.program({ echoStdin: true }), stdin })
          expect(r).toMatchObject({ exitCode: 0, stdout: stdin })
        })), 60_000)

    test("writes the request's files into /workspace before the program starts", () =>
      withExecutor({}, ({ executor }) =>
        Effect.gen(function*() {
          const r = yield* executor.executeCode({
            language: world.language,
            files: { "data/input.txt": "3\n4\n" },
            code: world.program({ printFile: "/workspace/data/input.txt" })
          })
          expect(r).toMatchObject({ exitCode: 0, stdout: "3\n4\n", stderr: "" })
        })), 60_000)

    test("collect: the files matching the globs come back after the program, with size and sha256, and the journal has their metadata", () =>
      withExecutor({}, ({ executor }) =>
        Effect.gen(function*() {
          const events: Array<{ type: string; data: unknown }> = []
          executor.unsafeSubscribe((e) => events.push(e))
          const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3])
          const r = yield* executor.executeCode({
            language: world.language,
            files: { "in/a.png": png, "in/b.txt": "bee", "other.csv": "x,y\n" },
            code: world.program({}),
            collect: ["in/*.png", "*.csv"]
          })
          expect(r.files?.map((f) => [f.path, f.size, f.mime, Array.from(f.content)])).toEqual([
            ["in/a.png", 11, "image/png", Array.from(png)],
            ["other.csv", 4, "text/csv", Array.from(new TextEncoder().encode("x,y\n"))]
          ])
          expect(r.files?.[0]?.sha256).toBe(createHash("sha256").update(png).digest("hex"))
          expect(r).toMatchObject({ skippedFiles: [], filesTruncated: false, collection: { status: "complete" } })
          const types = events.filter((e) => (e as { streamId?: string }).streamId === r.executionId).map((e) => e.type)
          expect(types.indexOf("ArtifactsCollected")).toBeGreaterThan(0)
          expect(types.indexOf("ArtifactsCollected")).toBe(types.indexOf("ContainerExited") - 1)
        })), 60_000)

    test("caps stdout: bytes past the cap are dropped and flagged, and counted", () =>
      withExecutor({}, ({ executor }) =>
        Effect.gen(function*() {
          const r = yield* executor.executeCode({
            language: world.language,
            outputLimitBytes: 256 * KiB,
            code: world.program({ stdoutBytes: 768 * KiB, stderr: "tail\n" })
          })
          expect(r.stdoutTruncated).toBe(true)
          expect(r.stdout.length).toBe(256 * KiB)
          expect(r.stdoutBytes).toBe(768 * KiB)
          expect(r.stderrTruncated).toBe(false)
          expect(r.stderr).toBe("tail\n")
        })), 60_000)
  })
}
