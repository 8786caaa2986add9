/**
 * An in-memory SandboxRuntime for fast unit, property and model-based tests.
 * Faithful where the executor depends on the engine's behaviour: names are
 * unique, exit waits block until exit or kill and only see the NEXT exit,
 * removing a running sandbox kills it, every call on a removed sandbox is a
 * 404, and the program only runs once its stdin is closed (like the runner),
 * or, with tools, once the header is whole: its stdin then carries the host's
 * replies to the program's tool calls until the run ends.
 * The shared contract suite (test/runtime-contract) runs against this and the
 * real engine, so the two cannot drift apart.
 *
 * What a "program" does is read from its code: a first line `#!fake {json}`
 * with { stdout, stderr, exitCode, sleepMs, hang, oom, echoStdin, printFile, toolCalls } (see internal/fakeProgram).
 * A session's kernel (`hermes-run --kernel python`) is emulated too: a cell's code `#!cell [steps]`
 * (fakeCell: print, display, result, raise, sleep, ignore SIGINT, die, a thread printing late, state
 * kept across cells; internal/fakeKernel).
 */
import { Clock, Context, Deferred, Effect, Either, Fiber, FiberSet, Layer, Option, Ref } from "effect"
import { ContainerFailed, DockerUnavailable, ImageNotFound, type SandboxError } from "./Errors.js"
import {
  type AttachedIO,
  type EngineHost,
  type ExitStatus,
  type OutputReceiver,
  refuseMissingFeatures,
  SandboxRuntime,
  type SandboxInfo,
  type SandboxRef,
  type SandboxSpec,
  type SandboxState
} from "./SandboxRuntime.js"
import { makeFakeExec } from "./internal/fakeExec.js"
import {
  FAKE_CODE_DIR,
  fakeCollect,
  type FakeStdin,
  fakeToolCalls,
  fromRunnerPayload,
  headerWithTools,
  makeFakeStdin,
  outputFrames
} from "./internal/fakeProgram.js"
import {
  encodeFrame,
  MAX_FRAME_PAYLOAD,
  RUNNER_FEATURES,
  RUNNER_FEATURES_LABEL,
  RUNNER_PROTOCOL_ERROR_EXIT,
  RUNNER_PROTOCOL_LABEL,
  RUNNER_PROTOCOL_VERSION,
  type RunnerFeature
} from "./RunnerProtocol.js"

export { type FakeCellStep, fakeCell } from "./internal/fakeKernel.js"
export { type FakeProgram, fakeProgram, type FakeToolCall } from "./internal/fakeProgram.js"

export interface FakeFaults {
  createFails?: boolean
  startFails?: boolean
  /** The sandbox starts at once but the start call answers this much later (an engine under load). */
  startAnswerDelayMs?: number
  /** Every call fails with DockerUnavailable, and running sandboxes are frozen until the engine is back. */
  engineDown?: boolean
  /**
   * A create gets no answer (DockerUnavailable) although the engine made the sandbox: at once, or
   * `landsAfterMs` later (a frozen engine running the request it held when it thaws).
   */
  createUnanswered?: { readonly landsAfterMs?: number }
  missingImages?: ReadonlyArray<string>
  /**
   * The labels of these images, as the engine would report them; any other image has a current
   * hermes-sandbox image's (runner protocol 2, every feature). `{ [RUNNER_PROTOCOL_LABEL]: "2" }`
   * is an image built before images said what their supervisor can do: a create or exec that needs a
   * feature it lacks is refused (ContainerFailed reason "protocol") before anything exists, as the
   * Docker runtime refuses it. (Only the features are checked here.)
   */
  imageLabels?: Readonly<Record<string, Readonly<Record<string, string>>>>
}

/** A current hermes-sandbox image's labels, as far as the runtimes read them. */
const CURRENT_IMAGE_LABELS: Readonly<Record<string, string>> = {
  [RUNNER_PROTOCOL_LABEL]: String(RUNNER_PROTOCOL_VERSION),
  [RUNNER_FEATURES_LABEL]: RUNNER_FEATURES.join(",")
}
const BUILD_COMMAND = "pnpm hermes-sandbox image build"

