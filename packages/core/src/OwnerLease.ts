/**
 * Ownership leases: how a process on ANOTHER host learns that the owner of a container is gone
 * (ARCHITECTURE.md, "Ownership across hosts").
 *
 * An owner of containers (an executor, a sessions service: whatever labels containers with its
 * executor id) appends `ExecutorLease { leaseMs }` to its executor stream (stream id = executor
 * id) before it creates anything, renews it every `renewEveryMs` while it lives, and appends
 * `ExecutorClosed` once its own finalizers removed its containers. A sweeper whose host id
 * differs from the owner's reads that stream (LeaseBook) and takes the owner as gone when its
 * last lease expired more than `clockSkewMs` ago (the owner's clock dated the lease, the
 * sweeper's clock judges it) or when it closed. No lease in the journal (a journal the owner
 * does not share, an owner older than leases) proves nothing: then the container's deadline
 * label stays the last resort.
 *
 * Holding: one renewal per (journal, executor id) in a process, reference-counted, so an
 * executor and the sessions service that share an id (DockerExecutor.layerWithSessions) keep
 * ONE lease, closed when the last of them closes — never while the other still owns containers.
 *
 * A lapse: when no renewal committed for a whole lease period (the journal refused it, or the
 * process was stalled), sweepers elsewhere may already be removing this owner's containers. The
 * holder logs an error, says so (`LeaseHandle.lapsed`), keeps trying every second, and logs the
 * recovery. It does not stop its runs: a run whose container a sweeper removed ends as
 * ContainerFailed (killed from outside the SDK), never as a silent result, and a journal that
 * refuses renewals refuses every run's own events too.
 */
import { Clock, Deferred, Duration, Effect, Fiber, Schema, type Scope, Stream } from "effect"
import { Event, Journal, type JournalError, type JournalService, Projection } from "@hermes-sandbox/events"
import { type LeaseState, type LeaseStatus } from "@hermes-sandbox/events/Projection"
import * as Schemas from "./Schemas.js"

/** An owner's lease options as users write them (`ownerLease` of an executor or a sessions service). */
export const OwnerLeaseOptionsSchema = Schema.Struct({
  /** How long each renewal holds the owner's containers. Default 30 000 ms. */
  leaseMs: Schema.optional(Schemas.PositiveInt()),
  /** How often the lease is renewed; at most a third of `leaseMs`, so two renewals may fail before it runs out. Default `leaseMs / 3`. */
  renewEveryMs: Schema.optional(Schemas.PositiveInt()),
  /** How far the owner's clock and a sweeper's may differ: a lease counts as expired only this long after its end. Default 5 000 ms. */
  clockSkewMs: Schema.optional(Schemas.NonNegativeInt)
})

export interface OwnerLeaseOptions extends Schemas.Input<typeof OwnerLeaseOptionsSchema> {}

export interface ResolvedLease {
  readonly leaseMs: number
  readonly renewEveryMs: number
  readonly clockSkewMs: number
}

export const DEFAULT_LEASE_MS = 30_000
export const DEFAULT_CLOCK_SKEW_MS = 5_000
/** How soon a renewal that failed is tried again. */
const RETRY_MS = 1_000

/** The options with their defaults (renewEveryMs capped at a third of the lease). */
export const resolve = (options: OwnerLeaseOptions = {}): ResolvedLease => {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS
  const third = Math.max(1, Math.floor(leaseMs / 3))
  return {
    leaseMs,
    renewEveryMs: Math.min(options.renewEveryMs ?? third, third),
    clockSkewMs: options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS
  }
}

/**
 * Whether an owner holds a lease: when asked (`ownerLease: { ... }`), and by default only on a
 * journal other hosts read (`sharedAcrossHosts`: PostgreSQL). A SQLite file or a memory journal
 * is one host's, whose owners the sweep proves gone by pid: a lease there would tell nobody
 * anything and only grow it (and a one-shot CLI run would write two more events). Several host
 * ids on one machine sharing a SQLite file (test/fleet) ask for it.
 */
