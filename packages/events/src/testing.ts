/**
 * fast-check arbitraries for property-based tests of code that produces or consumes
 * journal events (the executor, projections, UIs).
 *
 * Every lifecycle these generate is valid: `Projection.checkLifecycle` accepts it (this
 * package's own tests hold it to that).
 */
// effect ships fast-check (effect/FastCheck): the arbitraries need no dependency of their own, and
// they are the same instances @effect/vitest's it.prop and Schema's Arbitrary use.
import * as fc from "effect/FastCheck"
import {
  DestroyReason as DestroyReasonSchema,
  type DestroyReason,
  type EventData,
  type EventEnvelope,
  type EventMetadata,
  type EventType,
  type JournalEvent
} from "./Event.js"
import {
  CellStatus,
  KernelRestartReason,
  make,
  SCHEMA_VERSION,
  ToolCallFailureReason,
  ToolCallRefusalReason
} from "./Event.js"

// --- primitives --------------------------------------------------------------------------

const hex = (length: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: length, maxLength: length })

/**
 * @category arbitraries
 */
export const arbExecutionId: fc.Arbitrary<string> = fc.uuid({ version: 7 })

/**
 * @category arbitraries
 */
export const arbContainerName: fc.Arbitrary<string> = fc.uuid({ version: 4 }).map((id) => `hermes-sandbox-${id}`)

/**
 * @category arbitraries
 */
export const arbContainerId: fc.Arbitrary<string> = hex(64)

const arbSha256 = hex(64)
const arbImageId = hex(64).map((h) => `sha256:${h}`)
const arbText = fc.string({ maxLength: 40 })
const arbMillis = fc.integer({ min: 0, max: 600_000 })
const arbBytes = fc.integer({ min: 0, max: 16 * 1024 * 1024 })
const arbCount = fc.integer({ min: 0, max: 1_000 })
const arbExitCode = fc.oneof(fc.constantFrom(0, 1, 2, 126, 127, 137, 139, 143), fc.integer({ min: 0, max: 255 }))

/**
 * @category models
 */
export type Language = "python" | "javascript" | "bash"

/**
 * @category arbitraries
 */
export const arbLanguage: fc.Arbitrary<Language> = fc.constantFrom("python", "javascript", "bash")

/**
 * The part of an executor request the journal's own tests need: a narrower view of core's
 * `ExecuteRequest` (the schema executeCode validates), which events cannot import (core depends on
 * events). core's tests hold it to that schema: every value of {@link arbExecuteRequest} plans,
 * and this type is assignable to core's. For requests with every field executeCode takes, use
 * `arbExecuteRequest` of `@hermes-sandbox/core/testing` (or `@hermes-sandbox/docker/testing`).
 *
 * @category models
 */
export interface ExecuteRequest {
  readonly language: Language
  readonly code: string
  readonly stdin?: string
  readonly timeoutMs?: number
}

const snippets: Record<Language, ReadonlyArray<string>> = {
  python: [
    "print('hello')",
    "import sys\nprint(sys.stdin.read())",
    "while True: pass",
    "x = 'a' * 10**9",
    "raise SystemExit(3)"
  ],
  javascript: ["console.log('hello')", "process.exit(2)", "for(;;){}", "throw new Error('boom')", "console.error('e')"],
  bash: ["echo hello", "cat", "exit 7", "sleep 999", "yes | head -c 1000000"]
}

/**
 * Requests: realistic snippets (including ones that loop, exhaust memory or fail) and
 * arbitrary text, with optional stdin and timeout (omitted, not `undefined`). Narrower than core's
 * schema-derived `arbExecuteRequest` (see {@link ExecuteRequest}), and accepted by it.
 *
 * @category arbitraries
 */
