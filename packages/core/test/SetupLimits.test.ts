/**
 * Requests whose setup in the sandbox cannot succeed are InvalidRequest before any container
 * exists (hostile review 1, finding 13): path segments and paths the filesystem refuses, file
 * lists too large to hand over, a file that is also a directory, environments the kernel's
 * execve refuses, files or code larger than their tmpfs or the memory limit. The same cases
 * run on the engine in test/hostile/setup-failures.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit, Layer, Redacted, Scope } from "effect"
import { type Executor, type ExecutorOptions, Schemas, Session } from "@hermes-sandbox/core"
import { MAX_ENV_STRING_BYTES, MAX_ENV_TOTAL_BYTES } from "@hermes-sandbox/core/Schemas"
import { planExecution, validateWorkspacePath } from "@hermes-sandbox/core/ExecutionRequest"
import { resolveExecutorConfig } from "@hermes-sandbox/core/ExecutorConfig"
import { fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { withFakeExecutor } from "./support/fakeExecutor.js"

const KiB = 1024
const MiB = 1024 * KiB

/** n variables V0.. of `size` bytes each. */
const many = (n: number, size: number): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, "v".repeat(size)]))

/** The plan's refusal; an accepted request fails the test (without diffing a plan of megabytes). */
const refusal = (
  request: Parameters<typeof planExecution>[0],
  options: Parameters<typeof resolveExecutorConfig>[0] = {}
) =>
  Effect.gen(function* () {
    const config = yield* resolveExecutorConfig(options)
    const outcome = yield* Effect.either(planExecution(request, config))
    if (Either.isRight(outcome))
      return yield* Effect.die(new Error("expected an InvalidRequest, but the request was accepted"))
    return outcome.left
  })

const accepted = (
  request: Parameters<typeof planExecution>[0],
  options: Parameters<typeof resolveExecutorConfig>[0] = {}
) =>
  Effect.gen(function* () {
    const config = yield* resolveExecutorConfig(options)
    return yield* planExecution(request, config)
  })

const py = (extra: Partial<Parameters<typeof planExecution>[0]> = {}) => ({
  language: "python",
  code: "print(1)",
  ...extra
})

describe("workspace paths the filesystem takes", () => {
  it("segments of at most 255 bytes and paths of at most 4095 bytes, counted in UTF-8", () => {
    expect(validateWorkspacePath("x".repeat(255))).toBeUndefined()
    expect(validateWorkspacePath("x".repeat(256))).toMatch(/at most 255 bytes in UTF-8 \(NAME_MAX\)/)
    expect(validateWorkspacePath("é".repeat(127) + "x")).toBeUndefined() // 255 bytes
    expect(validateWorkspacePath(`dir/${"é".repeat(128)}/f`)).toMatch(/has 256/) // 128 characters, 256 bytes
    const seg = "s".repeat(254) + "/"
    const atLimit = seg.repeat(16) + "f".repeat(4095 - 16 * 255)
    expect(Buffer.byteLength(atLimit)).toBe(4095)
    expect(validateWorkspacePath(atLimit)).toBeUndefined()
    expect(validateWorkspacePath(atLimit + "g")).toMatch(/at most 4095 bytes in UTF-8 \(PATH_MAX\); this one has 4096/)
    // 2100 characters, but 4200 bytes: the old check counted characters.
    expect(
      validateWorkspacePath(Array.from({ length: 20 }, () => "é".repeat(104)).join("/") + "/" + "é".repeat(1))
    ).toMatch(/PATH_MAX/)
  })

  it.effect("a request's path problems name the file, its value and what is allowed, cut short when long", () =>
    Effect.gen(function* () {
      const e = yield* refusal(py({ files: { [`d/${"x".repeat(256)}`]: "x" } }))
      expect(e).toMatchObject({ _tag: "InvalidRequest", field: `files[${JSON.stringify(`d/${"x".repeat(98)}`)}...]` })
      expect(e.message).toContain(e.field)
      expect(e.message.length).toBeLessThan(400)
      expect(e.allowed).toMatch(/255 bytes/)
    })
  )

  it.effect("paths of more than 1 MiB in all are refused (300 paths of 3.8 KB); 1 MiB is accepted", () =>
    Effect.gen(function* () {
      const files: Record<string, string> = {}
      for (let i = 0; i < 300; i++) files[`${String(i).padStart(3, "0")}/${"p".repeat(250)}/`.repeat(15) + "f"] = "x"
      const e = yield* refusal(py({ files }))
      expect(e).toMatchObject({ _tag: "InvalidRequest", field: "files" })
      expect(e.allowed).toMatch(/1048576 bytes \(1 MiB\) in all/)
      // 512 paths of exactly 2 KiB: 1 MiB of paths.
      const fits = Object.fromEntries(
        Array.from({ length: 512 }, (_, i) => [
          `${String(i).padStart(3, "0")}/${"q".repeat(250)}/`.repeat(8) + "u".repeat(8),
          "x"
        ])
      )
      expect(Object.keys(fits).reduce((n, p) => n + Buffer.byteLength(p), 0)).toBe(MiB)
      yield* accepted(py({ files: fits }))
      const over = { ...fits, z: "x" }
      expect(yield* refusal(py({ files: over }))).toMatchObject({ field: "files" })
    })
  )

  it.effect.each([
    [{ a: "file", "a/b": "inside" }, 'files["a/b"]', '"a"'],
    [{ "d/e": "inside", d: "file" }, 'files["d/e"]', '"d"'],
    [{ "x/y/z": "deep", "x/y": "file", x0: "unrelated" }, 'files["x/y/z"]', '"x/y"'],
    [{ "a/b": "1", "a//b": "2" }, 'files["a//b"]', "normalized"],
    [{ a: "1", "./a": "2" }, 'files["./a"]', "normalized"],
    [{ "a/b": "1", "a/b/": "2" }, 'files["a/b/"]', "normalized"]
  ] as const)("a file that is also a directory, or one path spelled twice, is refused: %j", ([files, field, allowed]) =>
    Effect.gen(function* () {
      const e = yield* refusal(py({ files }))
      expect(e).toMatchObject({ _tag: "InvalidRequest", field })
      expect(e.allowed).toContain(allowed)
    })
  )

  it.effect("siblings and names sharing a prefix are not conflicts", () =>
    Effect.gen(function* () {
      const plan = yield* accepted(
        py({ files: { a: "1", ab: "2", "a.d/x": "3", "b/a": "4", "b/c/d": "5", "b/c/e": "6" } })
      )
      expect(plan.files.map(([p]) => p)).toEqual(["a", "ab", "a.d/x", "b/a", "b/c/d", "b/c/e"])
    })
  )
})

