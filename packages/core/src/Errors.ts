/**
 * Every way an execution can fail, one tagged class per kind, so callers can
 * `Effect.catchTag` exactly what they handle. A non-zero exit, a timeout or an
 * OOM kill of the sandboxed program is NOT an error: it is a result.
 */
import { Schema } from "effect"

/** The request or the executor options are invalid. Raised before any container exists. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  field: Schema.String,
  value: Schema.Unknown,
  allowed: Schema.String,
  message: Schema.String
}) {}

/** An InvalidRequest whose message names the field, the value and what is allowed. */
export const invalidRequest = (field: string, value: unknown, allowed: string): InvalidRequest =>
  new InvalidRequest({
    field,
    value,
    allowed,
    message: `invalid ${field}: got ${describeValue(value)}; allowed: ${allowed}`
  })

/** The engine cannot be reached (or stopped answering): names what was tried and how to start one. */
export class DockerUnavailable extends Schema.TaggedError<DockerUnavailable>()("DockerUnavailable", {
  endpoint: Schema.String,
  operation: Schema.String,
  message: Schema.String,
  hint: Schema.String
}) {}

/** The sandbox image is missing: names the image and the exact command that builds it. */
export class ImageNotFound extends Schema.TaggedError<ImageNotFound>()("ImageNotFound", {
  image: Schema.String,
  buildCommand: Schema.String,
  message: Schema.String
}) {}

/**
 * Why a ContainerFailed happened, so no caller matches HTTP codes or message text:
 * - "setup": the sandbox's supervisor could not set the run up (a file it could not write, a
 *   missing interpreter); the program never ran
 * - "protocol": the sandbox's report channel carried bytes its supervisor did not write, or the
 *   image does not speak this SDK's runner protocol; nothing it reported was used
 * - "session-locked": a session call never got the session's lock within its deadline
 * - "kernel-held": a session's Python kernel could not start: another process's kernel runs in the
 *   sandbox (a persistent sandbox held by two processes; one kernel per sandbox)
 * - "conflict": the engine refused the operation as conflicting with the container's name or
 *   state (HTTP 409): on create, the name is taken; on kill or exec, it is not running
 * - "not-found": the container does not exist (any more) (HTTP 404)
 * - "already-started": a start of a container that already runs (HTTP 304)
 * - "killed-externally": something outside the SDK (the engine stopping, docker stop/kill)
 *   killed the sandbox; the program did not finish
 * - "limits-unsupported": the engine cannot apply, or discarded, a hard resource limit
 *   (memory, swap, pids, CPU); the program was not run
 * - "quota-unsupported": a disk quota was asked for and the engine's storage cannot apply it
 * - "uids-exhausted": sandboxUid "per-sandbox" and every uid of the range is held by a live sandbox
 * - "guarantee-unavailable": the runtime cannot give one of a sandbox's guarantees (Kubernetes: a pids
 *   limit, ulimits, …, each named in the message) and the executor was not told to run without it
 *   (allowDegraded); nothing was created
 * - "tool-calls": the code made more refused tool calls than a run may (a flood): the run was ended
 * - "journal-budget": the run's tool calls would have written more to the journal than a run may
 *   (ToolLimits.maxJournalEvents / maxJournalBytes): the run was ended
 * - "engine": any other failure the engine reported (its message says which), e.g. a full disk
 */
export const ContainerFailureReason = Schema.Literal(
  "setup",
  "protocol",
  "session-locked",
  "kernel-held",
  "conflict",
  "not-found",
  "already-started",
  "killed-externally",
  "limits-unsupported",
  "quota-unsupported",
  "uids-exhausted",
  "guarantee-unavailable",
  "tool-calls",
  "journal-budget",
  "engine"
)
export type ContainerFailureReason = typeof ContainerFailureReason.Type

/**
 * The engine refused or failed an operation on a container; carries the engine's own message.
 * Branch on `reason`; `statusCode` (the engine's HTTP status, when it answered) is diagnostic.
 */
export class ContainerFailed extends Schema.TaggedError<ContainerFailed>()("ContainerFailed", {
  operation: Schema.String,
  containerName: Schema.String,
  statusCode: Schema.optional(Schema.Number),
  /** Defaults to "engine": a failure nobody classified is the engine's (and old encodings lack it). */
  reason: Schema.optionalWith(ContainerFailureReason, { default: () => "engine" }),
  message: Schema.String
}) {}

/** The executor's queue is full and the caller asked not to wait. */
export class QueueFull extends Schema.TaggedError<QueueFull>()("QueueFull", {
  inFlight: Schema.Number,
  queued: Schema.Number,
  maxQueue: Schema.Number,
  message: Schema.String
}) {}

