/**
 * A pure fold of journal events into per-stream lifecycle states, shared by live views
 * (fed from `Journal.live`/`follow`) and by replays (fed from `Journal.read`), so both see
 * exactly the same thing.
 *
 * `evolve` never throws: events that break the lifecycle order are recorded in
 * `violations`, so a projection of a damaged or foreign journal still renders.
 *
 * Stream kinds: a stream with any execution event (`ExecutionRequested`, a terminal
 * `Execution*`, `ContainerClaimed`, `ExecutionCompleted`) is an `"execution"`. A stream
 * holding only container events (a warm-pool container, a session's container) is a
 * `"container"` stream. Session and executor-stats events do not describe a container
 * lifecycle and are ignored here. An executor stream's ownership-lease events
 * (`ExecutorLease`, `ExecutorClosed`) are folded apart, into {@link LeaseState}s.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import {
  type DestroyReason,
  type EventEnvelope,
  type EventType,
  kernelEventTypes,
  leaseEventTypes,
  lifecycleEventTypes
} from "./Event.js"

/**
 * @category models
 */
export type Phase = "requested" | "created" | "started" | "exited" | "timedOut" | "interrupted" | "failed" | "destroyed"

/**
 * @category models
 */
export type Outcome = "exited" | "timedOut" | "interrupted" | "failed"

/**
 * One tool's calls: how many the code asked for (`ToolCallRequested`) and how many of them
 * completed, failed or were refused.
 *
 * @category models
 */
export interface ToolCallCounts {
  readonly requested: number
  readonly completed: number
  readonly failed: number
  readonly refused: number
}

/**
 * How a tool call ended (its outcome event).
 *
 * @category models
 */
export type ToolCallOutcome = "completed" | "failed" | "refused"

/**
 * @category models
 */
export interface ExecutionState {
  readonly streamId: string
  readonly kind: "execution" | "container"
  /** After `ContainerDestroyed` this stays `"destroyed"`; `outcome` keeps how it ended. */
  readonly phase: Phase
  readonly language?: string
  readonly sessionId?: string
  readonly containerName?: string
  readonly containerId?: string
  readonly exitCode?: number
  readonly oomKilled?: boolean
  readonly requestedAt?: number
  readonly createdAt?: number
  /** Start, or claim of a warm container. */
  readonly startedAt?: number
  /** Timestamp of the terminal event. */
  readonly finishedAt?: number
  readonly destroyedAt?: number
  readonly completedAt?: number
  readonly outcome?: Outcome
  readonly destroyReason?: DestroyReason
  readonly errorTag?: string
  readonly pooled?: boolean
  /** For an execution that claimed a warm container: the pool stream it came from. */
  readonly poolStreamId?: string
  /** For a pool container stream: the execution that claimed the container. */
  readonly claimedBy?: string
  /** `ArtifactsCollected`: how many files came back, their bytes, how many were skipped. */
  readonly artifacts?: {
    readonly files: number
    readonly bytes: number
    readonly skipped: number
    readonly status: "complete" | "partial" | "none"
  }
  /** Tool calls by tool name (absent before the first `ToolCallRequested`), counted as recorded. */
  readonly toolCalls?: Readonly<Record<string, ToolCallCounts>>
  /**
   * The run's tool calls by `callId`, with their outcome once it came (none: still in flight).
   * Kept only until the terminal event, which settles the run (nothing may follow it), so a
   * closed stream holds only the counts.
   */
  readonly toolCallsById?: Readonly<Record<string, { readonly tool: string; readonly outcome?: ToolCallOutcome }>>
  /** A session's Python kernel, from its stream's KernelStarted, CellExecuted and KernelRestarted. */
  readonly kernel?: KernelCounts
  readonly lastSequence: number
  readonly lastVersion: number
  readonly violations: ReadonlyArray<string>
}

/**
 * A session's Python kernel as its stream records it: kernels started, cells by status, how many
 * cells said `stateLost`, and the kernels' ends by reason.
 *
 * @category models
 */
export interface KernelCounts {
  readonly started: number
  readonly cells: number
  readonly byStatus: Readonly<Record<string, number>>
  readonly stateLost: number
  readonly restarts: Readonly<Record<string, number>>
}