interface FakeSandbox {
  readonly id: string
  readonly name: string
  readonly spec: SandboxSpec
  readonly createdAt: number
  status: SandboxState["status"]
  exitCode: number
  oomKilled: boolean
  stdin: FakeStdin
  output: OutputReceiver | undefined
  outputClosed: Deferred.Deferred<void>
  exitWaiters: Array<Deferred.Deferred<ExitStatus, SandboxError>>
  program: Fiber.RuntimeFiber<void> | undefined
}

export interface FakeRuntimeControlService {
  readonly faults: Ref.Ref<FakeFaults>
  /** Sandboxes that exist now (not removed), any state. */
  readonly alive: Effect.Effect<ReadonlyArray<{ readonly name: string; readonly status: SandboxState["status"] }>>
  /** How many sandboxes were ever created. */
  readonly createdCount: Effect.Effect<number>
  /** The most execs ever running at once in one sandbox (sessions must serialize theirs). */
  readonly maxConcurrentExecs: Effect.Effect<number>
  /**
   * The engine dies (like dockerd killed with SIGKILL, without live-restore) and stays down
   * until the `engineDown` fault is cleared: running sandboxes are killed, armed exit waits
   * and attach streams break (DockerUnavailable), stopped sandboxes stay until removed.
   */
  readonly crashEngine: Effect.Effect<void>
}

/** The fake's control handle, next to the SandboxRuntime it controls (see `layer`). */
export class FakeRuntimeControl extends Context.Tag("@hermes-sandbox/core/FakeRuntimeControl")<
  FakeRuntimeControl,
  FakeRuntimeControlService
>() {}

const endpoint = "fake://engine"

export interface FakeRuntimeOptions {
  /**
   * The engine the fake stands for (SandboxRuntime.engine), which the mount check judges host
   * paths against. Default: a local engine on /var/run/docker.sock.
   */
  readonly engine?: EngineHost
}

const DEFAULT_ENGINE: EngineHost = { kind: "local", socketPath: "/var/run/docker.sock" }
const encoder = new TextEncoder()