export const arbExecuteRequest: fc.Arbitrary<ExecuteRequest> = arbLanguage.chain((language) =>
  fc.record(
    {
      language: fc.constant(language),
      code: fc.oneof(
        fc.constantFrom(...snippets[language]),
        fc.string({ maxLength: 200 }),
        fc.fullUnicodeString({ maxLength: 50 })
      ),
      stdin: fc.string({ maxLength: 200 }),
      timeoutMs: fc.integer({ min: 1, max: 120_000 })
    },
    { requiredKeys: ["language", "code"] }
  )
)

// --- single events -----------------------------------------------------------------------

const arbRequested: fc.Arbitrary<EventData<"ExecutionRequested">> = fc.record(
  {
    language: fc.oneof(arbLanguage, arbText),
    image: fc.constantFrom("python:3.12-slim", "node:20-alpine", "bash:5"),
    codeBytes: arbBytes,
    codeSha256: arbSha256,
    stdinBytes: arbBytes,
    fileCount: fc.integer({ min: 0, max: 64 }),
    timeoutMs: fc.integer({ min: 1, max: 600_000 }),
    limits: fc.record({
      memoryBytes: fc.integer({ min: 0, max: 8 * 1024 ** 3 }),
      nanoCpus: fc.integer({ min: 0, max: 8e9 }),
      pidsLimit: fc.integer({ min: -1, max: 4096 }),
      outputLimitBytes: arbBytes
    }),
    network: fc.boolean(),
    runtime: fc.constantFrom("docker", "fake", "runsc"),
    scope: fc.constantFrom("ephemeral", "session", "persistent"),
    sessionId: fc.uuid()
  },
  {
    requiredKeys: [
      "language",
      "image",
      "codeBytes",
      "codeSha256",
      "stdinBytes",
      "fileCount",
      "timeoutMs",
      "limits",
      "network",
      "runtime"
    ]
  }
)

const arbDestroyReason: fc.Arbitrary<DestroyReason> = fc.constantFrom(...DestroyReasonSchema.literals)

const arbCompleted: fc.Arbitrary<EventData<"ExecutionCompleted">> = fc.record({
  exitCode: fc.option(arbExitCode, { nil: null }),
  timedOut: fc.boolean(),
  oomKilled: fc.boolean(),
  stdoutBytes: arbBytes,
  stderrBytes: arbBytes,
  stdoutTruncated: fc.boolean(),
  stderrTruncated: fc.boolean(),
  durationMs: arbMillis
})

const arbToolName = fc.constantFrom("web_search", "read_file", "terminal", "add")
const arbCallId = fc.integer({ min: 1, max: 50 })
// What a caller who opted in sees recorded: a small JSON object (plain prototype, so it compares
// equal after a JSON round trip).
const arbToolArguments = fc
  .dictionary(
    fc.constantFrom("query", "path", "a", "b"),
    fc.oneof(arbText, fc.integer(), fc.boolean(), fc.constant(null)),
    { maxKeys: 3 }
  )
  .map((args) => ({ ...args }))
const arbToolFailure = fc.record({
  durationMs: arbMillis,
  reason: fc.constantFrom(...ToolCallFailureReason.literals),
  message: arbText
})
const arbToolRefusal = fc.record({ reason: fc.constantFrom(...ToolCallRefusalReason.literals), message: arbText })