const lifecycleTypes: ReadonlySet<EventType> = new Set<EventType>(lifecycleEventTypes)
const kernelTypes: ReadonlySet<EventType> = new Set<EventType>(kernelEventTypes)

/**
 * Whether the event is a session's kernel event (KernelStarted, CellExecuted, KernelRestarted):
 * folded into the session's stream, never an execution's.
 *
 * @category guards
 */
export const isKernelEvent = (envelope: { readonly type: EventType }): boolean => kernelTypes.has(envelope.type)

const noKernel: KernelCounts = { started: 0, cells: 0, byStatus: {}, stateLost: 0, restarts: {} }

/** The kernel counts with one more event. */
const countKernel = (counts: KernelCounts | undefined, envelope: EventEnvelope): KernelCounts => {
  const k = counts ?? noKernel
  const plus = (r: Readonly<Record<string, number>>, key: string) => ({
    ...r,
    [key]: (Object.hasOwn(r, key) ? r[key]! : 0) + 1
  })
  switch (envelope.type) {
    case "KernelStarted":
      return { ...k, started: k.started + 1 }
    case "CellExecuted":
      return {
        ...k,
        cells: k.cells + 1,
        byStatus: plus(k.byStatus, envelope.data.status),
        stateLost: k.stateLost + (envelope.data.stateLost ? 1 : 0)
      }
    case "KernelRestarted":
      return { ...k, restarts: plus(k.restarts, envelope.data.reason) }
    default:
      return k
  }
}

/**
 * Whether the event takes part in a container/execution lifecycle (session and executor
 * events do not).
 *
 * @category guards
 */
export const isLifecycleEvent = (envelope: { readonly type: EventType }): boolean => lifecycleTypes.has(envelope.type)

// Destroy reasons that end a container without an execution outcome (pools, sessions,
// the orphan reaper after a crashed executor).
const reasonsWithoutOutcome: ReadonlySet<DestroyReason> = new Set<DestroyReason>([
  "orphan-reaped",
  "pool-recycled",
  "pool-drained",
  "session-closed",
  "idle-expired"
])

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

// --- ownership leases (executor streams) -------------------------------------------------

/**
 * An owner's lease as its executor stream (stream id = executor id) records it: who holds it,
 * when it was last renewed (the writer's clock) and for how long, and whether the owner closed.
 *
 * @category models
 */
export interface LeaseState {
  readonly executorId: string
  /** Host id and pid of the writer of the last lease event. */
  readonly host: string
  readonly pid: number
  /** Timestamp of the last `ExecutorLease`. */
  readonly renewedAt: number
  readonly leaseMs: number
  /** An `ExecutorClosed` came after the last `ExecutorLease`. */
  readonly closedAt?: number
  readonly lastSequence: number
}

/**
 * What a lease says of its owner at `nowMs`: it holds its containers (`"held"`), it closed, or
 * its lease ran out more than `clockSkewMs` ago (the writer's and the reader's clocks may
 * differ by that much).
 *
 * @category models
 */
export type LeaseStatus = "held" | "expired" | "closed"

const leaseTypes: ReadonlySet<EventType> = new Set<EventType>(leaseEventTypes)

/**
 * @category guards
 */
export const isLeaseEvent = (envelope: { readonly type: EventType }): boolean => leaseTypes.has(envelope.type)

/**
 * Applies one event to an owner's lease. Other events, and re-deliveries (a sequence not above
 * the last applied one), leave it as it is.
 *
 * @category folding
 */
export const evolveLease = (state: LeaseState | undefined, envelope: EventEnvelope): LeaseState | undefined => {
  if (state !== undefined && (envelope.streamId !== state.executorId || envelope.sequence <= state.lastSequence))
    return state
  const { host, pid } = envelope.metadata
  if (envelope.type === "ExecutorLease") {
    return {
      executorId: envelope.streamId,
      host,
      pid,
      renewedAt: envelope.timestamp,
      leaseMs: envelope.data.leaseMs,
      lastSequence: envelope.sequence
    }
  }
  if (envelope.type === "ExecutorClosed") {
    return {
      ...(state ?? { executorId: envelope.streamId, host, pid, renewedAt: envelope.timestamp, leaseMs: 0 }),
      closedAt: envelope.timestamp,
      lastSequence: envelope.sequence
    }
  }
  return state
}

/**
 * @category predicates
 */
