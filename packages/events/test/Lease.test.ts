/** Ownership-lease events: their fold (Projection.evolveLease, leaseStatus), the summary, checkLifecycle. */
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Event from "../src/Event.js"
import * as Projection from "../src/Projection.js"
import { arbEventOf, toEnvelopes } from "../src/testing.js"

const E = Event.make
const lease = (leaseMs: number) => E("ExecutorLease", { leaseMs })
const closed = E("ExecutorClosed", {})

const foldLease = (events: ReadonlyArray<Event.JournalEvent>, timestamp = 1_000) =>
  toEnvelopes("exec-a", events, { timestamp }).reduce<Projection.LeaseState | undefined>(
    Projection.evolveLease,
    undefined
  )

describe("ownership leases", () => {
  it("the last lease decides: held until its end plus the clock-skew allowance, then expired", () => {
    // toEnvelopes dates event i at timestamp + i: the second lease is at 1001.
    const state = foldLease([lease(30_000), lease(10_000)])!
    expect(state).toMatchObject({ executorId: "exec-a", renewedAt: 1_001, leaseMs: 10_000 })
    expect(state.closedAt).toBeUndefined()
    expect(Projection.leaseStatus(state, 1_001 + 10_000 + 5_000, 5_000)).toBe("held")
    expect(Projection.leaseStatus(state, 1_001 + 10_000 + 5_001, 5_000)).toBe("expired")
  })

  it("ExecutorClosed closes it at once; a later lease (the id reused) opens it again", () => {
    const state = foldLease([lease(30_000), closed])!
    expect(Projection.leaseStatus(state, 1_002, 5_000)).toBe("closed")
    const reopened = foldLease([lease(30_000), closed, lease(30_000)])!
    expect(Projection.leaseStatus(reopened, 1_003, 5_000)).toBe("held")
  })

  it("ignores re-deliveries and other streams' events", () => {
    const [first, second] = toEnvelopes("exec-a", [lease(30_000), lease(60_000)])
    const state = Projection.evolveLease(Projection.evolveLease(undefined, first!), second!)!
    expect(Projection.evolveLease(state, first!)).toBe(state)
    const other = toEnvelopes("exec-b", [closed], { startSequence: 9 })[0]!
    expect(Projection.evolveLease(state, other)).toBe(state)
    expect(
      Projection.evolveLease(undefined, toEnvelopes("x", [E("ExecutorStats", { inFlight: 0, queued: 0 })])[0]!)
    ).toBeUndefined()
  })

  it("property: whatever the lease events, the status is closed iff the last one is ExecutorClosed", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(arbEventOf("ExecutorLease"), arbEventOf("ExecutorClosed")), { minLength: 1, maxLength: 12 }),
        fc.nat(),
        (events, now) => {
          const state = foldLease(events)!
          const lastIsClose = events.at(-1)!.type === "ExecutorClosed"
          expect(Projection.leaseStatus(state, now, 0) === "closed").toBe(lastIsClose)
        }
      )
    )
  })

  it("the projector keeps leases apart from lifecycles and the summary counts owners", () => {
    const projector = Projection.makeProjector()
    for (const e of toEnvelopes("exec-a", [lease(30_000)])) projector.apply(e)
    for (const e of toEnvelopes("exec-b", [lease(30_000), closed], { startSequence: 2 })) projector.apply(e)
    expect(projector.states.size).toBe(0)
    expect([...projector.leases.keys()].sort()).toEqual(["exec-a", "exec-b"])
    expect(projector.summary().executors).toEqual({ open: 1, closed: 1 })
    expect(Projection.makeProjector().summary().executors).toBeUndefined()
  })

  it("checkLifecycle: an executor stream's leases are valid; a lease inside a lifecycle stream is not", () => {
    expect(
      Projection.checkLifecycle(toEnvelopes("exec-a", [lease(30_000), lease(30_000), closed, lease(30_000)]))
    ).toEqual([])
    const mixed = toEnvelopes("x", [
      E("ContainerCreated", { containerName: "n", containerId: "c", imageId: "i" }),
      lease(30_000)
    ])
    expect(Projection.checkLifecycle(mixed)).toEqual(["ExecutorLease (sequence 2) in a lifecycle stream"])
  })
})
