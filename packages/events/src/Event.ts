/**
 * The journal's vocabulary: one Schema per event type, a union of all of them, and the
 * envelope every committed event is wrapped in.
 *
 * The JSON form of an event is always `{ "type": "...", "data": { ... } }` so rows stay
 * readable with plain `sqlite3`/`jq` and so a future schema version can be recognised
 * before decoding the payload.
 */
import * as Schema from "effect/Schema"

// --- field schemas --------------------------------------------------------------------

// `Schema.Number` admits NaN/±Infinity, which JSON cannot carry (they become `null`), so a
// committed event would not decode again. Everything numeric is finite.
const Count = Schema.NonNegativeInt
const Millis = Schema.Finite.pipe(Schema.nonNegative())
const Int = Schema.Int

/**
 * Resource limits the container was created with.
 *
 * @category schemas
 */
export const Limits = Schema.Struct({
  memoryBytes: Count,
  nanoCpus: Count,
  // Docker uses -1 for "unlimited".
  pidsLimit: Int,
  outputLimitBytes: Count
})

/**
 * @category schemas
 */
export const DestroyReason = Schema.Literal(
  "completed",
  "timeout",
  "interrupted",
  "failed",
  "orphan-reaped",
  "pool-recycled",
  "pool-drained",
  "session-closed",
  "idle-expired"
)

/**
 * @category models
 */
export type DestroyReason = typeof DestroyReason.Type

/**
 * @category schemas
 */
export const SessionScope = Schema.Literal("session", "persistent")

/**
 * The caller's labels for a run or a session (e.g. the MCP server's `mcp.session`,
 * `mcp.tool`): recorded as given, for filtering and auditing; never interpreted.
 *
 * @category schemas
 */
export const Tags = Schema.Record({ key: Schema.String, value: Schema.String })

const event = <const Type extends string, Fields extends Schema.Struct.Fields>(type: Type, fields: Fields) =>
  Schema.Struct({ type: Schema.tag(type), data: Schema.Struct(fields) }).annotations({ identifier: type })

// --- execution lifecycle --------------------------------------------------------------

/**
 * The request as the executor accepted it. Sizes and a digest only: the code and stdin are not
 * journaled here (they may contain secrets, and they would bloat the journal); with `recordCode:
 * true` a bounded head of the code follows in CodeRecorded.
 *
 * @category schemas
 */
export const ExecutionRequested = event("ExecutionRequested", {
  language: Schema.String,
  image: Schema.String,
  codeBytes: Count,
  codeSha256: Schema.String,
  stdinBytes: Count,
  fileCount: Count,
  timeoutMs: Millis,
  limits: Limits,
  network: Schema.Boolean,
  runtime: Schema.String,
  scope: Schema.optional(Schema.String),
  sessionId: Schema.optional(Schema.String),
  tags: Schema.optional(Tags)
})

/**
 * @category schemas
 */
export const ContainerCreated = event("ContainerCreated", {
  containerName: Schema.String,
  containerId: Schema.String,
  imageId: Schema.String,
  pooled: Schema.optional(Schema.Boolean),
  /**
   * A warm-pool sandbox's: when it is recycled if no execution claimed it by then (its creation
   * plus the pool's `idleTtlMs`), in ms since the epoch (since 0.3.0; absent in older journals).
   */
  deadline: Schema.optional(Millis)
})

/**
 * @category schemas
 */
export const ContainerStarted = event("ContainerStarted", {
  containerId: Schema.String
})

/**
 * A warm-pool container (created and started in the stream `poolStreamId`) was handed to
 * this execution. Projections count a claim as created + started.
 *
 * @category schemas
 */
export const ContainerClaimed = event("ContainerClaimed", {
  containerName: Schema.String,
  containerId: Schema.String,
  poolStreamId: Schema.String
})

/**
 * @category schemas
 */
export const ContainerExited = event("ContainerExited", {
  exitCode: Int,
  oomKilled: Schema.Boolean,
  durationMs: Millis
})

/**
 * The files a run sent back (`collect`): paths, sizes and sha256 digests, never the content.
 * Appended before the terminal event, also when the collection was cut short (`status`). The
 * skipped entries are listed up to a bound and counted past it (`skippedOmitted`, since 0.3.0).
 *
 * @category schemas
 */