export const leaseStatus = (state: LeaseState, nowMs: number, clockSkewMs: number): LeaseStatus =>
  state.closedAt !== undefined ? "closed" : nowMs > state.renewedAt + state.leaseMs + clockSkewMs ? "expired" : "held"

/**
 * The state of a stream before any event.
 *
 * @category constructors
 */
export const initial = (streamId: string): ExecutionState => ({
  streamId,
  kind: "container",
  phase: "requested",
  lastSequence: 0,
  lastVersion: 0,
  violations: []
})

const hasContainer = (s: ExecutionState): boolean => s.containerId !== undefined || s.containerName !== undefined

const noToolCalls: ToolCallCounts = { requested: 0, completed: 0, failed: 0, refused: 0 }

const toolCallOutcomes = {
  ToolCallCompleted: "completed",
  ToolCallFailed: "failed",
  ToolCallRefused: "refused"
} as const satisfies Record<string, ToolCallOutcome>

/** A call's key among the stream's calls: its id, or a cell's `<cellId>/<callId>` (ids restart per cell). */
const callKey = (data: { readonly callId: number; readonly cellId?: string | undefined }): string =>
  data.cellId === undefined ? String(data.callId) : `${data.cellId}/${data.callId}`

/** The counts with one more `field` for `tool`. */
const countToolCall = (
  counts: ExecutionState["toolCalls"],
  tool: string,
  field: keyof ToolCallCounts
): Readonly<Record<string, ToolCallCounts>> => {
  // Own keys only: a tool may well be called `toString` or `__proto__`.
  const before = counts !== undefined && Object.hasOwn(counts, tool) ? counts[tool]! : noToolCalls
  return { ...counts, [tool]: { ...before, [field]: before[field] + 1 } }
}

/**
 * Applies one event. Deterministic; never throws. Events of other streams, non-lifecycle
 * events and re-deliveries (a sequence not above the last applied one) leave the state as
 * it is (re-deliveries are also noted as violations).
 *
 * @category folding
 */
