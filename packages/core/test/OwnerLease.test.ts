/**
 * Ownership across hosts, on the fake runtime and the memory journal under the TestClock:
 * the orphan decision (pure, and as a property), the lease holder (first lease before anything,
 * renewals, close, one lease per id for two holders, a lapse), and the sweep deciding for
 * another host's containers from the journal's leases — never a live owner's, every dead one's,
 * each lifecycle closed once even when two sweepers race.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Ref, Scope, Stream, TestClock } from "effect"
import * as fc from "fast-check"
import {
  Executor,
  type ExecutorOptions,
  OwnerLease,
  ProcessIdentity,
  SandboxRuntime,
  type SandboxSpec,
  Session,
  Sweep
} from "@hermes-sandbox/core"
import { Label, ProjectName } from "@hermes-sandbox/core/Labels"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, type JournalService, MemoryJournal, Projection } from "@hermes-sandbox/events"
import { type LeaseState } from "@hermes-sandbox/events/Projection"

const OTHER_HOST = "host-elsewhere"
const farDeadline = () => String(Math.ceil(Date.now() / 1000) + 7 * 86400)

const labelsOf = (
  executorId: string,
  host = OTHER_HOST,
  extra: Record<string, string> = {}
): Record<string, string> => ({
  [Label.project]: ProjectName,
  [Label.executor]: executorId,
  [Label.ownerHost]: host,
  [Label.ownerPid]: "4242",
  [Label.ownerStarted]: "1",
  [Label.deadline]: farDeadline(),
  ...extra
})

const lease = (renewedAt: number, leaseMs: number, closedAt?: number): LeaseState => ({
  executorId: "exec-a",
  host: OTHER_HOST,
  pid: 4242,
  renewedAt,
  leaseMs,
  lastSequence: 1,
  ...(closedAt === undefined ? {} : { closedAt })
})

describe("the orphan decision (Sweep.orphanReason)", () => {
  const now = 1_000_000
  it("another host's owner: alive while its lease holds, even with a deadline a week away; gone once it expired past the skew, or closed", () => {
    const labels = labelsOf("exec-a")
    expect(Sweep.orphanReason(labels, { nowMs: now, lease: lease(now - 29_000, 30_000) })).toBeUndefined()
    // Expired, but within the clock-skew allowance: still alive.
    expect(
      Sweep.orphanReason(labels, { nowMs: now, lease: lease(now - 34_000, 30_000), clockSkewMs: 5_000 })
    ).toBeUndefined()
    expect(Sweep.orphanReason(labels, { nowMs: now, lease: lease(now - 35_001, 30_000), clockSkewMs: 5_000 })).toBe(
      "lease-expired"
    )
    expect(Sweep.orphanReason(labels, { nowMs: now, lease: lease(now - 1_000, 30_000, now - 500) })).toBe(
      "owner-closed"
    )
  })

  it("no lease in the journal proves nothing: only the deadline label removes it", () => {
    expect(Sweep.orphanReason(labelsOf("exec-a"), { nowMs: now })).toBeUndefined()
    const past = labelsOf("exec-a", OTHER_HOST, { [Label.deadline]: String(Math.floor(Date.now() / 1000) - 10) })
    expect(Sweep.orphanReason(past, { nowMs: now })).toBe("deadline")
    expect(Sweep.isOrphan(past)).toBe(true)
  })

  it("an owner on this host is judged by its pid, never by a lease; a persistent sandbox (no owner) by nothing but its deadline", () => {
    const mine = labelsOf("exec-a", ProcessIdentity.self.host, {
      [Label.ownerPid]: String(process.pid),
      [Label.ownerStarted]: ProcessIdentity.self.started
    })
    expect(Sweep.orphanReason(mine, { nowMs: now, lease: lease(0, 1) })).toBeUndefined()
    expect(Sweep.decidedByLease(mine)).toBe(false)
    const persistent = { [Label.project]: ProjectName, [Label.scope]: "persistent", [Label.deadline]: farDeadline() }
    expect(Sweep.orphanReason(persistent, { nowMs: now, lease: lease(0, 1) })).toBeUndefined()
    expect(Sweep.decidedByLease(persistent)).toBe(false)
    expect(Sweep.decidedByLease(labelsOf("exec-a"))).toBe(true)
  })

  it("property: a live lease (renewed within leaseMs + skew) is never an orphan; an expired one always is", () => {
    fc.assert(
      fc.property(
        fc.nat(1_000_000),
        fc.integer({ min: 1, max: 120_000 }),
        fc.nat(30_000),
        fc.integer({ min: -200_000, max: 200_000 }),
        (renewedAt, leaseMs, skew, offset) => {
          const nowMs = renewedAt + leaseMs + skew + offset
          const reason = Sweep.orphanReason(labelsOf("exec-a"), {
            nowMs,
            lease: lease(renewedAt, leaseMs),
            clockSkewMs: skew
          })
          expect(reason === "lease-expired").toBe(offset > 0)
          expect(reason === undefined).toBe(offset <= 0)
        }
      )
    )
  })
})

const leaseEvents = (journal: JournalService, streamId: string) =>
  journal.read({ streamId }).pipe(
    Stream.runCollect,
    Effect.map((c) => [...c].map((e) => e.type))
  )

const inScope = <A, E, R>(effect: Effect.Effect<A, E, R | Scope.Scope>) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const value = yield* Scope.extend(effect, scope)
    return { value, close: Scope.close(scope, Exit.void) }
  })

describe("OwnerLease.hold", () => {
  it.effect(
    "the first lease is committed before hold returns, renewed every renewEveryMs, and closed with the scope",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        const { value: handle, close } = yield* inScope(
          OwnerLease.hold("exec-r", { leaseMs: 3_000, renewEveryMs: 1_000 })
        )
        expect(handle.lease).toEqual({ leaseMs: 3_000, renewEveryMs: 1_000, clockSkewMs: 5_000 })
        expect(yield* leaseEvents(journal, "exec-r")).toEqual(["ExecutorLease"])
        yield* TestClock.adjust("10 seconds")
        expect((yield* leaseEvents(journal, "exec-r")).length).toBe(11)
        expect(yield* handle.lapsed).toBe(false)
        yield* close
        const types = yield* leaseEvents(journal, "exec-r")
        expect(types.at(-1)).toBe("ExecutorClosed")
        yield* TestClock.adjust("10 seconds")
        expect(yield* leaseEvents(journal, "exec-r")).toEqual(types)
      }).pipe(Effect.provide(MemoryJournal.layer()))
  )

  it.effect("renewEveryMs is capped at a third of the lease", () =>
    Effect.sync(() => expect(OwnerLease.resolve({ leaseMs: 9_000, renewEveryMs: 8_000 }).renewEveryMs).toBe(3_000))
  )

  it.effect(
    "two holders of one id (an executor and its sessions service) share one lease, closed when the last leaves",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        const [a, b] = yield* Effect.all(
          [
            inScope(OwnerLease.hold("exec-s", { leaseMs: 3_000 })),
            inScope(OwnerLease.hold("exec-s", { leaseMs: 3_000 }))
          ],
          { concurrency: 2 }
        )
        expect(yield* leaseEvents(journal, "exec-s")).toEqual(["ExecutorLease"])
        yield* a.close
        yield* TestClock.adjust("2 seconds")
        expect(yield* leaseEvents(journal, "exec-s")).toEqual(["ExecutorLease", "ExecutorLease", "ExecutorLease"])
        yield* b.close
        expect((yield* leaseEvents(journal, "exec-s")).at(-1)).toBe("ExecutorClosed")
      }).pipe(Effect.provide(MemoryJournal.layer()))
  )

  it.effect(
    "a lease that could not be renewed for a whole lease period is known as lapsed, and recovers with the journal",
    () =>
      Effect.gen(function* () {
        const real = yield* Journal.Journal
        const refusing = yield* Ref.make(false)
        const flaky: JournalService = {
          ...real,
          append: (input) =>
            Effect.flatMap(Ref.get(refusing), (r) =>
              r
                ? real.append({ ...input, events: [{ type: "ExecutorStats", data: { inFlight: -1, queued: 0 } }] })
                : real.append(input)
            )
        }
        const { value: handle, close } = yield* inScope(
          OwnerLease.hold("exec-l", { leaseMs: 3_000 }).pipe(Effect.provideService(Journal.Journal, flaky))
        )
        yield* Ref.set(refusing, true)
        yield* TestClock.adjust("2 seconds")
        expect(yield* handle.lapsed).toBe(false)
        yield* TestClock.adjust("2 seconds")
        expect(yield* handle.lapsed).toBe(true)
        yield* Ref.set(refusing, false)
        yield* TestClock.adjust("1 second")
        expect(yield* handle.lapsed).toBe(false)
        yield* close
      }).pipe(Effect.provide(MemoryJournal.layer()))
  )

  it.effect(
    "an executor and a sessions service hold leases by default only on a journal shared across hosts (PostgreSQL), not on SQLite or memory; ownerLease: false turns it off",
    () =>
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        expect(OwnerLease.enabledFor(journal, undefined)).toBe(false)
        // A durable journal of one host (SQLite: a sweep mark) holds none by default; a shared one does.
        expect(
          OwnerLease.enabledFor(
            { ...journal, sweepMark: { get: Effect.succeed(undefined), set: () => Effect.void } },
            undefined
          )
        ).toBe(false)
        expect(OwnerLease.enabledFor({ ...journal, sharedAcrossHosts: true }, undefined)).toBe(true)
        expect(OwnerLease.enabledFor(journal, {})).toBe(true)
        expect(OwnerLease.enabledFor(journal, false)).toBe(false)
        const built = yield* inScope(
          Layer.build(
            Layer.merge(
              Executor.layer({ executorId: "exec-e", ownerLease: { leaseMs: 3_000 } }),
              Session.layer({
                executorId: "exec-e",
                ownerLease: { leaseMs: 3_000 },
                sweepOnStart: false,
                reapOnStart: false
              })
            ).pipe(Layer.provide(FakeRuntime.layer()), Layer.provide(Layer.succeed(Journal.Journal, journal)))
          )
        )
        expect(yield* leaseEvents(journal, "exec-e")).toEqual(["ExecutorLease"])
        yield* built.close
        expect((yield* leaseEvents(journal, "exec-e")).at(-1)).toBe("ExecutorClosed")
      }).pipe(Effect.provide(MemoryJournal.layer()))
  )
})

// --- the sweep, for containers of another host ------------------------------------------------

const spec = (name: string, labels: Record<string, string>): SandboxSpec => ({
  name,
  image: "fake",
  command: ["sleep"],
  env: {},
  workingDir: "/workspace",
  user: "1001:1001",
  labels,
  limits: { memoryBytes: 1, nanoCpus: 1, pidsLimit: 1, tmpBytes: 1, workspaceBytes: 1 },
  network: false,
  openStdin: false,
  capAdd: [],
  mounts: []
})

/** A container of `executorId` on another host, with its lifecycle open in the journal. */
const foreignContainer = (executorId: string, name: string) =>
  Effect.gen(function* () {
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const c = yield* runtime.create(spec(name, labelsOf(executorId)))
    yield* journal.append({
      streamId: name,
      executorId,
      events: [{ type: "ContainerCreated", data: { containerName: name, containerId: c.id, imageId: "i" } }]
    })
    return c
  })