describe("sandbox sizes", () => {
  it.effect("files larger than the /workspace tmpfs, counted in whole pages, are refused", () =>
    Effect.gen(function* () {
      const options = { workspaceSize: "1m" }
      expect(yield* refusal(py({ files: { big: new Uint8Array(MiB + 1) } }), options)).toMatchObject({
        _tag: "InvalidRequest",
        field: "files",
        allowed: expect.stringMatching(/workspaceSize/)
      })
      yield* accepted(py({ files: { big: new Uint8Array(MiB) } }), options)
      const pages = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, "x"]))
      yield* accepted(py({ files: pages(256) }), options) // 256 pages: fits (measured on runc and runsc)
      expect(yield* refusal(py({ files: pages(257) }), options)).toMatchObject({ field: "files" })
      // Empty files and directories take no pages.
      yield* accepted(
        py({ files: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`d${i}/f`, ""])) }),
        options
      )
    })
  )

  it.effect("code larger than the /tmp tmpfs is refused", () =>
    Effect.gen(function* () {
      const options = { tmpSize: "1m", maxCodeBytes: 4 * MiB }
      expect(yield* refusal(py({ code: "#".repeat(MiB + 1) }), options)).toMatchObject({
        _tag: "InvalidRequest",
        field: "code",
        allowed: expect.stringMatching(/tmpSize/)
      })
      yield* accepted(py({ code: "#".repeat(MiB) }), options)
    })
  )

  it.effect("files and code whose pages alone exceed the memory limit are refused; the request's memory counts", () =>
    Effect.gen(function* () {
      const files = { a: new Uint8Array(5 * MiB), b: new Uint8Array(5 * MiB) }
      expect(yield* refusal(py({ memory: "8m", files }))).toMatchObject({
        _tag: "InvalidRequest",
        field: "files",
        allowed: expect.stringMatching(/memory/)
      })
      expect(yield* refusal(py({ files }), { memory: "8m" })).toMatchObject({ field: "files" })
      yield* accepted(py({ memory: "16m", files }))
      expect(yield* refusal(py({ memory: "8m", code: "#".repeat(9 * MiB) }), { maxCodeBytes: 16 * MiB })).toMatchObject(
        { field: "code" }
      )
    })
  )

  it.effect("a caller that runs the plan elsewhere can turn the size checks off", () =>
    Effect.gen(function* () {
      const config = yield* resolveExecutorConfig({ workspaceSize: "1m" })
      yield* planExecution(py({ files: { big: new Uint8Array(2 * MiB) } }), config, { checkSandboxSizes: false })
    })
  )
})