export const evolve = (state: ExecutionState | undefined, envelope: EventEnvelope): ExecutionState => {
  const current = state ?? initial(envelope.streamId)
  if (envelope.streamId !== current.streamId) {
    return withViolation(current, `event ${envelope.sequence} belongs to stream ${envelope.streamId}`)
  }
  const kernelEvent = isKernelEvent(envelope)
  if (!isLifecycleEvent(envelope) && !kernelEvent) return current
  if (envelope.sequence <= current.lastSequence) {
    return withViolation(
      current,
      `${envelope.type} (sequence ${envelope.sequence}) arrived after sequence ${current.lastSequence}: ignored`
    )
  }
  const next: Mutable<ExecutionState> = {
    ...current,
    lastSequence: envelope.sequence,
    lastVersion: envelope.version,
    violations: current.violations
  }
  const violations: Array<string> = []
  const at = envelope.timestamp
  const seen = state !== undefined && current.lastSequence > 0
  const destroyed = current.destroyedAt !== undefined
  const ended = current.outcome !== undefined

  if (destroyed && envelope.type !== "ExecutionCompleted") {
    violations.push(`${envelope.type} after ContainerDestroyed`)
  }
  if (kernelEvent) {
    // A session's kernel lives in its sandbox: its events belong to the session's stream.
    if (current.kind === "execution") violations.push(`${envelope.type} in an execution's stream`)
    next.kernel = countKernel(current.kernel, envelope)
    if (envelope.type === "CellExecuted" && current.toolCallsById !== undefined) {
      // A cell's calls are settled before its CellExecuted (in-flight ones as cancelled); then gone.
      const prefix = `${envelope.data.cellId}/`
      const mine = Object.entries(current.toolCallsById).filter(([id]) => id.startsWith(prefix))
      const unsettled = mine.filter(([, call]) => call.outcome === undefined)
      if (unsettled.length > 0)
        violations.push(
          `CellExecuted with tool calls left without an outcome: ${unsettled.map(([id, call]) => `${id} (${call.tool})`).join(", ")}`
        )
      if (mine.length > 0)
        next.toolCallsById = Object.fromEntries(
          Object.entries(current.toolCallsById).filter(([id]) => !id.startsWith(prefix))
        )
    }
  }

  switch (envelope.type) {
    case "ExecutionRequested": {
      if (seen) violations.push("ExecutionRequested is not the first event of the stream")
      next.kind = "execution"
      next.language = envelope.data.language
      if (envelope.data.sessionId !== undefined) next.sessionId = envelope.data.sessionId
      next.requestedAt = at
      if (!seen) next.phase = "requested"
      break
    }
    case "ContainerCreated": {
      if (hasContainer(current)) violations.push("second ContainerCreated/ContainerClaimed")
      if (ended) violations.push("ContainerCreated after the terminal event")
      next.containerName = envelope.data.containerName
      next.containerId = envelope.data.containerId
      if (envelope.data.pooled !== undefined) next.pooled = envelope.data.pooled
      next.createdAt = at
      if (!ended && !destroyed) next.phase = "created"
      break
    }
    case "ContainerClaimed": {
      if (hasContainer(current)) violations.push("second ContainerCreated/ContainerClaimed")
      if (ended) violations.push("ContainerClaimed after the terminal event")
      next.kind = "execution"
      next.containerName = envelope.data.containerName
      next.containerId = envelope.data.containerId
      next.poolStreamId = envelope.data.poolStreamId
      next.pooled = true
      // A claimed container is already running: created + started for the projection.
      next.createdAt = at
      next.startedAt = at
      if (!ended && !destroyed) next.phase = "started"
      break
    }
    case "ContainerStarted": {
      if (current.createdAt === undefined) violations.push("ContainerStarted before ContainerCreated")
      else if (current.startedAt !== undefined) violations.push("second ContainerStarted")
      if (ended) violations.push("ContainerStarted after the terminal event")
      if (current.containerId !== undefined && current.containerId !== envelope.data.containerId) {
        violations.push(`ContainerStarted for ${envelope.data.containerId}, created ${current.containerId}`)
      }
      next.startedAt = at
      if (!ended && !destroyed) next.phase = "started"
      break
    }
    case "ArtifactsCollected": {
      if (ended) violations.push("ArtifactsCollected after the terminal event")
      if (current.startedAt === undefined && current.sessionId === undefined)
        violations.push("ArtifactsCollected before the container started")
      if (current.artifacts !== undefined) violations.push("second ArtifactsCollected")
      next.kind = "execution"
      next.artifacts = {
        files: envelope.data.files.length,
        bytes: envelope.data.files.reduce((n, f) => n + f.size, 0),
        skipped: envelope.data.skipped.length + (envelope.data.skippedOmitted ?? 0),
        status: envelope.data.status
      }
      break
    }
    case "ToolCallRequested": {
      const { tool } = envelope.data
      const id = callKey(envelope.data)
      if (ended) violations.push("ToolCallRequested after the terminal event")
      if (current.startedAt === undefined && current.sessionId === undefined)
        violations.push("ToolCallRequested before the container started")
      // A cell's call is in its session's stream, which stays a container stream.
      if (envelope.data.cellId === undefined) next.kind = "execution"
      next.toolCalls = countToolCall(current.toolCalls, tool, "requested")
      if (!ended) {
        if (current.toolCallsById?.[id] !== undefined) violations.push(`second ToolCallRequested for call ${id}`)
        else next.toolCallsById = { ...current.toolCallsById, [id]: { tool } }
      }
      break
    }
    case "ToolCallCompleted":
    case "ToolCallFailed":
    case "ToolCallRefused": {
      const { tool } = envelope.data
      const callId = callKey(envelope.data)
      const outcome = toolCallOutcomes[envelope.type]
      if (ended) violations.push(`${envelope.type} after the terminal event`)
      if (envelope.data.cellId === undefined) next.kind = "execution"
      next.toolCalls = countToolCall(current.toolCalls, tool, outcome)
      if (!ended) {
        // After the terminal event the run's calls are gone (and that is reported above).
        const call = current.toolCallsById?.[callId]
        if (call === undefined) violations.push(`${envelope.type} for call ${callId} without ToolCallRequested`)
        else if (call.outcome !== undefined)
          violations.push(`${envelope.type} for call ${callId}, already ${call.outcome}`)
        else {
          if (call.tool !== tool)
            violations.push(`${envelope.type} for call ${callId} names ${tool}, requested as ${call.tool}`)
          next.toolCallsById = { ...current.toolCallsById, [callId]: { tool: call.tool, outcome } }
        }
      }
      break
    }
    case "ContainerExited":
    case "ExecutionTimedOut":
    case "ExecutionInterrupted":
    case "ExecutionFailed": {
      if (ended) violations.push(`${envelope.type} after the terminal event (${current.outcome})`)
      if (!ended && current.toolCallsById !== undefined) {
        // Every call is settled before the run ends (in-flight ones as cancelled).
        const unsettled = Object.entries(current.toolCallsById).filter(([, call]) => call.outcome === undefined)
        if (unsettled.length > 0) {
          violations.push(
            `${envelope.type} with tool calls left without an outcome: ${unsettled.map(([id, call]) => `${id} (${call.tool})`).join(", ")}`
          )
        }
        delete next.toolCallsById
      }
      if (envelope.type === "ContainerExited" && current.startedAt === undefined && current.sessionId === undefined) {
        // Session executions run in a long-lived container and have no start of their own.
        violations.push("ContainerExited before ContainerStarted")
      }
      if (envelope.type !== "ContainerExited") next.kind = "execution"
      if (!ended) {
        const outcome: Outcome =
          envelope.type === "ContainerExited"
            ? "exited"
            : envelope.type === "ExecutionTimedOut"
              ? "timedOut"
              : envelope.type === "ExecutionInterrupted"
                ? "interrupted"
                : "failed"
        next.outcome = outcome
        next.finishedAt = at
        if (envelope.type === "ContainerExited") {
          next.exitCode = envelope.data.exitCode
          next.oomKilled = envelope.data.oomKilled
        }
        if (envelope.type === "ExecutionFailed") next.errorTag = envelope.data.errorTag
        if (!destroyed) next.phase = outcome
      }
      break
    }
    case "ContainerDestroyed": {
      if (destroyed) break // already reported above
      if (!hasContainer(current)) violations.push("ContainerDestroyed without ContainerCreated/ContainerClaimed")
      else if (current.containerId !== envelope.data.containerId) {
        violations.push(`ContainerDestroyed for ${envelope.data.containerId}, created ${current.containerId}`)
      }
      if (current.kind === "execution" && !ended && !reasonsWithoutOutcome.has(envelope.data.reason)) {
        violations.push(`ContainerDestroyed (${envelope.data.reason}) before the terminal event`)
      }
      next.destroyedAt = at
      next.destroyReason = envelope.data.reason
      next.phase = "destroyed"
      break
    }
    case "ExecutionCompleted": {
      next.kind = "execution"
      if (current.completedAt !== undefined) violations.push("second ExecutionCompleted")
      if (!ended) violations.push("ExecutionCompleted before the terminal event")
      else if (hasContainer(current) && !destroyed) violations.push("ExecutionCompleted before ContainerDestroyed")
      next.completedAt = at
      break
    }
  }
  if (violations.length > 0) {
    next.violations = [...current.violations, ...violations.map((v) => `${v} (sequence ${envelope.sequence})`)]
  }
  return next
}

