/**
 * The reaper of PERSISTENT sandboxes nobody here holds: removes those idle longer than their
 * idle limit and those past their maximum lifetime.
 *
 * Who removes a long-lived sandbox, and when:
 * - session, owner alive: its owner's in-process idle reaper (Session.ts) after
 *   `lifetimeSeconds` without a call, or at its hard cap;
 * - session, owner gone: the startup sweep (owner labels: pid + start time on this host) and,
 *   after a SIGKILL, the owner's watchdog (executor label) — running or not;
 * - session or persistent, past its `deadline` label: the startup sweep, and THIS reaper;
 * - persistent, held: its holder's in-process reaper (idle limit, counting what the journal
 *   shows of other processes' calls) and hard cap (the deadline label);
 * - persistent, not held here: THIS reaper, when idle longer than its `idle-seconds` label.
 *
 * Everything is decided from what the HOST knows; nothing is read from inside the sandbox (it
 * used to be: the session shell's state-file mtime, which a program could set to 2099, or make
 * unreadable — "a failed probe never removes"; hostile review 1, finding 6). The facts:
 * - the engine: the container's creation time (`SandboxInfo.createdAt`; whole seconds) and its
 *   `deadline` label (epoch seconds = creation + `maxLifetimeMs`, fixed at create: labels cannot
 *   change). A persistent sandbox made before deadlines existed counts as created with the
 *   default maximum lifetime (DEFAULT_PERSISTENT_MAX_LIFETIME_MS);
 * - the journal this reaper appends to: every event of the session's stream (handles opened,
 *   reconnected, detached) and every call on it (`ExecutionRequested` with its `sessionId`, then
 *   its terminal event in the call's own stream), dated by the host's clock when appended,
 *   from the container's creation on. A call requested and not ended counts as busy until
 *   `max(requested, the session's last call end) + its timeoutMs + IN_FLIGHT_GRACE_MS` — the
 *   host's own deadline for it — so a running call is never reaped under its caller, and a
 *   call whose process died stops counting by itself.
 * Idle time = now − the latest of those (creation included). A program inside cannot create a
 * journal event, a call or an engine timestamp, so it cannot make its sandbox look busier;
 * it can only end its own calls early.
 *
 * Which journal knows what: every process appends to the journal it was given. A SQLite
 * journal shared by every process that uses persistent sandboxes (the CLI's default; the
 * facades' `journal: "default"`) knows every handle and call on this host: the idle limit is
 * exact. A journal without any record of a sandbox since its creation (the facades' default
 * in-memory journal, used by another process) cannot date its last use; then `unrecorded`
 * decides: "engine-time" (an explicit reap: `Sessions.reap`, `hermes-sandbox session reap`)
 * takes the creation time as its last activity — it removes a sandbox created more than its
 * idle limit ago even if another process used it a moment ago; "keep" (the background reap when
 * a service starts) leaves it to its holders, a reaper that has records, an explicit reap, or
 * its deadline. A journal that cannot be read counts as having no records.
 *
 * A sandbox held open by this process is left to its handle (its calls are in flight here).
 */
import { Clock, Effect, Stream } from "effect"
import type { EventEnvelope, JournalEvent, JournalService } from "@hermes-sandbox/events"
import type { SandboxError } from "./Errors.js"
import { ContainerNamePrefix, Label, ProjectName } from "./Labels.js"
import { SandboxRuntime, type SandboxInfo } from "./SandboxRuntime.js"

/** A persistent sandbox's maximum lifetime when `maxLifetimeMs` is not given: 7 days from its creation. */
export const DEFAULT_PERSISTENT_MAX_LIFETIME_MS = 7 * 86400_000
/** The largest `maxLifetimeMs` of a persistent sandbox: 366 days (there is no "forever"). */
export const MAX_PERSISTENT_LIFETIME_MS = 366 * 86400_000
/** How long past its own deadline a call without a recorded end still counts as running (kill grace, sandbox kill, append). */
export const IN_FLIGHT_GRACE_MS = 30_000
/** How many of the journal's most recent events are searched for calls. */
export const DEFAULT_JOURNAL_WINDOW = 100_000

/** What the host recorded of a sandbox's use since its creation. */
export interface HostActivity {
  /** The latest host record: a handle opened, reconnected or detached, a call requested or ended. */
  readonly lastMs: number
  /** A call without a recorded end: busy until its host-side deadline (plus grace). */
  readonly busyUntilMs: number | undefined
}

/** No record of a sandbox since its creation: go by the creation time, or keep it (until its deadline). */
export type Unrecorded = "engine-time" | "keep"

export interface SandboxFacts {
  readonly nowMs: number
  /** The engine's creation time. */
  readonly createdAtMs: number
  /** From the `idle-seconds` label; undefined: no idle limit. */
  readonly idleLimitMs: number | undefined
  /** From the `deadline` label (see deadlineOf). */
  readonly deadlineMs: number | undefined
  /** undefined: the journal has no record of it since its creation. */
  readonly activity: HostActivity | undefined
}

export type DecisionReason = "max-lifetime" | "idle" | "no-idle-limit" | "call-in-flight" | "active" | "unrecorded"