/** The executor was closed before or while the request ran. */
export class ExecutorClosed extends Schema.TaggedError<ExecutorClosed>()("ExecutorClosed", {
  message: Schema.String
}) {}

/** The execution was cancelled (AbortSignal in the Promise API). The container is already gone. */
export class ExecutionAborted extends Schema.TaggedError<ExecutionAborted>()("ExecutionAborted", {
  executionId: Schema.String,
  reason: Schema.String,
  message: Schema.String
}) {}

/** The session was closed, expired or destroyed; its container is gone (or, persistent, detached). */
export class SessionEnded extends Schema.TaggedError<SessionEnded>()("SessionEnded", {
  sessionId: Schema.String,
  reason: Schema.String,
  message: Schema.String
}) {}

/**
 * A session's Python kernel cannot run in this sandbox: its image's supervisor lacks the `kernel`
 * feature (built before kernels: rebuild the images), or its Python has no IPython (the kernel's
 * driver failed before it was ready). Raised by `runCell` before any cell ran; the session lives on.
 */
export class KernelUnavailable extends Schema.TaggedError<KernelUnavailable>()("KernelUnavailable", {
  sessionId: Schema.String,
  image: Schema.String,
  message: Schema.String
}) {}

/**
 * A persistent sandbox exists for this profile but was made with another configuration
 * (image, limits, mounts or env names), and the caller asked to refuse rather than replace it.
 */
export class SessionConfigMismatch extends Schema.TaggedError<SessionConfigMismatch>()("SessionConfigMismatch", {
  profile: Schema.String,
  containerName: Schema.String,
  differences: Schema.Array(Schema.String),
  message: Schema.String
}) {}

/** Which of a session's file operations failed (`search`: searchFiles' grep or find, session/edit.ts). */
export const FileOperation = Schema.Literal("read", "write", "list", "remove", "search")
export type FileOperation = typeof FileOperation.Type

/** A session's file operation named a path that does not exist (the supervisor's ENOENT). */
export class FileNotFound extends Schema.TaggedError<FileNotFound>()("FileNotFound", {
  operation: FileOperation,
  /** The path as resolved in the sandbox (absolute, normalized). */
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * A session's file operation that the sandbox refused or could not do, with the errno name its
 * supervisor reported in `code` (as Node's fs errors): ELOOP (a symlink on the way or at the end:
 * never followed), ENOTDIR, EISDIR, EINVAL (not a regular file: a FIFO, a socket, a device),
 * ENOTEMPTY, ENOSPC / EFBIG / EDQUOT (the sandbox's space), EROFS, EACCES / EPERM (permissions in
 * the sandbox), EIO; or ETIMEDOUT: the host's deadline passed before the sandbox replied (a write
 * may then be partly done). A
 * missing path is FileNotFound; a path outside the writable roots is an InvalidRequest, refused
 * before anything runs. (Not the MCP server's FileOperationFailed, which classifies a tool's failure.)
 */
export class SandboxFileError extends Schema.TaggedError<SandboxFileError>()("SandboxFileError", {
  operation: FileOperation,
  path: Schema.String,
  code: Schema.String,
  message: Schema.String
}) {}

/**
 * A patch (a session's `patchFile`, session/edit.ts) that could not be applied; the file is left as
 * it was. `no-match`: the old text (or a diff hunk's lines) is not in the file; `ambiguous`: the old
 * text occurs more than once and `replaceAll` was not asked; `too-large`: the file, or what the
 * patch would make of it, is over the limit; `malformed-diff`: the diff is not a unified diff of
 * one file. `matches` and `lines` (1-based, the first 20) say where the old text occurs.
 */
export class PatchFailed extends Schema.TaggedError<PatchFailed>()("PatchFailed", {
  path: Schema.String,
  reason: Schema.Literal("no-match", "ambiguous", "too-large", "malformed-diff"),
  matches: Schema.Number,
  lines: Schema.Array(Schema.Number),
  message: Schema.String
}) {}

/** What the runtime port can fail with. */
export type SandboxError = DockerUnavailable | ImageNotFound | ContainerFailed

/**
 * How a message quotes a value ("got ..."), the one way for every message: short strings and
 * structures as JSON, long ones summarised (they may be code, or worse), null and undefined as "nothing".
 */
export const describeValue = (value: unknown): string => {
  if (typeof value === "string")
    return value.length > 80 ? `a string of ${value.length} characters` : JSON.stringify(value)
  if (value === null || value === undefined) return "nothing"
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value)
  try {
    const json = JSON.stringify(value)
    if (json !== undefined) return json.length > 80 ? `${json.slice(0, 77)}...` : json
  } catch {
    // a cycle: fall through
  }
  return typeof value
}
