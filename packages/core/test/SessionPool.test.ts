/**
 * The session pool (session/pool.ts) on the fake runtime: sessions opened ahead with their kernel
 * started, claimed once by an `open` of the same options, refilled, recycled when idle, ended with
 * the service. The engine test of the same path is test/session-pool.e2e.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schedule } from "effect"
import { Session } from "@hermes-sandbox/core"
import type { SessionsOptions } from "@hermes-sandbox/core/Session"
import { fakeCell, fakeProgram } from "@hermes-sandbox/core/testing"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { type FakeSessionsContext, withFakeSessions } from "./support/fakeSessions.js"

const withSessions = <A, E>(options: SessionsOptions, f: (ctx: FakeSessionsContext) => Effect.Effect<A, E>) =>
  withFakeSessions(f, options)

const readyAt = (sessions: Session.Sessions["Type"], n: number) =>
  sessions.poolReady.pipe(
    Effect.repeat({ until: (ready) => ready >= n, schedule: Schedule.spaced("5 millis") }),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`the pool never had ${n} ready`) })
  )

const types = (events: ReadonlyArray<EventEnvelope>) => events.map((e) => e.type)

describe("the session pool (fake runtime)", () => {
  it.live("an open of the pool's options claims a session whose kernel already started; the pool refills", () =>
    withSessions({ pool: { size: 1 } }, ({ events, sessions }) =>
      Effect.gen(function* () {
        yield* readyAt(sessions, 1)
        const s = yield* sessions.open()
        const first = yield* s.runCell({ code: fakeCell({ print: "hi\n" }) })
        // The kernel was the pool's: this cell did not start it, and it is the caller's first.
        expect(first).toMatchObject({ status: "ok", stdout: "hi\n", executionCount: 1, stateLost: false })
        expect(first.kernel).toMatchObject({ generation: 1, started: false })
        const stream = types(yield* events(s.sessionId))
        expect(stream.indexOf("KernelStarted")).toBeGreaterThan(stream.indexOf("SessionOpened"))
        expect(stream.indexOf("SessionClaimed")).toBeGreaterThan(stream.indexOf("KernelStarted"))
        expect(stream.indexOf("CellExecuted")).toBeGreaterThan(stream.indexOf("SessionClaimed"))
        // Handed over once: the next claim is another session, made by the refill.
        yield* readyAt(sessions, 1)
        const t = yield* sessions.open()
        expect(t.sessionId).not.toBe(s.sessionId)
        expect(types(yield* events(t.sessionId))).toContain("SessionClaimed")
        yield* s.close
        yield* t.close
      })
    )
  )

  it.live("an open with other options opens cold and leaves the pool's session waiting; tags are the claimer's", () =>
    withSessions(
      { pool: { size: 1, session: { env: { TEAM: "a" }, tags: { pool: "yes" } } } },
      ({ events, sessions }) =>
        Effect.gen(function* () {
          yield* readyAt(sessions, 1)
          for (const other of [{}, { env: { TEAM: "b" } }, { env: { TEAM: "a" }, memory: 256 * 1024 * 1024 }]) {
            const s = yield* sessions.open(other)
            expect(types(yield* events(s.sessionId))).not.toContain("SessionClaimed")
            yield* s.close
          }
          expect(yield* sessions.poolReady).toBe(1)
          const pooled = yield* sessions.open({ env: { TEAM: "a" }, tags: { who: "me" }, kernel: { eager: true } })
          const claimed = (yield* events(pooled.sessionId)).find((e) => e.type === "SessionClaimed")
          expect(claimed?.data).toMatchObject({ sessionId: pooled.sessionId, tags: { who: "me" } })
          // Its calls carry the claimer's tags, not the pool's.
          const r = yield* pooled.run(fakeProgram({ printEnv: "TEAM" }))
          expect(r.stdout).toBe("a\n")
          const requested = (yield* events(r.executionId)).find((e) => e.type === "ExecutionRequested")
          expect(requested?.data).toMatchObject({ tags: { who: "me" } })
          expect(JSON.stringify(requested?.data)).not.toContain("pool")
          yield* pooled.close
        })
    )
  )

  it.live("without a kernel (kernel: false) the pooled session's first cell starts it", () =>
    withSessions({ pool: { size: 1, kernel: false } }, ({ sessions }) =>
      Effect.gen(function* () {
        yield* readyAt(sessions, 1)
        const s = yield* sessions.open()
        const first = yield* s.runCell({ code: fakeCell({ print: "x\n" }) })
        expect(first.kernel).toMatchObject({ generation: 1, started: true })
        yield* s.close
      })
    )
  )

  it.live("an unclaimed session older than idleTtlMs is closed (pool-recycled) and replaced", () =>
    withSessions({ pool: { size: 1, idleTtlMs: 50 } }, ({ events, sessions }) =>
      Effect.gen(function* () {
        const seen: Array<EventEnvelope> = []
        const stop = sessions.unsafeSubscribe((e) => void seen.push(e))
        yield* readyAt(sessions, 1)
        // The refill's tick is the TTL: within a few of them the first ones are recycled.
        yield* Effect.sleep("400 millis")
        stop()
        const recycled = seen.filter((e) => e.type === "SessionClosed" && e.data.reason === "pool-recycled")
        expect(recycled.length).toBeGreaterThan(0)
        for (const e of recycled) expect(types(yield* events(e.streamId))).not.toContain("SessionClaimed")
        // A claim never gets one older than the TTL either (one that aged meanwhile is recycled and
        // the open is cold: tried until one is claimed).
        let claimed: EventEnvelope | undefined
        for (let i = 0; i < 20 && claimed === undefined; i++) {
          yield* readyAt(sessions, 1)
          const s = yield* sessions.open()
          claimed = (yield* events(s.sessionId)).find((e) => e.type === "SessionClaimed")
          yield* s.close
        }
        expect(claimed?.data).toMatchObject({ waitedMs: expect.any(Number) })
        expect((claimed?.data as { waitedMs: number } | undefined)?.waitedMs ?? Infinity).toBeLessThanOrEqual(50)
      })
    )
  )

  it.live("the service's close ends every pooled session and removes its sandbox", () =>
    withSessions({ pool: { size: 2 } }, ({ close, control, sessions }) =>
      Effect.gen(function* () {
        yield* readyAt(sessions, 2)
        expect((yield* control.alive).length).toBe(2)
        yield* close
        expect(yield* control.alive).toEqual([])
      })
    )
  )

  it.effect("bad pool options are refused when the service starts", () =>
    Effect.gen(function* () {
      for (const pool of [{ size: 0 }, { size: 1, idleTtlMs: -1 }, { size: 1, session: { memory: "lots" } }]) {
        const exit = yield* Effect.exit(withSessions({ pool } as unknown as SessionsOptions, () => Effect.void))
        expect(exit._tag).toBe("Failure")
        expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("InvalidRequest")
      }
    })
  )
})