export interface Decision {
  readonly remove: boolean
  readonly reason: DecisionReason
  /** Idle time by the host's records (ms), when it was measured. */
  readonly idleMs: number | undefined
}

/** The decision, from host facts only (pure). */
export const decide = (facts: SandboxFacts, unrecorded: Unrecorded): Decision => {
  const { activity, nowMs } = facts
  if (facts.deadlineMs !== undefined && nowMs > facts.deadlineMs)
    return { remove: true, reason: "max-lifetime", idleMs: undefined }
  if (facts.idleLimitMs === undefined) return { remove: false, reason: "no-idle-limit", idleMs: undefined }
  if (activity?.busyUntilMs !== undefined && activity.busyUntilMs > nowMs)
    return { remove: false, reason: "call-in-flight", idleMs: 0 }
  if (activity === undefined && unrecorded === "keep") return { remove: false, reason: "unrecorded", idleMs: undefined }
  const last = Math.max(facts.createdAtMs, activity?.lastMs ?? -Infinity, activity?.busyUntilMs ?? -Infinity)
  const idleMs = Math.max(0, nowMs - last)
  return idleMs > facts.idleLimitMs
    ? { remove: true, reason: "idle", idleMs }
    : { remove: false, reason: "active", idleMs }
}

/**
 * The deadline (ms) of a sandbox: its `deadline` label (epoch seconds); a persistent sandbox
 * made before deadlines were recorded: its creation + the default maximum lifetime.
 */
export const deadlineOf = (labels: Readonly<Record<string, string>>, createdAtMs: number): number | undefined => {
  const seconds = Number(labels[Label.deadline])
  if (labels[Label.deadline] !== undefined && Number.isFinite(seconds) && seconds > 0) return seconds * 1000
  return labels[Label.scope] === "persistent" ? createdAtMs + DEFAULT_PERSISTENT_MAX_LIFETIME_MS : undefined
}

const CALL_EVENTS = [
  "ExecutionRequested",
  "ContainerExited",
  "ExecutionTimedOut",
  "ExecutionInterrupted",
  "ExecutionFailed"
] as const

/**
 * What the journal recorded of each sandbox since its creation: its session stream's events
 * and the calls on it (see the header). One read of each session stream, then one scan of the
 * call events from the earliest of those (bounded by the most recent `window` events).
 */
export const journalActivity = (
  journal: JournalService,
  sandboxes: ReadonlyArray<{ readonly sessionId: string; readonly createdAtMs: number }>,
  window = DEFAULT_JOURNAL_WINDOW
) =>
  Effect.gen(function* () {
    const result = new Map<string, HostActivity | undefined>()
    if (sandboxes.length === 0) return result
    const lastSequence = yield* journal.lastSequence
    const windowStart = Math.max(1, lastSequence - window + 1)
    const since = new Map(sandboxes.map((s) => [s.sessionId, s.createdAtMs]))
    const stream = new Map<string, { lastMs: number | undefined; firstSequence: number | undefined }>()
    for (const s of sandboxes) {
      const seen = { lastMs: undefined as number | undefined, firstSequence: undefined as number | undefined }
      yield* journal.read({ streamId: s.sessionId, fromSequence: windowStart }).pipe(
        Stream.runForEach((e) =>
          Effect.sync(() => {
            // Older events belong to an earlier sandbox of the same profile + fingerprint (same stream).
            if (e.timestamp < s.createdAtMs) return
            seen.lastMs = Math.max(seen.lastMs ?? -Infinity, e.timestamp)
            seen.firstSequence ??= e.sequence
          })
        )
      )
      stream.set(s.sessionId, seen)
    }
    // Calls come after their handle's open (in the same journal); without any record, search the window.
    const from = Math.max(windowStart, Math.min(...[...stream.values()].map((s) => s.firstSequence ?? windowStart)))
    const calls = new Map<
      string,
      { sessionId: string; requestedMs: number; timeoutMs: number; endedMs: number | undefined }
    >()
    yield* journal.read({ fromSequence: from, types: CALL_EVENTS }).pipe(
      Stream.runForEach((e: EventEnvelope) =>
        Effect.sync(() => {
          if (e.type === "ExecutionRequested") {
            const sessionId = e.data.sessionId
            const createdAtMs = sessionId === undefined ? undefined : since.get(sessionId)
            if (sessionId === undefined || createdAtMs === undefined || e.timestamp < createdAtMs) return
            calls.set(e.streamId, {
              sessionId,
              requestedMs: e.timestamp,
              timeoutMs: e.data.timeoutMs,
              endedMs: undefined
            })
          } else {
            const call = calls.get(e.streamId)
            if (call !== undefined && call.endedMs === undefined) call.endedMs = e.timestamp
          }
        })
      )
    )
    const perSession = new Map<
      string,
      { lastMs: number; lastEndMs: number; open: Array<{ requestedMs: number; timeoutMs: number }> }
    >()
    for (const s of sandboxes)
      perSession.set(s.sessionId, {
        lastMs: stream.get(s.sessionId)?.lastMs ?? -Infinity,
        lastEndMs: -Infinity,
        open: []
      })
    for (const call of calls.values()) {
      const acc = perSession.get(call.sessionId)!
      acc.lastMs = Math.max(acc.lastMs, call.requestedMs, call.endedMs ?? -Infinity)
      if (call.endedMs === undefined) acc.open.push(call)
      else acc.lastEndMs = Math.max(acc.lastEndMs, call.endedMs)
    }
    for (const [sessionId, acc] of perSession) {
      // A queued call's deadline starts when the call before it ends: count from the later of the two.
      let busyUntilMs: number | undefined
      for (const c of acc.open)
        busyUntilMs = Math.max(
          busyUntilMs ?? -Infinity,
          Math.max(c.requestedMs, acc.lastEndMs) + c.timeoutMs + IN_FLIGHT_GRACE_MS
        )
      result.set(sessionId, Number.isFinite(acc.lastMs) ? { lastMs: acc.lastMs, busyUntilMs } : undefined)
    }
    return result
  })