const withViolation = (state: ExecutionState, violation: string): ExecutionState => ({
  ...state,
  violations: [...state.violations, violation]
})

/**
 * A lifecycle is closed when it has a terminal outcome and, if a container was created or
 * claimed, a `ContainerDestroyed`. A container-only stream (warm pool, session) is closed
 * once destroyed or claimed by an execution.
 *
 * @category predicates
 */
export const isClosed = (state: ExecutionState): boolean =>
  state.kind === "container"
    ? state.destroyedAt !== undefined || state.claimedBy !== undefined
    : state.outcome !== undefined && (!hasContainer(state) || state.destroyedAt !== undefined)

/**
 * Whether the state holds a container that has not been destroyed (nor handed over to an
 * execution).
 *
 * @category predicates
 */
export const isContainerAlive = (state: ExecutionState): boolean =>
  hasContainer(state) && state.destroyedAt === undefined && state.claimedBy === undefined

/**
 * An incremental projection over many streams: feed it envelopes in sequence order (from
 * a replay, `live` or `follow`).
 *
 * @category models
 */
export interface Projector {
  /** Applies an envelope; returns the updated state (undefined for non-lifecycle events). */
  readonly apply: (envelope: EventEnvelope) => ExecutionState | undefined
  readonly get: (streamId: string) => ExecutionState | undefined
  readonly states: ReadonlyMap<string, ExecutionState>
  /** Ownership leases by executor id (executor streams with lease events). */
  readonly leases: ReadonlyMap<string, LeaseState>
  readonly summary: () => Summary
}

