/**
 * The persistent-sandbox reaper on the fake runtime (TestClock): idleness is what the HOST
 * recorded (journal: handles opened and closed, calls requested and ended; engine: creation
 * time), the maximum lifetime is the deadline label, and nothing the sandbox says or does
 * changes either (hostile review 1, finding 6). The real-engine counterpart is
 * test/session-reaper.e2e.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Scope, Stream, TestClock } from "effect"
import { Label } from "@hermes-sandbox/core/Labels"
import { SandboxRuntime, Session, SessionReaper } from "@hermes-sandbox/core"
import { type SessionsOptions } from "@hermes-sandbox/core/Session"
import { fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"

type Base = Context.Context<SandboxRuntime | FakeRuntimeControl | Journal.Journal>

/** One fake engine; services may share its journal (one host, one durable journal) or get their own. */
const withEngine = <A, E>(
  f: (ctx: {
    /** A sessions service on the shared journal (or on `journal`, e.g. a fresh one). */
    open: (
      options?: SessionsOptions,
      journal?: Journal.Journal["Type"]
    ) => Effect.Effect<{ sessions: Session.Sessions["Type"]; close: Effect.Effect<void> }, unknown>
    freshJournal: Effect.Effect<Journal.Journal["Type"]>
    control: FakeRuntimeControl["Type"]
    journal: Journal.Journal["Type"]
    runtime: SandboxRuntime["Type"]
    /** While true, every exec answers "0" (the seconds-since-last-call a lying sandbox would print). */
    lie: { on: boolean; execs: number }
  }) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const base: Base = yield* Layer.buildWithScope(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()), scope)
    const real = Context.get(base, SandboxRuntime)
    const lie = { on: false, execs: 0 }
    const lying: SandboxRuntime["Type"] = {
      ...real,
      exec: (container, spec, output) => {
        if (!lie.on) return real.exec(container, spec, output)
        lie.execs++
        return real.exec(container, { ...spec, command: ["lie", fakeProgram({ stdout: "0\n" })] }, output)
      }
    }
    const withRuntime = Context.add(base, SandboxRuntime, lying)
    const open = (options: SessionsOptions = {}, journal?: Journal.Journal["Type"]) =>
      Effect.gen(function* () {
        const s = yield* Scope.make()
        const ctx = journal === undefined ? withRuntime : Context.add(withRuntime, Journal.Journal, journal)
        const built = yield* Layer.buildWithScope(
          Session.layer({ sweepOnStart: false, reapOnStart: false, ...options }).pipe(
            Layer.provide(Layer.succeedContext(ctx))
          ),
          s
        )
        return { sessions: Context.get(built, Session.Sessions), close: Scope.close(s, Exit.void) }
      })
    const freshJournal = Layer.buildWithScope(MemoryJournal.layer(), scope).pipe(
      Effect.map((c) => Context.get(c, Journal.Journal))
    )
    return yield* f({
      open,
      freshJournal,
      control: Context.get(base, FakeRuntimeControl),
      journal: Context.get(base, Journal.Journal),
      runtime: real,
      lie
    }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

const typesOf = (journal: Journal.Journal["Type"], streamId: string) =>
  journal.read({ streamId }).pipe(
    Stream.map((e) => e.type),
    Stream.runCollect,
    Effect.map((c) => [...c])
  )
const settle = Effect.yieldNow().pipe(Effect.repeatN(30))
const decisionOf = (report: SessionReaper.ReapReport, name: string) => report.decisions.find((d) => d.name === name)

describe("SessionReaper.decide (pure)", () => {
  const base = { nowMs: 1_000_000, createdAtMs: 0, idleLimitMs: 60_000, deadlineMs: undefined }
  it("past the deadline: removed, however recently used", () => {
    expect(
      SessionReaper.decide(
        { ...base, deadlineMs: 999_000, activity: { lastMs: 999_999, busyUntilMs: 2_000_000 } },
        "keep"
      )
    ).toMatchObject({ remove: true, reason: "max-lifetime" })
    expect(
      SessionReaper.decide({ ...base, idleLimitMs: undefined, deadlineMs: 1_000_000 - 1, activity: undefined }, "keep")
    ).toMatchObject({ remove: true, reason: "max-lifetime" })
  })
  it("no idle limit: kept until the deadline", () => {
    expect(
      SessionReaper.decide(
        { ...base, idleLimitMs: undefined, deadlineMs: 2_000_000, activity: undefined },
        "engine-time"
      )
    ).toMatchObject({ remove: false, reason: "no-idle-limit" })
  })
  it("a recorded call still within its deadline keeps it", () => {
    expect(
      SessionReaper.decide({ ...base, activity: { lastMs: 10, busyUntilMs: 1_000_001 } }, "engine-time")
    ).toMatchObject({ remove: false, reason: "call-in-flight" })
  })
  it("recorded activity: idle from the latest host record (creation included)", () => {
    expect(
      SessionReaper.decide({ ...base, activity: { lastMs: 950_000, busyUntilMs: undefined } }, "engine-time")
    ).toMatchObject({ remove: false, reason: "active", idleMs: 50_000 })
    expect(
      SessionReaper.decide({ ...base, activity: { lastMs: 900_000, busyUntilMs: undefined } }, "engine-time")
    ).toMatchObject({ remove: true, reason: "idle", idleMs: 100_000 })
    // A call that ended (busyUntil in the past) counts as activity until then.
    expect(
      SessionReaper.decide({ ...base, activity: { lastMs: 900_000, busyUntilMs: 990_000 } }, "engine-time")
    ).toMatchObject({ remove: false, reason: "active", idleMs: 10_000 })
    // Activity dated before the sandbox existed (an earlier sandbox of the profile) is not newer than its creation.
    expect(
      SessionReaper.decide(
        { ...base, createdAtMs: 980_000, activity: { lastMs: 5, busyUntilMs: undefined } },
        "engine-time"
      )
    ).toMatchObject({ remove: false, idleMs: 20_000 })
  })
  it("no host record since creation: by the engine's creation time when asked, else kept (the deadline still applies)", () => {
    expect(SessionReaper.decide({ ...base, activity: undefined }, "engine-time")).toMatchObject({
      remove: true,
      reason: "idle",
      idleMs: 1_000_000
    })
    expect(SessionReaper.decide({ ...base, createdAtMs: 990_000, activity: undefined }, "engine-time")).toMatchObject({
      remove: false,
      reason: "active",
      idleMs: 10_000
    })
    expect(SessionReaper.decide({ ...base, activity: undefined }, "keep")).toMatchObject({
      remove: false,
      reason: "unrecorded"
    })
  })
  it("deadlineOf: the label (epoch seconds); a persistent sandbox without one gets the default maximum from its creation", () => {
    expect(SessionReaper.deadlineOf({ [Label.deadline]: "1234" }, 0)).toBe(1_234_000)
    expect(SessionReaper.deadlineOf({ [Label.scope]: "persistent" }, 5)).toBe(
      5 + SessionReaper.DEFAULT_PERSISTENT_MAX_LIFETIME_MS
    )
    expect(SessionReaper.deadlineOf({ [Label.scope]: "session" }, 5)).toBeUndefined()
  })
})

describe("SessionReaper (fake runtime)", () => {
  it.effect(
    "a sandbox that claims from inside to have just been used is removed: the reaper asks the host, never the sandbox",
    () =>
      withEngine(({ control, journal, lie, open }) =>
        Effect.gen(function* () {
          const first = yield* open()
          const p = yield* first.sessions.openPersistent({ profile: "liar", lifetimeSeconds: 100 })
          expect(
            (yield* journal.read({ streamId: p.sessionId }).pipe(Stream.runCollect)).pipe((c) => [...c])[0]?.data
          ).toMatchObject({ idleMs: 100_000, deadline: 7 * 86_400_000 })
          yield* p.run(fakeProgram({ stdout: "x" }))
          yield* first.close
          lie.on = true // from now on the sandbox answers every probe with "idle for 0 s"
          yield* TestClock.adjust("101 seconds")
          const second = yield* open()
          const report = yield* second.sessions.reap
          expect(report.removed).toEqual([p.containerName])
          expect(decisionOf(report, p.containerName)).toMatchObject({ removed: true, reason: "idle", idleMs: 101_000 })
          expect(lie.execs).toBe(0)
          expect(yield* control.alive).toEqual([])
          expect((yield* typesOf(journal, p.sessionId)).slice(-3)).toEqual([
            "SessionIdleExpired",
            "ContainerDestroyed",
            "SessionClosed"
          ])
          yield* second.close
        })
      )
  )

  it.effect(
    "maxLifetimeMs is the deadline label of a persistent sandbox; past it the reaper removes it without an idle limit, used or not",
    () =>
      withEngine(({ control, journal, open, runtime }) =>
        Effect.gen(function* () {
          const first = yield* open()
          const p = yield* first.sessions.openPersistent({ profile: "capped", maxLifetimeMs: 60_000 })
          const [info] = yield* runtime.list({ [Label.session]: p.sessionId })
          expect(info?.labels[Label.deadline]).toBe("60")
          expect(info?.labels[Label.idleSeconds]).toBeUndefined()
          // The journal says it too (the dashboard's deadline): SessionOpened's, in ms; no idle limit.
          const opened = (yield* journal.read({ streamId: p.sessionId }).pipe(Stream.runCollect))
            .pipe((c) => [...c])
            .find((e) => e.type === "SessionOpened")
          expect(opened?.data).toMatchObject({ deadline: 60_000 })
          expect(opened?.data).not.toHaveProperty("idleMs")
          yield* TestClock.adjust("58 seconds")
          yield* p.run(fakeProgram({ stdout: "busy" }))
          yield* first.close
          const second = yield* open()
          yield* TestClock.adjust("1 second")
          expect((yield* second.sessions.reap).removed).toEqual([])
          yield* TestClock.adjust("2 seconds")
          const report = yield* second.sessions.reap
          expect(report.removed).toEqual([p.containerName])
          expect(decisionOf(report, p.containerName)).toMatchObject({ reason: "max-lifetime" })
          expect(yield* control.alive).toEqual([])
          expect((yield* typesOf(journal, p.sessionId)).slice(-2)).toEqual(["ContainerDestroyed", "SessionClosed"])
          yield* second.close
        })
      )
  )

  it.effect("every persistent sandbox gets a deadline: 7 days by default; maxLifetimeMs is validated", () =>
    withEngine(({ open, runtime }) =>
      Effect.gen(function* () {
        const { close, sessions } = yield* open()
        const p = yield* sessions.openPersistent({ profile: "default-cap" })
        const [info] = yield* runtime.list({ [Label.session]: p.sessionId })
        expect(Number(info?.labels[Label.deadline])).toBe(7 * 86400)
        expect(yield* Effect.flip(sessions.openPersistent({ profile: "bad", maxLifetimeMs: 0 }))).toMatchObject({
          _tag: "InvalidRequest",
          field: "maxLifetimeMs"
        })
        expect(
          yield* Effect.flip(sessions.openPersistent({ profile: "bad", maxLifetimeMs: 367 * 86400_000 }))
        ).toMatchObject({ _tag: "InvalidRequest", field: "maxLifetimeMs" })
        yield* p.destroy
        yield* close
      })
    )
  )

  it.effect("a held persistent handle ends at its deadline (its own hard cap) and the sandbox is removed", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function* () {
        const { close, sessions } = yield* open()
        const p = yield* sessions.openPersistent({ profile: "held-cap", maxLifetimeMs: 60_000 })
        yield* TestClock.adjust("59 seconds")
        yield* p.run(fakeProgram({ stdout: "x" }))
        expect((yield* p.status).open).toBe(true)
        yield* TestClock.adjust("2 seconds")
        yield* settle
        expect((yield* p.status).endReason).toMatch(/^max-lifetime/)
        expect(yield* control.alive).toEqual([])
        yield* close
      })
    )
  )

  it.effect("reopening a profile whose sandbox is past its deadline makes a new one instead of reconnecting", () =>
    withEngine(({ control, open }) =>
      Effect.gen(function* () {
        const first = yield* open()
        const p = yield* first.sessions.openPersistent({ profile: "expired", maxLifetimeMs: 60_000 })
        yield* first.close
        yield* TestClock.adjust("61 seconds")
        const second = yield* open()
        const again = yield* second.sessions.openPersistent({ profile: "expired", maxLifetimeMs: 60_000 })
        expect(again.reconnected).toBe(false)
        expect(yield* control.alive).toHaveLength(1)
        expect(yield* control.createdCount).toBe(2)
        yield* again.destroy
        expect(p.containerName).toBe(again.containerName) // same profile + fingerprint, same name
        yield* second.close
      })
    )
  )

  it.effect(
    "a sandbox used recently by another process (shared journal) is kept although older than its idle limit",
    () =>
      withEngine(({ control, journal, open }) =>
        Effect.gen(function* () {
          const first = yield* open()
          const p = yield* first.sessions.openPersistent({ profile: "legit", lifetimeSeconds: 100 })
          yield* first.close
          yield* TestClock.adjust("90 seconds")
          const other = yield* open()
          const again = yield* other.sessions.openPersistent({ profile: "legit", lifetimeSeconds: 100 })
          expect(again.reconnected).toBe(true)
          // The reconnection records the sandbox's deadline (its label: made at 0, 7 days) and idle limit.
          const reconnected = (yield* journal.read({ streamId: p.sessionId }).pipe(Stream.runCollect))
            .pipe((c) => [...c])
            .find((e) => e.type === "SessionReconnected")
          expect(reconnected?.data).toMatchObject({ deadline: 7 * 86_400_000, idleMs: 100_000 })
          yield* again.run(fakeProgram({ stdout: "work" }))
          yield* other.close
          yield* TestClock.adjust("60 seconds") // created 150 s ago, last used 60 s ago
          const reaper = yield* open()
          const kept = yield* reaper.sessions.reap
          expect(kept.removed).toEqual([])
          expect(decisionOf(kept, p.containerName)).toMatchObject({ removed: false, reason: "active", idleMs: 60_000 })
          yield* TestClock.adjust("41 seconds")
          expect((yield* reaper.sessions.reap).removed).toEqual([p.containerName])
          expect(yield* control.alive).toEqual([])
          yield* reaper.close
        })
      )
  )

  it.effect(
    "a call in flight in another process (shared journal) keeps the sandbox until the call's own deadline",
    () =>
      withEngine(({ control, open }) =>
        Effect.gen(function* () {
          const holder = yield* open()
          const p = yield* holder.sessions.openPersistent({ profile: "busy", lifetimeSeconds: 10, timeoutMs: 600_000 })
          const call = yield* Effect.fork(p.run(fakeProgram({ sleepMs: 300_000, stdout: "long" })))
          yield* settle
          yield* TestClock.adjust("60 seconds")
          const reaper = yield* open()
          const busy = yield* reaper.sessions.reap
          expect(busy.removed).toEqual([])
          expect(decisionOf(busy, p.containerName)).toMatchObject({ reason: "call-in-flight" })
          yield* TestClock.adjust("240 seconds")
          expect((yield* Fiber.join(call)).stdout).toBe("long")
          yield* holder.close // detach
          yield* TestClock.adjust("5 seconds")
          expect((yield* reaper.sessions.reap).removed).toEqual([])
          yield* TestClock.adjust("6 seconds")
          expect((yield* reaper.sessions.reap).removed).toEqual([p.containerName])
          expect(yield* control.alive).toEqual([])
          yield* reaper.close
        })
      )
  )

  it.effect(
    "without a record of the sandbox (another journal): an explicit reap goes by the engine's creation time; the start-up reap leaves it",
    () =>
      withEngine(({ control, freshJournal, open }) =>
        Effect.gen(function* () {
          const first = yield* open()
          const p = yield* first.sessions.openPersistent({ profile: "elsewhere", lifetimeSeconds: 100 })
          yield* p.run(fakeProgram({ stdout: "x" }))
          yield* first.close
          yield* TestClock.adjust("150 seconds")
          const blind = yield* open({ reapOnStart: true }, yield* freshJournal)
          yield* settle
          expect(yield* control.alive).toHaveLength(1)
          const report = yield* blind.sessions.reap
          expect(report.removed).toEqual([p.containerName])
          expect(decisionOf(report, p.containerName)).toMatchObject({ reason: "idle", idleMs: 150_000 })
          yield* blind.close
        })
      )
  )

  it.effect(
    "a held persistent handle's own idle timer also counts calls other processes recorded in the shared journal",
    () =>
      withEngine(({ control, open }) =>
        Effect.gen(function* () {
          const holder = yield* open()
          const held = yield* holder.sessions.openPersistent({ profile: "shared", lifetimeSeconds: 100 })
          yield* TestClock.adjust("80 seconds")
          const other = yield* open()
          const b = yield* other.sessions.openPersistent({ profile: "shared", lifetimeSeconds: 100 })
          yield* b.run(fakeProgram({ stdout: "b works" }))
          yield* other.close
          yield* TestClock.adjust("21 seconds") // 101 s after the holder's own last activity
          yield* settle
          expect((yield* held.status).open).toBe(true)
          expect(yield* control.alive).toHaveLength(1)
          yield* TestClock.adjust("80 seconds") // 101 s after the other process's call
          yield* settle
          expect(yield* held.status).toMatchObject({ open: false, endReason: "idle-expired" })
          expect(yield* control.alive).toEqual([])
          yield* holder.close
        })
      )
  )

  it.effect("a sandbox held by this process is left to its holder, even with a call running", () =>
    withEngine(({ open }) =>
      Effect.gen(function* () {
        const { close, sessions } = yield* open()
        const p = yield* sessions.openPersistent({ profile: "mine", lifetimeSeconds: 10, timeoutMs: 600_000 })
        const call = yield* Effect.fork(p.run(fakeProgram({ sleepMs: 100_000 })))
        yield* settle
        yield* TestClock.adjust("50 seconds")
        expect(yield* sessions.reap).toMatchObject({ checked: 0, removed: [] })
        yield* TestClock.adjust("50 seconds")
        yield* Fiber.join(call)
        yield* p.destroy
        yield* close
      })
    )
  )
})