export interface ReapDecision extends Decision {
  readonly name: string
  readonly sessionId: string
  /** True once the engine confirmed the removal. */
  readonly removed: boolean
}

export interface ReapReport {
  /** Persistent sandboxes looked at (all on the engine but those held by this process). */
  readonly checked: number
  readonly removed: ReadonlyArray<string>
  /** What was decided for each, and why. */
  readonly decisions: ReadonlyArray<ReapDecision>
}

export interface ReapOptions {
  /** Sandboxes held open by this process are never reaped here (their own reaper decides). */
  readonly skip: (containerName: string) => boolean
  /** Journal appends (already published-after-commit by the caller). */
  readonly append: (streamId: string, ...events: ReadonlyArray<JournalEvent>) => Effect.Effect<void>
  /** The journal the records are read from (the one `append` writes to). */
  readonly journal: JournalService
  /** A sandbox the journal has no record of since its creation. Default "engine-time". */
  readonly unrecorded?: Unrecorded
  readonly journalWindow?: number
}

export const reapIdle = (options: ReapOptions): Effect.Effect<ReapReport, SandboxError, SandboxRuntime> =>
  Effect.gen(function* () {
    const runtime = yield* SandboxRuntime
    const found = yield* runtime.list({ [Label.project]: ProjectName, [Label.scope]: "persistent" })
    const candidates = found.filter((c) => !options.skip(c.name))
    const sessionIdOf = (c: SandboxInfo) => c.labels[Label.session] ?? c.name.slice(ContainerNamePrefix.length)
    const activity = yield* journalActivity(
      options.journal,
      candidates.map((c) => ({ sessionId: sessionIdOf(c), createdAtMs: c.createdAt })),
      options.journalWindow
    ).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logWarning("session reaper: the journal cannot be read; no sandbox counts as recorded", cause).pipe(
          Effect.as(new Map<string, HostActivity | undefined>())
        )
      )
    )
    const now = yield* Clock.currentTimeMillis
    const decisions: Array<ReapDecision> = []
    yield* Effect.forEach(
      candidates,
      (c) =>
        Effect.gen(function* () {
          const sessionId = sessionIdOf(c)
          const idleSeconds = Number(c.labels[Label.idleSeconds])
          const decision = decide(
            {
              nowMs: now,
              createdAtMs: c.createdAt,
              idleLimitMs:
                c.labels[Label.idleSeconds] !== undefined && Number.isFinite(idleSeconds) && idleSeconds > 0
                  ? idleSeconds * 1000
                  : undefined,
              deadlineMs: deadlineOf(c.labels, c.createdAt),
              activity: activity.get(sessionId)
            },
            options.unrecorded ?? "engine-time"
          )
          if (!decision.remove) {
            decisions.push({ ...decision, name: c.name, sessionId, removed: false })
            return
          }
          yield* runtime.remove(c)
          decisions.push({ ...decision, name: c.name, sessionId, removed: true })
          yield* options.append(
            sessionId,
            ...(decision.reason === "idle"
              ? [
                  { type: "SessionIdleExpired", data: { sessionId, idleMs: decision.idleMs ?? 0 } } as const,
                  {
                    type: "ContainerDestroyed",
                    data: { containerName: c.name, containerId: c.id, reason: "idle-expired" }
                  } as const,
                  { type: "SessionClosed", data: { sessionId, reason: "idle-expired (reaper)" } } as const
                ]
              : [
                  {
                    type: "ContainerDestroyed",
                    data: { containerName: c.name, containerId: c.id, reason: "orphan-reaped" }
                  } as const,
                  { type: "SessionClosed", data: { sessionId, reason: "max-lifetime passed (reaper)" } } as const
                ])
          )
        }),
      { concurrency: 4, discard: true }
    )
    const removed = decisions.filter((d) => d.removed).map((d) => d.name)
    if (removed.length > 0)
      yield* Effect.logInfo(
        `session reaper: removed ${removed.length} persistent sandbox(es) (idle or past their maximum lifetime): ${removed.join(", ")}`
      )
    return { checked: candidates.length, removed, decisions }
  })