describe("environments the kernel takes", () => {
  it.effect(
    "a NAME=value of 131072 bytes (MAX_ARG_STRLEN with its NUL) is refused, without echoing the value; 131071 is accepted",
    () =>
      Effect.gen(function* () {
        expect(MAX_ENV_STRING_BYTES).toBe(131_071)
        const secret = "s3cr3t".repeat(30_000)
        const e = yield* refusal(py({ env: { TOKEN: secret } }))
        expect(e).toMatchObject({
          _tag: "InvalidRequest",
          field: "env.TOKEN",
          value: `"NAME=value" of ${6 + 180_000} bytes`
        })
        expect(e.message).not.toContain("s3cr3t")
        expect(e.allowed).toMatch(/MAX_ARG_STRLEN/)
        yield* accepted(py({ env: { LONG: "v".repeat(131_071 - 5) } }))
        expect(yield* refusal(py({ env: { LONG: "v".repeat(131_072 - 5) } }))).toMatchObject({ field: "env.LONG" })
        // UTF-8 bytes, not characters: 65,534 two-byte characters are 131,068 bytes (+ "LONG=").
        expect(yield* refusal(py({ env: { LONG: "é".repeat(65_534) } }))).toMatchObject({ field: "env.LONG" })
        // A 3 MiB value (the review's case).
        expect(yield* refusal(py({ env: { BIG: "v".repeat(3 * MiB) } }))).toMatchObject({ field: "env.BIG" })
      })
  )

  it.effect("an environment over 1 MiB in all is refused, the executor's env counted with the request's", () =>
    Effect.gen(function* () {
      expect(MAX_ENV_TOTAL_BYTES).toBe(MiB)
      // 8 variables "Vi=" + 131064 bytes + NUL = 1,048,544 bytes: fits; a ninth does not.
      yield* accepted(py({ env: many(8, 128 * KiB - 8) }))
      const e = yield* refusal(py({ env: many(9, 128 * KiB - 8) }))
      expect(e).toMatchObject({
        _tag: "InvalidRequest",
        field: "env",
        value: expect.stringMatching(/^1179612 bytes in 9 variables$/)
      })
      expect(e.allowed).toMatch(/1048576 bytes \(1 MiB\)/)
      // Executor env of 600 KiB + request env of 600 KiB: each fits, together they do not.
      const half = {
        A0: "a".repeat(100 * KiB),
        A1: "a".repeat(100 * KiB),
        A2: "a".repeat(100 * KiB),
        A3: "a".repeat(100 * KiB),
        A4: "a".repeat(100 * KiB),
        A5: "a".repeat(100 * KiB)
      }
      const fromRequest = Object.fromEntries(Object.entries(half).map(([k, v]) => [`R${k}`, v]))
      const merged = yield* refusal(py({ env: fromRequest }), { env: half })
      expect(merged).toMatchObject({ field: "env", value: expect.stringMatching(/merged over/) })
      // A request variable replacing an executor one counts once.
      yield* accepted(py({ env: half }), { env: half })
    })
  )

  it.effect("executor options are checked the same way", () =>
    Effect.gen(function* () {
      expect(yield* Effect.flip(resolveExecutorConfig({ env: { BIG: "v".repeat(3 * MiB) } }))).toMatchObject({
        _tag: "InvalidRequest",
        field: "env.BIG"
      })
      expect(yield* Effect.flip(resolveExecutorConfig({ env: many(24, 100 * KiB) }))).toMatchObject({
        _tag: "InvalidRequest",
        field: "env"
      })
    })
  )

  it.effect(
    "Schemas.decodeEnvOver (check.env before it) takes the variables it is merged over; a long name is cut short in the field",
    () =>
      Effect.gen(function* () {
        const b = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`B${i}`, "b".repeat(100 * KiB)]))
        const a = Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`A${i}`, "a".repeat(100 * KiB)]))
        yield* Schemas.decodeEnvOver("env", b)
        yield* Schemas.decodeEnvOver("env", b, { B0: "replaced" })
        expect(yield* Effect.flip(Schemas.decodeEnvOver("env", b, a))).toMatchObject({ field: "env" })
        const name = "N".repeat(200 * KiB)
        const e = yield* Effect.flip(Schemas.decodeEnvOver("env", { [name]: "" }))
        expect(e.field).toBe(`env.${"N".repeat(64)}...`)
        expect(e.message.length).toBeLessThan(400)
      })
  )
})