export const ArtifactsCollected = event("ArtifactsCollected", {
  files: Schema.Array(Schema.Struct({ path: Schema.String, size: Count, sha256: Schema.String, mime: Schema.String })),
  skipped: Schema.Array(Schema.Struct({ path: Schema.String, size: Count, reason: Schema.String })),
  /** Skipped entries past the list's bounds (1,000 entries, 256 KiB of paths), counted only. */
  skippedOmitted: Schema.optional(Count),
  truncated: Schema.Boolean,
  status: Schema.Literal("complete", "partial", "none"),
  reason: Schema.optional(Schema.String)
})

// --- tool calls (in the execution's stream, between the start and the terminal event) ---

/**
 * Why a dispatched tool call ended without a result: the handler threw or failed (`error`),
 * it outlived the per-call timeout (`timed-out`), its result was over the result limit
 * (`result-too-large`), or the run ended while it was in flight (`cancelled`).
 *
 * @category schemas
 */
export const ToolCallFailureReason = Schema.Literal("error", "timed-out", "result-too-large", "cancelled")

/**
 * @category models
 */
export type ToolCallFailureReason = typeof ToolCallFailureReason.Type

/**
 * Why a tool call was never dispatched to a handler (refusals do not count against the
 * run's call budget). `host-busy` (since 0.3.0): the host held as many tool arguments in flight,
 * over all its runs, as it may.
 *
 * @category schemas
 */
export const ToolCallRefusalReason = Schema.Literal(
  "unknown-tool",
  "invalid-arguments",
  "budget-exhausted",
  "arguments-too-large",
  "host-busy"
)

/**
 * @category models
 */
export type ToolCallRefusalReason = typeof ToolCallRefusalReason.Type

/**
 * Sandboxed code asked for a tool call. Size and digest of the raw argument bytes only: the
 * arguments themselves (which may hold secrets) are recorded only when the caller opted in.
 * `callId` numbers the run's calls 1, 2, 3…; exactly one of ToolCallCompleted, ToolCallFailed
 * or ToolCallRefused with the same `callId` follows, before the terminal event. A session's cell
 * journals its calls in the session's stream with its `cellId` (ids per cell), all settled before
 * its CellExecuted.
 *
 * @category schemas
 */
export const ToolCallRequested = event("ToolCallRequested", {
  callId: Count,
  /** A cell's call (in the session's stream): which cell; `callId` numbers that cell's calls. */
  cellId: Schema.optional(Schema.String),
  tool: Schema.String,
  argumentBytes: Count,
  /** Absent for a call refused as too large: the supervisor dropped its bytes unread. */
  argumentsSha256: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.Unknown)
})

/**
 * The handler returned; the result's size, never the result.
 *
 * @category schemas
 */
export const ToolCallCompleted = event("ToolCallCompleted", {
  callId: Count,
  /** A cell's call (in the session's stream): which cell; `callId` numbers that cell's calls. */
  cellId: Schema.optional(Schema.String),
  tool: Schema.String,
  durationMs: Millis,
  resultBytes: Count
})

/**
 * The call was dispatched and ended without a result (see {@link ToolCallFailureReason});
 * `message` is what the code was told (a handler's message, never its stack).
 *
 * @category schemas
 */
export const ToolCallFailed = event("ToolCallFailed", {
  callId: Count,
  /** A cell's call (in the session's stream): which cell; `callId` numbers that cell's calls. */
  cellId: Schema.optional(Schema.String),
  tool: Schema.String,
  durationMs: Millis,
  reason: ToolCallFailureReason,
  message: Schema.String
})

/**
 * The call was refused before any handler ran (see {@link ToolCallRefusalReason}).
 *
 * @category schemas
 */
export const ToolCallRefused = event("ToolCallRefused", {
  callId: Count,
  /** A cell's call (in the session's stream): which cell; `callId` numbers that cell's calls. */
  cellId: Schema.optional(Schema.String),
  tool: Schema.String,
  reason: ToolCallRefusalReason,
  message: Schema.String
})

