/**
 * Sessions on the fake runtime, where only the fake can show it: the engine's exec count,
 * TestClock-only timing, secrets in the fake's records, the cd/export model check. The
 * behaviours both sides share are one contract, test/support/sessionContract.ts, run on the
 * fake (test/session-contract.fake.test.ts) and on the engine (test/session-contract.docker.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Redacted, Scope, Stream, TestClock } from "effect"
import fc from "fast-check"
import { Label } from "@hermes-sandbox/core/Labels"
import { Session } from "@hermes-sandbox/core"
import { type SessionsOptions } from "@hermes-sandbox/core/Session"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, MemoryJournal } from "@hermes-sandbox/events"
import { SandboxRuntime } from "@hermes-sandbox/core"

/** A sessions service over a given runtime + journal (so a second service can play "the next process"). */
const service = (options: SessionsOptions, base: Layer.Layer<SandboxRuntime | FakeRuntimeControl | Journal.Journal>) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(Session.layer(options).pipe(Layer.provide(base)), scope)
    return { sessions: yield* Effect.provide(Session.Sessions, context), close: Scope.close(scope, Exit.void) }
  })

/** One fake engine and journal, shared by every service the test builds. */
const withEngine = <A, E>(
  f: (ctx: {
    open: (
      options?: SessionsOptions
    ) => Effect.Effect<{ sessions: Session.Sessions["Type"]; close: Effect.Effect<void> }, unknown>
    control: FakeRuntimeControl["Type"]
    journal: Journal.Journal["Type"]
    runtime: SandboxRuntime["Type"]
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const base = yield* Layer.buildWithScope(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()), scope)
    const baseLayer = Layer.succeedContext(base)
    const open = (options: SessionsOptions = {}) => service({ sweepOnStart: false, ...options }, baseLayer)
    return yield* f({
      open,
      control: yield* Effect.provide(FakeRuntimeControl, base),
      journal: yield* Effect.provide(Journal.Journal, base),
      runtime: yield* Effect.provide(SandboxRuntime, base)
    }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

const allEvents = (journal: Journal.Journal["Type"]) =>
  journal.read().pipe(
    Stream.runCollect,
    Effect.map((c): Array<EventEnvelope> => [...c])
  )

describe("Session (fake runtime)", () => {
  // Order, results and non-overlapping spans of parallel calls are in the contract.
  it.live("parallel calls on one session never run two programs at once in the sandbox (the fake engine's count)", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function* () {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open()
        yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => i),
          (i) => s.run(fakeProgram({ sleepMs: 15, export: { LAST: String(i) }, stdout: `call ${i}\n` })),
          { concurrency: "unbounded" }
        )
        expect(yield* control.maxConcurrentExecs).toBe(1)
        yield* close
      })
    )
  )

  it.effect("a running call is not idle: a call longer than the lifetime does not expire the session", () =>
    withEngine(({ open }) =>
      Effect.gen(function* () {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open({ lifetimeSeconds: 10, timeoutMs: 600_000 })
        const fiber = yield* Effect.fork(s.run(fakeProgram({ sleepMs: 30_000, stdout: "slow" })))
        yield* TestClock.adjust("30 seconds")
        expect((yield* Fiber.join(fiber)).stdout).toBe("slow")
        expect((yield* s.status).open).toBe(true)
        yield* close
      })
    )
  )

  it.effect(
    "a sandbox that dies under a call (gVisor's OOM, a docker kill) ends the session at once, saying why; the call does not wait for its deadline",
    () =>
      withEngine(({ journal, open, runtime }) =>
        Effect.gen(function* () {
          const { close, sessions } = yield* open()
          const s = yield* sessions.open({ timeoutMs: 600_000 })
          // The fake's exec outlives its sandbox's death, as a call's does under gVisor.
          const call = yield* Effect.fork(Effect.either(s.run(fakeProgram({ sleepMs: 300_000, stdout: "never" }))))
          yield* TestClock.adjust("1 second")
          const [sandbox] = yield* runtime.list({ [Label.session]: s.sessionId })
          yield* runtime.kill(sandbox!)
          // No clock moves: the call ends because the sandbox did, not at a deadline.
          const ended = yield* Fiber.join(call)
          expect(ended._tag).toBe("Left")
          expect(ended._tag === "Left" && ended.left).toMatchObject({
            _tag: "SessionEnded",
            reason: "sandbox exited (exit 137)"
          })
          expect((yield* s.status).endReason).toBe("sandbox exited (exit 137)")
          yield* s.close
          const closed = (yield* allEvents(journal)).find(
            (e) => e.streamId === s.sessionId && e.type === "SessionClosed"
          )
          expect(closed?.data).toMatchObject({ reason: "sandbox exited (exit 137)" })
          yield* close
        })
      )
  )

  it.effect(
    "forwarded secrets reach the command by name only: not in the sandbox's spec, the journal or the result",
    () =>
      withEngine(({ journal, open, runtime }) =>
        Effect.gen(function* () {
          const secret = "s3cr3t-value-9f8e7d"
          const { close, sessions } = yield* open()
          const s = yield* sessions.open({ secretEnv: { API_TOKEN: Redacted.make(secret) }, env: { PLAIN: "visible" } })
          expect((yield* s.run(fakeProgram({ printEnv: "PLAIN" }))).stdout).toBe("visible\n")
          const r = yield* s.run(fakeProgram({ stdout: "did not print it" }))
          // The command can use it (it is in its environment) ...
          const used = yield* s.run(fakeProgram({ printEnv: "API_TOKEN" }))
          expect(used.stdout).toBe(`${secret}\n`)
          // ... but it is nowhere else.
          expect(JSON.stringify(r)).not.toContain(secret)
          expect(JSON.stringify(yield* allEvents(journal))).not.toContain(secret)
          const [info] = yield* runtime.list({ [Label.session]: s.sessionId })
          expect(JSON.stringify(info)).not.toContain(secret)
          expect(info?.labels[Label.fingerprintSpec]).toContain("API_TOKEN")
          yield* close
        })
      )
  )

  it.effect.prop(
    "any sequence of cd/export calls leaves exactly the last directory and values (model check)",
    [
      fc.array(
        fc.oneof(
          fc.record({ cd: fc.constantFrom("/a", "/b", "/tmp/c", "/workspace/d e") }),
          fc.record({
            export: fc.dictionary(fc.constantFrom("X", "Y", "Z"), fc.string({ maxLength: 8 }), { maxKeys: 2 })
          })
        ),
        { maxLength: 12 }
      )
    ],
    ([ops]) =>
      withEngine(({ open }) =>
        Effect.gen(function* () {
          const { close, sessions } = yield* open()
          const s = yield* sessions.open()
          const model = { cwd: "/workspace", env: {} as Record<string, string> }
          for (const op of ops) {
            yield* s.run(fakeProgram(op))
            if ("cd" in op) model.cwd = op.cd
            else Object.assign(model.env, op.export)
          }
          expect((yield* s.run(fakeProgram({ printCwd: true }))).stdout).toBe(`${model.cwd}\n`)
          for (const name of ["X", "Y", "Z"])
            expect((yield* s.run(fakeProgram({ printEnv: name }))).stdout).toBe(`${model.env[name] ?? ""}\n`)
          yield* close
        })
      ),
    { fastCheck: { numRuns: 30 } }
  )
})
