/**
 * Sessions on the fake runtime: state carried between calls, isolation, serialization,
 * idle expiry (TestClock), deadlines, persistent reconnect and fingerprints, secrets, mounts,
 * the journal. The same behaviours run on the engine in test/session.e2e.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Redacted, Scope, Stream, TestClock } from "effect"
import fc from "fast-check"
import { Label, Session, type SessionsOptions } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, MemoryJournal } from "@hermes-sandbox/events"
import { SandboxRuntime } from "@hermes-sandbox/core"

/** A sessions service over a given runtime + journal (so a second service can play "the next process"). */
const service = (options: SessionsOptions, base: Layer.Layer<SandboxRuntime | FakeRuntimeControl | Journal.Journal>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(Session.layer(options).pipe(Layer.provide(base)), scope)
    return { sessions: yield* Effect.provide(Session.Sessions, context), close: Scope.close(scope, Exit.void) }
  })

/** One fake engine and journal, shared by every service the test builds. */
const withEngine = <A, E>(
  f: (ctx: {
    open: (options?: SessionsOptions) => Effect.Effect<{ sessions: Session.Sessions["Type"]; close: Effect.Effect<void> }, unknown>
    control: FakeRuntimeControl["Type"]
    journal: Journal.Journal["Type"]
    runtime: SandboxRuntime["Type"]
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
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

const typesOf = (journal: Journal.Journal["Type"], streamId: string) =>
  journal.read({ streamId }).pipe(Stream.map((e) => e.type), Stream.runCollect, Effect.map((c) => [...c]))
const allEvents = (journal: Journal.Journal["Type"]) => journal.read().pipe(Stream.runCollect, Effect.map((c): Array<EventEnvelope> => [...c]))

describe("Session (fake runtime)", () => {
  it.effect("carries the working directory and exported variables from call to call; close removes the sandbox", () =>
    withEngine(({ control, journal, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open()
        expect(s.containerName).toBe(`hermes-sandbox-${s.sessionId}`)
        const first = yield* s.run(fakeProgram({ cd: "/tmp/project", export: { GREETING: "hello" }, stdout: "moved\n" }))
        expect(first).toMatchObject({ exitCode: 0, stdout: "moved\n", stderr: "", timedOut: false, sessionId: s.sessionId, containerName: s.containerName })
        expect((yield* s.run(fakeProgram({ printCwd: true }))).stdout).toBe("/tmp/project\n")
        expect((yield* s.run(fakeProgram({ printEnv: "GREETING" }))).stdout).toBe("hello\n")
        // A code snippet sees the same directory and variables.
        expect((yield* s.runCode({ language: "python", code: fakeProgram({ printCwd: true }) })).stdout).toBe("/tmp/project\n")
        const exit3 = yield* s.run(fakeProgram({ exitCode: 3, stderr: "bad\n" }))
        expect(exit3).toMatchObject({ exitCode: 3, stderr: "bad\n" })

        yield* s.close
        expect(yield* control.alive).toEqual([])
        expect(yield* typesOf(journal, s.sessionId)).toEqual(["SessionOpened", "ContainerCreated", "ContainerStarted", "ContainerDestroyed", "SessionClosed"])
        expect(yield* typesOf(journal, first.executionId)).toEqual(["ExecutionRequested", "ContainerExited"])
        const requested = (yield* allEvents(journal)).find((e) => e.streamId === first.executionId && e.type === "ExecutionRequested")
        expect(requested?.data).toMatchObject({ scope: "session", sessionId: s.sessionId, language: "bash" })
        const error = yield* Effect.flip(s.run("echo after close"))
        expect(error).toMatchObject({ _tag: "SessionEnded", sessionId: s.sessionId, reason: "closed" })
        yield* s.close // idempotent
        yield* close
      })))

  it.effect("two sessions never share a sandbox or its state", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const a = yield* sessions.open()
        const b = yield* sessions.open()
        expect(a.containerName).not.toBe(b.containerName)
        yield* a.run(fakeProgram({ cd: "/a", export: { WHO: "a" } }))
        expect((yield* b.run(fakeProgram({ printCwd: true }))).stdout).toBe("/workspace\n")
        expect((yield* b.run(fakeProgram({ printEnv: "WHO" }))).stdout).toBe("\n")
        expect(yield* control.alive).toHaveLength(2)
        yield* close
        // Closing the service ends its sessions.
        expect(yield* control.alive).toEqual([])
      })))

  it.live("parallel calls on one session run one at a time, in order", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open()
        const results = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => i),
          (i) => s.run(fakeProgram({ sleepMs: 15, export: { LAST: String(i) }, stdout: `call ${i}\n` })),
          { concurrency: "unbounded" }
        )
        expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 8 }, (_, i) => `call ${i}\n`))
        expect(yield* control.maxConcurrentExecs).toBe(1)
        // Every call started after the previous one finished.
        for (let i = 1; i < results.length; i++) {
          expect(Date.parse(results[i]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(results[i - 1]!.finishedAt))
        }
        yield* close
      })))

  it.effect("expires after lifetimeSeconds without a call (TestClock); every call resets the timer", () =>
    withEngine(({ control, journal, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open({ lifetimeSeconds: 60 })
        yield* s.run(fakeProgram({ stdout: "hi" }))
        yield* TestClock.adjust("50 seconds")
        yield* s.run(fakeProgram({ stdout: "still here" }))
        yield* TestClock.adjust("50 seconds")
        expect((yield* s.status).open).toBe(true)
        yield* TestClock.adjust("11 seconds")
        // The reaper's cleanup runs in the background.
        yield* Effect.yieldNow().pipe(Effect.repeatN(20))
        expect(yield* s.status).toMatchObject({ open: false, endReason: "idle-expired" })
        expect(yield* control.alive).toEqual([])
        expect(yield* typesOf(journal, s.sessionId)).toEqual([
          "SessionOpened",
          "ContainerCreated",
          "ContainerStarted",
          "SessionIdleExpired",
          "ContainerDestroyed",
          "SessionClosed"
        ])
        const destroyed = (yield* allEvents(journal)).find((e) => e.streamId === s.sessionId && e.type === "ContainerDestroyed")
        expect(destroyed?.data).toMatchObject({ reason: "idle-expired" })
        expect(yield* Effect.flip(s.run("echo"))).toMatchObject({ _tag: "SessionEnded", reason: "idle-expired" })
        yield* close
      })))

  it.effect("a running call is not idle: a call longer than the lifetime does not expire the session", () =>
    withEngine(({ open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open({ lifetimeSeconds: 10, timeoutMs: 600_000 })
        const fiber = yield* Effect.fork(s.run(fakeProgram({ sleepMs: 30_000, stdout: "slow" })))
        yield* TestClock.adjust("30 seconds")
        expect((yield* Fiber.join(fiber)).stdout).toBe("slow")
        expect((yield* s.status).open).toBe(true)
        yield* close
      })))

  it.effect("the host-side deadline kills the call (137, timedOut); the session stays usable", () =>
    withEngine(({ journal, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open({ timeoutMs: 5_000 })
        const fiber = yield* Effect.fork(s.run(fakeProgram({ hang: true, stdout: "partial" })))
        yield* TestClock.adjust("5 seconds")
        const r = yield* Fiber.join(fiber)
        expect(r).toMatchObject({ timedOut: true, exitCode: 137, stdout: "partial" })
        expect(yield* typesOf(journal, r.executionId)).toEqual(["ExecutionRequested", "ExecutionTimedOut"])
        expect((yield* s.run(fakeProgram({ stdout: "next" }))).stdout).toBe("next")
        yield* close
      })))

  it.effect("interrupting a call records it and leaves the session open", () =>
    withEngine(({ journal, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const s = yield* sessions.open()
        let executionId = ""
        const unsubscribe = sessions.unsafeSubscribe((e) => {
          if (e.type === "ExecutionRequested") executionId = e.streamId
        })
        const fiber = yield* Effect.fork(s.run(fakeProgram({ hang: true })))
        yield* Effect.yieldNow().pipe(Effect.repeatN(10))
        yield* Fiber.interrupt(fiber)
        unsubscribe()
        expect(yield* typesOf(journal, executionId)).toEqual(["ExecutionRequested", "ExecutionInterrupted"])
        expect((yield* s.run(fakeProgram({ stdout: "ok" }))).stdout).toBe("ok")
        yield* close
      })))

  it.effect("forwarded secrets reach the command by name only: not in the sandbox's spec, the journal or the result", () =>
    withEngine(({ journal, open, runtime }) =>
      Effect.gen(function*() {
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
      })))

  it.effect("mounts: read-only by default; the Docker socket and / are refused unless forced", () =>
    withEngine(({ open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const socket = yield* Effect.flip(sessions.open({ mounts: [{ hostPath: "/var/run/docker.sock", containerPath: "/var/run/docker.sock" }] }))
        expect(socket).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
        expect(socket.message).toContain("Docker socket")
        const root = yield* Effect.flip(sessions.open({ mounts: [{ hostPath: "/", containerPath: "/host" }] }))
        expect(root.message).toContain("root directory")
        const forced = yield* sessions.open({ mounts: [{ hostPath: "/", containerPath: "/host" }], allowDangerousMounts: true })
        yield* forced.close
        yield* close
      })))

  it.effect("persistent: a new process finds the sandbox again by its labels, with its state", () =>
    withEngine(({ control, journal, open }) =>
      Effect.gen(function*() {
        const first = yield* open()
        const p = yield* first.sessions.openPersistent({ profile: "dev" })
        expect(p).toMatchObject({ scope: "persistent", reconnected: false })
        yield* p.run(fakeProgram({ cd: "/srv", export: { INSTALLED: "yes" } }))
        yield* first.close // detaches: the sandbox stays
        expect(yield* control.alive).toHaveLength(1)

        const second = yield* open()
        const again = yield* second.sessions.openPersistent({ profile: "dev" })
        expect(again).toMatchObject({ reconnected: true, containerName: p.containerName, sessionId: p.sessionId, fingerprint: p.fingerprint })
        expect((yield* again.run(fakeProgram({ printCwd: true }))).stdout).toBe("/srv\n")
        expect((yield* again.run(fakeProgram({ printEnv: "INSTALLED" }))).stdout).toBe("yes\n")
        expect(yield* typesOf(journal, p.sessionId)).toEqual(["SessionOpened", "ContainerCreated", "ContainerStarted", "SessionClosed", "SessionReconnected"])
        // Another profile is another sandbox.
        const other = yield* second.sessions.openPersistent({ profile: "ops" })
        expect(other.containerName).not.toBe(p.containerName)
        yield* other.destroy
        yield* again.destroy
        expect(yield* control.alive).toEqual([])
        yield* second.close
      })))

  it.effect("persistent: a changed configuration replaces the old sandbox (default) or is refused, naming what changed", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function*() {
        const { close, sessions } = yield* open()
        const p = yield* sessions.openPersistent({ profile: "dev", memory: "256m", env: { A: "1" } })
        yield* p.close
        // Values are not fingerprinted (they travel with each call): same names, new value = same sandbox.
        const sameNames = yield* sessions.openPersistent({ profile: "dev", memory: "256m", env: { A: "2" } })
        expect(sameNames.reconnected).toBe(true)
        yield* sameNames.close
        const refused = yield* Effect.flip(sessions.openPersistent({ profile: "dev", memory: "128m", env: { A: "1" }, onConfigChange: "refuse" }))
        expect(refused).toMatchObject({ _tag: "SessionConfigMismatch", profile: "dev", containerName: p.containerName })
        if (refused._tag === "SessionConfigMismatch") expect(refused.differences).toContain("limits.memoryBytes: 268435456 -> 134217728")
        expect((yield* control.alive).map((a) => a.name)).toEqual([p.containerName])
        const replaced = yield* sessions.openPersistent({ profile: "dev", memory: "128m", env: { A: "1", B: "new name" } })
        expect(replaced).toMatchObject({ reconnected: false, replaced: [p.containerName] })
        expect(replaced.containerName).not.toBe(p.containerName)
        expect((yield* control.alive).map((a) => a.name)).toEqual([replaced.containerName])
        yield* replaced.destroy
        yield* close
      })))

  it.effect("persistent: the reaper removes one idle longer than lifetimeSeconds that nobody holds", () =>
    withEngine(({ control, journal, open }) =>
      Effect.gen(function*() {
        const first = yield* open({ reapOnStart: false })
        const p = yield* first.sessions.openPersistent({ profile: "idle", lifetimeSeconds: 100 })
        yield* p.run(fakeProgram({ stdout: "x" }))
        yield* first.close
        yield* TestClock.adjust("50 seconds")
        const second = yield* open({ reapOnStart: false })
        expect((yield* second.sessions.reap).removed).toEqual([])
        yield* TestClock.adjust("51 seconds")
        expect((yield* second.sessions.reap).removed).toEqual([p.containerName])
        expect(yield* control.alive).toEqual([])
        expect((yield* typesOf(journal, p.sessionId)).slice(-3)).toEqual(["SessionIdleExpired", "ContainerDestroyed", "SessionClosed"])
        yield* second.close
      })))

  it.effect.prop(
    "any sequence of cd/export calls leaves exactly the last directory and values (model check)",
    [fc.array(fc.oneof(
      fc.record({ cd: fc.constantFrom("/a", "/b", "/tmp/c", "/workspace/d e") }),
      fc.record({ export: fc.dictionary(fc.constantFrom("X", "Y", "Z"), fc.string({ maxLength: 8 }), { maxKeys: 2 }) })
    ), { maxLength: 12 })],
    ([ops]) =>
      withEngine(({ open }) =>
        Effect.gen(function*() {
          const { close, sessions } = yield* open()
          const s = yield* sessions.open()
          const model = { cwd: "/workspace", env: {} as Record<string, string> }
          for (const op of ops) {
            yield* s.run(fakeProgram(op))
            if ("cd" in op) model.cwd = op.cd
            else Object.assign(model.env, op.export)
          }
          expect((yield* s.run(fakeProgram({ printCwd: true }))).stdout).toBe(`${model.cwd}\n`)
          for (const name of ["X", "Y", "Z"]) expect((yield* s.run(fakeProgram({ printEnv: name }))).stdout).toBe(`${model.env[name] ?? ""}\n`)
          yield* close
        })),
    { fastCheck: { numRuns: 30 } }
  )
})