/**
 * @category schemas
 */
export const ExecutionTimedOut = event("ExecutionTimedOut", {
  timeoutMs: Millis,
  durationMs: Millis
})

/**
 * @category schemas
 */
export const ExecutionInterrupted = event("ExecutionInterrupted", {
  reason: Schema.String
})

/**
 * The run failed with a typed error: its tag, its message and, when it has one, its reason
 * (ContainerFailed's: "journal-budget", "tool-calls", "protocol", …; since 0.3.0).
 *
 * @category schemas
 */
export const ExecutionFailed = event("ExecutionFailed", {
  errorTag: Schema.String,
  message: Schema.String,
  reason: Schema.optional(Schema.String)
})

/**
 * @category schemas
 */
export const ContainerDestroyed = event("ContainerDestroyed", {
  containerName: Schema.String,
  containerId: Schema.String,
  reason: DestroyReason
})

/**
 * The result summary. Appended last (after `ContainerDestroyed`); optional — a lifecycle
 * is closed without it.
 *
 * @category schemas
 */
export const ExecutionCompleted = event("ExecutionCompleted", {
  exitCode: Schema.NullOr(Int),
  timedOut: Schema.Boolean,
  oomKilled: Schema.Boolean,
  stdoutBytes: Count,
  stderrBytes: Count,
  stdoutTruncated: Schema.Boolean,
  stderrTruncated: Schema.Boolean,
  durationMs: Millis
})

// --- the audit trail (opt-in: `recordCode`) ----------------------------------------------

/**
 * The program's code, recorded because the caller asked for an audit trail (`recordCode: true`):
 * appended right after the request (ExecutionRequested of a run or a session call; for a session's
 * kernel cell, in the session's stream with its `cellId`, before its CellExecuted). `code` is its
 * head: at most 64 KiB of UTF-8, cut at a character boundary (`truncated` then); `codeBytes` is the
 * whole code's size. It may hold secrets: whoever can read the journal can read it.
 *
 * @category schemas
 */
export const CodeRecorded = event("CodeRecorded", {
  /** A session's kernel cell (in the session's stream): which cell. */
  cellId: Schema.optional(Schema.String),
  code: Schema.String,
  codeBytes: Count,
  truncated: Schema.Boolean
})

/**
 * The head of the program's output, recorded with `recordCode: true`, before the terminal event
 * (a cell's: before its CellExecuted). Each stream at most 16 KiB of UTF-8 (the program's bytes
 * decoded leniently: invalid UTF-8 as U+FFFD, NUL as U+FFFD too), cut at a character boundary;
 * `stdoutBytes`/`stderrBytes` count what the program wrote in all; `truncated`: either stream is
 * more than its head.
 *
 * @category schemas
 */
export const OutputRecorded = event("OutputRecorded", {
  /** A session's kernel cell (in the session's stream): which cell. */
  cellId: Schema.optional(Schema.String),
  stdout: Schema.String,
  stderr: Schema.String,
  stdoutBytes: Count,
  stderrBytes: Count,
  truncated: Schema.Boolean
})

// --- sessions (stream id = session id) --------------------------------------------------

/**
 * @category schemas
 */
export const SessionOpened = event("SessionOpened", {
  sessionId: Schema.String,
  scope: SessionScope,
  containerName: Schema.String,
  tags: Schema.optional(Tags),
  /**
   * When its maximum lifetime ends (`maxLifetimeMs`; a persistent sandbox's `deadline` label), in
   * ms since the epoch: it is removed then, whatever it does (since 0.3.0; absent in older journals).
   */
  deadline: Schema.optional(Millis),
  /** Its idle limit (`lifetimeSeconds`), in ms: it is removed once no call ran for so long (since 0.3.0). */
  idleMs: Schema.optional(Millis)
})

/**
 * A session the sessions service opened ahead of demand (its pool: SessionOpened, its container's
 * events and, with a kernel, KernelStarted already in the stream) was handed to a caller's `open`.
 * What happens after it is the caller's; `waitedMs` is how long it waited, unclaimed; `tags` are
 * the caller's (its calls carry them from here on).
 *
 * @category schemas
 */