export const make = (initialFaults: FakeFaults = {}, options: FakeRuntimeOptions = {}) =>
  Effect.gen(function* () {
    const faults = yield* Ref.make<FakeFaults>(initialFaults)
    const sandboxes = new Map<string, FakeSandbox>()
    const byName = new Map<string, FakeSandbox>()
    const programs = yield* FiberSet.make<void>()
    let created = 0

    const engineCheck = (operation: string) =>
      Ref.get(faults).pipe(
        Effect.flatMap((f) =>
          f.engineDown
            ? Effect.fail(
                new DockerUnavailable({
                  endpoint,
                  operation,
                  message: "the fake engine is down",
                  hint: "clear the engineDown fault"
                })
              )
            : Effect.void
        )
      )

    /** Like DockerRuntime: what the image's supervisor lacks of `requires` refuses the operation. */
    const refuseWithoutFeatures = (
      image: string,
      requires: ReadonlyArray<RunnerFeature> | undefined,
      operation: string,
      containerName: string
    ) =>
      Effect.flatMap(Ref.get(faults), (f) =>
        refuseMissingFeatures(
          image,
          f.imageLabels?.[image] ?? CURRENT_IMAGE_LABELS,
          requires,
          { operation, containerName },
          BUILD_COMMAND
        )
      )

    // Like the engine, a sandbox is found by id or by name.
    const lookup = (ref: SandboxRef) => sandboxes.get(ref.id) ?? byName.get(ref.id)
    const find = (ref: SandboxRef, operation: string) =>
      Effect.suspend(() => {
        const s = lookup(ref)
        return s
          ? Effect.succeed(s)
          : Effect.fail(
              new ContainerFailed({
                operation,
                containerName: ref.name,
                statusCode: 404,
                reason: "not-found",
                message: `No such container: ${ref.id}`
              })
            )
      })

    const finish = (s: FakeSandbox, exitCode: number, oomKilled: boolean) =>
      Effect.gen(function* () {
        if (s.status !== "running") return
        s.status = "exited"
        s.exitCode = exitCode
        s.oomKilled = oomKilled
        const waiters = s.exitWaiters
        s.exitWaiters = []
        for (const w of waiters) yield* Deferred.succeed(w, { exitCode })
        yield* Deferred.succeed(s.outputClosed, undefined)
      })

    const run = (s: FakeSandbox) =>
      Effect.gen(function* () {
        // Like the supervisor: the whole payload, or with tools the whole header (the rest of its stdin is replies).
        const payload = yield* s.stdin.until((bytes, ended) => (ended || headerWithTools(bytes) ? bytes : undefined))
        const { files, program, key, stdin, collect, tools } = fromRunnerPayload(payload)
        // Like the supervisor: the program's streams go out in frames on stdout, its report last.
        const frame = (type: "o" | "e" | "x" | "E", b: Uint8Array | string) => {
          const bytes = typeof b === "string" ? encoder.encode(b) : b
          if (key === undefined) return type === "e" || type === "E" ? s.output?.stderr(bytes) : s.output?.stdout(bytes)
          if (type === "x" || type === "E") return s.output?.stdout(encodeFrame(key, type, bytes))
          for (const f of outputFrames(key, type, bytes)) s.output?.stdout(f)
        }
        let stdoutBytes = 0
        const print = (bytes: Uint8Array) => {
          stdoutBytes += bytes.byteLength
          if (bytes.byteLength > 0) frame("o", bytes)
        }
        // The runner writes the request's files into /workspace (the working directory), the tool modules into its code directory.
        const file =
          program.printFile === undefined
            ? undefined
            : (files.find(([path]) => `/workspace/${path}` === program.printFile || path === program.printFile) ??
                tools?.header.modules.find(([path]) => `${FAKE_CODE_DIR}/${path}` === program.printFile))?.[1]
        const missing = program.printFile !== undefined && file === undefined
        const err = encoder.encode(
          `${program.stderr ?? ""}${missing ? `${program.printFile}: No such file or directory\n` : ""}`
        )
        if (program.stdout) print(encoder.encode(program.stdout))
        if (program.stdoutBase64) print(Buffer.from(program.stdoutBase64, "base64"))
        if (program.echoStdin) print(stdin)
        if (file !== undefined) print(file)
        if (program.toolCalls !== undefined && program.toolCalls.length > 0) {
          const channel =
            key === undefined || tools === undefined
              ? undefined
              : { key, tools, stdin: s.stdin, send: (f: Uint8Array) => s.output?.stdout(f) }
          const calls = yield* Effect.either(
            fakeToolCalls(program.toolCalls, program.toolCallsConcurrently === true, channel, print)
          )
          if (Either.isLeft(calls)) {
            // The supervisor gives up (its 'E', exit 126), taking the program with it.
            frame("E", calls.left.message)
            return yield* finish(s, RUNNER_PROTOCOL_ERROR_EXIT, false)
          }
        }
        if (err.byteLength > 0) frame("e", err)
        if (program.hang) return yield* Effect.never
        if (program.sleepMs) yield* Effect.sleep(program.sleepMs)
        // A frozen engine delivers no exit until it is back.
        while ((yield* Ref.get(faults)).engineDown) yield* Effect.sleep(50)
        const exitCode = missing ? 1 : (program.exitCode ?? 0)
        // Like the supervisor: the files asked for, then report the end, unless the kernel killed it with the program.
        if (key !== undefined && !program.oom && collect !== undefined) {
          for (const [path, content] of fakeCollect(files, collect)) {
            s.output?.stdout(encodeFrame(key, "f", `644 ${content.byteLength} ${path}`))
            for (let at = 0; at < content.byteLength; at += MAX_FRAME_PAYLOAD)
              s.output?.stdout(encodeFrame(key, "c", content.subarray(at, at + MAX_FRAME_PAYLOAD)))
            s.output?.stdout(encodeFrame(key, "F", String(content.byteLength)))
          }
        }
        if (key !== undefined && !program.oom) {
          frame("x", `${exitCode} ${stdoutBytes} ${err.byteLength} 0`)
        }
        yield* finish(s, program.oom ? 137 : exitCode, program.oom === true)
      })

    const fakeExec = makeFakeExec({ engineCheck, find, programs })

    const runtime = SandboxRuntime.of({
      name: "fake",
      engine: options.engine ?? DEFAULT_ENGINE,
      resolveImage: (image) =>
        engineCheck("resolveImage").pipe(
          Effect.zipRight(Ref.get(faults)),
          Effect.flatMap((f) =>
            f.missingImages?.includes(image)
              ? Effect.fail(
                  new ImageNotFound({ image, buildCommand: BUILD_COMMAND, message: `No such image: ${image}` })
                )
              : Effect.succeed(`sha256:fake-${image}`)
          )
        ),
      create: (spec) =>
        Effect.gen(function* () {
          yield* engineCheck("create")
          const f = yield* Ref.get(faults)
          if (f.missingImages?.includes(spec.image)) {
            return yield* new ImageNotFound({
              image: spec.image,
              buildCommand: BUILD_COMMAND,
              message: `No such image: ${spec.image}`
            })
          }
          yield* refuseWithoutFeatures(spec.image, spec.requires, "create", spec.name)
          if (f.createFails)
            return yield* new ContainerFailed({
              operation: "create",
              containerName: spec.name,
              statusCode: 500,
              reason: "engine",
              message: "injected create failure"
            })
          if (byName.has(spec.name)) {
            return yield* new ContainerFailed({
              operation: "create",
              containerName: spec.name,
              statusCode: 409,
              reason: "conflict",
              message: `Conflict. The container name "/${spec.name}" is already in use`
            })
          }
          const land = Effect.gen(function* () {
            created += 1
            const s: FakeSandbox = {
              id: `fake${created.toString(16).padStart(12, "0")}`,
              name: spec.name,
              spec,
              // The Effect clock, like the journal's timestamps (TestClock drives both in tests).
              createdAt: yield* Clock.currentTimeMillis,
              status: "created",
              exitCode: 0,
              oomKilled: false,
              stdin: makeFakeStdin(),
              output: undefined,
              outputClosed: yield* Deferred.make<void>(),
              exitWaiters: [],
              program: undefined
            }
            sandboxes.set(s.id, s)
            byName.set(s.name, s)
            return { id: s.id, name: s.name, imageId: `sha256:fake-${spec.image}` }
          })
          if (f.createUnanswered !== undefined) {
            const after = f.createUnanswered.landsAfterMs ?? 0
            if (after === 0) yield* land
            else
              yield* Effect.forkDaemon(
                Effect.sleep(after).pipe(
                  Effect.zipRight(Effect.suspend(() => (byName.has(spec.name) ? Effect.void : Effect.asVoid(land))))
                )
              )
            return yield* new DockerUnavailable({
              endpoint,
              operation: "create",
              message: "the fake engine did not answer the create",
              hint: "clear the createUnanswered fault"
            })
          }
          return yield* land
        }),
      attach: (ref, output) =>
        Effect.gen(function* () {
          yield* engineCheck("attach")
          const s = yield* find(ref, "attach")
          s.output = output
          const io: AttachedIO = {
            write: s.stdin.write,
            end: s.stdin.end,
            closed: Deferred.await(s.outputClosed)
          }
          return io
        }),
      // Nobody but the SDK signals the fake's sandboxes.
      outsideKill: () => Effect.succeed(Option.none()),
      armExit: (ref) =>
        Effect.gen(function* () {
          yield* engineCheck("wait")
          const s = yield* find(ref, "wait")
          const waiter = yield* Deferred.make<ExitStatus, SandboxError>()
          s.exitWaiters.push(waiter)
          return Deferred.await(waiter)
        }),
      start: (ref) =>
        Effect.gen(function* () {
          yield* engineCheck("start")
          const s = yield* find(ref, "start")
          if ((yield* Ref.get(faults)).startFails) {
            return yield* new ContainerFailed({
              operation: "start",
              containerName: s.name,
              statusCode: 500,
              reason: "engine",
              message: "injected start failure"
            })
          }
          if (s.status !== "created") return
          s.status = "running"
          // Interruptible even when start is called from an uninterruptible region (forks inherit it).
          s.program = yield* FiberSet.run(programs, Effect.interruptible(run(s)))
          const answerDelay = (yield* Ref.get(faults)).startAnswerDelayMs
          if (answerDelay !== undefined) yield* Effect.sleep(answerDelay)
        }),
      kill: (ref) =>
        Effect.gen(function* () {
          yield* engineCheck("kill")
          const s = yield* find(ref, "kill")
          if (s.status !== "running") return
          if (s.program) yield* Fiber.interrupt(s.program)
          yield* finish(s, 137, false)
        }),
      inspect: (ref) =>
        Effect.gen(function* () {
          yield* engineCheck("inspect")
          const s = yield* find(ref, "inspect")
          return { status: s.status, exitCode: s.exitCode, oomKilled: s.oomKilled }
        }),
      // The fake's OOM kills only ever end a whole sandbox (its exit says so).
      oomKillsSince: () => Effect.succeed(false),
      remove: (ref) =>
        Effect.gen(function* () {
          yield* engineCheck("remove")
          const s = lookup(ref)
          if (!s) return
          if (s.program) yield* Fiber.interrupt(s.program)
          yield* finish(s, 137, false)
          // Waiters armed on a removed container see it disappear, as with the engine.
          for (const w of s.exitWaiters) {
            yield* Deferred.fail(
              w,
              new ContainerFailed({
                operation: "wait",
                containerName: s.name,
                statusCode: 404,
                reason: "not-found",
                message: "container removed"
              })
            )
          }
          yield* Deferred.succeed(s.outputClosed, undefined)
          sandboxes.delete(s.id)
          byName.delete(s.name)
        }),
      list: (labels) =>
        engineCheck("list").pipe(
          Effect.map(() =>
            [...sandboxes.values()]
              .filter((s) => Object.entries(labels).every(([k, v]) => s.spec.labels[k] === v))
              .map(
                (s): SandboxInfo => ({
                  id: s.id,
                  name: s.name,
                  labels: s.spec.labels,
                  status: s.status,
                  createdAt: s.createdAt
                })
              )
          )
        ),
      exec: (ref, spec, output) =>
        output.requires === undefined || output.requires.length === 0
          ? fakeExec.exec(ref, spec, output)
          : engineCheck("exec").pipe(
              Effect.zipRight(find(ref, "exec")),
              Effect.flatMap((s) => refuseWithoutFeatures(s.spec.image, output.requires, "exec", s.name)),
              Effect.zipRight(fakeExec.exec(ref, spec, output))
            )
    })

    const control: FakeRuntimeControlService = {
      faults,
      alive: Effect.sync(() => [...sandboxes.values()].map((s) => ({ name: s.name, status: s.status }))),
      createdCount: Effect.sync(() => created),
      maxConcurrentExecs: fakeExec.maxConcurrentExecs,
      crashEngine: Effect.gen(function* () {
        yield* Ref.update(faults, (f) => ({ ...f, engineDown: true }))
        for (const s of sandboxes.values()) {
          if (s.status !== "running") continue
          if (s.program) yield* Fiber.interrupt(s.program)
          s.status = "exited"
          s.exitCode = 137
          const waiters = s.exitWaiters
          s.exitWaiters = []
          for (const w of waiters) {
            yield* Deferred.fail(
              w,
              new DockerUnavailable({
                endpoint,
                operation: "wait",
                message: `wait ${s.name}: the connection to the engine closed before the container exited`,
                hint: "clear the engineDown fault"
              })
            )
          }
          yield* Deferred.succeed(s.outputClosed, undefined)
        }
      })
    }
    return { runtime, control }
  })

/** The fake runtime and its control handle (for fault injection and leak checks). */
export const layer = (
  faults: FakeFaults = {},
  options: FakeRuntimeOptions = {}
): Layer.Layer<SandboxRuntime | FakeRuntimeControl> =>
  Layer.scopedContext(
    make(faults, options).pipe(
      Effect.map(({ control, runtime }) =>
        Context.make(SandboxRuntime, runtime).pipe(Context.add(FakeRuntimeControl, control))
      )
    )
  )