export const enabledFor = (
  journal: JournalService,
  option: false | OwnerLeaseOptions | undefined
): option is OwnerLeaseOptions | undefined =>
  option === false ? false : option !== undefined || journal.sharedAcrossHosts === true

export interface LeaseHandle {
  readonly executorId: string
  readonly lease: ResolvedLease
  /** True while no renewal has committed for a whole lease period (see the header). */
  readonly lapsed: Effect.Effect<boolean>
}

interface Holder {
  refs: number
  lapsed: boolean
  readonly lease: ResolvedLease
  /** Done once the first lease was sent (and committed, unless the journal refused it). */
  readonly started: Deferred.Deferred<void>
  fiber: Fiber.RuntimeFiber<never, never> | undefined
}

/** The renewals this process runs, per journal and executor id. */
const holders = new WeakMap<JournalService, Map<string, Holder>>()

const renewOnce = (journal: JournalService, executorId: string, leaseMs: number) =>
  journal.append({ streamId: executorId, executorId, events: [Event.make("ExecutorLease", { leaseMs })] })

/**
 * The renewal loop. `committedAt` is when the last successful renewal was SENT (the journal
 * dates the event at or after that), so the lapse is judged conservatively.
 */
const renewals = (journal: JournalService, executorId: string, holder: Holder, committedAt: number) =>
  Effect.gen(function* () {
    const { lease } = holder
    let last = committedAt
    let delay = lease.renewEveryMs
    for (;;) {
      yield* Effect.sleep(Duration.millis(delay))
      const sentAt = yield* Clock.currentTimeMillis
      const ok = yield* renewOnce(journal, executorId, lease.leaseMs).pipe(
        Effect.as(true),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`ownership lease of ${executorId}: renewal failed; retrying`, cause).pipe(Effect.as(false))
        )
      )
      if (ok) {
        if (holder.lapsed) {
          holder.lapsed = false
          yield* Effect.logWarning(
            `ownership lease of ${executorId}: renewed again after ${sentAt - last} ms without a renewal`
          )
        }
        last = sentAt
        delay = lease.renewEveryMs
      } else {
        const now = yield* Clock.currentTimeMillis
        if (!holder.lapsed && now - last >= lease.leaseMs) {
          holder.lapsed = true
          yield* Effect.logError(
            `ownership lease of ${executorId} lapsed: no renewal committed for ${now - last} ms (lease ${lease.leaseMs} ms); ` +
              "sweepers on other hosts may remove this owner's containers"
          )
        }
        delay = Math.min(RETRY_MS, lease.renewEveryMs)
      }
    }
  })

/** The first holder of an id in this process: the first lease, then the renewals. */
const begin = (journal: JournalService, executorId: string, holder: Holder) =>
  Effect.gen(function* () {
    const sentAt = yield* Clock.currentTimeMillis
    const ok = yield* renewOnce(journal, executorId, holder.lease.leaseMs).pipe(
      Effect.as(true),
      Effect.catchAllCause((cause) =>
        Effect.logWarning(`ownership lease of ${executorId}: the first lease failed; retrying`, cause).pipe(
          Effect.as(false)
        )
      )
    )
    // A daemon: it belongs to every holder of the id, not to the first one's scope. After a failed
    // first lease it counts from long ago, so the loop reports the lapse when the next one fails too.
    // Interruptible, although forked from the uninterruptible acquisition (it would inherit that).
    holder.fiber = yield* Effect.forkDaemon(
      Effect.interruptible(renewals(journal, executorId, holder, ok ? sentAt : sentAt - holder.lease.leaseMs))
    )
  }).pipe(Effect.ensuring(Deferred.succeed(holder.started, undefined)))