export const SessionClaimed = event("SessionClaimed", {
  sessionId: Schema.String,
  waitedMs: Schema.Number,
  tags: Schema.optional(Tags)
})

/**
 * @category schemas
 */
export const SessionReconnected = event("SessionReconnected", {
  sessionId: Schema.String,
  containerName: Schema.String,
  /** As SessionOpened's: the sandbox's `deadline` label, in ms since the epoch (since 0.3.0). */
  deadline: Schema.optional(Millis),
  /** As SessionOpened's (since 0.3.0). */
  idleMs: Schema.optional(Millis)
})

/**
 * A persistent sandbox made with another configuration was removed (with whatever its
 * `/workspace` held) and replaced by a new one: recorded in the OLD sandbox's stream, before
 * its ContainerDestroyed and SessionClosed.
 *
 * @category schemas
 */
export const SessionReplaced = event("SessionReplaced", {
  sessionId: Schema.String,
  profile: Schema.String,
  containerName: Schema.String,
  /** What changed, e.g. "limits.memoryBytes: 536870912 -> 268435456". */
  differences: Schema.Array(Schema.String),
  /** The session id of the sandbox that replaces it. */
  replacedBy: Schema.String
})

/**
 * @category schemas
 */
export const SessionIdleExpired = event("SessionIdleExpired", {
  sessionId: Schema.String,
  idleMs: Millis
})

/**
 * @category schemas
 */
export const SessionClosed = event("SessionClosed", {
  sessionId: Schema.String,
  reason: Schema.String
})

// --- a session's Python kernel (in the session's stream, issue 28) --------------------------

/**
 * A session's Python kernel became ready: `generation` counts the session's kernels from 1 (each
 * is one exec of the kernel's supervisor), `startMs` from the exec to ready (preload included).
 *
 * @category schemas
 */
export const KernelStarted = event("KernelStarted", {
  kernelId: Schema.String,
  generation: Count,
  language: Schema.Literal("python"),
  startMs: Millis,
  preload: Schema.Array(Schema.String),
  /** The preloaded modules that failed to import (the cell's own import raises the real error). */
  preloadFailed: Schema.Array(Schema.String)
})

/**
 * The statuses of a cell (CellResult.status).
 *
 * @category schemas
 */
export const CellStatus = Schema.Literal("ok", "error", "timeout", "interrupted", "crashed")

/**
 * One output of a cell as the journal keeps it: its kind and its MIME types with their sizes, never
 * the data (at most 16 types listed).
 *
 * @category schemas
 */
export const CellOutputSummary = Schema.Struct({
  kind: Schema.Literal("result", "display"),
  mime: Schema.Array(Schema.Struct({ type: Schema.String, bytes: Count })).pipe(Schema.maxItems(16))
})

/**
 * A cell ran. Sizes, digests and MIME types only: never the code, the data, the error's value or
 * its traceback. At most 100 outputs are listed (`outputsOmitted` counts the rest);
 * `displaysOmitted` counts outputs not returned (over a bound, malformed).
 *
 * @category schemas
 */
export const CellExecuted = event("CellExecuted", {
  cellId: Schema.String,
  kernelId: Schema.String,
  executionCount: Count,
  status: CellStatus,
  durationMs: Millis,
  timeoutMs: Millis,
  codeBytes: Count,
  codeSha256: Schema.String,
  stdoutBytes: Count,
  stderrBytes: Count,
  stdoutTruncated: Schema.Boolean,
  stderrTruncated: Schema.Boolean,
  outputs: Schema.Array(CellOutputSummary).pipe(Schema.maxItems(100)),
  outputsOmitted: Count,
  displaysOmitted: Count,
  stateLost: Schema.Boolean,
  oomKilled: Schema.Boolean,
  toolCallsMade: Count
})

/**
 * Why a session's kernel ended: the caller asked (`requested`), a cell's deadline (`timeout`) or
 * the caller's abort (`interrupted`) had to kill it, or it died (`crashed`: OOM, a signal, its
 * supervisor gone, a forged frame).
 *
 * @category schemas
 */
export const KernelRestartReason = Schema.Literal("requested", "timeout", "interrupted", "crashed")

