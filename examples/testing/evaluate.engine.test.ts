/**
 * The same service against the real engine: a few examples, not properties (each run starts a
 * container), to check what the fake cannot — that the Python program itself is right.
 */
import { describe, expect, it } from "vitest"
import { createExecutor } from "@hermes-sandbox/docker"
import { evaluate } from "./evaluate.js"

describe("evaluate, on the engine", () => {
  it("computes, and reports Python's error", async () => {
    await using executor = await createExecutor()
    expect(await evaluate(executor, "6*7")).toEqual({ ok: true, value: "42" })
    expect(await evaluate(executor, "1/0")).toEqual({
      ok: false,
      reason: "error",
      detail: "ZeroDivisionError: division by zero"
    })
    expect(await evaluate(executor, "__import__('os')")).toMatchObject({ ok: false, reason: "error" })
  })
})
