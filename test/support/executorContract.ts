/**
 * One contract for the Executor's behaviour, written once with the Effect API and run on the fake
 * runtime (executor-contract.fake.test.ts) and on the engine (executor-contract.docker.test.ts,
 * also with a warm pool: the engine-pool project), as the runtime contract is (runtimeContract.ts).
 *
 * A world says how to build an executor over its runtime and journal, how its programs do a thing
 * and how time passes. What only one side can show stays in that side's suite: fault injection,
 * TestClock precision, gauges and the fake pool in packages/core/test/Executor.test.ts; hardening,
 * outside kills, images, languages and the Promise facade in test/execute.e2e.test.ts; the tool
 * channel's attacks, its modules and every language in test/tools.e2e.test.ts.
 */
import { createHash } from "node:crypto"
import { describe, expect } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { ContainerNamePrefix, Label } from "@hermes-sandbox/core/Labels"
import {
  type ExecuteOptions,
  type ExecuteRequest,
  Executor,
  type ExecutorOptions,
  SandboxRuntime,
  type ToolContext,
  type Tools
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
  /**
   * Then calls host tools and prints one line per call, in call order: `0 <the result's JSON>`
   * (compact), `1 <the tool error's message>` or `2 <the refusal's message>`.
   */
  readonly toolCalls?: ReadonlyArray<ProgramToolCall>
  /** The calls all at once (threads), their lines printed once all are answered. */
  readonly toolCallsConcurrently?: boolean
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

export interface ProgramToolCall {
  readonly tool: string
  /** Sent as compact JSON; `{}` without args or rawArgs. */
  readonly args?: unknown
  /** The argument bytes as they are (UTF-8). */
  readonly rawArgs?: string
  /** The whole request ("<tool>\n<arguments>") padded with spaces to this many bytes. */
  readonly size?: number
}

/**
 * `toolCalls` in Python, for a world that runs real code: a call with only `args` goes through the
 * generated `hermes_tools` module (its result re-encoded compactly, as JSON.stringify writes it);
 * `rawArgs` or `size` speak the channel's socket directly, so the bytes sent are exactly those.
 */
export const pythonToolCalls = (p: Program): ReadonlyArray<string> => {
  if (p.toolCalls === undefined || p.toolCalls.length === 0) return []
  const s = JSON.stringify
  const literal = (value: unknown) => (value === undefined ? "None" : `json.loads(${s(s(value))})`)
  const calls = p.toolCalls.map(
    (c) =>
      `lambda: _call(${s(c.tool)}, ${literal(c.args)}, ${c.rawArgs === undefined ? "None" : s(c.rawArgs)}, ${c.size ?? "None"})`
  )
  return [
    // What was printed before is out before a call that may never end.
    "sys.stdout.flush()",
    "import json, os, socket, threading",
    "def _call(name, args, raw, size):",
    "    if raw is None and size is None:",
    "        import hermes_tools",
    "        try:",
    "            return '0 ' + json.dumps(hermes_tools.call_tool(name, args), separators=(',', ':'), ensure_ascii=False)",
    "        except hermes_tools.ToolRefused as e:",
    "            return '2 ' + str(e)",
    "        except hermes_tools.ToolError as e:",
    "            return '1 ' + str(e)",
    "    body = raw if raw is not None else json.dumps(args if args is not None else {}, separators=(',', ':'), ensure_ascii=False)",
    "    request = name.encode() + b'\\n' + body.encode()",
    "    if size is not None and size > len(request):",
    "        request += b' ' * (size - len(request))",
    "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
    "    s.connect(os.environ['HERMES_TOOLS_SOCKET'])",
    "    try:",
    "        s.sendall(request)",
    "        s.shutdown(socket.SHUT_WR)",
    "    except OSError:",
    "        pass",
    "    reply = b''",
    "    while True:",
    "        chunk = s.recv(65536)",
    "        if not chunk:",
    "            break",
    "        reply += chunk",
    "    s.close()",
    "    return reply[:1].decode() + ' ' + reply[1:].decode('utf-8', 'replace')",
    `_calls = [${calls.join(", ")}]`,
    ...(p.toolCallsConcurrently
      ? [
          "_lines = [None] * len(_calls)",
          "def _run(i):",
          "    _lines[i] = _calls[i]()",
          "_threads = [threading.Thread(target=_run, args=(i,)) for i in range(len(_calls))]",
          "for t in _threads: t.start()",
          "for t in _threads: t.join()",
          "for line in _lines: sys.stdout.write(line + '\\n')"
        ]
      : ["for f in _calls:", "    sys.stdout.write(f() + '\\n')", "    sys.stdout.flush()"]),
    "sys.stdout.flush()"
  ]
}

export interface ExecutorWorld {
  /** The runtime and journal of one case: its executors run over them, and the checks read them. */
  readonly base: Layer.Layer<SandboxRuntime | Journal.Journal, unknown>
  /** An executor with these options over the base (the world may add its own, e.g. a warm pool). */
  readonly executor: (
    options: ExecutorOptions
  ) => Layer.Layer<Executor.Executor, unknown, SandboxRuntime | Journal.Journal>
  /** A language every program below is written in. */
  readonly language: string
  readonly program: (program: Program) => string
  readonly time: ContractTime
  /** Executions may claim a pre-started sandbox (other events, the pool's container name). */
  readonly warmPool: boolean
}

const NAME = /^hermes-sandbox-[0-9a-f-]{36}$/
const KiB = 1024

/** A tool that adds two numbers (the schema the refusals are checked against). */
const addTool = {
  description: "Adds two numbers",
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  handler: ({ a, b }: { a: number; b: number }) => a + b
}

/** A ToolCall* event's data, loosely: the checks read the fields each type has. */
interface ToolEvent {
  readonly type: string
  readonly data: {
    readonly callId: number
    readonly tool: string
    readonly reason?: string
    readonly message?: string
    readonly argumentBytes?: number
    readonly argumentsSha256?: string
    readonly arguments?: unknown
    readonly resultBytes?: number
    readonly durationMs?: number
  }
}

const toolEventsOf = (journal: Journal.Journal["Type"], executionId: string) =>
  Effect.map(
    eventsOf(journal, executionId),
    (events) => events.filter((e) => e.type.startsWith("ToolCall")) as unknown as ReadonlyArray<ToolEvent>
  )

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
    Effect.gen(function* () {
      const base = yield* Layer.build(world.base)
      const scope = yield* Scope.make()
      const close = Scope.close(scope, Exit.void)
      const context = yield* Layer.buildWithScope(world.executor({ awaitRemoval: true, ...options }), scope).pipe(
        Effect.provide(base)
      )
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
      for (const e of events)
        if (e.type === "ContainerCreated" || e.type === "ContainerClaimed") return e.data.containerName
      return undefined
    })

  /** Forks a program that prints "up" and never ends; returns once it printed, with its container. */
  const started = (executor: Executor.Executor["Type"], journal: Journal.Journal["Type"], hooks: ExecuteOptions = {}) =>
    Effect.gen(function* () {
      let up = false
      let executionId = ""
      const fiber = yield* Effect.fork(
        executor.executeCode(
          { language: world.language, code: world.program({ stdout: "up\n", hang: true }) },
          { ...hooks, onStdout: () => void (up = true), onExecutionId: (id) => void (executionId = id) }
        )
      )
      yield* eventually(
        time,
        "the program printed",
        Effect.sync(() => up)
      )
      const containerName = yield* containerOf(journal, executionId)
      expect(containerName).toMatch(NAME)
      return { fiber, executionId, containerName: containerName! }
    })

  /** The containers of this executor's executions (its pool's, ready or claimed, left out). */
  const executionContainers = (runtime: SandboxRuntime["Type"], executor: Executor.Executor["Type"]) =>
    Effect.map(runtime.list({ [Label.executor]: executor.executorId }), (all) =>
      all.filter((c) => c.labels[Label.pool] !== "true")
    )

  describe(`Executor contract: ${name}`, () => {
    test(
      "returns the program's output and exit code in a hermes-sandbox-<uuid v7> container, records the lifecycle and removes the container",
      () =>
        withExecutor({}, ({ executor, journal, runtime }) =>
          Effect.gen(function* () {
            const r = yield* executor.executeCode({
              language: world.language,
              code: world.program({ stdout: "42\n", stderr: "warn\n", exitCode: 3 })
            })
            expect(r).toMatchObject({
              exitCode: 3,
              stdout: "42\n",
              stderr: "warn\n",
              timedOut: false,
              oomKilled: false
            })
            expect(r.containerName).toMatch(NAME)
            // UUID v7: version nibble 7.
            expect(r.containerName.slice(ContainerNamePrefix.length)[14]).toBe("7")
            // Cold: the name embeds the execution id. Warm: the pooled container's own id.
            if (!world.warmPool) expect(r.containerName).toBe(`${ContainerNamePrefix}${r.executionId}`)
            expect(Date.parse(r.finishedAt)).toBeGreaterThanOrEqual(Date.parse(r.startedAt))
            // awaitRemoval: the container is gone when the result is back.
            expect(yield* gone(runtime, r.containerName)).toBe(true)
            expect(lifecycles("ContainerExited")).toContainEqual(yield* typesOf(journal, r.executionId))
          })
        ),
      60_000
    )

    test(
      "the host-side deadline kills a program that never ends: timedOut, 137, its output so far, ExecutionTimedOut, removed",
      () =>
        withExecutor({ timeoutMs: 2_000 }, ({ executor, journal, runtime }) =>
          Effect.gen(function* () {
            const t0 = yield* Clock.currentTimeMillis
            const fiber = yield* Effect.fork(
              executor.executeCode({ language: world.language, code: world.program({ stdout: "partial", spin: true }) })
            )
            const r = yield* joinPassing(time, fiber)
            const elapsed = (yield* Clock.currentTimeMillis) - t0
            expect(r).toMatchObject({ timedOut: true, exitCode: 137, oomKilled: false, stdout: "partial" })
            expect(elapsed).toBeGreaterThanOrEqual(2_000)
            expect(yield* gone(runtime, r.containerName)).toBe(true)
            expect(lifecycles("ExecutionTimedOut")).toContainEqual(yield* typesOf(journal, r.executionId))
            // The deadline ends the program on time: from its start to its recorded timeout. (Creating
            // and removing its container, which a loaded machine slows, are not the deadline's.)
            const events = yield* eventsOf(journal, r.executionId)
            const startedAt = events.find(
              (e) => e.type === "ContainerStarted" || e.type === "ContainerClaimed"
            )!.timestamp
            const timedOutAt = events.find((e) => e.type === "ExecutionTimedOut")!.timestamp
            expect(timedOutAt - startedAt).toBeLessThan(2_000 + 5_000)
          })
        ),
      60_000
    )

    test(
      "a per-request timeout overrides the executor's",
      () =>
        withExecutor({ timeoutMs: 60_000 }, ({ executor }) =>
          Effect.gen(function* () {
            const t0 = yield* Clock.currentTimeMillis
            const fiber = yield* Effect.fork(
              executor.executeCode({ language: world.language, code: world.program({ hang: true }), timeoutMs: 1_000 })
            )
            const r = yield* joinPassing(time, fiber)
            expect(r.timedOut).toBe(true)
            // Its 1 s ended the run (timed from the sandbox's start: a cold create on a loaded
            // cluster alone took 5 s in ci47), and the whole call was nowhere near the executor's 60 s.
            expect(r.durationMs).toBeLessThan(1_000 + 5_000)
            expect((yield* Clock.currentTimeMillis) - t0).toBeLessThan(30_000)
          })
        ),
      60_000
    )

    test(
      "an OOM kill is reported as oomKilled with exit 137, not as a timeout",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
            const r = yield* executor.executeCode({
              language: world.language,
              code: world.program({ oom: true }),
              memory: "128m"
            })
            expect(r).toMatchObject({ exitCode: 137, oomKilled: true, timedOut: false })
          })
        ),
      60_000
    )

    test(
      "interrupting an execution removes its container and records ExecutionInterrupted with the caller's reason",
      () =>
        withExecutor({}, ({ executor, journal, runtime }) =>
          Effect.gen(function* () {
            const { containerName, executionId, fiber } = yield* started(executor, journal, {
              interruptReason: () => "enough"
            })
            // Interrupting the caller waits until the container is gone.
            yield* Fiber.interrupt(fiber)
            expect(yield* gone(runtime, containerName)).toBe(true)
            const events = yield* eventsOf(journal, executionId)
            expect(events.find((e) => e.type === "ExecutionInterrupted")?.data).toEqual({
              reason: "interrupted by the caller: enough"
            })
            expect(events.at(-1)?.type).toBe("ContainerDestroyed")
          })
        ),
      60_000
    )

    test(
      "closing the executor interrupts every running execution and removes every container; later calls are ExecutorClosed",
      () =>
        withExecutor({ timeoutMs: 60_000 }, ({ close, executor, journal, runtime }) =>
          Effect.gen(function* () {
            const running = [
              yield* started(executor, journal),
              yield* started(executor, journal),
              yield* started(executor, journal)
            ]
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
            const after = yield* Effect.flip(
              executor.executeCode({ language: world.language, code: world.program({}) })
            )
            expect(after._tag).toBe("ExecutorClosed")
          })
        ),
      60_000
    )

    test(
      "rejects invalid requests before any container exists, naming the field, the value and what is allowed",
      () =>
        withExecutor({}, ({ executor, journal, runtime }) =>
          Effect.gen(function* () {
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
            expect(
              all.filter(
                (e) =>
                  e.type === "ExecutionRequested" ||
                  e.type === "ContainerClaimed" ||
                  (e.type === "ContainerCreated" && e.data.pooled !== true)
              )
            ).toEqual([])
            expect(yield* executionContainers(runtime, executor)).toEqual([])
          })
        ),
      60_000
    )

    test(
      "limits concurrency (one container at a time, FIFO); a full queue fails with QueueFull when asked not to wait",
      () =>
        withExecutor({ maxConcurrency: 1, maxQueue: 1, whenQueueFull: "fail" }, ({ executor, journal }) =>
          Effect.gen(function* () {
            const stats = Effect.map(executor.stats, ({ inFlight, queued, removing }) => ({
              inFlight,
              queued,
              removing
            }))
            const first = yield* Effect.fork(
              executor.executeCode({ language: world.language, code: world.program({ sleepMs: 1_500, stdout: "1" }) })
            )
            yield* eventually(
              time,
              "the first runs",
              Effect.map(stats, (s) => s.inFlight === 1)
            )
            let secondId = ""
            const second = yield* Effect.fork(
              executor.executeCode(
                { language: world.language, code: world.program({ sleepMs: 100, stdout: "2" }) },
                { onExecutionId: (id) => void (secondId = id) }
              )
            )
            yield* eventually(
              time,
              "the second waits",
              Effect.map(stats, (s) => s.queued === 1),
              20_000,
              1
            )
            expect(yield* stats).toEqual({ inFlight: 1, removing: 0, queued: 1 })
            if (!world.warmPool) expect((yield* executor.stats).warm).toEqual({})
            const third = yield* Effect.flip(
              executor.executeCode({ language: world.language, code: world.program({}) })
            )
            expect(third).toMatchObject({ _tag: "QueueFull", inFlight: 1, queued: 1, maxQueue: 1 })
            // Never more than one container at a time: the waiting one is requested, nothing more.
            expect(yield* typesOf(journal, secondId)).toEqual(["ExecutionRequested"])
            const a = yield* joinPassing(time, first)
            const b = yield* joinPassing(time, second)
            expect([a.stdout, b.stdout]).toEqual(["1", "2"])
            expect(Date.parse(b.startedAt)).toBeGreaterThanOrEqual(Date.parse(a.finishedAt))
            expect(yield* stats).toEqual({ inFlight: 0, removing: 0, queued: 0 })
          })
        ),
      60_000
    )

    test(
      "feeds stdin to the program",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
            const stdin = "from stdin\nline\u0000two"
            const r = yield* executor.executeCode({
              language: world.language,
              code: world.program({ echoStdin: true }),
              stdin
            })
            expect(r).toMatchObject({ exitCode: 0, stdout: stdin })
          })
        ),
      60_000
    )

    test(
      "writes the request's files into /workspace before the program starts",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
            const r = yield* executor.executeCode({
              language: world.language,
              files: { "data/input.txt": "3\n4\n" },
              code: world.program({ printFile: "/workspace/data/input.txt" })
            })
            expect(r).toMatchObject({ exitCode: 0, stdout: "3\n4\n", stderr: "" })
          })
        ),
      60_000
    )

    test(
      "collect: the files matching the globs come back after the program, with size and sha256, and the journal has their metadata",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
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
            const types = events
              .filter((e) => (e as { streamId?: string }).streamId === r.executionId)
              .map((e) => e.type)
            expect(types.indexOf("ArtifactsCollected")).toBeGreaterThan(0)
            expect(types.indexOf("ArtifactsCollected")).toBe(types.indexOf("ContainerExited") - 1)
          })
        ),
      60_000
    )

    test(
      "caps stdout: bytes past the cap are dropped and flagged, and counted",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
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
          })
        ),
      60_000
    )

    // ---- tool calls from the code: served, refused, failed, budgeted, journaled, cut by the deadline

    test(
      "tool calls: the handler serves each call (told the execution and the call) and its result reaches the code; toolCallsMade counts them",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
            const seen: Array<Omit<ToolContext, "signal"> & { readonly aborted: boolean }> = []
            const tools: Tools = {
              add: {
                ...addTool,
                handler: ({ a, b }: { a: number; b: number }, { callId, executionId, signal, tool }: ToolContext) => {
                  seen.push({ callId, executionId, tool, aborted: signal.aborted })
                  return { sum: a + b }
                }
              }
            }
            const r = yield* executor.executeCode({
              language: world.language,
              tools,
              code: world.program({
                stdout: "before\n",
                toolCalls: [
                  { tool: "add", args: { a: 1, b: 2 } },
                  { tool: "add", args: { a: 40, b: 2 } }
                ]
              })
            })
            expect(r).toMatchObject({
              exitCode: 0,
              timedOut: false,
              stdout: 'before\n0 {"sum":3}\n0 {"sum":42}\n',
              stderr: "",
              toolCallsMade: 2
            })
            expect(r.stdoutBytes).toBe(r.stdout.length)
            expect(seen).toEqual([
              { callId: 1, executionId: r.executionId, tool: "add", aborted: false },
              { callId: 2, executionId: r.executionId, tool: "add", aborted: false }
            ])
          })
        ),
      60_000
    )

    test(
      "tool calls: an unknown tool, arguments against the schema and arguments that are not JSON are refused (status 2) without running a handler",
      () =>
        withExecutor({}, ({ executor, journal }) =>
          Effect.gen(function* () {
            let ran = 0
            const tools: Tools = { add: { ...addTool, handler: () => ++ran } }
            const r = yield* executor.executeCode({
              language: world.language,
              tools,
              code: world.program({
                toolCalls: [
                  { tool: "nope" },
                  { tool: "add", args: { a: "one", b: 2 } },
                  { tool: "add", rawArgs: "{not json" }
                ]
              })
            })
            const lines = r.stdout.split("\n")
            expect(lines[0]).toBe('2 no tool named "nope" is available to this run (tools: add)')
            expect(lines[1]).toMatch(/^2 invalid arguments for add: /)
            expect(lines[2]).toBe("2 the arguments of add are not JSON")
            expect(lines.slice(3)).toEqual([""])
            expect(r).toMatchObject({ exitCode: 0, toolCallsMade: 0 })
            expect(ran).toBe(0)
            const refused = (yield* toolEventsOf(journal, r.executionId)).filter((e) => e.type === "ToolCallRefused")
            expect(refused.map((e) => [e.data.callId, e.data.reason])).toEqual([
              [1, "unknown-tool"],
              [2, "invalid-arguments"],
              [3, "invalid-arguments"]
            ])
          })
        ),
      60_000
    )

    test(
      "tool calls: a request over the argument limit is refused as too large (status 2), its bytes never reaching the host",
      () =>
        withExecutor({}, ({ executor, journal }) =>
          Effect.gen(function* () {
            const r = yield* executor.executeCode({
              language: world.language,
              tools: { add: addTool },
              toolLimits: { maxArgumentBytes: 1024 },
              code: world.program({
                toolCalls: [
                  { tool: "add", size: 4096 },
                  { tool: "add", args: { a: 1, b: 1 } }
                ]
              })
            })
            // A request of 4096 bytes: "add", its newline and 4092 bytes of arguments.
            expect(r.stdout).toBe(
              "2 the arguments of 4092 bytes exceed the limit of 1024 bytes (maxArgumentBytes)\n0 2\n"
            )
            expect(r.toolCallsMade).toBe(1)
            const events = yield* toolEventsOf(journal, r.executionId)
            expect(events[0]).toMatchObject({
              type: "ToolCallRequested",
              data: { callId: 1, tool: "add", argumentBytes: 4092 }
            })
            // Never read, so never hashed.
            expect(events[0]?.data.argumentsSha256).toBeUndefined()
            expect(events[1]).toMatchObject({
              type: "ToolCallRefused",
              data: { callId: 1, reason: "arguments-too-large" }
            })
          })
        ),
      60_000
    )

    test(
      "tool calls: a handler's throw or rejection reaches the code as a tool error (status 1) with its message, never a stack",
      () =>
        withExecutor({}, ({ executor, journal }) =>
          Effect.gen(function* () {
            const tools: Tools = {
              fail: {
                handler: () => {
                  throw new Error("the upstream said no")
                }
              },
              reject: { handler: () => Promise.reject(new Error("not today")) }
            }
            const r = yield* executor.executeCode({
              language: world.language,
              tools,
              code: world.program({ toolCalls: [{ tool: "fail" }, { tool: "reject" }] })
            })
            expect(r).toMatchObject({ exitCode: 0, stdout: "1 the upstream said no\n1 not today\n", toolCallsMade: 2 })
            const failed = (yield* toolEventsOf(journal, r.executionId)).filter((e) => e.type === "ToolCallFailed")
            expect(failed.map((e) => [e.data.callId, e.data.tool, e.data.reason, e.data.message])).toEqual([
              [1, "fail", "error", "the upstream said no"],
              [2, "reject", "error", "not today"]
            ])
          })
        ),
      60_000
    )

    test(
      "tool calls: the budget (maxCalls) counts served calls only; a call past it is refused (status 2) and toolCallsMade stops at it",
      () =>
        withExecutor({}, ({ executor, journal }) =>
          Effect.gen(function* () {
            const r = yield* executor.executeCode({
              language: world.language,
              tools: { add: addTool },
              toolLimits: { maxCalls: 2 },
              code: world.program({
                toolCalls: [
                  { tool: "add", args: { a: 1, b: 1 } },
                  { tool: "nope" },
                  { tool: "add", args: { a: 2, b: 2 } },
                  { tool: "add", args: { a: 3, b: 3 } }
                ]
              })
            })
            expect(r.stdout.split("\n")).toEqual([
              "0 2",
              '2 no tool named "nope" is available to this run (tools: add)',
              "0 4",
              "2 tool call limit reached (2 calls per execution); no more tool calls are served in this run",
              ""
            ])
            expect(r.toolCallsMade).toBe(2)
            const outcomes = (yield* toolEventsOf(journal, r.executionId)).filter((e) => e.type !== "ToolCallRequested")
            expect(outcomes.map((e) => [e.type, e.data.callId, e.data.reason])).toEqual([
              ["ToolCallCompleted", 1, undefined],
              ["ToolCallRefused", 2, "unknown-tool"],
              ["ToolCallCompleted", 3, undefined],
              ["ToolCallRefused", 4, "budget-exhausted"]
            ])
          })
        ),
      60_000
    )

    test(
      "tool calls: the journal holds exactly the calls made, each requested (size, sha256, the arguments when asked) then settled once, between the start and the end",
      () =>
        withExecutor({}, ({ executor, journal }) =>
          Effect.gen(function* () {
            const raw = '{"a":5,"b":6}'
            const r = yield* executor.executeCode({
              language: world.language,
              tools: {
                add: addTool,
                fail: {
                  handler: () => {
                    throw new Error("no")
                  }
                }
              },
              recordToolArguments: true,
              code: world.program({
                toolCalls: [
                  { tool: "add", args: { a: 1, b: 2 } },
                  { tool: "add", rawArgs: raw },
                  { tool: "fail" },
                  { tool: "nope" }
                ]
              })
            })
            expect(r.stdout).toBe(
              '0 3\n0 11\n1 no\n2 no tool named "nope" is available to this run (tools: add, fail)\n'
            )
            const events = yield* eventsOf(journal, r.executionId)
            const types = events.map((e) => e.type)
            expect(lifecycles("ContainerExited")).toContainEqual(types.filter((t) => !t.startsWith("ToolCall")))
            // Every call's events come after the program started and before its end.
            const first = types.findIndex((t) => t.startsWith("ToolCall"))
            const last = types.length - 1 - [...types].reverse().findIndex((t) => t.startsWith("ToolCall"))
            expect(first).toBeGreaterThan(
              Math.max(types.indexOf("ContainerStarted"), types.indexOf("ContainerClaimed"))
            )
            expect(last).toBeLessThan(types.indexOf("ContainerExited"))
            const tool = events.filter((e) => e.type.startsWith("ToolCall")) as unknown as ReadonlyArray<ToolEvent>
            const requested = tool.filter((e) => e.type === "ToolCallRequested")
            expect(requested.map((e) => [e.data.callId, e.data.tool, e.data.arguments])).toEqual([
              [1, "add", { a: 1, b: 2 }],
              [2, "add", { a: 5, b: 6 }],
              [3, "fail", {}],
              [4, "nope", {}]
            ])
            for (const e of requested) {
              expect(e.data.argumentBytes).toBeGreaterThan(0)
              expect(e.data.argumentsSha256).toMatch(/^[0-9a-f]{64}$/)
            }
            // The raw call's bytes are known on every side: its size and hash are theirs.
            expect(requested[1]?.data).toMatchObject({
              argumentBytes: raw.length,
              argumentsSha256: createHash("sha256").update(raw).digest("hex")
            })
            // Exactly one outcome per call, after its request.
            for (const id of [1, 2, 3, 4]) {
              const mine = tool.filter((e) => e.data.callId === id)
              expect(mine.map((e) => e.type)).toEqual([
                "ToolCallRequested",
                id <= 2 ? "ToolCallCompleted" : id === 3 ? "ToolCallFailed" : "ToolCallRefused"
              ])
            }
            expect(
              tool.filter((e) => e.type === "ToolCallCompleted").map((e) => [e.data.callId, e.data.resultBytes])
            ).toEqual([
              [1, 1],
              [2, 2]
            ])
            for (const e of tool)
              if (e.type !== "ToolCallRequested" && e.type !== "ToolCallRefused")
                expect(e.data.durationMs).toBeGreaterThanOrEqual(0)
            expect(r.toolCallsMade).toBe(3)
          })
        ),
      60_000
    )

    test(
      "tool calls: concurrent calls are served at once, each answered to its own caller",
      () =>
        withExecutor({}, ({ executor }) =>
          Effect.gen(function* () {
            // Each call waits until all three are being served: they can only end if they run at once.
            let arrived = 0
            let open!: () => void
            const together = new Promise<void>((resolve) => (open = resolve))
            const tools: Tools = {
              meet: {
                handler: async ({ n }: { n: number }) => {
                  if (++arrived === 3) open()
                  await together
                  return { n, arrived }
                }
              }
            }
            const fiber = yield* Effect.fork(
              executor.executeCode({
                language: world.language,
                tools,
                timeoutMs: 20_000,
                code: world.program({
                  toolCallsConcurrently: true,
                  toolCalls: [1, 2, 3].map((n) => ({ tool: "meet", args: { n } }))
                })
              })
            )
            const r = yield* joinPassing(time, fiber)
            expect(r).toMatchObject({ timedOut: false, exitCode: 0, toolCallsMade: 3 })
            expect(r.stdout).toBe('0 {"n":1,"arrived":3}\n0 {"n":2,"arrived":3}\n0 {"n":3,"arrived":3}\n')
          })
        ),
      60_000
    )

    test(
      "tool calls: the deadline during a handler that never answers cancels it (its signal aborted, ToolCallFailed cancelled before ExecutionTimedOut) and removes the container",
      () =>
        withExecutor({}, ({ executor, journal, runtime }) =>
          Effect.gen(function* () {
            let called = false
            let aborted = false
            const tools: Tools = {
              wait: {
                handler: (_args: unknown, { signal }: ToolContext) =>
                  new Promise(() => {
                    called = true
                    signal.addEventListener("abort", () => void (aborted = true))
                  })
              }
            }
            const fiber = yield* Effect.fork(
              executor.executeCode({
                language: world.language,
                tools,
                timeoutMs: 3_000,
                code: world.program({ stdout: "calling\n", toolCalls: [{ tool: "wait" }, { tool: "wait" }] })
              })
            )
            const r = yield* joinPassing(time, fiber)
            expect(r).toMatchObject({ timedOut: true, exitCode: 137, stdout: "calling\n", toolCallsMade: 1 })
            expect(called).toBe(true)
            expect(aborted).toBe(true)
            expect(yield* gone(runtime, r.containerName)).toBe(true)
            const events = yield* eventsOf(journal, r.executionId)
            const types = events.map((e) => e.type)
            expect(lifecycles("ExecutionTimedOut")).toContainEqual(types.filter((t) => !t.startsWith("ToolCall")))
            // The second call never happened: the program was killed waiting for the first.
            expect(types.filter((t) => t.startsWith("ToolCall"))).toEqual(["ToolCallRequested", "ToolCallFailed"])
            const failed = events.find((e) => e.type === "ToolCallFailed") as unknown as ToolEvent
            expect(failed.data).toMatchObject({ callId: 1, tool: "wait", reason: "cancelled" })
            expect(types.indexOf("ToolCallFailed")).toBeLessThan(types.indexOf("ExecutionTimedOut"))
          })
        ),
      60_000
    )
  })
}

