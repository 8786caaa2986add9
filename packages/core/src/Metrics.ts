/**
 * Prometheus metrics of an executor and its sessions service: one registry per `Metrics` instance
 * (prom-client's `Registry`, never its process-wide default one), so two executors in one process
 * never share or collide.
 *
 * What they count is a projection of what the services journal: the counters and histograms are
 * fed the events each service publishes after their append committed (internal/publisher.ts), so
 * they agree with `hermes-sandbox events` and `Projection.summarize` by construction, on every
 * journal alike; the gauges are read from the services' live state when the registry is scraped,
 * never kept up on the hot path.
 *
 * - `hermes_sandbox_executions_total{language,outcome}`: terminal events. `outcome`: ok (exit 0),
 *   error (another exit code), oom (killed by the OOM killer), timeout (ExecutionTimedOut),
 *   interrupted (ExecutionInterrupted: aborted, the executor closed), failed (ExecutionFailed).
 *   `language` is one of python, javascript, bash (else "other").
 * - `hermes_sandbox_execution_phase_seconds{phase}`: a one-shot execution's phases, from its
 *   stream's timestamps (and the moment it got its slot): queue (requested → slot), create (slot →
 *   ContainerCreated) or claim (slot → ContainerClaimed, a warm sandbox), start (created →
 *   ContainerStarted), run (started or claimed → the terminal event, or → the files' first frame
 *   with `collect`), collect (the files' first frame, else ArtifactsCollected → the terminal
 *   event), removal (the terminal event → ContainerDestroyed). Session calls run in a long-lived sandbox and have no phases here.
 * - `hermes_sandbox_tool_calls_total{tool,outcome}`: ToolCallCompleted | Failed | Refused
 *   (outcome completed, failed, refused). `tool` is a tool's name only once the host has shown it
 *   is one of its tools (a call of it was served, failed, or refused for its arguments or the
 *   budget: checks made after the name was found among the run's tools), and at most
 *   MAX_TOOL_LABELS names; every other name the sandboxed code sends is "other".
 * - `hermes_sandbox_journal_append_seconds`: each append of the services' events, as long as it took.
 * - `hermes_sandbox_leaked_containers_removed_total{by}`: containers whose owner is gone, removed by
 *   the sweeps of these services (by "sweep": startup and periodic; deadline label passed, owner's
 *   pid gone, lease expired or closed), or found removed already when such a sweep closed their
 *   lifecycle in the journal (by "watchdog": their owner's watchdog, or whoever removed them without
 *   recording it; reported by one sweep only). Not counted: removals of the services' own containers
 *   (a create without an answer, a retried removal), the SessionReaper's and openPersistent's
 *   removals of persistent sandboxes (idle or past their lifetime: a policy, not a leak), and what a
 *   watchdog removes of containers no lifecycle in the journal's sweep window names.
 * - gauges: `hermes_sandbox_in_flight` (concurrency slots held: running, and results returned whose
 *   sandbox is still being removed), `hermes_sandbox_queued`, `hermes_sandbox_pool_ready{language}`
 *   (warm sandboxes ready), `hermes_sandbox_sessions_open` (session sandboxes the sessions service
 *   holds, its pool's included).
 *
 * Nothing here grows with what the sandbox does: label values come from fixed sets (or the capped
 * set of the host's tool names), and what is kept per execution is dropped at its end and bounded
 * (MAX_TRACKED) besides.
 */
import { createRequire } from "node:module"
import { Context, Effect, Layer } from "effect"
import type * as PromClient from "prom-client"
import type { EventEnvelope, JournalEvent } from "@hermes-sandbox/events"
import { Languages } from "./Language.js"
import { onFirstUse } from "./OnFirstUse.js"
import type { SweepReport } from "./Sweep.js"

/** The content type of the text exposition (Prometheus text format 0.0.4), for an HTTP response. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/** The outcomes of `hermes_sandbox_executions_total`. */
export const EXECUTION_OUTCOMES = ["ok", "error", "oom", "timeout", "interrupted", "failed"] as const
export type ExecutionOutcome = (typeof EXECUTION_OUTCOMES)[number]
/** The phases of `hermes_sandbox_execution_phase_seconds`. */
export const PHASES = ["queue", "create", "claim", "start", "run", "collect", "removal"] as const
export type ExecutionPhase = (typeof PHASES)[number]
/** The outcomes of `hermes_sandbox_tool_calls_total`. */
export const TOOL_CALL_OUTCOMES = ["completed", "failed", "refused"] as const
/** Who removed the containers of `hermes_sandbox_leaked_containers_removed_total`. */
export const LEAKED_REMOVED_BY = ["sweep", "watchdog"] as const
/** Distinct tool names used as labels at most; past them, "other". */
export const MAX_TOOL_LABELS = 100
/** Executions whose phases are being followed at most (the oldest is dropped past it). */
export const MAX_TRACKED = 10_000

