/**
 * @hermes-sandbox/docker — the SandboxRuntime over a Docker engine, its Effect layers, and the
 * Promise facades.
 *
 * Its modules are re-exported as namespaces (`DockerExecutor.layer(...)`, `HermesConfig.load(...)`);
 * the Promise facades (createExecutor, createSession, createSessions, openPersistent, openHermesSandbox,
 * fromHermesConfig) and their option and result types by name, and only by name (HermesOptions is
 * not a namespace here; its other export is the entry `@hermes-sandbox/docker/HermesOptions`).
 * `internal/` is not exported; the known_hosts matcher the remote suites test is in `./testing`. Nothing of
 * @hermes-sandbox/core is re-exported: the executor, the session service, the errors and the
 * port come from core (`import { Executor, ContainerFailed } from "@hermes-sandbox/core"`).
 */
export * as ContainerSpec from "./ContainerSpec.js"
export * as DiskQuota from "./DiskQuota.js"
export * as DockerContext from "./DockerContext.js"
export * as DockerEngine from "./DockerEngine.js"
export * as DockerExecutor from "./DockerExecutor.js"
export * as DockerRuntime from "./DockerRuntime.js"
export * as DockerSessions from "./DockerSessions.js"
export * as EngineEndpoint from "./EngineEndpoint.js"
export * as HermesConfig from "./HermesConfig.js"
export * as ImageBuild from "./ImageBuild.js"
export * as ResourceLimits from "./ResourceLimits.js"
export * as SandboxUid from "./SandboxUid.js"
export * as SandboxServices from "./SandboxServices.js"
export * as Seccomp from "./Seccomp.js"
export * as Watchdog from "./Watchdog.js"

export {
  createExecutor,
  type CreateExecutorOptions,
  type ExecuteCallOptions,
  importKubernetes,
  type KubernetesChoice,
  type SandboxExecutor
} from "./createExecutor.js"
export {
  createSession,
  type CreateSessionOptions,
  createSessions,
  type CreateSessionsOptions,
  type FileOperationOptions,
  type HermesSandbox,
  openHermesSandbox,
  openPersistent,
  type OpenPersistentOptions,
  type SandboxProcess,
  type SandboxSession,
  type SandboxSessions,
  type SessionCallOptions,
  type SessionsOpenOptions
} from "./createSession.js"
export { fromHermesConfig, type HermesConfigSource, type HermesSandboxOptions } from "./HermesOptions.js"
export { DEFAULT_MEMORY_EVENTS, type FacadeJournal } from "./internal/facadeJournal.js"
