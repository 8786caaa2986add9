/**
 * The dashboard's projection of the journal: fed every envelope once, in sequence order (a follow
 * from the first event), it keeps only bounded state, whatever the journal's size:
 *
 * - the streams still open (executions running, sessions, warm-pool and session containers), folded
 *   by the journal's own `Projection.evolve`, at most `maxActive` (the oldest dropped past it, counted);
 * - the most recent `maxRecent` closed executions, each as one compact row (outcome, phases, counts);
 * - per-minute buckets for the charts, the last `minutes` minutes of the journal's time: executions
 *   ended by outcome, each phase's latency as a fixed log-scale histogram (quantiles within one bin,
 *   19 %), warm-pool claims against cold creates;
 * - exact totals: executions by outcome (as `Projection.summarize` counts them), the duration's
 *   histogram over every execution.
 *
 * An execution's stream leaves the open set at its close (`Projection.isClosed`); events of a stream
 * neither open nor recent that cannot begin one (a late `ExecutionCompleted`) change nothing.
 */
import type { EventEnvelope } from "@hermes-sandbox/events"
import { Projection } from "@hermes-sandbox/events"

/** How an execution ended, as the metrics name it (docs/observability.md). */
export type OutcomeLabel = "ok" | "error" | "oom" | "timeout" | "interrupted" | "failed"
export const OUTCOMES: ReadonlyArray<OutcomeLabel> = ["ok", "error", "oom", "timeout", "interrupted", "failed"]

/**
 * An execution's phases from its journal events: `create` (requested → ContainerCreated: the queue
 * wait included) or `claim` (→ ContainerClaimed, a warm sandbox), `start` (→ ContainerStarted), `run`
 * (→ the terminal event: the program and the collection of its files), `removal` (→ ContainerDestroyed).
 */
export type PhaseName = "create" | "claim" | "start" | "run" | "removal"
export const PHASES: ReadonlyArray<PhaseName> = ["create", "claim", "start", "run", "removal"]

export interface ExecutionRow {
  readonly id: string
  readonly language?: string
  readonly sessionId?: string
  readonly outcome: OutcomeLabel
  readonly exitCode?: number
  readonly errorTag?: string
  readonly requestedAt?: number
  readonly finishedAt?: number
  /** Start (or claim) to the terminal event, as `Projection.summarize` measures it. */
  readonly durationMs?: number
  readonly phases: Readonly<Partial<Record<PhaseName, number>>>
  readonly pooled: boolean
  readonly toolCalls: number
  readonly files: number
  /** The sequence of the event that closed it: the list's order and its paging cursor. */
  readonly closedSequence: number
}

export interface RunningItem {
  readonly kind: "execution" | "session" | "pool" | "process"
  readonly id: string
  readonly language?: string
  readonly phase: string
  readonly since: number
  readonly ageMs: number
  /**
   * Executions: their start (or request) plus their timeout. Sessions: the earlier of their maximum
   * lifetime's end and their last activity plus their idle limit. Warm-pool sandboxes: when they are
   * recycled unclaimed. Background processes: their session's. Absent when the journal has none
   * (events recorded before these fields were).
   */
  readonly deadline?: number
  /** What the deadline is: "timeout", "max-lifetime", "idle" (a session's idle limit), "recycle" (a warm sandbox's). */
  readonly deadlineKind?: "timeout" | "max-lifetime" | "idle" | "recycle"
  readonly containerName?: string
  /** A session's idle limit, in ms. */
  readonly idleMs?: number
  /** A background process's session. */
  readonly sessionId?: string
  /** A background process's pid in its sandbox. */
  readonly pid?: number
  /** A background process's command as recorded (recordCode), its first COMMAND_CHARS characters. */
  readonly command?: string
  /** The command was longer than what `command` holds (or was cut when recorded). */
  readonly commandCut?: boolean
  /** The command's size in bytes (always recorded). */
  readonly commandBytes?: number
}

/** A background process's command is kept (and sent) at most this many characters. */
export const COMMAND_CHARS = 200
/** Background processes tracked at most, over every session (past it they are counted, not shown). */
export const MAX_PROCESSES = 10_000