/** What a service reports of its live state when the registry is scraped (summed over the services). */
export interface LiveState {
  readonly inFlight?: number
  readonly queued?: number
  readonly poolReady?: Readonly<Record<string, number>>
  readonly sessionsOpen?: number
}

export interface SandboxMetrics {
  /** The registry in Prometheus' text format (the live gauges read first). */
  readonly text: Effect.Effect<string>
  /** The exposition's content type, for the HTTP response. */
  readonly contentType: string
  /**
   * The prom-client registry itself, e.g. to merge with one's own
   * (`Registry.merge([mine, metrics.registry])`). Its gauges are read by `text` only.
   */
  readonly registry: PromClient.Registry
  /** @internal A committed event of the services (the publisher calls it). */
  readonly observe: (event: EventEnvelope) => void
  /** @internal One append took this long. */
  readonly appended: (seconds: number) => void
  /** @internal The execution got its concurrency slot at this time (the journal's clock). */
  readonly slotTaken: (executionId: string, atMs: number) => void
  /** @internal The execution's collected files began to arrive at this time (undefined: none came). */
  readonly collectBegan: (executionId: string, atMs: number | undefined) => void
  /** @internal What a sweep of these services reported: the orphaned containers it removed, and those it found removed. */
  readonly leakedRemoved: (report: Pick<SweepReport, "removed" | "alreadyRemoved">) => void
  /** @internal Read `live` at each scrape; returns the unregistration. */
  readonly addLiveState: (live: Effect.Effect<LiveState>) => () => void
  /** @internal Follow each execution's phases and outcome as they are measured (the traces: Tracing.ts); returns the unregistration. */
  readonly addPhaseObserver: (observer: PhaseObserver) => () => void
}

/**
 * What the traces take from the one projection of an execution's phases (this module's): each phase
 * as it is measured (from its start to its end, the journal's clock, ms), and the outcome of its
 * terminal event (session calls included, which have no phases).
 */
export interface PhaseObserver {
  readonly phase: (executionId: string, phase: ExecutionPhase, fromMs: number, toMs: number) => void
  readonly ended: (executionId: string, outcome: ExecutionOutcome) => void
}

/** The registry an executor and a sessions service share (DockerExecutor.layerWithSessions provides one). */
export class Metrics extends Context.Tag("@hermes-sandbox/core/Metrics")<Metrics, SandboxMetrics>() {}

/** What is used of prom-client: its registry and three metric types. */
interface PromClientUsed {
  readonly Registry: typeof PromClient.Registry
  readonly Counter: typeof PromClient.Counter
  readonly Gauge: typeof PromClient.Gauge
  readonly Histogram: typeof PromClient.Histogram
}

// prom-client loads with the first registry made (an executor's start), not with the package; and
// only the four modules used, not its index (default process metrics, push gateway, cluster
// aggregation, OpenTelemetry's API): 9 modules and ~10 ms of CPU instead of 184 and ~70 ms.
const promClient = onFirstUse<PromClientUsed>(
  () => ({
    Registry: require("prom-client/lib/registry"),
    Counter: require("prom-client/lib/counter"),
    Gauge: require("prom-client/lib/gauge"),
    Histogram: require("prom-client/lib/histogram")
  }),
  () =>
    ((r) => ({
      Registry: r("prom-client/lib/registry"),
      Counter: r("prom-client/lib/counter"),
      Gauge: r("prom-client/lib/gauge"),
      Histogram: r("prom-client/lib/histogram")
    }))(createRequire(import.meta.url))
)

const PHASE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]
const APPEND_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

const languages: ReadonlySet<string> = new Set(Languages)

interface Tracked {
  readonly language: string
  /** A one-shot execution (a session's call runs in a long-lived sandbox: counted, not phased). */
  readonly phased: boolean
  readonly requestedAt: number
  slotAt?: number
  acquiredAt?: number
  startedAt?: number
  /** With `collect`: when the files began to come (else when ArtifactsCollected was recorded). */
  collectAt?: number
  collected?: boolean
  endedAt?: number
}

/** The outcome a terminal event records (undefined for any other event): the metrics' and the traces'. */
export const outcomeOf = (event: JournalEvent): ExecutionOutcome | undefined => {
  switch (event.type) {
    case "ContainerExited":
      return event.data.oomKilled ? "oom" : event.data.exitCode === 0 ? "ok" : "error"
    case "ExecutionTimedOut":
      return "timeout"
    case "ExecutionInterrupted":
      return "interrupted"
    case "ExecutionFailed":
      return "failed"
    default:
      return undefined
  }
}