const dataArbitraries: { readonly [T in EventType]: fc.Arbitrary<EventData<T>> } = {
  ExecutionRequested: arbRequested,
  ContainerCreated: fc.record(
    { containerName: arbContainerName, containerId: arbContainerId, imageId: arbImageId, pooled: fc.boolean() },
    { requiredKeys: ["containerName", "containerId", "imageId"] }
  ),
  ContainerStarted: fc.record({ containerId: arbContainerId }),
  ContainerClaimed: fc.record({
    containerName: arbContainerName,
    containerId: arbContainerId,
    poolStreamId: fc.uuid()
  }),
  ArtifactsCollected: fc.record(
    {
      files: fc.array(
        fc.record({
          path: arbText,
          size: arbBytes,
          sha256: fc.stringMatching(/^[0-9a-f]{64}$/),
          mime: fc.constantFrom("image/png", "text/csv")
        }),
        { maxLength: 3 }
      ),
      skipped: fc.array(fc.record({ path: arbText, size: arbBytes, reason: fc.constantFrom("too-large", "symlink") }), {
        maxLength: 2
      }),
      skippedOmitted: fc.nat(),
      truncated: fc.boolean(),
      status: fc.constantFrom("complete" as const, "partial" as const, "none" as const),
      reason: fc.constantFrom("timed-out", "sandbox-ended")
    },
    { requiredKeys: ["files", "skipped", "truncated", "status"] }
  ),
  ToolCallRequested: fc.record(
    {
      callId: arbCallId,
      tool: arbToolName,
      argumentBytes: arbBytes,
      argumentsSha256: arbSha256,
      arguments: arbToolArguments
    },
    { requiredKeys: ["callId", "tool", "argumentBytes", "argumentsSha256"] }
  ),
  ToolCallCompleted: fc.record({ callId: arbCallId, tool: arbToolName, durationMs: arbMillis, resultBytes: arbBytes }),
  ToolCallFailed: fc
    .tuple(arbCallId, arbToolName, arbToolFailure)
    .map(([callId, tool, failure]) => ({ callId, tool, ...failure })),
  ToolCallRefused: fc
    .tuple(arbCallId, arbToolName, arbToolRefusal)
    .map(([callId, tool, refusal]) => ({ callId, tool, ...refusal })),
  CodeRecorded: fc.record(
    { cellId: fc.uuid(), code: arbText, codeBytes: arbBytes, truncated: fc.boolean() },
    { requiredKeys: ["code", "codeBytes", "truncated"] }
  ),
  OutputRecorded: fc.record(
    {
      cellId: fc.uuid(),
      stdout: arbText,
      stderr: arbText,
      stdoutBytes: arbBytes,
      stderrBytes: arbBytes,
      truncated: fc.boolean()
    },
    { requiredKeys: ["stdout", "stderr", "stdoutBytes", "stderrBytes", "truncated"] }
  ),
  ContainerExited: fc.record({ exitCode: arbExitCode, oomKilled: fc.boolean(), durationMs: arbMillis }),
  ExecutionTimedOut: fc.record({ timeoutMs: arbMillis, durationMs: arbMillis }),
  ExecutionInterrupted: fc.record({ reason: arbText }),
  ExecutionFailed: fc.record({
    errorTag: fc.constantFrom("CreateFailed", "StartFailed", "ImagePullFailed"),
    message: arbText
  }),
  ContainerDestroyed: fc.record({
    containerName: arbContainerName,
    containerId: arbContainerId,
    reason: arbDestroyReason
  }),
  ExecutionCompleted: arbCompleted,
  SessionOpened: fc.record({
    sessionId: fc.uuid(),
    scope: fc.constantFrom("session", "persistent"),
    containerName: arbContainerName
  }),
  SessionClaimed: fc.record({ sessionId: fc.uuid(), waitedMs: fc.nat() }),
  SessionReconnected: fc.record({ sessionId: fc.uuid(), containerName: arbContainerName }),
  SessionReplaced: fc.record({
    sessionId: fc.uuid(),
    profile: fc.constantFrom("default", "dev"),
    containerName: arbContainerName,
    differences: fc.array(fc.constantFrom("image", "limits.memoryBytes: 536870912 -> 268435456"), { maxLength: 3 }),
    replacedBy: fc.uuid()
  }),
  SessionIdleExpired: fc.record({ sessionId: fc.uuid(), idleMs: arbMillis }),
  SessionClosed: fc.record({ sessionId: fc.uuid(), reason: arbText }),
  KernelStarted: fc.record({
    kernelId: fc.uuid(),
    generation: fc.integer({ min: 1, max: 20 }),
    language: fc.constant("python" as const),
    startMs: arbMillis,
    preload: fc.array(fc.constantFrom("pandas", "matplotlib.pyplot", "numpy"), { maxLength: 3 }),
    preloadFailed: fc.array(fc.constantFrom("pandas", "nosuchmodule"), { maxLength: 2 })
  }),
  CellExecuted: fc.record({
    cellId: fc.uuid(),
    kernelId: fc.uuid(),
    executionCount: fc.integer({ min: 1, max: 1000 }),
    status: fc.constantFrom(...CellStatus.literals),
    durationMs: arbMillis,
    timeoutMs: arbMillis,
    codeBytes: arbBytes,
    codeSha256: arbSha256,
    stdoutBytes: arbBytes,
    stderrBytes: arbBytes,
    stdoutTruncated: fc.boolean(),
    stderrTruncated: fc.boolean(),
    outputs: fc.array(
      fc.record({
        kind: fc.constantFrom("result" as const, "display" as const),
        mime: fc.array(fc.record({ type: fc.constantFrom("text/plain", "text/html", "image/png"), bytes: arbBytes }), {
          maxLength: 3
        })
      }),
      { maxLength: 3 }
    ),
    outputsOmitted: arbCount,
    displaysOmitted: arbCount,
    stateLost: fc.boolean(),
    oomKilled: fc.boolean(),
    toolCallsMade: arbCount
  }),
  KernelRestarted: fc.record(
    {
      kernelId: fc.uuid(),
      generation: fc.integer({ min: 1, max: 20 }),
      reason: fc.constantFrom(...KernelRestartReason.literals),
      signal: fc.integer({ min: 1, max: 64 }),
      oomKilled: fc.boolean(),
      cellId: fc.uuid()
    },
    { requiredKeys: ["kernelId", "generation", "reason"] }
  ),
  ProcessStarted: fc.record({
    processId: fc.uuid(),
    pid: fc.integer({ min: 1, max: 4_194_304 }),
    commandBytes: arbCount,
    commandSha256: arbSha256
  }),
  ProcessExited: fc.record(
    {
      processId: fc.uuid(),
      exitCode: fc.integer({ min: 0, max: 255 }),
      signal: fc.constantFrom("SIGTERM", "SIGKILL", "SIGINT"),
      reason: fc.constantFrom("session ended"),
      durationMs: fc.nat(),
      stdoutBytes: arbCount,
      stderrBytes: arbCount
    },
    { requiredKeys: ["processId", "durationMs", "stdoutBytes", "stderrBytes"] }
  ),
  ExecutorStats: fc.record({ inFlight: arbCount, queued: arbCount }),
  ExecutorLease: fc.record({ leaseMs: fc.integer({ min: 1, max: 600_000 }) }),
  ExecutorClosed: fc.constant({})
}

