/**
 * One contract for every SandboxRuntime: the fake must behave like the engine
 * wherever the executor depends on it. Run against both (runtime-contract.*.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, type Layer, Option, Scope } from "effect"
import { v7 as uuidv7 } from "uuid"
import { encodeRunnerPayload } from "@hermes-sandbox/core/RunnerProtocol"
import {
  type ExecSpec,
  type Language,
  type SandboxCreated,
  SandboxRuntime,
  type SandboxSpec
} from "@hermes-sandbox/core"
import { Label } from "@hermes-sandbox/core/Labels"

/** How to make each runtime's program do a thing (real code for the engine, the DSL for the fake). */
export interface ContractPrograms {
  readonly language: Language
  readonly image: string
  readonly command: ReadonlyArray<string>
  readonly exitWith: (code: number, stdout: string, stderr: string) => string
  readonly hang: string
  readonly echoStdin: string
  /** exec: a long-lived main process, so the sandbox stays running for execs. */
  readonly idleCommand: ReadonlyArray<string>
  /** exec commands (argv) doing the same things. */
  readonly exec: {
    readonly exitWith: (code: number, stdout: string, stderr: string) => ReadonlyArray<string>
    readonly echoStdin: ReadonlyArray<string>
    readonly hang: ReadonlyArray<string>
    /** Prints the variable's value and a newline. */
    readonly printEnv: (name: string) => ReadonlyArray<string>
    /** Prints the working directory and a newline. */
    readonly printCwd: ReadonlyArray<string>
    /** Copies exactly n bytes of stdin to stdout, needing no end of stdin (a runtime whose stdin never ends). */
    readonly echoBytes?: (n: number) => ReadonlyArray<string>
    /** Allocates memory until the OOM killer takes it (the sandbox's own process lives on). */
    readonly allocateForever?: ReadonlyArray<string>
  }
}

const decoder = new TextDecoder()

/** The project's Python image, its supervisor, and coreutils for the execs: what Docker and Kubernetes run. */
export const PYTHON_PROGRAMS: ContractPrograms = {
  language: "python",
  image: "hermes-sandbox/python:latest",
  command: ["/opt/hermes/hermes-run"],
  exitWith: (code, stdout, stderr) =>
    `import sys\nsys.stdout.write(${JSON.stringify(stdout)})\nsys.stderr.write(${JSON.stringify(stderr)})\nsys.exit(${code})\n`,
  hang: "import time\nwhile True: time.sleep(1)\n",
  echoStdin: "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n",
  idleCommand: ["sleep", "infinity"],
  exec: {
    exitWith: (code, stdout, stderr) => [
      "sh",
      "-c",
      'printf %s "$1"; printf %s "$2" >&2; exit "$3"',
      "sh",
      stdout,
      stderr,
      String(code)
    ],
    echoStdin: ["cat"],
    echoBytes: (n) => ["head", "-c", String(n)],
    allocateForever: ["python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"],
    hang: ["sleep", "1000"],
    printEnv: (name) => ["sh", "-c", 'printf "%s\\n" "$(printenv "$1")"', "sh", name],
    printCwd: ["pwd"]
  }
}

