/**
 * The sweep (at startup, and every `sweepIntervalMs` when asked): find containers whose owner
 * is provably gone, in any state, remove them, and close their lifecycles in the journal, so a
 * replay shows every lifecycle closed even after a SIGKILL, a power loss or a lost host.
 *
 * "Provably gone" (orphanReason): the container's deadline passed; or its owner is on THIS host
 * (same host id) and its process is dead or recycled (pid + start time); or its owner is on
 * another host and the journal says so — its ownership lease expired (plus the clock-skew
 * allowance) or it closed (OwnerLease.ts). An owner on another host with a fresh lease, or of
 * which the journal holds no lease at all, is alive as far as the sweep knows: then only the
 * deadline label removes its containers.
 *
 * It never touches a live sibling's containers: a container is only an orphan
 * when its owner is proven gone, never merely because it is not ours.
 */
import { Clock, Duration, Effect, Either, Schedule, type Scope, Stream } from "effect"
import { type EventMetadata } from "@hermes-sandbox/events/Event"
import { Journal, type JournalEvent, Projection } from "@hermes-sandbox/events"
import { type LeaseState } from "@hermes-sandbox/events/Projection"
import { Label, ProjectName } from "./Labels.js"
import * as OwnerLease from "./OwnerLease.js"
import * as ProcessIdentity from "./ProcessIdentity.js"
import { SandboxRuntime, type SandboxInfo } from "./SandboxRuntime.js"

export interface SweepOptions {
  /** The sweeping executor: its own containers and streams are never swept. */
  readonly executorId: string
  /** How many of the journal's most recent events to check for open lifecycles (and, the first time, for leases). Default 100 000. */
  readonly journalWindow?: number
  /** How far another host's clock may be off: its lease counts as expired only this long after its end. Default 5 000 ms. */
  readonly clockSkewMs?: number
  /** Leases read so far; a periodic sweep keeps one so each sweep reads only what was appended since. Default: a fresh one. */
  readonly leases?: OwnerLease.LeaseBook
  /** Names the sweep in its log line. Default "startup sweep". */
  readonly name?: string
  /** Told each sweep's report (the metrics' count of leaked containers removed). */
  readonly onReport?: (report: SweepReport) => void
}

export interface SweepReport {
  /** Orphaned containers removed. */
  readonly removed: ReadonlyArray<string>
  /** Containers left alone because their owner is alive. */
  readonly live: number
  /** Lifecycles closed in the journal. */
  readonly closed: ReadonlyArray<string>
  /**
   * Containers of gone owners that the journal still held as alive and that were gone already when
   * this sweep closed their lifecycle (ContainerDestroyed, orphan-reaped): their owner's watchdog, or
   * whoever removed them without recording it, did. Each is reported by one sweep only (the close's
   * expected version), however many sweep the journal.
   */
  readonly alreadyRemoved: ReadonlyArray<string>
  /** Orphans that could not be removed this time (left for the next sweep or the watchdog). */
  readonly failed: ReadonlyArray<string>
  readonly durationMs: number
}

/** Why a container is an orphan (see the header). */
export type OrphanReason = "deadline" | "owner-dead" | "lease-expired" | "owner-closed"

export interface OwnerFacts {
  /** Wall-clock now (ms), for the deadline label: epoch seconds written by whichever process created it. Default Date.now(). */
  readonly wallNowMs?: number
  /** Now by the journal's clock (ms), for leases: they are dated by the journal's timestamps. Default wallNowMs. */
  readonly nowMs?: number
  /** The owner's lease as the journal holds it (absent: none). */
  readonly lease?: LeaseState | undefined
  readonly clockSkewMs?: number
  /** This sweeper's host id. Default ProcessIdentity.self.host. */
  readonly selfHost?: string
}

const deadlinePassed = (labels: Readonly<Record<string, string>>, wallNowMs: number) => {
  const deadline = Number(labels[Label.deadline])
  return Number.isFinite(deadline) && deadline > 0 && wallNowMs / 1000 > deadline
}

/**
 * Whether the journal's lease is what decides for this container: an owner on another host
 * (a same-host owner is judged by its pid), and a deadline not passed yet.
 */
export const decidedByLease = (
  labels: Readonly<Record<string, string>>,
  facts: Pick<OwnerFacts, "wallNowMs" | "selfHost"> = {}
): boolean => {
  const host = labels[Label.ownerHost]
  return (
    labels[Label.executor] !== undefined &&
    host !== undefined &&
    host !== (facts.selfHost ?? ProcessIdentity.self.host) &&
    !deadlinePassed(labels, facts.wallNowMs ?? Date.now())
  )
}