/**
 * An event of the given type with arbitrary (valid) data.
 *
 * @category arbitraries
 */
export const arbEventOf = <T extends EventType>(type: T): fc.Arbitrary<Extract<JournalEvent, { readonly type: T }>> =>
  (dataArbitraries[type] as fc.Arbitrary<EventData<T>>).map((data) => make(type, data))

/**
 * Any single event, every type equally likely.
 *
 * @category arbitraries
 */
export const arbEvent: fc.Arbitrary<JournalEvent> = fc.oneof(
  ...(Object.keys(dataArbitraries) as Array<EventType>).map((type) => arbEventOf(type) as fc.Arbitrary<JournalEvent>)
)

// --- lifecycles --------------------------------------------------------------------------

/**
 * The paths a lifecycle can take.
 *
 * @category models
 */
export type LifecyclePath =
  | "create-failed"
  | "start-failed"
  | "exited"
  | "oom"
  | "timeout"
  | "interrupted-queued"
  | "interrupted-created"
  | "interrupted-running"
  | "failed-running"
  | "pooled"
  | "session"

/**
 * @category constants
 */
export const lifecyclePaths: ReadonlyArray<LifecyclePath> = [
  "create-failed",
  "start-failed",
  "exited",
  "oom",
  "timeout",
  "interrupted-queued",
  "interrupted-created",
  "interrupted-running",
  "failed-running",
  "pooled",
  "session"
]