/**
 * A session's kernel ended; the next cell starts a new one (its `stateLost` says so unless the
 * caller asked). `cellId`: the cell it ended under.
 *
 * @category schemas
 */
export const KernelRestarted = event("KernelRestarted", {
  kernelId: Schema.String,
  generation: Count,
  reason: KernelRestartReason,
  signal: Schema.optional(Count),
  oomKilled: Schema.optional(Schema.Boolean),
  cellId: Schema.optional(Schema.String)
})

/**
 * A background process started in a session (`session.spawn`): `processId` names it for the
 * session's caller, `pid` is its pid inside the sandbox. The command's size and sha256, as
 * ExecutionRequested and CellExecuted keep for code; its text only with `recordCode`.
 *
 * @category schemas
 */
export const ProcessStarted = event("ProcessStarted", {
  processId: Schema.String,
  pid: Count,
  commandBytes: Count,
  commandSha256: Schema.String,
  /**
   * With `recordCode` only: the command's first 64 KiB of UTF-8 (as CodeRecorded's code), and
   * whether it was cut (since 0.3.0).
   */
  command: Schema.optional(Schema.String),
  commandTruncated: Schema.optional(Schema.Boolean)
})

/**
 * A session's background process ended: `exitCode` (128 + the signal's number when a signal
 * ended it), `signal` when it was killed on request (`kill(signal)`), or `reason` when the
 * host stopped following it (the session ended: the sandbox goes with it). Output in bytes as
 * the supervisor counted it, kept or not.
 *
 * @category schemas
 */
export const ProcessExited = event("ProcessExited", {
  processId: Schema.String,
  exitCode: Schema.optional(Schema.Int),
  signal: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  durationMs: Millis,
  stdoutBytes: Count,
  stderrBytes: Count
})

// --- executor (stream id = executor id) ------------------------------------------------

/**
 * @category schemas
 */
export const ExecutorStats = event("ExecutorStats", {
  inFlight: Count,
  queued: Count
})

/**
 * Ownership lease: the executor (or sessions service) whose id is the stream id holds its
 * containers for `leaseMs` from this event's timestamp. Appended when it starts and renewed
 * well before expiry; a sweeper on another host takes the owner as gone once the last lease
 * expired (plus a clock-skew allowance). Kept tiny: one is written every few seconds per
 * owner (ARCHITECTURE.md, "Ownership across hosts").
 *
 * @category schemas
 */
export const ExecutorLease = event("ExecutorLease", {
  leaseMs: Schema.Int.pipe(Schema.positive())
})

/**
 * The owner whose id is the stream id closed: it removed its containers itself, so any left
 * (a removal that gave up) are orphans at once. A later `ExecutorLease` (the same id reused)
 * opens a new lease.
 *
 * @category schemas
 */
export const ExecutorClosed = event("ExecutorClosed", {})

// --- unions ------------------------------------------------------------------------------

/**
 * Every event schema, in declaration order.
 *
 * @category schemas
 */
export const members = [
  ExecutionRequested,
  ContainerCreated,
  ContainerStarted,
  ContainerClaimed,
  ArtifactsCollected,
  ToolCallRequested,
  ToolCallCompleted,
  ToolCallFailed,
  ToolCallRefused,
  ContainerExited,
  ExecutionTimedOut,
  ExecutionInterrupted,
  ExecutionFailed,
  ContainerDestroyed,
  ExecutionCompleted,
  CodeRecorded,
  OutputRecorded,
  SessionOpened,
  SessionClaimed,
  SessionReconnected,
  SessionReplaced,
  SessionIdleExpired,
  SessionClosed,
  KernelStarted,
  CellExecuted,
  KernelRestarted,
  ProcessStarted,
  ProcessExited,
  ExecutorStats,
  ExecutorLease,
  ExecutorClosed
] as const

/**
 * @category schemas
 */
export const JournalEvent = Schema.Union(...members)

/**
 * @category models
 */
export type JournalEvent = typeof JournalEvent.Type

/**
 * @category models
 */
export type EventType = JournalEvent["type"]

/**
 * The payload type of one event type.
 *
 * @category models
 */
