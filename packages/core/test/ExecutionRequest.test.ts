import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { planExecution, validateWorkspacePath } from "@hermes-sandbox/core/ExecutionRequest"
import { resolveExecutorConfig } from "@hermes-sandbox/core/ExecutorConfig"
import { Schemas } from "@hermes-sandbox/core"

describe("request and option validation", () => {
  it.effect("resolves the seeds' defaults", () =>
    Effect.gen(function* () {
      const config = yield* resolveExecutorConfig()
      expect(config).toMatchObject({
        timeoutMs: 300_000,
        memoryBytes: 512 * 1024 * 1024,
        nanoCpus: 1e9,
        pidsLimit: 256,
        outputLimitBytes: 1024 * 1024,
        network: false,
        workingDir: "/workspace",
        user: "1001:1001"
      })
    })
  )

  it.effect.each([
    [{ timeoutMs: 0 }, "timeoutMs"],
    [{ timeoutMs: -1 }, "timeoutMs"],
    [{ memory: "5m" }, "memory"],
    [{ memory: "lots" }, "memory"],
    // A fractional byte count passed validation and then failed as a JournalError (or at the engine).
    [{ memory: 536870912.5 }, "memory"],
    [{ memory: -1 }, "memory"],
    [{ cpus: 0 }, "cpus"],
    [{ pidsLimit: 1.5 }, "pidsLimit"],
    [{ images: { python: "" } }, "images.python"],
    [{ capAdd: ["SYS_ADMIN"] }, "capAdd"]
  ] as const)("rejects executor option %j naming %s", ([options, field]) =>
    Effect.gen(function* () {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const error = yield* Effect.flip(resolveExecutorConfig(options as any))
      expect(error._tag).toBe("InvalidRequest")
      expect(error.field).toBe(field)
      expect(error.message).toContain(field)
    })
  )

  it.effect("accepts language aliases and resolves per-request overrides", () =>
    Effect.gen(function* () {
      const config = yield* resolveExecutorConfig({ timeoutMs: 1000 })
      const plan = yield* planExecution({ language: "JS", code: "1", memory: "64m", timeoutMs: 50, cpus: 0.5 }, config)
      expect(plan).toMatchObject({
        language: "javascript",
        memoryBytes: 64 * 1024 * 1024,
        timeoutMs: 50,
        nanoCpus: 5e8
      })
      expect(plan.image).toBe("hermes-sandbox/node:latest")
      expect(plan.codeSha256).toMatch(/^[0-9a-f]{64}$/)
    })
  )

  it("parses Docker-style sizes", () => {
    expect(Schemas.parseSize("512m")).toBe(512 * 1024 * 1024)
    expect(Schemas.parseSize("1g")).toBe(1024 ** 3)
    expect(Schemas.parseSize("64K")).toBe(65536)
    expect(Schemas.parseSize(1234)).toBe(1234)
    expect(Schemas.parseSize("12x")).toBeUndefined()
  })

  it("refuses workspace paths that escape", () => {
    expect(validateWorkspacePath("a/b.txt")).toBeUndefined()
    for (const bad of ["/etc/passwd", "../x", "a/../../x", "", "a//b", "./a", "a\0b"]) {
      expect(validateWorkspacePath(bad)).toBeDefined()
    }
  })
})