/**
 * One execution's events, in order. A `pooled` lifecycle also carries the warm-pool
 * stream (created + started) its container was claimed from; that stream's events must
 * be committed before the claim.
 *
 * @category models
 */
export interface Lifecycle {
  readonly executionId: string
  readonly path: LifecyclePath
  readonly events: ReadonlyArray<JournalEvent>
  readonly pool?: { readonly streamId: string; readonly events: ReadonlyArray<JournalEvent> }
}

const arbRun = fc.record({
  request: arbRequested.map(({ sessionId: _s, scope: _scope, ...rest }) => rest),
  containerName: arbContainerName,
  containerId: arbContainerId,
  imageId: arbImageId,
  exitCode: arbExitCode,
  durationMs: arbMillis,
  reason: arbText,
  message: arbText,
  summary: fc.option(arbCompleted, { nil: undefined }),
  pooledOutcome: fc.constantFrom<"exited" | "timeout" | "interrupted" | "failed">(
    "exited",
    "timeout",
    "interrupted",
    "failed"
  ),
  sessionId: fc.uuid(),
  toolCalls: fc.array(
    fc.record({
      tool: arbToolName,
      argumentBytes: arbBytes,
      argumentsSha256: arbSha256,
      outcome: fc.oneof(
        fc.record({ type: fc.constant("ToolCallCompleted" as const), durationMs: arbMillis, resultBytes: arbBytes }),
        arbToolFailure.map((failure) => ({ type: "ToolCallFailed" as const, ...failure })),
        arbToolRefusal.map((refusal) => ({ type: "ToolCallRefused" as const, ...refusal }))
      )
    }),
    { maxLength: 3 }
  ),
  // How the calls interleave (concurrent calls from threads or Promise.all settle in any order).
  toolCallOrder: fc.array(fc.nat(), { minLength: 6, maxLength: 6 })
})

/**
 * A valid event sequence of one execution; every {@link LifecyclePath} is covered: create
 * fails, start fails, normal exit, OOM kill, timeout, interruption (queued, created,
 * running), failure while running, a claimed warm-pool container, and an execution inside
 * a session's long-lived container. A run whose program ran makes up to 3 tool calls
 * (numbered 1, 2, 3, possibly in flight at once), each settled before the terminal event.
 *
 * @category arbitraries
 */
export const arbLifecycle = (executionId?: string): fc.Arbitrary<Lifecycle> =>
  fc
    .tuple(
      executionId === undefined ? arbExecutionId : fc.constant(executionId),
      fc.constantFrom(...lifecyclePaths),
      arbRun
    )
    .map(([id, path, run]) => buildLifecycle(id, path, run))

type Run = typeof arbRun extends fc.Arbitrary<infer A> ? A : never