/** The program in Python, its steps in the order of `Program` (the real engine's and the cluster's). */
export const pythonProgram = (p: Program): string => {
  const s = JSON.stringify
  const lines = ["import sys, time"]
  if (p.stdout) lines.push(`sys.stdout.write(${s(p.stdout)})`)
  if (p.echoStdin) lines.push("sys.stdout.flush()", "sys.stdout.buffer.write(sys.stdin.buffer.read())")
  if (p.printFile) lines.push(`sys.stdout.write(open(${s(p.printFile)}).read())`)
  if (p.stdoutBytes) {
    lines.push(
      `for _ in range(${Math.floor(p.stdoutBytes / 65536)}): sys.stdout.write('x' * 65536)`,
      `sys.stdout.write('x' * ${p.stdoutBytes % 65536})`
    )
  }
  lines.push(...pythonToolCalls(p))
  if (p.stderr) lines.push(`sys.stderr.write(${s(p.stderr)})`)
  lines.push("sys.stdout.flush()", "sys.stderr.flush()")
  if (p.oom) lines.push("a = []", "while True:", "    a.append(bytearray(10**7))")
  if (p.hang) lines.push("while True:", "    time.sleep(1)")
  if (p.spin) lines.push("while True:", "    pass")
  if (p.sleepMs) lines.push(`time.sleep(${p.sleepMs / 1000})`)
  lines.push(`sys.exit(${p.exitCode ?? 0})`)
  return lines.join("\n") + "\n"
}