/** Why the container's owner is provably gone, or undefined when it may be alive (pure but for the same-host pid probe). */
export const orphanReason = (
  labels: Readonly<Record<string, string>>,
  facts: OwnerFacts = {}
): OrphanReason | undefined => {
  const wallNowMs = facts.wallNowMs ?? Date.now()
  if (deadlinePassed(labels, wallNowMs)) return "deadline"
  const host = labels[Label.ownerHost]
  // A persistent sandbox has no owner: only its deadline (and the SessionReaper) remove it.
  if (host === undefined) return undefined
  if (host === (facts.selfHost ?? ProcessIdentity.self.host)) {
    return ProcessIdentity.isGone({ host, pid: Number(labels[Label.ownerPid]), started: labels[Label.ownerStarted] })
      ? "owner-dead"
      : undefined
  }
  return leaseVerdict(facts.lease, facts.nowMs ?? wallNowMs, facts.clockSkewMs ?? OwnerLease.DEFAULT_CLOCK_SKEW_MS)
}

const leaseVerdict = (lease: LeaseState | undefined, nowMs: number, clockSkewMs: number): OrphanReason | undefined => {
  const status = OwnerLease.statusOf(lease, nowMs, clockSkewMs)
  return status === "expired" ? "lease-expired" : status === "closed" ? "owner-closed" : undefined
}

/** Whether a container's owner is provably gone, without the journal (deadline label, same-host pid). */
export const isOrphan = (labels: Readonly<Record<string, string>>, nowMs = Date.now()): boolean =>
  orphanReason(labels, { wallNowMs: nowMs }) !== undefined

const closeReasons: Record<OrphanReason, string> = {
  deadline: "the owning process died; closed by the sweep",
  "owner-dead": "the owning process died; closed by the sweep",
  "lease-expired": "the owner's lease expired (its host is gone); closed by the sweep",
  "owner-closed": "the owner closed; closed by the sweep"
}