/**
 * @category constructors
 */
export const makeProjector = (): Projector => {
  const states = new Map<string, ExecutionState>()
  const leases = new Map<string, LeaseState>()
  const apply = (envelope: EventEnvelope): ExecutionState | undefined => {
    if (isLeaseEvent(envelope)) {
      const lease = evolveLease(leases.get(envelope.streamId), envelope)
      if (lease !== undefined) leases.set(envelope.streamId, lease)
      return undefined
    }
    if (!isLifecycleEvent(envelope) && !isKernelEvent(envelope)) return undefined
    const next = evolve(states.get(envelope.streamId), envelope)
    states.set(envelope.streamId, next)
    // The warm container now belongs to the claiming execution: the pool stream hands it
    // over (so it is not counted alive twice).
    if (envelope.type === "ContainerClaimed") {
      const pool = states.get(envelope.data.poolStreamId)
      if (pool !== undefined && pool.claimedBy === undefined && pool.streamId !== envelope.streamId) {
        states.set(pool.streamId, { ...pool, claimedBy: envelope.streamId })
      }
    }
    return next
  }
  return {
    apply,
    get: (streamId) => states.get(streamId),
    states,
    leases,
    summary: () => summarize(states.values(), leases.values())
  }
}

/**
 * Folds all streams of a history (in sequence order).
 *
 * @category folding
 */
export const project = (events: Iterable<EventEnvelope>): ReadonlyMap<string, ExecutionState> => {
  const projector = makeProjector()
  for (const envelope of events) projector.apply(envelope)
  return projector.states
}

/**
 * Folds a stream (e.g. `journal.read()`) without holding its events: memory grows with the
 * number of streams, not events.
 *
 * @category folding
 */
export const projectStream = <E, R>(
  events: Stream.Stream<EventEnvelope, E, R>
): Effect.Effect<ReadonlyMap<string, ExecutionState>, E, R> =>
  Effect.suspend(() => {
    const projector = makeProjector()
    return Stream.runForEach(events, (envelope) => Effect.sync(() => projector.apply(envelope))).pipe(
      Effect.as(projector.states)
    )
  })

/**
 * Each updated state, as events flow (a live view).
 *
 * @category folding
 */
export const states = <E, R>(events: Stream.Stream<EventEnvelope, E, R>): Stream.Stream<ExecutionState, E, R> =>
  Stream.suspend(() => {
    const projector = makeProjector()
    return Stream.filterMap(events, (envelope) => Option.fromNullable(projector.apply(envelope)))
  })

/**
 * @category models
 */
export interface Summary {
  /** Executions (container-only streams are not counted here). */
  readonly total: number
  readonly byOutcome: Readonly<Record<Outcome | "open", number>>
  /** From start (or claim) to the terminal event, over executions that have both. */
  readonly durationMs: {
    readonly count: number
    readonly p50: number
    readonly p95: number
    readonly p99: number
    readonly max: number
  }
  /** Histogram of container exit codes. */
  readonly exitCodes: Readonly<Record<string, number>>
  /** Containers created or claimed and not destroyed, over every stream (pools included). */
  readonly containersAlive: number
  /** Executions that are not closed (see {@link isClosed}). */
  readonly openLifecycles: number
  /** Tool calls by tool name (sorted), summed over executions. */
  readonly toolCalls: Readonly<Record<string, ToolCallCounts>>
  /**
   * Owners with an ownership lease: open (last event a lease; it may have expired since) or
   * closed. Absent when no lease was given or seen.
   */
  readonly executors?: { readonly open: number; readonly closed: number }
}

/**
 * Nearest-rank percentile of a sorted array (0 when empty).
 */
const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!

/**
 * @category summaries
 */
