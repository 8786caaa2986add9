/**
 * The shared schemas: one size grammar and formatter, InvalidRequest from a decode's first issue,
 * and property tests over the arbitraries derived from the same schemas (core/testing): every
 * valid request plans, every valid option set resolves, every size round-trips.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Schema } from "effect"
import { describeValue } from "@hermes-sandbox/core/Errors"
import { type ExecuteRequest, Schemas } from "@hermes-sandbox/core"
import { planExecution } from "@hermes-sandbox/core/ExecutionRequest"
import {
  resolveExecutorConfig,
  resolveSandboxDefaults,
  SandboxDefaultsSchema
} from "@hermes-sandbox/core/ExecutorConfig"
import { arbBytes, arbExecuteRequest, arbExecutorOptions, arbMemory, arbSize } from "@hermes-sandbox/core/testing"
import * as EventsTesting from "@hermes-sandbox/events/testing"

const { GiB, KiB, MiB, TiB } = Schemas
const decodeSize = Schema.decodeUnknownSync(Schemas.Size)

describe("one size grammar", () => {
  it.each([
    // Docker's (the executor options')
    ["512m", 512 * MiB],
    ["1g", GiB],
    ["64K", 64 * KiB],
    ["64kb", 64 * KiB],
    ["2GB", 2 * GiB],
    ["100b", 100],
    ["1073741824", GiB],
    [" 8 m ", 8 * MiB],
    // the Hermes agent's
    ["256M", 256 * MiB],
    ["512MiB", 512 * MiB],
    ["1t", TiB],
    ["2TiB", 2 * TiB],
    ["4kib", 4 * KiB],
    // fractions that are whole bytes
    ["1.5g", 1.5 * GiB],
    ["0.5k", 512],
    [1234, 1234],
    [0, 0]
  ] as const)("%j is %d bytes", (input, bytes) => {
    expect(Schemas.parseSize(input)).toBe(bytes)
  })

  it.each([
    ["12x"],
    ["lots"],
    [""],
    ["-1m"],
    ["1.1k"],
    ["0.5"],
    ["536870912.5"],
    [536870912.5],
    [-1],
    [Number.NaN],
    [2 ** 60],
    [{}],
    [null]
  ])("%j is refused (not a size, or not a whole number of bytes)", (input) => {
    expect(Schemas.parseSize(input)).toBeUndefined()
  })

  it("one formatter: the shortest exact unit, read back by the grammar", () => {
    expect([GiB, 512 * MiB, 64 * KiB, 1234, 0, 1536 * MiB].map(Schemas.formatSize)).toEqual([
      "1g",
      "512m",
      "64k",
      "1234",
      "0",
      "1536m"
    ])
  })

  it("every decoded size round-trips through the formatter (property)", () => {
    fc.assert(
      fc.property(arbSize, (written) => {
        const bytes = decodeSize(written)
        expect(Number.isSafeInteger(bytes)).toBe(true)
        expect(Schemas.parseSize(Schemas.formatSize(bytes))).toBe(bytes)
        expect(decodeSize(Schemas.formatSize(bytes))).toBe(bytes)
      }),
      { numRuns: 500 }
    )
    fc.assert(
      fc.property(arbBytes, (bytes) => Schemas.parseSize(Schemas.formatSize(bytes)) === bytes),
      { numRuns: 500 }
    )
  })

  it("every arbitrary memory limit is at least Docker's minimum", () => {
    fc.assert(
      fc.property(
        arbMemory,
        (written) => Schema.decodeUnknownSync(Schemas.Memory)(written) >= Schemas.DOCKER_MIN_MEMORY_BYTES
      ),
      { numRuns: 300 }
    )
  })
})

describe("InvalidRequest from the first issue: the path is the field, the message annotation what is allowed", () => {
  const refusal = (options: unknown) => Effect.runSync(Effect.flip(resolveExecutorConfig(options as never)))

  it.effect("a field's own message, the value as written", () =>
    Effect.gen(function* () {
      expect(refusal({ memory: "5m" })).toMatchObject({
        field: "memory",
        value: "5m",
        allowed: `bytes or a size like "512m", at least 6m (Docker's minimum)`,
        message: `invalid memory: got "5m"; allowed: bytes or a size like "512m", at least 6m (Docker's minimum)`
      })
      expect(refusal({ timeoutMs: "5s" })).toMatchObject({
        field: "timeoutMs",
        value: "5s",
        allowed: "a number of milliseconds > 0 and <= 86400000 (24 h)"
      })
      expect(refusal({ tmpSize: {} })).toMatchObject({
        field: "tmpSize",
        value: {},
        allowed: `bytes or a size like "64m", at least ${MiB} bytes`
      })
    })
  )

  it("a list item is reported on the list, with the item as the value", () => {
    expect(refusal({ capAdd: ["CHOWN", "SYS_ADMIN"] })).toMatchObject({
      field: "capAdd",
      value: "SYS_ADMIN",
      allowed: "only DAC_OVERRIDE, CHOWN, FOWNER may be added back"
    })
    expect(refusal({ warmPool: { size: 1, languages: ["cobol"] } })).toMatchObject({
      field: "warmPool.languages",
      value: "cobol",
      allowed: "one of python, javascript, bash"
    })
    // Preloaded modules reach the interpreter's argv: dotted names only, 32 at most.
    expect(refusal({ warmPool: { size: 1, preload: { python: ["pandas", "os;import x"] } } })).toMatchObject({
      field: "warmPool.preload.python",
      value: "os;import x"
    })
    expect(refusal({ warmPool: { size: 1, preload: { python: ["--help"] } } })).toMatchObject({
      field: "warmPool.preload.python",
      value: "--help"
    })
    expect(
      refusal({ warmPool: { size: 1, preload: { python: Array.from({ length: 33 }, (_, i) => `m${i}`) } } })
    ).toMatchObject({ field: "warmPool.preload.python" })
    const taken = Effect.runSync(
      resolveExecutorConfig({ warmPool: { size: 1, preload: { python: ["pandas", "matplotlib.pyplot"] } } })
    )
    expect(taken).toBeDefined()
  })

  it("an unknown key names the key", () => {
    expect(refusal({ images: { cobol: "x" } })).toMatchObject({
      field: "images.cobol",
      value: "cobol",
      allowed: "one of python, javascript, bash"
    })
  })

  it("a nested field and a missing one", () => {
    expect(refusal({ images: { python: "a b" } })).toMatchObject({ field: "images.python", value: "a b" })
    expect(refusal({ warmPool: {} })).toMatchObject({
      field: "warmPool.size",
      value: undefined,
      allowed: "an integer from 1 to 256"
    })
    expect(
      Effect.runSync(
        Effect.flip(planExecution({ code: "x" } as ExecuteRequest, Effect.runSync(resolveExecutorConfig())))
      )
    ).toMatchObject({
      field: "language",
      allowed: "python, javascript or bash (aliases: py, js, node, sh)"
    })
  })

  it("an item inside a list keeps its index: mounts[0].hostPath", () => {
    const decode = Schemas.decoderFor(Schema.Struct({ mounts: Schema.Array(Schemas.Mount) }))
    const result = decode("", { mounts: [{ hostPath: "relative", containerPath: "/x" }] })
    expect(Either.isLeft(result) && result.left).toMatchObject({
      field: "mounts[0].hostPath",
      value: "relative",
      allowed: "an absolute host path"
    })
  })

  it.effect("a language that only an object's prototype has is not a language", () =>
    Effect.gen(function* () {
      const config = yield* resolveExecutorConfig()
      expect(yield* Effect.flip(planExecution({ language: "constructor", code: "" }, config))).toMatchObject({
        field: "language",
        value: "constructor"
      })
    })
  )

  it.effect("non-integers are InvalidRequest, never a container's problem", () =>
    Effect.gen(function* () {
      const config = yield* resolveExecutorConfig()
      for (const [request, field] of [
        [{ memory: 536870912.5 }, "memory"],
        [{ memory: "1.1k" }, "memory"],
        [{ pidsLimit: 2.5 }, "pidsLimit"],
        [{ outputLimitBytes: 1.5 }, "outputLimitBytes"]
      ] as const) {
        expect(yield* Effect.flip(planExecution({ language: "python", code: "1", ...request }, config))).toMatchObject({
          _tag: "InvalidRequest",
          field
        })
      }
      expect(
        yield* planExecution({ language: "python", code: "1", timeoutMs: 2.5, cpus: 0.333 }, config)
      ).toMatchObject({ timeoutMs: 3, nanoCpus: 333_000_000 })
    })
  )

  it("decoders of picked fields (check.* before them) keep the messages (the path is the field)", () => {
    expect(Effect.runSync(Schemas.decoderFor(SandboxDefaultsSchema.pick("memory"))("", { memory: "1g" })).memory).toBe(
      GiB
    )
    expect(
      Effect.runSync(
        Effect.flip(
          Schemas.decoderFor(Schema.Struct({ lifetimeSeconds: Schemas.PositiveInt(10) }))("", { lifetimeSeconds: 0 })
        )
      )
    ).toMatchObject({ field: "lifetimeSeconds", allowed: "an integer from 1 to 10" })
    expect(Effect.runSync(Effect.flip(Schemas.decodeEnvOver("secretEnv", { "1X": "v" })))).toMatchObject({
      field: "secretEnv.1X",
      value: "1X"
    })
    expect(
      Effect.runSync(
        Effect.flip(Schemas.decoderFor(Schema.Struct({ sessionImage: Schemas.Image }))("", { sessionImage: " " }))
      )
    ).toMatchObject({ field: "sessionImage" })
  })
})

describe("describeValue: one way to quote a value", () => {
  it("quotes short strings and structures, summarises long ones, says nothing for nothing", () => {
    expect(describeValue("lots")).toBe('"lots"')
    expect(describeValue("x".repeat(81))).toBe("a string of 81 characters")
    expect(describeValue(-5)).toBe("-5")
    expect(describeValue(undefined)).toBe("nothing")
    expect(describeValue(null)).toBe("nothing")
    expect(describeValue(["a"])).toBe('["a"]')
    expect(describeValue({ k: "v".repeat(100) })).toMatch(/^\{"k":"v+\.\.\.$/)
  })
})

describe("properties over the derived arbitraries", () => {
  it("every arbitrary valid request plans, with its own limits", () => {
    const config = Effect.runSync(resolveExecutorConfig())
    fc.assert(
      fc.property(arbExecuteRequest, (request) => {
        const plan = Effect.runSync(Effect.either(planExecution(request as ExecuteRequest, config)))
        if (Either.isLeft(plan)) throw new Error(`refused ${JSON.stringify(request)}: ${plan.left.message}`)
        const p = plan.right
        if (request.memory !== undefined) expect(p.memoryBytes).toBe(Schemas.parseSize(request.memory))
        if (request.cpus !== undefined) expect(p.nanoCpus).toBe(Math.round(request.cpus * 1e9))
        if (request.timeoutMs !== undefined) expect(p.timeoutMs).toBe(Math.ceil(request.timeoutMs))
        expect(Object.keys(config.languages)).toContain(p.language)
        expect(p.files.map(([path]) => path)).toEqual(Object.keys(request.files ?? {}))
      }),
      { numRuns: 300 }
    )
  })

  it("events' narrower arbExecuteRequest is held to the schema: its type is a request, and every value plans", () => {
    const config = Effect.runSync(resolveExecutorConfig())
    const narrower: fc.Arbitrary<ExecuteRequest> = EventsTesting.arbExecuteRequest
    fc.assert(
      fc.property(narrower, (request) => {
        const plan = Effect.runSync(Effect.either(planExecution(request, config)))
        if (Either.isLeft(plan)) throw new Error(`refused ${JSON.stringify(request)}: ${plan.left.message}`)
      }),
      { numRuns: 300 }
    )
  })

  it("every arbitrary valid option set resolves, and its sandbox defaults resolve alike on their own", () => {
    fc.assert(
      fc.property(arbExecutorOptions, (options) => {
        const config = Effect.runSync(Effect.either(resolveExecutorConfig(options as never)))
        if (Either.isLeft(config)) throw new Error(`refused ${JSON.stringify(options)}: ${config.left.message}`)
        const { maxConcurrency: _c, maxQueue: _q, whenQueueFull: _w, awaitRemoval: _a, ...sandbox } = config.right
        expect(Effect.runSync(resolveSandboxDefaults(options as never))).toEqual(sandbox)
      }),
      { numRuns: 200 }
    )
  })
})