describe("refused before any sandbox exists (fake runtime)", () => {
  const withExecutor = <A, E>(
    options: ExecutorOptions,
    f: (executor: Executor.Executor["Type"], createdCount: Effect.Effect<number>) => Effect.Effect<A, E>
  ) => withFakeExecutor(options, ({ executor, control }) => f(executor, control.createdCount))

  it.effect("the executor creates nothing for any of the cases", () =>
    withExecutor({ workspaceSize: "1m", tmpSize: "1m", maxCodeBytes: 4 * MiB }, (executor, createdCount) =>
      Effect.gen(function* () {
        const cases: Array<[Parameters<typeof planExecution>[0], string]> = [
          [py({ files: { [`${"x".repeat(256)}`]: "x" } }), "files["],
          [py({ files: { [`${"s".repeat(254)}/`.repeat(16) + "f".repeat(16)]: "x" } }), "files["],
          [
            py({
              files: Object.fromEntries(
                Array.from({ length: 300 }, (_, i) => [`${i}/${"p".repeat(250)}/`.repeat(15) + "f", "x"])
              )
            }),
            "files"
          ],
          [py({ files: { a: "1", "a/b": "2" } }), "files["],
          [py({ files: { "d/e": "1", d: "2" } }), "files["],
          [py({ files: { big: new Uint8Array(2 * MiB) } }), "files"],
          [py({ code: "#".repeat(2 * MiB) }), "code"],
          [py({ env: { BIG: "v".repeat(3 * MiB) } }), "env.BIG"],
          [py({ env: many(24, 100 * KiB) }), "env"]
        ]
        for (const [request, field] of cases) {
          const e = yield* Effect.flip(executor.executeCode(request))
          expect(e).toMatchObject({ _tag: "InvalidRequest" })
          expect((e as { field: string }).field.startsWith(field), (e as { field: string }).field).toBe(true)
        }
        expect(yield* createdCount).toBe(0)
        // Within the limits, it runs.
        const ok = yield* executor.executeCode(
          py({
            code: fakeProgram({ stdout: "ok\n" }),
            env: { LONG: "v".repeat(131_071 - 5) },
            files: { [`${"é".repeat(127)}x`]: "x" }
          })
        )
        expect(ok).toMatchObject({ exitCode: 0, stdout: "ok\n" })
      })
    )
  )

  it.effect("a session refuses a per-call env the kernel would refuse, before the exec; the session still serves", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Session.layer({ sweepOnStart: false }).pipe(
          Layer.provide(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()))
        ),
        scope
      )
      const sessions = yield* Effect.provide(Session.Sessions, context)
      yield* Effect.gen(function* () {
        expect(yield* Effect.flip(sessions.open({ env: { BIG: "v".repeat(3 * MiB) } }))).toMatchObject({
          _tag: "InvalidRequest",
          field: "env.BIG"
        })
        const s = yield* sessions.open()
        expect(
          yield* Effect.flip(s.run(fakeProgram({ stdout: "x\n" }), { env: { BIG: "v".repeat(3 * MiB) } }))
        ).toMatchObject({ _tag: "InvalidRequest", field: "env.BIG" })
        expect(yield* Effect.flip(s.run(fakeProgram({ stdout: "x\n" }), { env: many(24, 100 * KiB) }))).toMatchObject({
          _tag: "InvalidRequest",
          field: "env"
        })
        expect(
          yield* Effect.flip(s.runCode({ language: "python", code: "1", env: { LONG: "v".repeat(131_072) } }))
        ).toMatchObject({ _tag: "InvalidRequest", field: "env.LONG" })
        expect((yield* s.run(fakeProgram({ stdout: "still here\n" }))).stdout).toBe("still here\n")
        // Secrets get the same bounds, their values never echoed; and the call's env counts what it is merged over.
        const nul = yield* Effect.flip(sessions.open({ secretEnv: { TOKEN: Redacted.make("a\0b") } }))
        expect(nul).toMatchObject({ _tag: "InvalidRequest", field: "secretEnv.TOKEN", value: "(redacted)" })
        expect(nul.message).not.toContain("a\0b")
        const heavy = yield* sessions.open({
          secretEnv: Object.fromEntries(Object.entries(many(9, 100 * KiB)).map(([k, v]) => [k, Redacted.make(v)]))
        })
        const extra = Object.fromEntries(Object.entries(many(3, 100 * KiB)).map(([k, v]) => [`CALL_${k}`, v]))
        expect(yield* Effect.flip(heavy.run(fakeProgram({}), { env: extra }))).toMatchObject({
          _tag: "InvalidRequest",
          field: "env"
        })
        expect((yield* heavy.run(fakeProgram({ stdout: "fits\n" }), { env: { SMALL: "x" } })).stdout).toBe("fits\n")
      }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
    })
  )
})