export const runtimeContract = (
  name: string,
  layer: Layer.Layer<SandboxRuntime, unknown>,
  programs: ContractPrograms,
  world: {
    /** Kubernetes: a sandbox runs as soon as it is created (`start` is a no-op), so none is ever only "created". */
    readonly startsOnCreate?: boolean
    /** The sandboxes' CPU (default a whole one; a pod's is reserved on its node). */
    readonly nanoCpus?: number
    /** The runtime sees an OOM kill that leaves the sandbox running (`oomKillsSince`): Docker's event log does. */
    readonly seesOomKillsInside?: boolean
  } = {}
) => {
  const startsOnCreate = world.startsOnCreate === true
  const contractLabel = `${Label.project}.contract-run`
  const runId = uuidv7()
  const spec = (labels: Record<string, string> = {}): SandboxSpec => ({
    name: `hermes-sandbox-${uuidv7()}`,
    image: programs.image,
    command: programs.command,
    env: {},
    workingDir: "/workspace",
    user: "1001:1001",
    labels: { [contractLabel]: runId, ...labels },
    limits: {
      memoryBytes: 256 * 1024 * 1024,
      nanoCpus: world.nanoCpus ?? 1e9,
      pidsLimit: 64,
      tmpBytes: 16 * 1024 * 1024,
      workspaceBytes: 16 * 1024 * 1024
    },
    network: false,
    openStdin: true,
    capAdd: [],
    mounts: []
  })

  /** Create a sandbox that is force-removed when the test's scope closes. */
  const created = (s: SandboxSpec) =>
    Effect.gen(function* () {
      const runtime = yield* SandboxRuntime
      return yield* Effect.acquireRelease(runtime.create(s), (c) => runtime.remove(c).pipe(Effect.orDie))
    })

  const runProgram = (c: SandboxCreated, code: string, stdin = "") =>
    Effect.gen(function* () {
      const runtime = yield* SandboxRuntime
      const out: Array<Uint8Array> = []
      const err: Array<Uint8Array> = []
      const io = yield* runtime.attach(c, {
        stdout: (b) => out.push(Uint8Array.from(b)),
        stderr: (b) => err.push(Uint8Array.from(b))
      })
      const exit = yield* runtime.armExit(c)
      yield* runtime.start(c)
      const enc = new TextEncoder()
      yield* io.write(
        encodeRunnerPayload({
          language: programs.language,
          code: enc.encode(code),
          files: [],
          stdin: enc.encode(stdin),
          // (Kubernetes: the stream cannot end stdin, so the program's stdin travels in the header.)
          stdinInHeader: runtime.stdinEnds === false
        })
      )
      yield* io.end
      const status = yield* exit
      yield* io.closed
      const text = (chunks: Array<Uint8Array>) => chunks.map((c) => decoder.decode(c, { stream: true })).join("")
      return { exitCode: status.exitCode, stdout: text(out), stderr: text(err) }
    })

  describe(`SandboxRuntime contract: ${name}`, () => {
    it.scopedLive("runs a program once: exit code, separate stdout and stderr", () =>
      Effect.gen(function* () {
        const c = yield* created(spec())
        const r = yield* runProgram(c, programs.exitWith(3, "out\n", "err\n"))
        expect(r).toEqual({ exitCode: 3, stdout: "out\n", stderr: "err\n" })
      }).pipe(Effect.provide(layer))
    )

    it.scopedLive("passes stdin through after the program", () =>
      Effect.gen(function* () {
        const c = yield* created(spec())
        const r = yield* runProgram(c, programs.echoStdin, "hello\u0000world")
        expect(r.stdout).toBe("hello\u0000world")
      }).pipe(Effect.provide(layer))
    )

    it.scopedLive("names are unique: a second create with the same name fails with 409", () =>
      Effect.gen(function* () {
        const runtime = yield* SandboxRuntime
        const s = spec()
        yield* created(s)
        const second = yield* Effect.exit(runtime.create(s))
        expect(Exit.isFailure(second)).toBe(true)
        if (Exit.isFailure(second)) {
          const error = second.cause._tag === "Fail" ? second.cause.error : undefined
          expect(error).toMatchObject({ _tag: "ContainerFailed", statusCode: 409, reason: "conflict" })
        }
      }).pipe(Effect.provide(layer))
    )

    it.scopedLive(
      "an armed exit wait blocks until a kill, which reports 137",
      () =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const c = yield* created(spec())
          const io = yield* runtime.attach(c, { stdout: () => {}, stderr: () => {} })
          const exit = yield* runtime.armExit(c)
          yield* runtime.start(c)
          yield* io.write(
            encodeRunnerPayload({
              language: programs.language,
              code: new TextEncoder().encode(programs.hang),
              files: [],
              stdin: new Uint8Array()
            })
          )
          yield* io.end
          const early = yield* exit.pipe(
            Effect.timeoutTo({ duration: "300 millis", onSuccess: Option.some, onTimeout: Option.none })
          )
          expect(Option.isNone(early)).toBe(true)
          yield* runtime.kill(c)
          const status = yield* exit
          expect(status.exitCode).toBe(137)
          const state = yield* runtime.inspect(c)
          expect(state.status).toBe("exited")
          expect(state.oomKilled).toBe(false)
          // Killing a stopped sandbox is not an error.
          yield* runtime.kill(c)
        }).pipe(Effect.provide(layer)),
      30_000
    )

    it.scopedLive(
      "removing a running sandbox (force) works; afterwards it is a 404, and removing again is fine",
      () =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const c = yield* runtime.create(spec())
          const io = yield* runtime.attach(c, { stdout: () => {}, stderr: () => {} })
          yield* runtime.start(c)
          yield* io.write(
            encodeRunnerPayload({
              language: programs.language,
              code: new TextEncoder().encode(programs.hang),
              files: [],
              stdin: new Uint8Array()
            })
          )
          yield* runtime.remove(c)
          const after = yield* Effect.exit(runtime.inspect(c))
          expect(Exit.isFailure(after)).toBe(true)
          if (Exit.isFailure(after)) {
            const error = after.cause._tag === "Fail" ? after.cause.error : undefined
            expect(error).toMatchObject({ _tag: "ContainerFailed", statusCode: 404, reason: "not-found" })
          }
          yield* runtime.remove(c)
          yield* io.closed
        }).pipe(Effect.provide(layer)),
      30_000
    )

    it.scopedLive(
      "removers racing for one running sandbox all succeed (the engine's 409 'removal already in progress' is waited out)",
      () =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          for (let round = 0; round < 3; round++) {
            const c = yield* runtime.create(spec())
            yield* runtime.attach(c, { stdout: () => {}, stderr: () => {} })
            yield* runtime.start(c)
            // A watchdog, a sweep and a reaper may all remove the same container at once.
            const outcomes = yield* Effect.all(
              [runtime.remove(c), runtime.remove(c), runtime.remove(c)].map(Effect.exit),
              { concurrency: "unbounded" }
            )
            expect(outcomes.map(Exit.isSuccess)).toEqual([true, true, true])
            expect(Exit.isFailure(yield* Effect.exit(runtime.inspect(c)))).toBe(true)
          }
        }).pipe(Effect.provide(layer)),
      60_000
    )

    it.scopedLive(
      "list finds sandboxes by label in every state",
      () =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const marker = uuidv7()
          const a = yield* created(spec({ [`${Label.project}.contract-marker`]: marker }))
          yield* created(spec({ [`${Label.project}.contract-marker`]: marker }))
          yield* created(spec())
          const found = yield* runtime.list({ [`${Label.project}.contract-marker`]: marker })
          expect(found.map((f) => f.name).sort()).toHaveLength(2)
          // A pod starts by itself (its create waits for that; its supervisor then waits for the header).
          expect(found.find((f) => f.id === a.id)?.status).toBe(startsOnCreate ? "running" : "created")
          yield* runProgram(a, programs.exitWith(0, "", ""))
          const again = yield* runtime.list({ [`${Label.project}.contract-marker`]: marker })
          expect(again.find((f) => f.id === a.id)?.status).toBe("exited")
        }).pipe(Effect.provide(layer)),
      30_000
    )

    describe("exec", () => {
      const text = (chunks: Array<Uint8Array>) => chunks.map((c) => decoder.decode(c, { stream: true })).join("")
      /** A running sandbox whose main process idles; removed with the test's scope. */
      const running = (env: Record<string, string> = {}) =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const c = yield* created({ ...spec(), command: programs.idleCommand, openStdin: false, env })
          yield* runtime.start(c)
          return c
        })
      const execRun = (c: SandboxCreated, execSpec: ExecSpec, stdin?: string) =>
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const out: Array<Uint8Array> = []
          const err: Array<Uint8Array> = []
          const p = yield* runtime.exec(c, execSpec, {
            stdout: (b) => out.push(Uint8Array.from(b)),
            stderr: (b) => err.push(Uint8Array.from(b))
          })
          if (execSpec.stdin) {
            if (stdin !== undefined) yield* p.write(new TextEncoder().encode(stdin))
            yield* p.end
          }
          const status = yield* p.exit
          return { exitCode: status.exitCode, stdout: text(out), stderr: text(err) }
        })

      it.scopedLive(
        "runs a command in a running sandbox: exit code, separate stdout and stderr",
        () =>
          Effect.gen(function* () {
            const c = yield* running()
            const r = yield* execRun(c, { command: programs.exec.exitWith(5, "out\n", "err\n"), env: {}, stdin: false })
            expect(r).toEqual({ exitCode: 5, stdout: "out\n", stderr: "err\n" })
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "applies its env over the sandbox's, and its working directory",
        () =>
          Effect.gen(function* () {
            const c = yield* running({ FROM_SANDBOX: "s", OVERRIDDEN: "sandbox" })
            const a = yield* execRun(c, { command: programs.exec.printEnv("FROM_SANDBOX"), env: {}, stdin: false })
            expect(a.stdout).toBe("s\n")
            const b = yield* execRun(c, {
              command: programs.exec.printEnv("OVERRIDDEN"),
              env: { OVERRIDDEN: "exec" },
              stdin: false
            })
            expect(b.stdout).toBe("exec\n")
            const d = yield* execRun(c, { command: programs.exec.printCwd, env: {}, workingDir: "/tmp", stdin: false })
            expect(d.stdout).toBe("/tmp\n")
            const e = yield* execRun(c, { command: programs.exec.printCwd, env: {}, stdin: false })
            expect(e.stdout).toBe("/workspace\n")
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "passes stdin through, and closing it is EOF (a runtime whose stdin never ends: the bytes arrive whole)",
        () =>
          Effect.gen(function* () {
            const runtime = yield* SandboxRuntime
            const c = yield* running()
            const input = "line one\nline\u0000two"
            const command =
              runtime.stdinEnds === false && programs.exec.echoBytes !== undefined
                ? programs.exec.echoBytes(new TextEncoder().encode(input).byteLength)
                : programs.exec.echoStdin
            const r = yield* execRun(c, { command, env: {}, stdin: true }, input)
            expect(r).toMatchObject({ exitCode: 0, stdout: input })
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "kill ends a hanging process with 137; the sandbox keeps running and takes more execs",
        () =>
          Effect.gen(function* () {
            const runtime = yield* SandboxRuntime
            const c = yield* running()
            const p = yield* runtime.exec(
              c,
              { command: programs.exec.hang, env: {}, stdin: false },
              { stdout: () => {}, stderr: () => {} }
            )
            const early = yield* p.exit.pipe(
              Effect.timeoutTo({ duration: "300 millis", onSuccess: Option.some, onTimeout: Option.none })
            )
            expect(Option.isNone(early)).toBe(true)
            yield* p.kill
            const status = yield* p.exit.pipe(Effect.timeout("10 seconds"))
            expect(status.exitCode).toBe(137)
            yield* p.kill // idempotent
            expect((yield* runtime.inspect(c)).status).toBe("running")
            const again = yield* execRun(c, {
              command: programs.exec.exitWith(0, "still here", ""),
              env: {},
              stdin: false
            })
            expect(again.stdout).toBe("still here")
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "execs run side by side, each with its own streams",
        () =>
          Effect.gen(function* () {
            const c = yield* running()
            const results = yield* Effect.forEach(
              [1, 2, 3, 4],
              (i) => execRun(c, { command: programs.exec.exitWith(i, `out${i}`, `err${i}`), env: {}, stdin: false }),
              { concurrency: "unbounded" }
            )
            expect(results).toEqual([1, 2, 3, 4].map((i) => ({ exitCode: i, stdout: `out${i}`, stderr: `err${i}` })))
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "a sandbox that is not running refuses exec with 409; a removed one with 404",
        () =>
          Effect.gen(function* () {
            const runtime = yield* SandboxRuntime
            const c = yield* created({ ...spec(), command: programs.idleCommand, openStdin: false })
            // (A pod runs once created: there is no sandbox that exists and is not running to refuse.)
            if (!startsOnCreate) {
              const notStarted = yield* Effect.flip(
                runtime.exec(
                  c,
                  { command: programs.exec.printCwd, env: {}, stdin: false },
                  { stdout: () => {}, stderr: () => {} }
                )
              )
              expect(notStarted).toMatchObject({ _tag: "ContainerFailed", statusCode: 409, reason: "conflict" })
            }
            yield* runtime.remove(c)
            const gone = yield* Effect.flip(
              runtime.exec(
                c,
                { command: programs.exec.printCwd, env: {}, stdin: false },
                { stdout: () => {}, stderr: () => {} }
              )
            )
            expect(gone).toMatchObject({ _tag: "ContainerFailed", statusCode: 404, reason: "not-found" })
          }).pipe(Effect.provide(layer)),
        30_000
      )

      it.scopedLive(
        "killing the sandbox ends its running execs",
        () =>
          Effect.gen(function* () {
            const runtime = yield* SandboxRuntime
            const c = yield* running()
            const p = yield* runtime.exec(
              c,
              { command: programs.exec.hang, env: {}, stdin: false },
              { stdout: () => {}, stderr: () => {} }
            )
            yield* runtime.kill(c)
            const status = yield* p.exit.pipe(Effect.timeout("10 seconds"), Effect.either)
            // It ended, unsuccessfully (the fake says 137; Docker 20.10 reports 126 for an exec whose container died).
            if (status._tag === "Right") expect(status.right.exitCode).not.toBe(0)
          }).pipe(Effect.provide(layer)),
        30_000
      )

      const allocateForever = programs.exec.allocateForever
      if (allocateForever !== undefined)
        it.scopedLive(
          `an exec the OOM killer takes leaves the sandbox running; oomKillsSince ${world.seesOomKillsInside === true ? "says so from before it, not from after" : "cannot tell (false)"}`,
          () =>
            Effect.gen(function* () {
              const runtime = yield* SandboxRuntime
              const before = Date.now()
              const c = yield* running()
              expect(yield* runtime.oomKillsSince(c, before)).toBe(false)
              const r = yield* execRun(c, { command: allocateForever, env: {}, stdin: false })
              expect(r.exitCode).toBe(137)
              expect((yield* runtime.inspect(c)).status).toBe("running")
              expect(yield* runtime.oomKillsSince(c, before)).toBe(world.seesOomKillsInside === true)
              // Not from a moment after it (past the runtime's allowance for the engine's clock).
              const after = Date.now()
              yield* Effect.sleep("1200 millis")
              expect(yield* runtime.oomKillsSince(c, after + 1_100)).toBe(false)
            }).pipe(Effect.provide(layer)),
          60_000
        )
    })

    // Which command depends on the image (the project's own: `image build`; any other: `docker
    // pull` it, dd183ba): execute.e2e asserts both wordings on the engine.
    it.live("a missing image is ImageNotFound naming the image and a command that gets it", () =>
      Effect.gen(function* () {
        const runtime = yield* SandboxRuntime
        const error = yield* Effect.flip(runtime.create({ ...spec(), image: "hermes-sandbox/does-not-exist:0" }))
        expect(error).toMatchObject({ _tag: "ImageNotFound", image: "hermes-sandbox/does-not-exist:0" })
        if (error._tag === "ImageNotFound") {
          expect(error.buildCommand).toMatch(/image build|docker pull hermes-sandbox\/does-not-exist:0/)
          expect(error.message).toContain("hermes-sandbox/does-not-exist:0")
        }
      }).pipe(Effect.provide(layer))
    )
  })

  return { spec, created, runProgram, Scope }
}
