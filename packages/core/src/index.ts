/**
 * @hermes-sandbox/core — the executor, sessions, the SandboxRuntime port and the errors.
 *
 * Modules are re-exported as namespaces (`Executor.Executor`, `Sweep.sweep`, `Labels.Label`), except
 * ExecutionResult, Language, OutputCapture and SandboxRuntime, whose main export carries the
 * module's name (a namespace would shadow it). The names of the errors, the request, result and
 * option types, the port, the labels and the runner protocol are also exported flat: that is the
 * contract the docker package, the CLI and users import by name. The fake runtime is only in
 * `./testing`.
 */
export * as Artifacts from "./Artifacts.js"
export type { CollectedFile, CollectionStatus, SkippedFile, SkipReason } from "./Artifacts.js"
// Tools are exported flat: `Tools` is the type of a run's tools (name -> Tool).
export {
  DEFAULT_TOOL_LIMITS,
  MAX_TOOL_LIMITS,
  planTools,
  RESERVED_TOOL_NAMES,
  resolveToolLimits,
  TOOL_NAME,
  ToolLimitsSchema
} from "./Tools.js"
export type { JsonSchema, PlannedTool, Tool, ToolContext, ToolLimits, ToolPlan, Tools, ToolSpec } from "./Tools.js"
export { toolModules } from "./tools/stubs.js"
export * as Errors from "./Errors.js"
export * from "./Errors.js"
export { errorJson } from "./ErrorJson.js"
export * as Executor from "./Executor.js"
export type { ExecuteError, ExecuteOptions, ExecutorStats } from "./Executor.js"
export * as ExecutionRequest from "./ExecutionRequest.js"
export * from "./ExecutionRequest.js"
export * from "./ExecutionResult.js"
export * as ExecutorConfig from "./ExecutorConfig.js"
export * from "./ExecutorConfig.js"
export * as Labels from "./Labels.js"
export * from "./Labels.js"
export * from "./Language.js"
export * from "./OutputCapture.js"
export * from "./RunnerProtocol.js"
export * as RunnerProtocol from "./RunnerProtocol.js"
export * as RunnerProtocolTable from "./RunnerProtocolTable.js"
export * from "./SandboxRuntime.js"
export * as Schemas from "./Schemas.js"
export * as OwnerLease from "./OwnerLease.js"
export type { OwnerLeaseOptions } from "./OwnerLease.js"
export * as ProcessIdentity from "./ProcessIdentity.js"
export * as Sweep from "./Sweep.js"
export * as WarmPool from "./WarmPool.js"
export * as Fingerprint from "./Fingerprint.js"
export * as Session from "./Session.js"
export * as Mounts from "./Mounts.js"
export {
  type FileCallOptions,
  type FileEntry,
  type ListFilesResult,
  type PersistentOptions,
  type ReadFileOptions,
  type ReadFileResult,
  type RunOptions,
  type SessionCallError,
  type SessionCodeRequest,
  type SessionFileError,
  type SessionMount,
  type SessionOpenError,
  type SessionOptions,
  type SessionResult,
  type SessionScope,
  Sessions,
  type SessionsOptions,
  type SessionStatus,
  type WriteFileOptions,
  type WriteFileResult
} from "./Session.js"
export * as SessionReaper from "./SessionReaper.js"
