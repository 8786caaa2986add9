export { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "./createExecutor.js"
export * as ContainerSpec from "./ContainerSpec.js"
export * as DockerEngine from "./DockerEngine.js"
export * as DockerExecutor from "./DockerExecutor.js"
export * as DockerRuntime from "./DockerRuntime.js"
export * from "@hermes-sandbox/core"
export * as Watchdog from "./Watchdog.js"
export {
  createSession,
  type CreateSessionOptions,
  type HermesSandbox,
  openHermesSandbox,
  openPersistent,
  type OpenPersistentOptions,
  type SandboxSession,
  type SessionCallOptions
} from "./createSession.js"
export * as DiskQuota from "./DiskQuota.js"
export * as DockerSessions from "./DockerSessions.js"
export * as HermesConfig from "./HermesConfig.js"
export * as ResourceLimits from "./ResourceLimits.js"
export * as SandboxUid from "./SandboxUid.js"
export { fromHermesConfig, type HermesConfigSource, type HermesSandboxOptions } from "./HermesOptions.js"
export { DEFAULT_MEMORY_EVENTS, type FacadeJournal } from "./internal/facadeJournal.js"