export const sweep = (options: SweepOptions) =>
  Effect.gen(function* () {
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const startedAt = yield* Clock.currentTimeMillis
    const book = options.leases ?? OwnerLease.makeBook(journal, options.journalWindow)
    const clockSkewMs = options.clockSkewMs ?? OwnerLease.DEFAULT_CLOCK_SKEW_MS
    // A journal that cannot be read knows no lease: then only pids and deadlines decide.
    const leasesOf = (ids: Iterable<string>) =>
      book
        .lookup(ids)
        .pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning("sweep: could not read ownership leases; deciding without them", cause).pipe(
              Effect.as(new Map<string, LeaseState>())
            )
          )
        )

    // Listed BEFORE the leases are read: an owner renews its lease before it creates a container,
    // so a container listed here was created under a lease the read below sees (or a later one).
    const containers = yield* runtime.list({ [Label.project]: ProjectName })
    const foreign = containers.filter((c) => c.labels[Label.executor] !== options.executorId)
    const leases = yield* leasesOf(
      foreign.filter((c) => decidedByLease(c.labels)).map((c) => c.labels[Label.executor]!)
    )
    const nowMs = yield* Clock.currentTimeMillis
    const orphans: Array<SandboxInfo> = []
    /** Why each orphan is one, for the journal's ExecutionInterrupted. */
    const why = new Map<string, OrphanReason>()
    let live = 0
    for (const c of foreign) {
      const reason = orphanReason(c.labels, { nowMs, lease: leases.get(c.labels[Label.executor] ?? ""), clockSkewMs })
      if (reason === undefined) live++
      else {
        orphans.push(c)
        why.set(c.name, reason)
      }
    }
    // One orphan that cannot be removed (the watchdog removing it at the same moment answers
    // 409 "removal already in progress"; the engine hiccups) must not cost the others.
    const outcomes = yield* Effect.forEach(
      orphans,
      (c) =>
        runtime.remove(c).pipe(
          Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.intersect(Schedule.recurs(8)))),
          Effect.either,
          Effect.map((r) => ({ container: c, removed: Either.isRight(r) }))
        ),
      { concurrency: 8 }
    )
    const removed = outcomes.filter((o) => o.removed).map((o) => o.container)
    const failed = outcomes.filter((o) => !o.removed).map((o) => o.container.name)
    const removedNames = new Set(removed.map((c) => c.name))
    const stillThere = new Set(containers.map((c) => c.name).filter((n) => !removedNames.has(n)))

    // Close, in the journal, lifecycles left open by owners that are gone.
    const last = yield* journal.lastSequence
    // From the window's start, or from the last sweep's mark when it is later: every lifecycle
    // open at that sweep began at or after its mark (Journal.sweepMark), so the replay of a
    // durable journal does not grow with its length.
    const mark = journal.sweepMark === undefined ? undefined : yield* journal.sweepMark.get
    const fromSequence = Math.max(1, last - (options.journalWindow ?? 100_000) + 1, mark ?? 1)
    const projector = Projection.makeProjector()
    // Who wrote each stream: host, pid and (since it is recorded) the pid's start time, for isGone.
    const owners = new Map<string, EventMetadata>()
    /** Where each stream's first event in the replay is, for the next mark. */
    const firstSequence = new Map<string, number>()
    /** Session streams (their id is the session id): closing their container also closes the session. */
    const sessionStreams = new Set<string>()
    /**
     * Sessions not closed yet, with their stream's last version. One whose container is not
     * recorded yet (a sweep can run between SessionOpened and ContainerCreated) has no lifecycle
     * in the projection, but must still hold the mark: past its SessionOpened, a later sweep would
     * not know the stream is a session and would close its container but never the session.
     */
    const openSessions = new Map<string, { version: number; containerName: string | undefined; persistent: boolean }>()
    yield* journal.read({ fromSequence }).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.sync(() => {
          for (const e of chunk) {
            projector.apply(e)
            if (e.type === "SessionOpened" || e.type === "SessionReconnected") sessionStreams.add(e.streamId)
            if (e.type === "SessionClosed") openSessions.delete(e.streamId)
            else if (sessionStreams.has(e.streamId)) {
              const known = openSessions.get(e.streamId)
              openSessions.set(e.streamId, {
                version: e.version,
                containerName:
                  e.type === "SessionOpened" || e.type === "SessionReconnected"
                    ? e.data.containerName
                    : known?.containerName,
                // Only a persistent session is ever reconnected.
                persistent:
                  e.type === "SessionOpened"
                    ? e.data.scope === "persistent"
                    : e.type === "SessionReconnected" || (known?.persistent ?? false)
              })
            }
            if (!owners.has(e.streamId)) {
              owners.set(e.streamId, e.metadata)
              firstSequence.set(e.streamId, e.sequence)
            }
          }
        })
      )
    )
    // Who is gone among the writers of open streams: a same-host writer by its pid, another host's by its lease.
    const openOwners = [
      ...[...projector.states].filter(([, state]) => !Projection.isClosed(state)).map(([id]) => owners.get(id)),
      ...[...openSessions.keys()].map((id) => owners.get(id))
    ]
    const streamLeases = yield* leasesOf(
      openOwners
        .filter((o): o is EventMetadata => o !== undefined && o.host !== ProcessIdentity.self.host)
        .map((o) => o.executorId)
    )
    const leaseNowMs = yield* Clock.currentTimeMillis
    const writerGone = (owner: EventMetadata): OrphanReason | undefined =>
      owner.host === ProcessIdentity.self.host
        ? ProcessIdentity.isGone(owner)
          ? "owner-dead"
          : undefined
        : leaseVerdict(streamLeases.get(owner.executorId), leaseNowMs, clockSkewMs)
    const closed: Array<string> = []
    const alreadyRemoved: Array<string> = []
    // The earliest lifecycle this sweep leaves open (its owner alive, its container still there,
    // or closed by someone else meanwhile): the next mark. Past the replay when none is.
    let nextMark = last + 1
    const leftOpen = (streamId: string) =>
      void (nextMark = Math.min(nextMark, firstSequence.get(streamId) ?? fromSequence))
    for (const [streamId, state] of projector.states) {
      if (Projection.isClosed(state) || (state.requestedAt === undefined && state.createdAt === undefined)) continue
      const owner = owners.get(streamId)
      if (owner === undefined || owner.executorId === options.executorId) {
        leftOpen(streamId)
        continue
      }
      const containerRemovedNow = state.containerName !== undefined && removedNames.has(state.containerName)
      const gone = writerGone(owner)
      if (
        (!containerRemovedNow && gone === undefined) ||
        (state.containerName !== undefined && stillThere.has(state.containerName))
      ) {
        leftOpen(streamId)
        continue
      }
      const ownerGoneReason = closeReasons[gone ?? why.get(state.containerName ?? "") ?? "owner-dead"]
      const events: Array<JournalEvent> = []
      // A container-only stream (warm pool, session) has no execution to end, only a container.
      if (state.outcome === undefined && state.kind === "execution")
        events.push({ type: "ExecutionInterrupted", data: { reason: ownerGoneReason } })
      if (state.containerId !== undefined && state.destroyedAt === undefined) {
        events.push({
          type: "ContainerDestroyed",
          data: { containerName: state.containerName ?? "", containerId: state.containerId, reason: "orphan-reaped" }
        })
        if (sessionStreams.has(streamId))
          events.push({ type: "SessionClosed", data: { sessionId: streamId, reason: ownerGoneReason } })
      }
      if (events.length === 0) {
        leftOpen(streamId)
        continue
      }
      // Another executor starting at the same moment may sweep the same stream: the expected
      // version makes exactly one of the two appends win, so the lifecycle closes once.
      const appended = yield* journal
        .append({ streamId, events, executorId: options.executorId, expectedVersion: state.lastVersion })
        .pipe(
          Effect.as(true),
          Effect.catchTag("VersionConflict", () => Effect.succeed(false))
        )
      if (appended) {
        closed.push(streamId)
        if (!containerRemovedNow && events.some((e) => e.type === "ContainerDestroyed"))
          alreadyRemoved.push(state.containerName ?? "")
      } else leftOpen(streamId)
    }
    // Open sessions without a container lifecycle in the replay (SessionOpened, its container not
    // recorded yet): held while the owner lives; closed when it is gone and its container is not
    // there (one it made before dying was removed above, by its labels). A persistent session
    // outlives its owner by design: it is only held.
    for (const [sessionId, { containerName, persistent, version }] of openSessions) {
      const state = projector.states.get(sessionId)
      if (state !== undefined && (state.requestedAt !== undefined || state.createdAt !== undefined)) continue // decided above
      const owner = owners.get(sessionId)
      const gone =
        owner === undefined || owner.executorId === options.executorId || persistent ? undefined : writerGone(owner)
      if (gone === undefined || (containerName !== undefined && stillThere.has(containerName))) {
        leftOpen(sessionId)
        continue
      }
      const appended = yield* journal
        .append({
          streamId: sessionId,
          events: [{ type: "SessionClosed", data: { sessionId, reason: closeReasons[gone] } }],
          executorId: options.executorId,
          expectedVersion: version
        })
        .pipe(
          Effect.as(true),
          Effect.catchTag("VersionConflict", () => Effect.succeed(false))
        )
      if (appended) closed.push(sessionId)
      else leftOpen(sessionId)
    }
    if (journal.sweepMark !== undefined) yield* journal.sweepMark.set(nextMark)
    const report: SweepReport = {
      removed: removed.map((c) => c.name),
      live,
      closed,
      alreadyRemoved,
      failed,
      durationMs: (yield* Clock.currentTimeMillis) - startedAt
    }
    options.onReport?.(report)
    if (report.removed.length > 0 || report.closed.length > 0 || report.failed.length > 0) {
      yield* Effect.logInfo(
        `${options.name ?? "startup sweep"}: removed ${report.removed.length} orphaned container(s), closed ${report.closed.length} lifecycle(s)` +
          (failed.length > 0 ? `, could not remove ${failed.length} (${failed.join(", ")})` : "") +
          ` in ${report.durationMs} ms`
      )
    }
    return report
  })

/**
 * Sweep every `intervalMs` (after a first wait) for the scope's lifetime, with one lease book
 * across sweeps: how a live executor reaps the orphans of an owner whose whole host died (its
 * watchdog died with it). A failed sweep is logged and the next one tries again.
 */
export const periodically = (
  options: SweepOptions & { readonly intervalMs: number }
): Effect.Effect<void, never, SandboxRuntime | Journal.Journal | Scope.Scope> =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    const leases = options.leases ?? OwnerLease.makeBook(journal, options.journalWindow)
    const once = sweep({ ...options, leases, name: options.name ?? "periodic sweep" }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("periodic sweep failed; trying again later", cause))
    )
    yield* Effect.forkScoped(
      Effect.forever(Effect.sleep(Duration.millis(options.intervalMs)).pipe(Effect.zipRight(once)))
    )
  })