interface Process {
  readonly processId: string
  readonly pid: number
  readonly startedAt: number
  readonly commandBytes: number
  readonly command?: string
  readonly commandCut: boolean
}

interface Tracked {
  state: Projection.ExecutionState
  timeoutMs?: number
  files: number
  sessionOpenedAt?: number
  /** A session's maximum lifetime's end, a warm sandbox's recycling (SessionOpened, ContainerCreated). */
  deadline?: number
  /** A session's idle limit and its last activity (an event of it or of one of its calls). */
  idleMs?: number
  lastActivityAt?: number
  /** A session's background processes still running, by id. */
  processes?: Map<string, Process>
}

interface Bucket {
  readonly minute: number
  readonly outcomes: Record<OutcomeLabel, number>
  readonly phases: Record<PhaseName, Uint32Array>
  claims: number
  creates: number
}

// --- a log-scale histogram: bin 0 is [0, 1) ms, bin i ≥ 1 is [BASE^(i-1), BASE^i) ms --------------

const BASE = 2 ** 0.25
const BINS = 100
const LOG_BASE = Math.log(BASE)
export const binOf = (ms: number): number =>
  ms < 1 ? 0 : Math.min(BINS - 1, 1 + Math.floor(Math.log(ms) / LOG_BASE + 1e-9))
/** The upper bound of a bin, in ms: what a quantile falling in it is reported as. */
export const binUpper = (bin: number): number => (bin === 0 ? 1 : BASE ** bin)

/** The nearest-rank quantile of a histogram (its bin's upper bound, rounded), or undefined when empty. */
export const quantile = (bins: Uint32Array, q: number): number | undefined => {
  let total = 0
  for (const n of bins) total += n
  if (total === 0) return undefined
  const rank = Math.max(1, Math.ceil(q * total))
  let seen = 0
  for (let i = 0; i < bins.length; i++) {
    seen += bins[i]!
    if (seen >= rank) return Math.round(binUpper(i))
  }
  return undefined
}

const newBins = () => new Uint32Array(BINS)

/** A record with one value per key. */
const recordOf = <K extends string, V>(keys: ReadonlyArray<K>, f: (key: K) => V): Record<K, V> =>
  Object.fromEntries(keys.map((k) => [k, f(k)])) as Record<K, V>

export const outcomeOf = (state: Projection.ExecutionState): OutcomeLabel | undefined => {
  switch (state.outcome) {
    case "exited":
      return state.oomKilled === true ? "oom" : state.exitCode === 0 ? "ok" : "error"
    case "timedOut":
      return "timeout"
    case "interrupted":
      return "interrupted"
    case "failed":
      return "failed"
    default:
      return undefined
  }
}

const phasesOf = (state: Projection.ExecutionState): Partial<Record<PhaseName, number>> => {
  const phases: Partial<Record<PhaseName, number>> = {}
  const span = (from: number | undefined, to: number | undefined) =>
    from === undefined || to === undefined ? undefined : Math.max(0, to - from)
  const first = span(state.requestedAt, state.createdAt)
  if (first !== undefined) phases[state.poolStreamId === undefined ? "create" : "claim"] = first
  if (state.poolStreamId === undefined) {
    const start = span(state.createdAt, state.startedAt)
    if (start !== undefined) phases.start = start
  }
  const run = span(state.startedAt, state.finishedAt)
  if (run !== undefined) phases.run = run
  const removal = span(state.finishedAt, state.destroyedAt)
  if (removal !== undefined) phases.removal = removal
  return phases
}

const toolCallsOf = (state: Projection.ExecutionState): number =>
  Object.values(state.toolCalls ?? {}).reduce((n, c) => n + c.requested, 0)