const names = Effect.flatMap(SandboxRuntime, (r) => r.list({ [Label.project]: ProjectName })).pipe(
  Effect.map((l) => l.map((c) => c.name).sort())
)

const appendLease = (executorId: string, leaseMs: number) =>
  Effect.flatMap(Journal.Journal, (j) =>
    j.append({ streamId: executorId, executorId, events: [{ type: "ExecutorLease", data: { leaseMs } }] })
  )

const fleet = <A, E>(effect: Effect.Effect<A, E, SandboxRuntime | Journal.Journal>) =>
  effect.pipe(Effect.provide(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer())))

describe("the sweep decides for another host's containers from the journal", () => {
  it.effect(
    "a renewing owner is never reaped however far its deadline; once it stops renewing, the sweep after expiry + skew removes its containers and closes their lifecycles once",
    () =>
      fleet(
        Effect.gen(function* () {
          const journal = yield* Journal.Journal
          yield* appendLease("exec-a", 3_000)
          yield* foreignContainer("exec-a", "hermes-sandbox-a1")
          yield* foreignContainer("exec-b", "hermes-sandbox-b1") // no lease at all: the deadline's job
          const book = OwnerLease.makeBook(journal)
          // Renewing every second for a minute, swept every second: never touched.
          for (let i = 0; i < 60; i++) {
            yield* TestClock.adjust("1 second")
            yield* appendLease("exec-a", 3_000)
            expect((yield* Sweep.sweep({ executorId: "sweeper", leases: book, clockSkewMs: 1_000 })).removed).toEqual(
              []
            )
          }
          // It stops renewing (its host died): still alive until lease + skew has passed.
          yield* TestClock.adjust("4 seconds")
          expect((yield* Sweep.sweep({ executorId: "sweeper", leases: book, clockSkewMs: 1_000 })).removed).toEqual([])
          yield* TestClock.adjust("1 millis")
          const report = yield* Sweep.sweep({ executorId: "sweeper", leases: book, clockSkewMs: 1_000 })
          expect(report.removed).toEqual(["hermes-sandbox-a1"])
          expect(report.closed).toEqual(["hermes-sandbox-a1"])
          expect(yield* names).toEqual(["hermes-sandbox-b1"])
          const events = [...(yield* journal.read({ streamId: "hermes-sandbox-a1" }).pipe(Stream.runCollect))]
          expect(events.map((e) => e.type)).toEqual(["ContainerCreated", "ContainerDestroyed"])
          expect(events[1]!.type === "ContainerDestroyed" && events[1]!.data.reason).toBe("orphan-reaped")
          expect((yield* Sweep.sweep({ executorId: "sweeper", leases: book })).closed).toEqual([])
        })
      )
  )

  it.effect("an owner that closed: what it left is reaped at once; the same id leased again is alive again", () =>
    fleet(
      Effect.gen(function* () {
        const journal = yield* Journal.Journal
        yield* appendLease("exec-c", 30_000)
        yield* foreignContainer("exec-c", "hermes-sandbox-c1")
        yield* journal.append({
          streamId: "exec-c",
          executorId: "exec-c",
          events: [{ type: "ExecutorClosed", data: {} }]
        })
        yield* appendLease("exec-c", 30_000)
        expect((yield* Sweep.sweep({ executorId: "sweeper" })).removed).toEqual([])
        yield* journal.append({
          streamId: "exec-c",
          executorId: "exec-c",
          events: [{ type: "ExecutorClosed", data: {} }]
        })
        expect((yield* Sweep.sweep({ executorId: "sweeper" })).removed).toEqual(["hermes-sandbox-c1"])
      })
    )
  )

  it.effect(
    "two sweepers racing for one dead owner's containers: every container removed, each lifecycle closed exactly once",
    () =>
      fleet(
        Effect.gen(function* () {
          const journal = yield* Journal.Journal
          yield* appendLease("exec-d", 1_000)
          for (let i = 0; i < 6; i++) yield* foreignContainer("exec-d", `hermes-sandbox-d${i}`)
          yield* TestClock.adjust("10 seconds")
          const [one, two] = yield* Effect.all(
            [Sweep.sweep({ executorId: "sweeper-1" }), Sweep.sweep({ executorId: "sweeper-2" })],
            { concurrency: 2 }
          )
          expect([...one.closed, ...two.closed].sort()).toEqual(
            Array.from({ length: 6 }, (_, i) => `hermes-sandbox-d${i}`)
          )
          expect(yield* names).toEqual([])
          const all: Array<EventEnvelope> = [...(yield* journal.read().pipe(Stream.runCollect))]
          for (let i = 0; i < 6; i++) {
            const stream = all.filter((e) => e.streamId === `hermes-sandbox-d${i}`)
            expect(stream.map((e) => e.type)).toEqual(["ContainerCreated", "ContainerDestroyed"])
            expect(Projection.checkLifecycle(stream)).toEqual([])
          }
        })
      )
  )

  it.effect(
    "on a journal shared across hosts an executor sweeps every lease period by default (a dead host's containers go while it runs); sweepIntervalMs: false never",
    () =>
      fleet(
        Effect.gen(function* () {
          const runtime = yield* SandboxRuntime
          const shared: JournalService = { ...(yield* Journal.Journal), sharedAcrossHosts: true }
          const executorOn = (options: Partial<ExecutorOptions>) =>
            inScope(
              Layer.build(
                Executor.layer({ ownerLease: { leaseMs: 3_000, clockSkewMs: 500 }, ...options }).pipe(
                  Layer.provide(Layer.succeed(SandboxRuntime, runtime)),
                  Layer.provide(Layer.succeed(Journal.Journal, shared))
                )
              )
            )
          yield* appendLease("exec-dead", 1_000)
          yield* foreignContainer("exec-dead", "hermes-sandbox-dead1")
          const quiet = yield* executorOn({ executorId: "exec-quiet", sweepIntervalMs: false })
          const sweeping = yield* executorOn({ executorId: "exec-sweeping" })
          // Both swept at start, while the dead owner's lease still held; only the default one sweeps again, 3 s later.
          expect(yield* names).toEqual(["hermes-sandbox-dead1"])
          yield* sweeping.close
          yield* TestClock.adjust("10 seconds")
          expect(yield* names, "sweepIntervalMs: false sweeps only at start").toEqual(["hermes-sandbox-dead1"])
          const again = yield* executorOn({ executorId: "exec-sweeping-2" })
          yield* appendLease("exec-dead-2", 1_000)
          yield* foreignContainer("exec-dead-2", "hermes-sandbox-dead2")
          yield* TestClock.adjust("3 seconds")
          // The startup sweep of exec-sweeping-2 removed dead1 (its lease long expired); its periodic sweep, dead2.
          expect(yield* names).toEqual([])
          yield* again.close
          yield* quiet.close
        })
      )
  )

  it.effect("the periodic sweep (Sweep.periodically) reaps a dead host's containers while the sweeper lives", () =>
    fleet(
      Effect.gen(function* () {
        yield* appendLease("exec-p", 2_000)
        yield* foreignContainer("exec-p", "hermes-sandbox-p1")
        const { close } = yield* inScope(
          Sweep.periodically({ executorId: "sweeper", intervalMs: 1_000, clockSkewMs: 500 })
        )
        yield* TestClock.adjust("2 seconds")
        expect(yield* names).toEqual(["hermes-sandbox-p1"])
        yield* TestClock.adjust("1 second")
        expect(yield* names).toEqual([])
        yield* close
      })
    )
  )
})