export type EventData<T extends EventType> = Extract<JournalEvent, { readonly type: T }>["data"]

/**
 * The event of one type.
 *
 * @category models
 */
export type EventOf<T extends EventType> = Extract<JournalEvent, { readonly type: T }>

/**
 * Event types that take part in an execution's or a container's lifecycle (the
 * projection folds these; session and executor events are not lifecycle events).
 *
 * @category constants
 */
export const lifecycleEventTypes = [
  "ExecutionRequested",
  "ContainerCreated",
  "ContainerStarted",
  "ContainerClaimed",
  "ArtifactsCollected",
  "ToolCallRequested",
  "ToolCallCompleted",
  "ToolCallFailed",
  "ToolCallRefused",
  "ContainerExited",
  "ExecutionTimedOut",
  "ExecutionInterrupted",
  "ExecutionFailed",
  "ContainerDestroyed",
  "ExecutionCompleted"
] as const satisfies ReadonlyArray<EventType>

/**
 * A session's Python kernel's events, in the session's stream (see {@link CellExecuted}).
 *
 * @category constants
 */
export const kernelEventTypes = [
  "KernelStarted",
  "CellExecuted",
  "KernelRestarted"
] as const satisfies ReadonlyArray<EventType>

/**
 * The audit trail's events (`recordCode: true`): a run's code and the head of its output, in its
 * stream (a cell's in the session's, with its `cellId`). Not lifecycle events.
 *
 * @category constants
 */
export const auditEventTypes = ["CodeRecorded", "OutputRecorded"] as const satisfies ReadonlyArray<EventType>

/**
 * All event types, in declaration order.
 *
 * @category constants
 */
export const eventTypes = [
  ...lifecycleEventTypes,
  ...auditEventTypes,
  "SessionOpened",
  "SessionClaimed",
  "SessionReconnected",
  "SessionReplaced",
  "SessionIdleExpired",
  "SessionClosed",
  ...kernelEventTypes,
  "ProcessStarted",
  "ProcessExited",
  "ExecutorStats",
  "ExecutorLease",
  "ExecutorClosed"
] as const satisfies ReadonlyArray<EventType>

// Compile-time check that the list above names every member of the union.
type _AllTypesListed = [EventType] extends [(typeof eventTypes)[number]] ? true : never
const _allTypesListed: _AllTypesListed = true

/**
 * The ownership-lease events of an executor stream (see {@link ExecutorLease}).
 *
 * @category constants
 */
export const leaseEventTypes = ["ExecutorLease", "ExecutorClosed"] as const satisfies ReadonlyArray<EventType>

/**
 * Events that end an execution (exactly one per lifecycle).
 *
 * @category constants
 */
export const terminalTypes = [
  "ContainerExited",
  "ExecutionTimedOut",
  "ExecutionInterrupted",
  "ExecutionFailed"
] as const satisfies ReadonlyArray<EventType>

/**
 * @category models
 */
export type TerminalType = (typeof terminalTypes)[number]

/**
 * @category guards
 */
export const isTerminal = (event: { readonly type: EventType }): event is EventOf<TerminalType> =>
  (terminalTypes as ReadonlyArray<EventType>).includes(event.type)

/**
 * @category guards
 */
export const isEventType = (u: unknown): u is EventType =>
  typeof u === "string" && (eventTypes as ReadonlyArray<string>).includes(u)

/**
 * Builds an event. Type-safe in both the type and the payload:
 *
 * ```ts
 * Event.make("ContainerStarted", { containerId })
 * ```
 *
 * No validation happens here (it is a plain object constructor); the journal validates
 * every event against its Schema when appending.
 *
 * @category constructors
 */
export const make = <const T extends EventType>(type: T, data: EventData<T>): EventOf<T> =>
  ({ type, data }) as EventOf<T>

// --- envelope --------------------------------------------------------------------------

/**
 * Version of the envelope/event encoding. Bumped on any incompatible change so that old
 * readers can refuse rows they would misread.
 *
 * @category constants
 */
export const SCHEMA_VERSION = 1 as const