/** The compact row of an execution (closed or not: the detail view shows a running one's too). */
export const rowOf = (
  state: Projection.ExecutionState,
  extra: { readonly files: number; readonly closedSequence: number }
): ExecutionRow => ({
  id: state.streamId,
  ...(state.language === undefined ? {} : { language: state.language }),
  ...(state.sessionId === undefined ? {} : { sessionId: state.sessionId }),
  outcome: outcomeOf(state) ?? "interrupted",
  ...(state.exitCode === undefined ? {} : { exitCode: state.exitCode }),
  ...(state.errorTag === undefined ? {} : { errorTag: state.errorTag }),
  ...(state.requestedAt === undefined ? {} : { requestedAt: state.requestedAt }),
  ...(state.finishedAt === undefined ? {} : { finishedAt: state.finishedAt }),
  ...(state.startedAt !== undefined && state.finishedAt !== undefined
    ? { durationMs: Math.max(0, state.finishedAt - state.startedAt) }
    : {}),
  phases: phasesOf(state),
  pooled: state.poolStreamId !== undefined,
  toolCalls: toolCallsOf(state),
  files: extra.files,
  closedSequence: extra.closedSequence
})

/** Event types that may begin a stream the dashboard tracks. */
const BEGINS: ReadonlySet<string> = new Set([
  "ExecutionRequested",
  "ContainerCreated",
  "ContainerClaimed",
  "SessionOpened",
  "SessionReconnected",
  "SessionClaimed"
])

export interface DashboardLimits {
  /** Closed executions kept for the list (default 10,000). */
  readonly maxRecent?: number
  /** Open streams tracked (default 10,000); past it the oldest is dropped and counted. */
  readonly maxActive?: number
  /** Minutes of the charts (default 60). */
  readonly minutes?: number
}

export interface Overview {
  /** The last sequence applied. */
  readonly position: number
  readonly summary: {
    readonly total: number
    readonly byOutcome: Readonly<Record<OutcomeLabel | "open", number>>
    readonly durationMs: { readonly count: number; readonly p50?: number; readonly p95?: number }
    readonly containersAlive: number
    readonly sessionsOpen: number
    readonly poolReady: number
    readonly processesRunning: number
    readonly toolCalls: number
    /** Open streams dropped past the bound (their later events not shown). */
    readonly untracked: number
    /** Background processes not tracked past MAX_PROCESSES. */
    readonly processesUntracked: number
    readonly recentKept: number
  }
  readonly running: {
    readonly executions: number
    readonly sessions: number
    readonly pool: number
    readonly processes: number
    /** The oldest first, at most `limit` of each kind. */
    readonly items: ReadonlyArray<RunningItem>
  }
  readonly charts: {
    /** Each minute of the window (ms since the epoch of its start), the latest last. */
    readonly minutes: ReadonlyArray<number>
    readonly outcomes: Readonly<Record<OutcomeLabel, ReadonlyArray<number>>>
    readonly latency: Readonly<
      Record<PhaseName, { readonly p50: ReadonlyArray<number | null>; readonly p95: ReadonlyArray<number | null> }>
    >
    readonly pool: { readonly claims: ReadonlyArray<number>; readonly creates: ReadonlyArray<number> }
  }
}

export interface ExecutionPage {
  readonly rows: ReadonlyArray<ExecutionRow>
  /** The cursor of the next (older) page, or null at the oldest kept. */
  readonly before: number | null
  readonly kept: number
}

export interface DashboardProjection {
  readonly apply: (envelope: EventEnvelope) => void
  readonly position: () => number
  readonly overview: (nowMs: number, limit?: number) => Overview
  /** Closed executions, the newest first, those closed before the cursor `before` (a closedSequence). */
  readonly executions: (options: { readonly before?: number | undefined; readonly limit: number }) => ExecutionPage
  /** An execution's row if it is open or among the recent ones. */
  readonly find: (id: string) => ExecutionRow | undefined
}