/**
 * Hold the lease of `executorId` for the scope: the first holder in this process appends the
 * first lease (every holder waits for it, so nothing this owner creates is ever unleased) and
 * starts the renewals; the last one to leave stops them and appends `ExecutorClosed`. A journal
 * that refuses the first lease is logged, not fatal: the renewals keep trying.
 */
export const hold = (
  executorId: string,
  options: OwnerLeaseOptions = {}
): Effect.Effect<LeaseHandle, never, Journal.Journal | Scope.Scope> =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    const byId = holders.get(journal) ?? new Map<string, Holder>()
    holders.set(journal, byId)
    let holder = byId.get(executorId)
    if (holder === undefined) {
      // Registered before the first append, so a second holder starting at the same moment joins it.
      holder = {
        refs: 0,
        lapsed: false,
        lease: resolve(options),
        started: yield* Deferred.make<void>(),
        fiber: undefined
      }
      byId.set(executorId, holder)
      holder.refs++
      yield* begin(journal, executorId, holder)
    } else {
      holder.refs++
      yield* Deferred.await(holder.started)
    }
    const held = holder
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        if (--held.refs > 0) return Effect.void
        byId.delete(executorId)
        return (held.fiber === undefined ? Effect.void : Fiber.interrupt(held.fiber)).pipe(
          Effect.zipRight(
            journal.append({ streamId: executorId, executorId, events: [Event.make("ExecutorClosed", {})] })
          ),
          Effect.catchAllCause((cause) =>
            Effect.logWarning(
              `ownership lease of ${executorId}: could not record the close (the lease will expire)`,
              cause
            )
          ),
          Effect.asVoid
        )
      })
    )
    return { executorId, lease: held.lease, lapsed: Effect.sync(() => held.lapsed) }
  }).pipe(Effect.uninterruptible)

// --- reading leases (the sweep) -------------------------------------------------------------

/** How many of the journal's most recent events a first look at an owner's stream covers. Default 100 000. */
export const DEFAULT_LEASE_WINDOW = 100_000

export interface LeaseBook {
  /**
   * The leases of these owners as the journal holds them now (absent: no lease event in the
   * window). Each owner's stream is read from where this book last read it (the first time:
   * the most recent `window` events), with the stream index and a types filter, so a periodic
   * sweep reads only what was appended since the last one.
   */
  readonly lookup: (executorIds: Iterable<string>) => Effect.Effect<ReadonlyMap<string, LeaseState>, JournalError>
}

export const makeBook = (journal: JournalService, window = DEFAULT_LEASE_WINDOW): LeaseBook => {
  const known = new Map<string, { state: LeaseState | undefined; readUpTo: number }>()
  return {
    lookup: (executorIds) =>
      Effect.gen(function* () {
        const out = new Map<string, LeaseState>()
        const ids = [...new Set(executorIds)]
        if (ids.length === 0) return out
        const last = yield* journal.lastSequence
        for (const id of ids) {
          const entry = known.get(id) ?? { state: undefined, readUpTo: Math.max(0, last - window) }
          if (entry.readUpTo < last) {
            yield* journal
              .read({ streamId: id, types: Event.leaseEventTypes, fromSequence: entry.readUpTo + 1 })
              .pipe(
                Stream.runForEach((e) => Effect.sync(() => void (entry.state = Projection.evolveLease(entry.state, e))))
              )
            // Events after `last` may have been read too; reading them again is harmless (evolveLease skips re-deliveries).
            entry.readUpTo = last
          }
          known.set(id, entry)
          if (entry.state !== undefined) out.set(id, entry.state)
        }
        return out
      })
  }
}

/** What the journal says of an owner at `nowMs`; undefined when it holds no lease of it. */
export const statusOf = (lease: LeaseState | undefined, nowMs: number, clockSkewMs: number): LeaseStatus | undefined =>
  lease === undefined ? undefined : Projection.leaseStatus(lease, nowMs, clockSkewMs)