/**
 * Who wrote the event: the executor, and the process it ran in (host, pid and the pid's
 * kernel start time, so that a later process reusing the pid is not taken for the writer).
 * `started` is absent in events written before it was recorded, and where /proc is not
 * available; it is an optional addition, so SCHEMA_VERSION stays 1.
 *
 * @category schemas
 */
export const EventMetadata = Schema.Struct({
  executorId: Schema.String,
  host: Schema.String,
  pid: Schema.Int,
  /** Kernel start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22). */
  started: Schema.optional(Schema.String)
})

/**
 * @category models
 */
export type EventMetadata = typeof EventMetadata.Type

const headerFields = {
  id: Schema.String,
  sequence: Schema.Int.pipe(Schema.positive()),
  streamId: Schema.String,
  version: Schema.Int.pipe(Schema.positive()),
  timestamp: Schema.Finite,
  schemaVersion: Schema.Literal(SCHEMA_VERSION),
  metadata: EventMetadata
}

const envelopeOf = <Type extends string, Data extends Schema.Struct.Fields>(
  member: Schema.Struct<{ type: Schema.tag<Type>; data: Schema.Struct<Data> }>
) =>
  Schema.Struct({
    id: headerFields.id,
    sequence: headerFields.sequence,
    streamId: headerFields.streamId,
    version: headerFields.version,
    timestamp: headerFields.timestamp,
    type: member.fields.type,
    data: member.fields.data,
    schemaVersion: headerFields.schemaVersion,
    metadata: headerFields.metadata
  })

/**
 * A committed event: the event plus its position in the journal (`sequence`, global,
 * gap-free from 1) and in its stream (`streamId`; `version`, from 1).
 *
 * @category schemas
 */
export const EventEnvelope = Schema.Union(
  envelopeOf(ExecutionRequested),
  envelopeOf(ContainerCreated),
  envelopeOf(ContainerStarted),
  envelopeOf(ContainerClaimed),
  envelopeOf(ArtifactsCollected),
  envelopeOf(ToolCallRequested),
  envelopeOf(ToolCallCompleted),
  envelopeOf(ToolCallFailed),
  envelopeOf(ToolCallRefused),
  envelopeOf(ContainerExited),
  envelopeOf(ExecutionTimedOut),
  envelopeOf(ExecutionInterrupted),
  envelopeOf(ExecutionFailed),
  envelopeOf(ContainerDestroyed),
  envelopeOf(ExecutionCompleted),
  envelopeOf(CodeRecorded),
  envelopeOf(OutputRecorded),
  envelopeOf(SessionOpened),
  envelopeOf(SessionClaimed),
  envelopeOf(SessionReconnected),
  envelopeOf(SessionReplaced),
  envelopeOf(SessionIdleExpired),
  envelopeOf(SessionClosed),
  envelopeOf(KernelStarted),
  envelopeOf(CellExecuted),
  envelopeOf(KernelRestarted),
  envelopeOf(ProcessStarted),
  envelopeOf(ProcessExited),
  envelopeOf(ExecutorStats),
  envelopeOf(ExecutorLease),
  envelopeOf(ExecutorClosed)
)

/**
 * @category models
 */
export type EventEnvelope = typeof EventEnvelope.Type

/**
 * The envelope of one event type (narrowed by `type`).
 *
 * @category models
 */
export type EnvelopeOf<T extends EventType> = Extract<EventEnvelope, { readonly type: T }>

/**
 * @category decoding
 */
export const decodeEvent = Schema.decodeUnknown(JournalEvent)

/**
 * @category decoding
 */
export const decodeEventSync = Schema.decodeUnknownSync(JournalEvent)

/**
 * @category decoding
 */
export const decodeEnvelope = Schema.decodeUnknown(EventEnvelope)

/**
 * @category decoding
 */
export const decodeEnvelopeSync = Schema.decodeUnknownSync(EventEnvelope)

/**
 * @category encoding
 */
export const encodeEvent = Schema.encode(JournalEvent)

/**
 * Validates an event against its Schema, returning it in its JSON-ready encoded form.
 *
 * @category encoding
 */
export const validateEvent = Schema.validate(JournalEvent)

/**
 * @category guards
 */
export const isJournalEvent = Schema.is(JournalEvent)