const buildLifecycle = (executionId: string, path: LifecyclePath, run: Run): Lifecycle => {
  const { containerId, containerName } = run
  const events: Array<JournalEvent> = []
  const request = path === "session" ? { ...run.request, scope: "session", sessionId: run.sessionId } : run.request
  events.push(make("ExecutionRequested", request))
  const created = () => events.push(make("ContainerCreated", { containerName, containerId, imageId: run.imageId }))
  const started = () => events.push(make("ContainerStarted", { containerId }))
  const destroyed = (reason: DestroyReason) =>
    events.push(make("ContainerDestroyed", { containerName, containerId, reason }))
  const exited = (oomKilled: boolean) =>
    events.push(
      make("ContainerExited", { exitCode: oomKilled ? 137 : run.exitCode, oomKilled, durationMs: run.durationMs })
    )
  const timedOut = () =>
    events.push(
      make("ExecutionTimedOut", {
        timeoutMs: request.timeoutMs,
        durationMs: Math.max(run.durationMs, request.timeoutMs)
      })
    )
  const interrupted = () => events.push(make("ExecutionInterrupted", { reason: run.reason }))
  const failed = (errorTag: string) => events.push(make("ExecutionFailed", { errorTag, message: run.message }))
  // The program's tool calls, between the start and the terminal event: each step either
  // requests the next call or settles one in flight.
  const toolCalls = () => {
    const calls = run.toolCalls
    const inFlight: Array<number> = []
    let requested = 0
    for (const choice of run.toolCallOrder.slice(0, calls.length * 2)) {
      const pick = choice % (inFlight.length + (requested < calls.length ? 1 : 0))
      if (pick === inFlight.length) {
        const call = calls[requested]!
        requested++
        inFlight.push(requested)
        events.push(
          make("ToolCallRequested", {
            callId: requested,
            tool: call.tool,
            argumentBytes: call.argumentBytes,
            argumentsSha256: call.argumentsSha256
          })
        )
      } else {
        const [callId] = inFlight.splice(pick, 1) as [number]
        const {
          tool,
          outcome: { type, ...data }
        } = calls[callId - 1]!
        events.push(make(type, { callId, tool, ...data } as EventData<typeof type>))
      }
    }
  }
  let pool: Lifecycle["pool"]
  let exitCode: number | null = null
  switch (path) {
    case "create-failed":
      failed("CreateFailed")
      break
    case "start-failed":
      created()
      failed("StartFailed")
      destroyed("failed")
      break
    case "exited":
      created()
      started()
      toolCalls()
      exited(false)
      destroyed("completed")
      exitCode = run.exitCode
      break
    case "oom":
      created()
      started()
      toolCalls()
      exited(true)
      destroyed("completed")
      exitCode = 137
      break
    case "timeout":
      created()
      started()
      toolCalls()
      timedOut()
      destroyed("timeout")
      break
    case "interrupted-queued":
      interrupted()
      break
    case "interrupted-created":
      created()
      interrupted()
      destroyed("interrupted")
      break
    case "interrupted-running":
      created()
      started()
      toolCalls()
      interrupted()
      destroyed("interrupted")
      break
    case "failed-running":
      created()
      started()
      toolCalls()
      failed("AttachFailed")
      destroyed("failed")
      break
    case "pooled": {
      const streamId = `pool-${executionId}`
      pool = {
        streamId,
        events: [
          make("ContainerCreated", { containerName, containerId, imageId: run.imageId, pooled: true }),
          make("ContainerStarted", { containerId })
        ]
      }
      events.push(make("ContainerClaimed", { containerName, containerId, poolStreamId: streamId }))
      toolCalls()
      switch (run.pooledOutcome) {
        case "exited":
          exited(false)
          destroyed("completed")
          exitCode = run.exitCode
          break
        case "timeout":
          timedOut()
          destroyed("timeout")
          break
        case "interrupted":
          interrupted()
          destroyed("interrupted")
          break
        case "failed":
          failed("AttachFailed")
          destroyed("failed")
          break
      }
      break
    }
    case "session":
      // Runs in the session's container: no create/start/destroy of its own.
      toolCalls()
      exited(false)
      exitCode = run.exitCode
      break
  }
  if (run.summary !== undefined) {
    const last = events.at(-1)!
    events.push(
      make("ExecutionCompleted", {
        ...run.summary,
        exitCode,
        timedOut: path === "timeout" || (path === "pooled" && run.pooledOutcome === "timeout"),
        oomKilled: path === "oom",
        durationMs: last.type === "ContainerDestroyed" ? run.durationMs : run.summary.durationMs
      })
    )
  }
  return pool === undefined ? { executionId, path, events } : { executionId, path, events, pool }
}

// --- envelopes & histories ----------------------------------------------------------------

