/**
 * keepFullOutput (issue 29, item 4): a result's streams stay within outputLimitBytes, and a run that
 * asked keeps each stream whole up to its own bound, as `fullOutput` when the result was cut.
 * OutputCapture's two caps as a property; the executor on the fake runtime; the real engine's
 * supervisor relays up to the larger cap: test/mcp-collect.test.ts (through the MCP server).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import { DEFAULT_KEPT_OUTPUT_BYTES, Executor, OutputCapture } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"
import fc from "fast-check"

const ascii = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

describe("OutputCapture with a kept bound", () => {
  it("text() is the first limitBytes, full() the first keepBytes, of what was pushed; truncated says whether each is all", () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 0, maxLength: 300 }).map((a) => a.map((b) => 97 + (b % 26)))),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 0, max: 2000 }),
        (chunks, limit, keep) => {
          const c = new OutputCapture(limit, keep)
          for (const chunk of chunks) c.push(chunk)
          const all = ascii(Uint8Array.from(chunks.flatMap((x) => [...x])))
          expect(c.total).toBe(all.length)
          expect(c.text()).toBe(all.slice(0, limit))
          expect(c.bytes.byteLength).toBe(Math.min(all.length, limit))
          expect(c.truncated).toBe(all.length > limit)
          const full = c.full()
          if (keep === 0) expect(full).toBeUndefined()
          else expect(full).toEqual({ text: all.slice(0, keep), truncated: all.length > keep })
        }
      )
    )
  })
})

const withExecutor = <A, E>(
  f: (executor: Executor.Executor["Type"], journal: Journal.Journal["Type"]) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      Executor.layer({ awaitRemoval: true, outputLimitBytes: 100 }).pipe(
        Layer.provideMerge(FakeRuntime.layer()),
        Layer.provideMerge(MemoryJournal.layer())
      ),
      scope
    )
    const executor = yield* Effect.provide(Executor.Executor, context)
    const journal = yield* Effect.provide(Journal.Journal, context)
    return yield* f(executor, journal).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

describe("executeCode's keepFullOutput (fake runtime, outputLimitBytes 100)", () => {
  // 1,000 bytes of stdout whose end the result's 100 cannot hold; stderr small.
  const long = `${"x".repeat(990)}THE-END!!\n`
  const code = fakeProgram({ stdout: long, stderr: "warn\n" })

  it.effect("asked for (true): the result is cut as before, fullOutput holds both streams whole", () =>
    withExecutor((executor) =>
      Effect.gen(function* () {
        const r = yield* executor.executeCode({ language: "python", code }, { keepFullOutput: true })
        expect([r.stdout.length, r.stdoutTruncated, r.stdoutBytes]).toEqual([100, true, 1000])
        expect(r.fullOutput).toEqual({
          stdout: long,
          stderr: "warn\n",
          stdoutTruncated: false,
          stderrTruncated: false
        })
      })
    )
  )

  it.effect("a bound of its own: the first that many bytes, stdoutTruncated when the program wrote more", () =>
    withExecutor((executor) =>
      Effect.gen(function* () {
        const r = yield* executor.executeCode({ language: "python", code }, { keepFullOutput: 500 })
        expect(r.fullOutput?.stdout).toBe(long.slice(0, 500))
        expect(r.fullOutput?.stdoutTruncated).toBe(true)
      })
    )
  )

  it.effect("not asked, or nothing cut: no fullOutput (the result has it all)", () =>
    withExecutor((executor) =>
      Effect.gen(function* () {
        expect((yield* executor.executeCode({ language: "python", code })).fullOutput).toBeUndefined()
        const short = yield* executor.executeCode(
          { language: "python", code: fakeProgram({ stdout: "short\n" }) },
          { keepFullOutput: true }
        )
        expect([short.stdout, short.fullOutput]).toEqual(["short\n", undefined])
      })
    )
  )

  it.effect("a value that is no bound is InvalidRequest naming keepFullOutput, before anything is recorded", () =>
    withExecutor((executor, journal) =>
      Effect.gen(function* () {
        for (const keep of [0, -1, 1.5, 2 * 1024 * 1024 * 1024, "10m", Number.NaN]) {
          const refused = yield* Effect.flip(
            executor.executeCode({ language: "python", code }, { keepFullOutput: keep as never })
          )
          expect(refused._tag === "InvalidRequest" && refused.field, String(keep)).toBe("keepFullOutput")
        }
        expect(yield* journal.lastSequence).toBe(0)
        expect(DEFAULT_KEPT_OUTPUT_BYTES).toBe(10 * 1024 * 1024)
      })
    )
  )
})