export const summarize = (
  input: Iterable<ExecutionState> | ReadonlyMap<string, ExecutionState>,
  leases?: Iterable<LeaseState>
): Summary => {
  const list = isMap(input) ? input.values() : input
  const byOutcome: Record<Outcome | "open", number> = { exited: 0, timedOut: 0, interrupted: 0, failed: 0, open: 0 }
  const exitCodes: Record<string, number> = {}
  const durations: Array<number> = []
  let total = 0
  let containersAlive = 0
  let openLifecycles = 0
  const toolCalls = new Map<string, Mutable<ToolCallCounts>>()
  for (const state of list) {
    if (isContainerAlive(state)) containersAlive++
    if (state.kind !== "execution") continue
    total++
    byOutcome[state.outcome ?? "open"]++
    if (!isClosed(state)) openLifecycles++
    if (state.exitCode !== undefined) exitCodes[String(state.exitCode)] = (exitCodes[String(state.exitCode)] ?? 0) + 1
    if (state.startedAt !== undefined && state.finishedAt !== undefined) {
      durations.push(Math.max(0, state.finishedAt - state.startedAt))
    }
    for (const [tool, counts] of Object.entries(state.toolCalls ?? {})) {
      const sum = toolCalls.get(tool) ?? { ...noToolCalls }
      sum.requested += counts.requested
      sum.completed += counts.completed
      sum.failed += counts.failed
      sum.refused += counts.refused
      toolCalls.set(tool, sum)
    }
  }
  durations.sort((a, b) => a - b)
  let open = 0
  let closedOwners = 0
  for (const lease of leases ?? []) lease.closedAt === undefined ? open++ : closedOwners++
  return {
    ...(open + closedOwners === 0 ? {} : { executors: { open, closed: closedOwners } }),
    total,
    byOutcome,
    durationMs: {
      count: durations.length,
      p50: percentile(durations, 50),
      p95: percentile(durations, 95),
      p99: percentile(durations, 99),
      max: durations.at(-1) ?? 0
    },
    exitCodes,
    containersAlive,
    openLifecycles,
    toolCalls: Object.fromEntries([...toolCalls].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  }
}

const isMap = (u: unknown): u is ReadonlyMap<string, ExecutionState> => u instanceof Map

/**
 * Lists what is wrong with one stream's events (empty when valid): lifecycle order
 * (created < started < exactly one terminal < destroyed; nothing after `ContainerDestroyed`
 * but `ExecutionCompleted`), tool calls (after the start, or in a session's call; each
 * `callId` requested once, then exactly one outcome, all before the terminal event),
 * versions 1..n contiguous, sequences strictly increasing, a single stream id; ownership-lease
 * events only in a stream of their own (an executor's), never in a lifecycle's; a session's kernel
 * events (KernelStarted, CellExecuted, KernelRestarted) in a session's stream, before its
 * ContainerDestroyed, never in an execution's.
 *
 * @category validation
 */
export const checkLifecycle = (events: Iterable<EventEnvelope>): ReadonlyArray<string> => {
  const violations: Array<string> = []
  let state: ExecutionState | undefined
  let streamId: string | undefined
  let expectedVersion = 1
  let lastSequence = 0
  let lifecycle = false
  let lease = false
  for (const envelope of events) {
    if (streamId === undefined) streamId = envelope.streamId
    else if (envelope.streamId !== streamId) {
      violations.push(`sequence ${envelope.sequence} belongs to stream ${envelope.streamId}, not ${streamId}`)
      continue
    }
    if (envelope.version !== expectedVersion) {
      violations.push(`version ${envelope.version} at sequence ${envelope.sequence}, expected ${expectedVersion}`)
    }
    expectedVersion = envelope.version + 1
    if (envelope.sequence <= lastSequence) {
      violations.push(`sequence ${envelope.sequence} does not increase (after ${lastSequence})`)
    }
    lastSequence = Math.max(lastSequence, envelope.sequence)
    if (isLeaseEvent(envelope)) {
      if (lifecycle) violations.push(`${envelope.type} (sequence ${envelope.sequence}) in a lifecycle stream`)
      lease = true
      continue
    }
    if (isLifecycleEvent(envelope) || isKernelEvent(envelope)) {
      if (lease) violations.push(`${envelope.type} (sequence ${envelope.sequence}) in an executor's lease stream`)
      lifecycle = true
    }
    // Sequence order is reported above; renumber so evolve still checks the event's place
    // in the lifecycle instead of dropping it as a re-delivery.
    const sequence = Math.max(envelope.sequence, (state?.lastSequence ?? 0) + 1)
    state = evolve(state, sequence === envelope.sequence ? envelope : { ...envelope, sequence })
  }
  if (state !== undefined) violations.push(...state.violations)
  return violations
}