export const makeDashboardProjection = (limits: DashboardLimits = {}): DashboardProjection => {
  const maxRecent = limits.maxRecent ?? 10_000
  const maxActive = limits.maxActive ?? 10_000
  const minutes = limits.minutes ?? 60
  const active = new Map<string, Tracked>()
  const recent: Array<ExecutionRow> = []
  const recentById = new Map<string, ExecutionRow>()
  const buckets = new Map<number, Bucket>()
  const closedByOutcome: Record<OutcomeLabel, number> = {
    ok: 0,
    error: 0,
    oom: 0,
    timeout: 0,
    interrupted: 0,
    failed: 0
  }
  const durations = newBins()
  let durationCount = 0
  let closedToolCalls = 0
  let position = 0
  let untracked = 0
  let processesTracked = 0
  let processesUntracked = 0

  const bucketAt = (ts: number): Bucket | undefined => {
    const minute = Math.floor(ts / 60_000) * 60_000
    const found = buckets.get(minute)
    if (found !== undefined) return found
    let oldest = Number.POSITIVE_INFINITY
    for (const m of buckets.keys()) oldest = Math.min(oldest, m)
    if (buckets.size >= minutes) {
      // Full: a minute older than every kept one is not charted; a newer one replaces the oldest.
      if (minute < oldest) return undefined
      buckets.delete(oldest)
    }
    const bucket: Bucket = {
      minute,
      outcomes: { ok: 0, error: 0, oom: 0, timeout: 0, interrupted: 0, failed: 0 },
      phases: { create: newBins(), claim: newBins(), start: newBins(), run: newBins(), removal: newBins() },
      claims: 0,
      creates: 0
    }
    buckets.set(minute, bucket)
    return bucket
  }

  const close = (tracked: Tracked, sequence: number) => {
    const { state } = tracked
    active.delete(state.streamId)
    if (state.kind !== "execution") return
    const row = rowOf(state, { files: tracked.files, closedSequence: sequence })
    closedByOutcome[row.outcome]++
    closedToolCalls += row.toolCalls
    if (row.durationMs !== undefined) {
      durations[binOf(row.durationMs)]!++
      durationCount++
    }
    const bucket = bucketAt(state.finishedAt ?? state.destroyedAt ?? 0)
    if (bucket !== undefined) {
      bucket.outcomes[row.outcome]++
      for (const phase of PHASES) {
        const ms = row.phases[phase]
        if (ms !== undefined) bucket.phases[phase][binOf(ms)]!++
      }
      if (state.poolStreamId !== undefined) bucket.claims++
      else if (state.createdAt !== undefined && state.sessionId === undefined) bucket.creates++
    }
    recent.push(row)
    recentById.set(row.id, row)
    if (recent.length > maxRecent + 1024) {
      for (const gone of recent.splice(0, recent.length - maxRecent)) recentById.delete(gone.id)
    }
  }

  const forget = (streamId: string) => {
    const gone = active.get(streamId)
    if (gone === undefined) return
    processesTracked -= gone.processes?.size ?? 0
    active.delete(streamId)
  }

  const apply = (envelope: EventEnvelope) => {
    if (envelope.sequence <= position) return
    position = envelope.sequence
    let tracked = active.get(envelope.streamId)
    if (tracked === undefined) {
      if (!BEGINS.has(envelope.type) || recentById.has(envelope.streamId)) return
      tracked = { state: Projection.initial(envelope.streamId), files: 0 }
      active.set(envelope.streamId, tracked)
      if (active.size > maxActive) {
        forget(active.keys().next().value as string)
        untracked++
      }
    }
    tracked.lastActivityAt = envelope.timestamp
    switch (envelope.type) {
      case "ExecutionRequested":
        tracked.timeoutMs = envelope.data.timeoutMs
        break
      case "ArtifactsCollected":
        tracked.files = envelope.data.files.length
        break
      case "ContainerCreated":
        if (envelope.data.deadline !== undefined) tracked.deadline = envelope.data.deadline
        break
      case "SessionOpened":
      case "SessionReconnected":
        tracked.sessionOpenedAt ??= envelope.timestamp
        if (envelope.data.deadline !== undefined) tracked.deadline = envelope.data.deadline
        if (envelope.data.idleMs !== undefined) tracked.idleMs = envelope.data.idleMs
        break
      case "SessionClaimed":
        tracked.sessionOpenedAt ??= envelope.timestamp
        break
      case "ProcessStarted": {
        if (processesTracked >= MAX_PROCESSES) {
          processesUntracked++
          break
        }
        const { command } = envelope.data
        tracked.processes ??= new Map()
        if (!tracked.processes.has(envelope.data.processId)) processesTracked++
        tracked.processes.set(envelope.data.processId, {
          processId: envelope.data.processId,
          pid: envelope.data.pid,
          startedAt: envelope.timestamp,
          commandBytes: envelope.data.commandBytes,
          ...(command === undefined ? {} : { command: command.slice(0, COMMAND_CHARS) }),
          commandCut:
            command !== undefined && (command.length > COMMAND_CHARS || envelope.data.commandTruncated === true)
        })
        break
      }
      case "ProcessExited":
        if (tracked.processes?.delete(envelope.data.processId) === true) processesTracked--
        break
      case "SessionClosed":
        forget(envelope.streamId)
        return
    }
    tracked.state = Projection.evolve(tracked.state, envelope)
    if (envelope.type === "ContainerClaimed") {
      // The warm sandbox is the execution's now: its pool stream is done.
      forget(envelope.data.poolStreamId)
    }
    const { state } = tracked
    // A session's call is its activity (its idle limit counts from the last one).
    if (state.sessionId !== undefined && state.sessionId !== state.streamId) {
      const session = active.get(state.sessionId)
      if (session !== undefined) session.lastActivityAt = envelope.timestamp
    }
    if (tracked.sessionOpenedAt === undefined && state.lastSequence > 0 && Projection.isClosed(state))
      close(tracked, envelope.sequence)
  }

  /** A session's deadline: the earlier of its maximum lifetime's end and its idle expiry (when recorded). */
  const sessionDeadline = (t: Tracked): Pick<RunningItem, "deadline" | "deadlineKind"> => {
    const idle = t.idleMs === undefined ? undefined : (t.lastActivityAt ?? t.sessionOpenedAt ?? 0) + t.idleMs
    if (idle !== undefined && (t.deadline === undefined || idle < t.deadline))
      return { deadline: idle, deadlineKind: "idle" }
    return t.deadline === undefined ? {} : { deadline: t.deadline, deadlineKind: "max-lifetime" }
  }

  const runningItems = (nowMs: number) => {
    const executions: Array<RunningItem> = []
    const sessions: Array<RunningItem> = []
    const pool: Array<RunningItem> = []
    const processes: Array<RunningItem> = []
    for (const tracked of active.values()) {
      const { state, timeoutMs, sessionOpenedAt } = tracked
      const container = state.containerName === undefined ? {} : { containerName: state.containerName }
      if (sessionOpenedAt !== undefined) {
        const deadline = sessionDeadline(tracked)
        sessions.push({
          kind: "session",
          id: state.streamId,
          phase: "open",
          since: sessionOpenedAt,
          ageMs: nowMs - sessionOpenedAt,
          ...deadline,
          ...(tracked.idleMs === undefined ? {} : { idleMs: tracked.idleMs }),
          ...container
        })
        // Its background processes end with it at the latest: its maximum lifetime is theirs.
        for (const p of tracked.processes?.values() ?? []) {
          processes.push({
            kind: "process",
            id: p.processId,
            sessionId: state.streamId,
            phase: "running",
            since: p.startedAt,
            ageMs: nowMs - p.startedAt,
            ...(tracked.deadline === undefined ? {} : { deadline: tracked.deadline, deadlineKind: "max-lifetime" }),
            pid: p.pid,
            commandBytes: p.commandBytes,
            ...(p.command === undefined ? {} : { command: p.command, commandCut: p.commandCut }),
            ...container
          })
        }
      } else if (state.kind === "execution") {
        const since = state.requestedAt ?? state.createdAt ?? nowMs
        const from = state.startedAt ?? state.requestedAt
        executions.push({
          kind: "execution",
          id: state.streamId,
          ...(state.language === undefined ? {} : { language: state.language }),
          phase: state.phase,
          since,
          ageMs: nowMs - since,
          ...(timeoutMs === undefined || from === undefined
            ? {}
            : { deadline: from + timeoutMs, deadlineKind: "timeout" as const }),
          ...container
        })
      } else if (state.pooled === true && Projection.isContainerAlive(state)) {
        const since = state.createdAt ?? nowMs
        pool.push({
          kind: "pool",
          id: state.streamId,
          phase: state.phase,
          since,
          ageMs: nowMs - since,
          ...(tracked.deadline === undefined ? {} : { deadline: tracked.deadline, deadlineKind: "recycle" as const }),
          ...container
        })
      }
    }
    return { executions, sessions, pool, processes }
  }

  const overview = (nowMs: number, limit = 50): Overview => {
    const { executions, sessions, pool, processes } = runningItems(nowMs)
    const oldestFirst = (items: Array<RunningItem>) => items.sort((a, b) => a.since - b.since).slice(0, limit)
    const byOutcome: Record<OutcomeLabel | "open", number> = { ...closedByOutcome, open: 0 }
    let openToolCalls = 0
    let containersAlive = 0
    let openExecutions = 0
    for (const { state } of active.values()) {
      if (Projection.isContainerAlive(state)) containersAlive++
      if (state.kind !== "execution") continue
      openExecutions++
      openToolCalls += toolCallsOf(state)
      const outcome = outcomeOf(state)
      byOutcome[outcome ?? "open"]++
    }
    const latest = Math.max(0, ...buckets.keys())
    const window = Array.from({ length: minutes }, (_, i) => latest - (minutes - 1 - i) * 60_000)
    const series = <A>(f: (b: Bucket | undefined) => A) => window.map((m) => f(buckets.get(m)))
    const outcomes = recordOf(OUTCOMES, (o) => series((b) => b?.outcomes[o] ?? 0))
    const latency = recordOf(PHASES, (p) => ({
      p50: series((b) => (b === undefined ? null : (quantile(b.phases[p], 0.5) ?? null))),
      p95: series((b) => (b === undefined ? null : (quantile(b.phases[p], 0.95) ?? null)))
    }))
    const closedTotal = OUTCOMES.reduce((n, o) => n + closedByOutcome[o], 0)
    const p50 = quantile(durations, 0.5)
    const p95 = quantile(durations, 0.95)
    return {
      position,
      summary: {
        total: closedTotal + openExecutions,
        byOutcome,
        durationMs: {
          count: durationCount,
          ...(p50 === undefined ? {} : { p50 }),
          ...(p95 === undefined ? {} : { p95 })
        },
        containersAlive,
        sessionsOpen: sessions.length,
        poolReady: pool.length,
        processesRunning: processes.length,
        toolCalls: closedToolCalls + openToolCalls,
        untracked,
        processesUntracked,
        recentKept: Math.min(recent.length, maxRecent)
      },
      running: {
        executions: executions.length,
        sessions: sessions.length,
        pool: pool.length,
        processes: processes.length,
        items: [...oldestFirst(executions), ...oldestFirst(sessions), ...oldestFirst(processes), ...oldestFirst(pool)]
      },
      charts: {
        minutes: buckets.size === 0 ? [] : window,
        outcomes,
        latency,
        pool: { claims: series((b) => b?.claims ?? 0), creates: series((b) => b?.creates ?? 0) }
      }
    }
  }

  const executionsPage = (options: { readonly before?: number | undefined; readonly limit: number }): ExecutionPage => {
    const oldestKept = Math.max(0, recent.length - maxRecent)
    // The first index whose closedSequence is at or past the cursor (rows are in closing order).
    let lo = oldestKept
    let hi = recent.length
    if (options.before !== undefined) {
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (recent[mid]!.closedSequence < options.before) lo = mid + 1
        else hi = mid
      }
    }
    const end = options.before === undefined ? recent.length : lo
    const start = Math.max(oldestKept, end - options.limit)
    const rows = recent.slice(start, end).reverse()
    return { rows, before: start > oldestKept ? recent[start]!.closedSequence : null, kept: recent.length - oldestKept }
  }

  return {
    apply,
    position: () => position,
    overview,
    executions: executionsPage,
    find: (id) => {
      const open = active.get(id)
      if (open !== undefined && open.state.kind === "execution")
        return rowOf(open.state, { files: open.files, closedSequence: open.state.lastSequence })
      return recentById.get(id)
    }
  }
}
