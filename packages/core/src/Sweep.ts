/**
 * The startup sweep: find containers whose owner is provably gone (its process
 * on this host is dead, or the container's deadline passed), in any state,
 * remove them, and close their lifecycles in the journal, so a replay shows
 * every lifecycle closed even after a SIGKILL or a power loss.
 *
 * It never touches a live sibling's containers: a container is only an orphan
 * when its owner is proven gone, never merely because it is not ours.
 */
import { Clock, Effect, Either, Schedule, Stream } from "effect"
import { type EventMetadata, Journal, type JournalEvent, Projection } from "@hermes-sandbox/events"
import { Label, ProjectName } from "./Labels.js"
import * as ProcessIdentity from "./ProcessIdentity.js"
import { SandboxRuntime, type SandboxInfo } from "./SandboxRuntime.js"

export interface SweepOptions {
  /** The sweeping executor: its own containers and streams are never swept. */
  readonly executorId: string
  /** How many of the journal's most recent events to check for open lifecycles. Default 100 000. */
  readonly journalWindow?: number
}

export interface SweepReport {
  /** Orphaned containers removed. */
  readonly removed: ReadonlyArray<string>
  /** Containers left alone because their owner is alive. */
  readonly live: number
  /** Lifecycles closed in the journal. */
  readonly closed: ReadonlyArray<string>
  /** Orphans that could not be removed this time (left for the next sweep or the watchdog). */
  readonly failed: ReadonlyArray<string>
  readonly durationMs: number
}

/**
 * Whether a container's owner is provably gone. Its deadline label is wall-clock epoch seconds,
 * written by whichever process created it, so it is judged against the wall clock, not `Clock`.
 */
export const isOrphan = (labels: Readonly<Record<string, string>>, nowMs = Date.now()): boolean => {
  const deadline = Number(labels[Label.deadline])
  if (Number.isFinite(deadline) && deadline > 0 && nowMs / 1000 > deadline) return true
  return ProcessIdentity.isGone({
    host: labels[Label.ownerHost],
    pid: Number(labels[Label.ownerPid]),
    started: labels[Label.ownerStarted]
  })
}

const ownerGoneReason = "the owning process died; closed by the startup sweep"

export const sweep = (options: SweepOptions) =>
  Effect.gen(function*() {
    const runtime = yield* SandboxRuntime
    const journal = yield* Journal.Journal
    const startedAt = yield* Clock.currentTimeMillis

    const containers = yield* runtime.list({ [Label.project]: ProjectName })
    const orphans: Array<SandboxInfo> = []
    let live = 0
    for (const c of containers) {
      if (c.labels[Label.executor] === options.executorId) continue
      if (isOrphan(c.labels)) orphans.push(c)
      else live++
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
    yield* journal.read({ fromSequence }).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.sync(() => {
          for (const e of chunk) {
            projector.apply(e)
            if (e.type === "SessionOpened") sessionStreams.add(e.streamId)
            if (!owners.has(e.streamId)) {
              owners.set(e.streamId, e.metadata)
              firstSequence.set(e.streamId, e.sequence)
            }
          }
        })
      )
    )
    const closed: Array<string> = []
    // The earliest lifecycle this sweep leaves open (its owner alive, its container still there,
    // or closed by someone else meanwhile): the next mark. Past the replay when none is.
    let nextMark = last + 1
    const leftOpen = (streamId: string) => void (nextMark = Math.min(nextMark, firstSequence.get(streamId) ?? fromSequence))
    for (const [streamId, state] of projector.states) {
      if (Projection.isClosed(state) || state.requestedAt === undefined && state.createdAt === undefined) continue
      const owner = owners.get(streamId)
      if (owner === undefined || owner.executorId === options.executorId) {
        leftOpen(streamId)
        continue
      }
      const containerRemovedNow = state.containerName !== undefined && removedNames.has(state.containerName)
      if ((!containerRemovedNow && !ProcessIdentity.isGone(owner)) || (state.containerName !== undefined && stillThere.has(state.containerName))) {
        leftOpen(streamId)
        continue
      }
      const events: Array<JournalEvent> = []
      // A container-only stream (warm pool, session) has no execution to end, only a container.
      if (state.outcome === undefined && state.kind === "execution") events.push({ type: "ExecutionInterrupted", data: { reason: ownerGoneReason } })
      if (state.containerId !== undefined && state.destroyedAt === undefined) {
        events.push({
          type: "ContainerDestroyed",
          data: { containerName: state.containerName ?? "", containerId: state.containerId, reason: "orphan-reaped" }
        })
        if (sessionStreams.has(streamId)) events.push({ type: "SessionClosed", data: { sessionId: streamId, reason: ownerGoneReason } })
      }
      if (events.length === 0) {
        leftOpen(streamId)
        continue
      }
      // Another executor starting at the same moment may sweep the same stream: the expected
      // version makes exactly one of the two appends win, so the lifecycle closes once.
      const appended = yield* journal.append({ streamId, events, executorId: options.executorId, expectedVersion: state.lastVersion }).pipe(
        Effect.as(true),
        Effect.catchTag("VersionConflict", () => Effect.succeed(false))
      )
      if (appended) closed.push(streamId)
      else leftOpen(streamId)
    }
    if (journal.sweepMark !== undefined) yield* journal.sweepMark.set(nextMark)
    const report: SweepReport = { removed: removed.map((c) => c.name), live, closed, failed, durationMs: (yield* Clock.currentTimeMillis) - startedAt }
    if (report.removed.length > 0 || report.closed.length > 0 || report.failed.length > 0) {
      yield* Effect.logInfo(
        `startup sweep: removed ${report.removed.length} orphaned container(s), closed ${report.closed.length} lifecycle(s)` +
          (failed.length > 0 ? `, could not remove ${failed.length} (${failed.join(", ")})` : "") +
          ` in ${report.durationMs} ms`
      )
    }
    return report
  })
