/**
 * @hermes-sandbox/core — the executor, sessions, the SandboxRuntime port and the errors.
 *
 * Modules are exported as namespaces (`Executor.Executor`, `Session.Sessions`, `Labels.Label`,
 * `Sweep.sweep`). Flat, and nowhere else on this entry: the error classes, the modules whose main
 * export carries the module's name (ExecutionResult, Language, OutputCapture, SandboxRuntime: a
 * namespace would shadow it), `errorJson`, and the few types users write in their own signatures
 * (ExecuteRequest, the option types, Tool and Tools).
 *
 * Every top-level module is also an entry of its own (`@hermes-sandbox/core/Labels`,
 * `@hermes-sandbox/core/Tools`); `internal/`, `kernel/`, `session/` and `tools/` are not exported.
 * The runner protocol (the frame codec the docker runtime speaks to the supervisor) is only the
 * entry `@hermes-sandbox/core/RunnerProtocol`: shared with the docker package, not an API for
 * users. The fake runtime is only in `./testing`.
 */
export * as Artifacts from "./Artifacts.js"
export * as CellLineage from "./CellLineage.js"
export * as ExecutionRequest from "./ExecutionRequest.js"
export * as Executor from "./Executor.js"
export * as ExecutorConfig from "./ExecutorConfig.js"
export * as ExecutorWithSessions from "./ExecutorWithSessions.js"
export * as Fingerprint from "./Fingerprint.js"
export * as Labels from "./Labels.js"
export * as Metrics from "./Metrics.js"
export * as Mounts from "./Mounts.js"
export * as OwnerLease from "./OwnerLease.js"
export * as ProcessIdentity from "./ProcessIdentity.js"
export * as Schemas from "./Schemas.js"
export * as Session from "./Session.js"
export * as SessionReaper from "./SessionReaper.js"
export * as Sweep from "./Sweep.js"
export * as Tracing from "./Tracing.js"
export * as WarmPool from "./WarmPool.js"

// Modules named after their main export.
export * from "./CellResult.js"
export type { DoctorCheck } from "./DoctorCheck.js"
export * from "./ExecutionResult.js"
export * from "./Language.js"
export * from "./OutputCapture.js"
export * from "./SandboxRuntime.js"

// The errors (each a Schema.TaggedError; `catchTag` names them) and their JSON form.
export {
  ContainerFailed,
  ContainerFailureReason,
  DockerUnavailable,
  ExecutionAborted,
  ExecutorClosed,
  FileNotFound,
  ImageNotFound,
  InvalidRequest,
  KernelUnavailable,
  PatchFailed,
  QueueFull,
  type SandboxError,
  SandboxFileError,
  SessionConfigMismatch,
  SessionEnded
} from "./Errors.js"
export { errorJson } from "./ErrorJson.js"

// The types users name in their own code.
export type { ExecuteRequest } from "./ExecutionRequest.js"
export type { ExecuteError, ExecuteOptions } from "./Executor.js"
export type { ExecutorOptions, SandboxDefaults } from "./ExecutorConfig.js"
export type { PersistentOptions, SessionOptions } from "./Session.js"
export type { Tool, ToolContext, ToolLimits, Tools, ToolSpec } from "./Tools.js"
