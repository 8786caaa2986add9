/**
 * One contract for every SandboxRuntime: the fake must behave like the engine
 * wherever the executor depends on it. Run against both (runtime-contract.*.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, type Layer, Option, Scope } from "effect"
import { v7 as uuidv7 } from "uuid"
import {
  encodeRunnerPayload,
  Label,
  type Language,
  type SandboxCreated,
  SandboxRuntime,
  type SandboxSpec
} from "@hermes-sandbox/core"

/** How to make each runtime's program do a thing (real code for the engine, the DSL for the fake). */
export interface ContractPrograms {
  readonly language: Language
  readonly image: string
  readonly command: ReadonlyArray<string>
  readonly exitWith: (code: number, stdout: string, stderr: string) => string
  readonly hang: string
  readonly echoStdin: string
}

const decoder = new TextDecoder()

export const runtimeContract = (name: string, layer: Layer.Layer<SandboxRuntime, unknown>, programs: ContractPrograms) => {
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
    limits: { memoryBytes: 256 * 1024 * 1024, nanoCpus: 1e9, pidsLimit: 64, tmpBytes: 16 * 1024 * 1024, workspaceBytes: 16 * 1024 * 1024 },
    network: false,
    openStdin: true,
    capAdd: [],
    mounts: []
  })

  /** Create a sandbox that is force-removed when the test's scope closes. */
  const created = (s: SandboxSpec) =>
    Effect.gen(function*() {
      const runtime = yield* SandboxRuntime
      return yield* Effect.acquireRelease(runtime.create(s), (c) => runtime.remove(c).pipe(Effect.orDie))
    })

  const runProgram = (c: SandboxCreated, code: string, stdin = "") =>
    Effect.gen(function*() {
      const runtime = yield* SandboxRuntime
      const out: Array<Uint8Array> = []
      const err: Array<Uint8Array> = []
      const io = yield* runtime.attach(c, { stdout: (b) => out.push(Uint8Array.from(b)), stderr: (b) => err.push(Uint8Array.from(b)) })
      const exit = yield* runtime.armExit(c)
      yield* runtime.start(c)
      const enc = new TextEncoder()
      yield* io.write(encodeRunnerPayload({ language: programs.language, code: enc.encode(code), files: [], stdin: enc.encode(stdin) }))
      yield* io.end
      const status = yield* exit
      yield* io.closed
      const text = (chunks: Array<Uint8Array>) => chunks.map((c) => decoder.decode(c, { stream: true })).join("")
      return { exitCode: status.exitCode, stdout: text(out), stderr: text(err) }
    })

  describe(`SandboxRuntime contract: ${name}`, () => {
    it.scopedLive("runs a program once: exit code, separate stdout and stderr", () =>
      Effect.gen(function*() {
        const c = yield* created(spec())
        const r = yield* runProgram(c, programs.exitWith(3, "out\n", "err\n"))
        expect(r).toEqual({ exitCode: 3, stdout: "out\n", stderr: "err\n" })
      }).pipe(Effect.provide(layer)))

    it.scopedLive("passes stdin through after the program", () =>
      Effect.gen(function*() {
        const c = yield* created(spec())
        const r = yield* runProgram(c, programs.echoStdin, "hello\u0000world")
        expect(r.stdout).toBe("hello\u0000world")
      }).pipe(Effect.provide(layer)))

    it.scopedLive("names are unique: a second create with the same name fails with 409", () =>
      Effect.gen(function*() {
        const runtime = yield* SandboxRuntime
        const s = spec()
        yield* created(s)
        const second = yield* Effect.exit(runtime.create(s))
        expect(Exit.isFailure(second)).toBe(true)
        if (Exit.isFailure(second)) {
          const error = second.cause._tag === "Fail" ? second.cause.error : undefined
          expect(error).toMatchObject({ _tag: "ContainerFailed", statusCode: 409 })
        }
      }).pipe(Effect.provide(layer)))

    it.scopedLive("an armed exit wait blocks until a kill, which reports 137", () =>
      Effect.gen(function*() {
        const runtime = yield* SandboxRuntime
        const c = yield* created(spec())
        const io = yield* runtime.attach(c, { stdout: () => {}, stderr: () => {} })
        const exit = yield* runtime.armExit(c)
        yield* runtime.start(c)
        yield* io.write(encodeRunnerPayload({ language: programs.language, code: new TextEncoder().encode(programs.hang), files: [], stdin: new Uint8Array() }))
        yield* io.end
        const early = yield* exit.pipe(Effect.timeoutTo({ duration: "300 millis", onSuccess: Option.some, onTimeout: Option.none }))
        expect(Option.isNone(early)).toBe(true)
        yield* runtime.kill(c)
        const status = yield* exit
        expect(status.exitCode).toBe(137)
        const state = yield* runtime.inspect(c)
        expect(state.status).toBe("exited")
        expect(state.oomKilled).toBe(false)
        // Killing a stopped sandbox is not an error.
        yield* runtime.kill(c)
      }).pipe(Effect.provide(layer)), 30_000)

    it.scopedLive("removing a running sandbox (force) works; afterwards it is a 404, and removing again is fine", () =>
      Effect.gen(function*() {
        const runtime = yield* SandboxRuntime
        const c = yield* runtime.create(spec())
        const io = yield* runtime.attach(c, { stdout: () => {}, stderr: () => {} })
        yield* runtime.start(c)
        yield* io.write(encodeRunnerPayload({ language: programs.language, code: new TextEncoder().encode(programs.hang), files: [], stdin: new Uint8Array() }))
        yield* runtime.remove(c)
        const after = yield* Effect.exit(runtime.inspect(c))
        expect(Exit.isFailure(after)).toBe(true)
        if (Exit.isFailure(after)) {
          const error = after.cause._tag === "Fail" ? after.cause.error : undefined
          expect(error).toMatchObject({ _tag: "ContainerFailed", statusCode: 404 })
        }
        yield* runtime.remove(c)
        yield* io.closed
      }).pipe(Effect.provide(layer)), 30_000)

    it.scopedLive("list finds sandboxes by label in every state", () =>
      Effect.gen(function*() {
        const runtime = yield* SandboxRuntime
        const marker = uuidv7()
        const a = yield* created(spec({ [`${Label.project}.contract-marker`]: marker }))
        yield* created(spec({ [`${Label.project}.contract-marker`]: marker }))
        yield* created(spec())
        const found = yield* runtime.list({ [`${Label.project}.contract-marker`]: marker })
        expect(found.map((f) => f.name).sort()).toHaveLength(2)
        expect(found.find((f) => f.id === a.id)?.status).toBe("created")
        yield* runProgram(a, programs.exitWith(0, "", ""))
        const again = yield* runtime.list({ [`${Label.project}.contract-marker`]: marker })
        expect(again.find((f) => f.id === a.id)?.status).toBe("exited")
      }).pipe(Effect.provide(layer)), 30_000)

    it.live("a missing image is ImageNotFound naming the image and the build command", () =>
      Effect.gen(function*() {
        const runtime = yield* SandboxRuntime
        const error = yield* Effect.flip(runtime.create({ ...spec(), image: "hermes-sandbox/does-not-exist:0" }))
        expect(error).toMatchObject({ _tag: "ImageNotFound", image: "hermes-sandbox/does-not-exist:0" })
        if (error._tag === "ImageNotFound") expect(error.buildCommand).toContain("image build")
      }).pipe(Effect.provide(layer)))
  })

  return { spec, created, runProgram, Scope }
}
