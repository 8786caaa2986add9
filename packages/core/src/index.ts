export * as Errors from "./Errors.js"
export * from "./Errors.js"
export * as Executor from "./Executor.js"
export type { ExecuteError, ExecuteOptions, ExecutorStats } from "./Executor.js"
export * from "./ExecutionRequest.js"
export * from "./ExecutionResult.js"
export * from "./ExecutorConfig.js"
export * from "./Labels.js"
export * from "./Language.js"
export * from "./OutputCapture.js"
export * from "./RunnerProtocol.js"
export * as RunnerProtocol from "./RunnerProtocol.js"
export * from "./SandboxRuntime.js"
export * as Schemas from "./Schemas.js"
export * as ProcessIdentity from "./ProcessIdentity.js"
export * as Sweep from "./Sweep.js"
export * as WarmPool from "./WarmPool.js"
export * as Fingerprint from "./Fingerprint.js"
export * as Session from "./Session.js"
export * as Mounts from "./Mounts.js"
export {
  type PersistentOptions,
  type RunOptions,
  type SessionCallError,
  type SessionCodeRequest,
  type SessionMount,
  type SessionOpenError,
  type SessionOptions,
  type SessionResult,
  type SessionScope,
  Sessions,
  type SessionsOptions,
  type SessionStatus
} from "./Session.js"
export * as SessionReaper from "./SessionReaper.js"