/**
 * Metadata used by {@link toEnvelopes} and {@link arbJournalHistory}.
 *
 * @category constants
 */
export const testMetadata: EventMetadata = { executorId: "executor-test", host: "test-host", pid: 1 }

/**
 * A deterministic, well-formed UUID v7 (time-ordered) for generated envelopes.
 */
const uuidV7 = (timestamp: number, n: number): string => {
  const time = Math.max(0, Math.trunc(timestamp)).toString(16).padStart(12, "0").slice(-12)
  const counter = (n & 0xfff).toString(16).padStart(3, "0")
  const tail = n.toString(16).padStart(12, "0").slice(-12)
  return `${time.slice(0, 8)}-${time.slice(8)}-7${counter}-8000-${tail}`
}

/**
 * Wraps one stream's events in envelopes (versions 1..n), numbered from `startSequence`.
 *
 * @category constructors
 */
export const toEnvelopes = (
  streamId: string,
  events: ReadonlyArray<JournalEvent>,
  options: { readonly startSequence?: number; readonly startVersion?: number; readonly timestamp?: number } = {}
): ReadonlyArray<EventEnvelope> => {
  const start = options.startSequence ?? 1
  const timestamp = options.timestamp ?? 1_700_000_000_000
  return events.map(
    (event, i) =>
      ({
        id: uuidV7(timestamp + i, start + i),
        sequence: start + i,
        streamId,
        version: (options.startVersion ?? 1) + i,
        timestamp: timestamp + i,
        type: event.type,
        data: event.data,
        schemaVersion: SCHEMA_VERSION,
        metadata: testMetadata
      }) as EventEnvelope
  )
}

/**
 * A journal history: a few warm-pool streams first (the containers later claimed), then
 * 1–8 execution lifecycles and an executor-stats stream, interleaved at random while each
 * stream keeps its order. Sequences run 1..n, versions 1..k per stream, timestamps never
 * decrease.
 *
 * @category arbitraries
 */
export const arbJournalHistory: fc.Arbitrary<ReadonlyArray<EventEnvelope>> = fc
  .tuple(
    fc.uniqueArray(arbLifecycle(), { minLength: 1, maxLength: 8, selector: (l) => l.executionId }),
    fc.array(arbEventOf("ExecutorStats"), { maxLength: 4 }),
    fc.integer({ min: 1_600_000_000_000, max: 2_000_000_000_000 })
  )
  .chain(([lifecycles, stats, start]) => {
    const streams: Array<{ id: string; events: ReadonlyArray<JournalEvent> }> = lifecycles.map((l) => ({
      id: l.executionId,
      events: l.events
    }))
    if (stats.length > 0) streams.push({ id: "executor-test", events: stats })
    const total = streams.reduce((n, s) => n + s.events.length, 0)
    return fc.array(fc.nat(), { minLength: total, maxLength: total }).map((choices) => {
      const out: Array<EventEnvelope> = []
      const versions = new Map<string, number>()
      let timestamp = start
      const emit = (streamId: string, event: JournalEvent, step: number) => {
        const version = (versions.get(streamId) ?? 0) + 1
        versions.set(streamId, version)
        timestamp += step % 50
        out.push(
          toEnvelopes(streamId, [event], { startSequence: out.length + 1, startVersion: version, timestamp })[0]!
        )
      }
      for (const lifecycle of lifecycles) {
        if (lifecycle.pool !== undefined) {
          for (const event of lifecycle.pool.events) emit(lifecycle.pool.streamId, event, 1)
        }
      }
      const cursors = streams.map(() => 0)
      let open = streams.map((_, i) => i)
      for (const choice of choices) {
        const pick = open[choice % open.length]!
        const stream = streams[pick]!
        emit(stream.id, stream.events[cursors[pick]!]!, choice)
        cursors[pick]!++
        if (cursors[pick] === stream.events.length) open = open.filter((i) => i !== pick)
      }
      return out
    })
  })