/** A fresh registry with every metric of the contract, its counters at zero. */
export const makeMetrics = (): SandboxMetrics => {
  const prom = promClient()
  const registry = new prom.Registry()
  const registers = [registry]
  const executions = new prom.Counter({
    name: "hermes_sandbox_executions_total",
    help: "Executions ended, by language and outcome (their terminal journal event).",
    labelNames: ["language", "outcome"] as const,
    registers
  })
  const phases = new prom.Histogram({
    name: "hermes_sandbox_execution_phase_seconds",
    help: `How long each phase of a one-shot execution took (${PHASES.join(", ")}; create or claim: a new sandbox or a warm one).`,
    labelNames: ["phase"] as const,
    buckets: PHASE_BUCKETS,
    registers
  })
  const toolCalls = new prom.Counter({
    name: "hermes_sandbox_tool_calls_total",
    help: 'Tool calls of sandboxed code, by tool ("other" for a name that is not a host tool) and outcome.',
    labelNames: ["tool", "outcome"] as const,
    registers
  })
  const appends = new prom.Histogram({
    name: "hermes_sandbox_journal_append_seconds",
    help: "How long each journal append of the services' events took.",
    buckets: APPEND_BUCKETS,
    registers
  })
  const leaked = new prom.Counter({
    name: "hermes_sandbox_leaked_containers_removed_total",
    help: 'Containers their owner left behind, removed: by this executor\'s sweeps ("sweep"), or found removed by their owner\'s watchdog when a sweep closed their lifecycle ("watchdog").',
    labelNames: ["by"] as const,
    registers
  })
  const inFlight = new prom.Gauge({
    name: "hermes_sandbox_in_flight",
    help: "Concurrency slots held: executions running, and results returned whose sandbox is being removed.",
    registers
  })
  const queued = new prom.Gauge({
    name: "hermes_sandbox_queued",
    help: "Executions waiting for a concurrency slot.",
    registers
  })
  const poolReady = new prom.Gauge({
    name: "hermes_sandbox_pool_ready",
    help: "Warm-pool sandboxes ready to be claimed, by language.",
    labelNames: ["language"] as const,
    registers
  })
  const sessionsOpen = new prom.Gauge({
    name: "hermes_sandbox_sessions_open",
    help: "Session sandboxes the sessions service holds open (its pool's included).",
    registers
  })
  // Known series at zero from the start (a rate over a series that appears late misses its first step).
  for (const language of Languages)
    for (const outcome of EXECUTION_OUTCOMES) executions.labels({ language, outcome }).inc(0)
  for (const phase of PHASES) phases.zero({ phase })
  for (const by of LEAKED_REMOVED_BY) leaked.inc({ by }, 0)

  const tracked = new Map<string, Tracked>()
  const toolNames = new Set<string>()
  const toolLabel = (tool: string, known: boolean): string => {
    if (toolNames.has(tool)) return tool
    if (!known || toolNames.size >= MAX_TOOL_LABELS) return "other"
    toolNames.add(tool)
    return tool
  }
  const observers = new Set<PhaseObserver>()
  const phase = (executionId: string, name: ExecutionPhase, fromMs: number, toMs: number) => {
    phases.observe({ phase: name }, Math.max(0, toMs - fromMs) / 1000)
    for (const o of observers) o.phase(executionId, name, fromMs, toMs)
  }
  const live = new Set<Effect.Effect<LiveState>>()

  const observe = (event: EventEnvelope): void => {
    const at = event.timestamp
    switch (event.type) {
      case "ExecutionRequested": {
        if (tracked.size >= MAX_TRACKED) {
          const oldest = tracked.keys().next()
          if (oldest.done !== true) tracked.delete(oldest.value)
        }
        tracked.set(event.streamId, {
          language: languages.has(event.data.language) ? event.data.language : "other",
          // A session's call has no slot, container or start of its own.
          phased: event.data.sessionId === undefined,
          requestedAt: at
        })
        return
      }
      case "ContainerCreated":
      case "ContainerClaimed": {
        const t = tracked.get(event.streamId)
        if (t === undefined || !t.phased || t.acquiredAt !== undefined) return
        const slotAt = t.slotAt ?? t.requestedAt
        phase(event.streamId, "queue", t.requestedAt, slotAt)
        phase(event.streamId, event.type === "ContainerCreated" ? "create" : "claim", slotAt, at)
        t.acquiredAt = at
        // A warm sandbox was started ahead: the run counts from the claim.
        if (event.type === "ContainerClaimed") t.startedAt = at
        return
      }
      case "ContainerStarted": {
        const t = tracked.get(event.streamId)
        if (t === undefined || t.acquiredAt === undefined || t.startedAt !== undefined) return
        phase(event.streamId, "start", t.acquiredAt, at)
        t.startedAt = at
        return
      }
      case "ArtifactsCollected": {
        const t = tracked.get(event.streamId)
        if (t === undefined || t.startedAt === undefined || t.endedAt !== undefined) return
        t.collected = true
        t.collectAt ??= at
        return
      }
      case "ContainerExited":
      case "ExecutionTimedOut":
      case "ExecutionInterrupted":
      case "ExecutionFailed": {
        const t = tracked.get(event.streamId)
        const outcome = outcomeOf(event) ?? "failed"
        // (Untracked: its request came before this registry, or was dropped past MAX_TRACKED.)
        if (t === undefined || t.endedAt === undefined) {
          executions.inc({ language: t?.language ?? "other", outcome })
          for (const o of observers) o.ended(event.streamId, outcome)
        }
        if (t === undefined || t.endedAt !== undefined) return
        if (t.startedAt !== undefined) {
          if (t.collected === true && t.collectAt !== undefined) {
            // The program ended, then the supervisor walked /workspace and sent the files back.
            const from = Math.min(Math.max(t.collectAt, t.startedAt), at)
            phase(event.streamId, "run", t.startedAt, from)
            phase(event.streamId, "collect", from, at)
          } else phase(event.streamId, "run", t.startedAt, at)
        }
        t.endedAt = at
        // Nothing to remove: the execution ends here.
        if (t.acquiredAt === undefined) tracked.delete(event.streamId)
        return
      }
      case "ContainerDestroyed": {
        const t = tracked.get(event.streamId)
        if (t === undefined) return
        if (t.endedAt !== undefined) phase(event.streamId, "removal", t.endedAt, at)
        tracked.delete(event.streamId)
        return
      }
      case "ToolCallCompleted":
        toolCalls.inc({ tool: toolLabel(event.data.tool, true), outcome: "completed" })
        return
      case "ToolCallFailed":
        toolCalls.inc({ tool: toolLabel(event.data.tool, true), outcome: "failed" })
        return
      case "ToolCallRefused": {
        // Only these refusals come after the name was found among the run's tools.
        const known = event.data.reason === "invalid-arguments" || event.data.reason === "budget-exhausted"
        toolCalls.inc({ tool: toolLabel(event.data.tool, known), outcome: "refused" })
        return
      }
      default:
        return
    }
  }

  const text = Effect.gen(function* () {
    const states = yield* Effect.forEach([...live], (l) => l, { concurrency: "unbounded" })
    let inFlightNow = 0
    let queuedNow = 0
    let sessionsNow = 0
    const ready: Record<string, number> = Object.fromEntries(Languages.map((l) => [l, 0]))
    for (const s of states) {
      inFlightNow += s.inFlight ?? 0
      queuedNow += s.queued ?? 0
      sessionsNow += s.sessionsOpen ?? 0
      for (const [language, n] of Object.entries(s.poolReady ?? {}))
        if (languages.has(language)) ready[language] = (ready[language] ?? 0) + n
    }
    inFlight.set(inFlightNow)
    queued.set(queuedNow)
    sessionsOpen.set(sessionsNow)
    for (const [language, n] of Object.entries(ready)) poolReady.set({ language }, n)
    return yield* Effect.promise(() => registry.metrics())
  })

  return {
    text,
    contentType: registry.contentType,
    registry,
    observe,
    appended: (seconds) => appends.observe(seconds),
    collectBegan: (executionId, atMs) => {
      const t = tracked.get(executionId)
      if (t !== undefined && atMs !== undefined && t.collectAt === undefined) t.collectAt = atMs
    },
    slotTaken: (executionId, atMs) => {
      const t = tracked.get(executionId)
      if (t !== undefined && t.slotAt === undefined) t.slotAt = atMs
    },
    leakedRemoved: (report) => {
      if (report.removed.length > 0) leaked.inc({ by: "sweep" }, report.removed.length)
      if (report.alreadyRemoved.length > 0) leaked.inc({ by: "watchdog" }, report.alreadyRemoved.length)
    },
    addLiveState: (state) => {
      live.add(state)
      return () => void live.delete(state)
    },
    addPhaseObserver: (observer) => {
      observers.add(observer)
      return () => void observers.delete(observer)
    }
  }
}

/**
 * A registry for the services this layer is provided to (an executor and its sessions service:
 * their gauges are summed). Each call is a new registry: the layer is memoized by reference.
 */
export const layer = (): Layer.Layer<Metrics> => Layer.sync(Metrics, makeMetrics)
