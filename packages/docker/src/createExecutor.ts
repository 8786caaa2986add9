/**
 * The Promise facade, for users who do not use Effect:
 *
 *   await using executor = await createExecutor({ timeoutMs: 10_000 })
 *   const r = await executor.executeCode({ language: "python", code: "print(6*7)" })
 *
 * Errors are the SDK's typed error classes (check `error._tag` or `instanceof`),
 * never Effect's wrappers. An AbortSignal cancels an execution and removes its container.
 */
import { Layer } from "effect"
import type { Observable } from "rxjs"
import { type ExecuteOptions, type ExecuteRequest, type ExecutionResult, InvalidRequest } from "@hermes-sandbox/core"
import type { KubernetesRuntimeOptions } from "@hermes-sandbox/kubernetes/KubernetesRuntime"
import type { ExecutorStats } from "@hermes-sandbox/core/Executor"
import type { EventEnvelope } from "@hermes-sandbox/events"
import type { ReplayOptions } from "@hermes-sandbox/events/Journal"
import * as DockerExecutor from "./DockerExecutor.js"
import { executorOptionsFromHermes, type HermesConfigSource } from "./HermesOptions.js"
import { type FacadeJournal, facadeJournalLayer } from "./internal/facadeJournal.js"
import { openExecutorFacade } from "./internal/executorFacade.js"

export interface CreateExecutorOptions extends Omit<DockerExecutor.DockerExecutorOptions, "runtime"> {
  /**
   * Where lifecycle events are recorded: "memory" (default for the library: the last 10,000
   * events), { maxEvents } (in memory, that many), "default" (the journal at the default
   * location, as the CLI uses), { path } of a SQLite file, or a PostgreSQL URL ("postgres://…"
   * or { url }) that many executors on many hosts share (everything, durably).
   */
  readonly journal?: FacadeJournal
  /**
   * Apply the Hermes agent's `terminal:` configuration (true = ~/.hermes/config.yaml and TERMINAL_*)
   * under these options: image, limits, timeout, network, env and forwarded variables. A config
   * with docker_volumes is refused here (one-shot executions take no mounts): use createSession.
   */
  readonly hermesConfig?: HermesConfigSource
  /**
   * Where sandboxes run. On Docker (the default; the engine options above): the OCI runtime's name,
   * e.g. "runsc" for gVisor (default: the engine's, runc). Or a Kubernetes cluster:
   * `{ kubernetes: { namespace, kubeconfig?, context?, runtimeClassName?, allowDegraded?, … } }`,
   * one bare Pod per sandbox (docs/kubernetes.md; gVisor there is `runtimeClassName`). That needs
   * `@hermes-sandbox/kubernetes` installed.
   */
  readonly runtime?: DockerExecutor.DockerExecutorOptions["runtime"] | KubernetesChoice
}

/** `runtime: { kubernetes: … }`: sandboxes as Pods on a cluster. */
export interface KubernetesChoice {
  readonly kubernetes: KubernetesRuntimeOptions
}

/** The options without a Kubernetes choice (they are Docker's then), and the choice if made. */
export const splitRuntime = <O extends CreateExecutorOptions>(
  options: O
): {
  readonly docker: Omit<O, "runtime"> & DockerExecutor.DockerExecutorOptions
  readonly kubernetes?: KubernetesRuntimeOptions
} => {
  const { runtime, ...rest } = options
  // (Omit over a generic loses the optional properties' exactness; the object is the same but `runtime`.)
  type Docker = Omit<O, "runtime"> & DockerExecutor.DockerExecutorOptions
  if (typeof runtime === "object" && runtime !== null) return { docker: rest as Docker, kubernetes: runtime.kubernetes }
  return { docker: { ...rest, ...(runtime === undefined ? {} : { runtime }) } as Docker }
}

export interface ExecuteCallOptions extends ExecuteOptions {
  /** Cancels the execution; its container is removed before the promise rejects with ExecutionAborted. */
  readonly signal?: AbortSignal
}

export interface SandboxExecutor extends AsyncDisposable {
  readonly executorId: string
  executeCode(request: ExecuteRequest, options?: ExecuteCallOptions): Promise<ExecutionResult>
  /** Live lifecycle events (committed to the journal first). */
  readonly events$: Observable<EventEnvelope>
  /**
   * Past events of this executor's journal (the in-memory one too; `{ streamId }` for one
   * execution), completing after the last stored one. While open: after close() it errors with
   * ExecutorClosed (its journal closed with it; a SQLite journal can be read with openJournal).
   */
  replay(options?: ReplayOptions): Observable<EventEnvelope>
  stats(): Promise<ExecutorStats>
  /**
   * This executor's Prometheus metrics in the text exposition format, for a `/metrics` of your own
   * (content type `Metrics.CONTENT_TYPE` of `@hermes-sandbox/core`; docs/observability.md): a
   * registry of its own, never prom-client's global one.
   */
  metrics(): Promise<string>
  /** Interrupts running executions and resolves once every container is removed. Idempotent. */
  close(): Promise<void>
}

export { abortReason, squashCause } from "./internal/facadeCall.js"

/**
 * What this package uses of `@hermes-sandbox/kubernetes`, by module: its index's declarations reach
 * the Kubernetes client's, whose types need `ws`'s, which a Docker-only user does not have.
 */
export interface KubernetesPackage {
  readonly KubernetesExecutor: typeof import("@hermes-sandbox/kubernetes/KubernetesExecutor")
  readonly KubernetesRuntime: typeof import("@hermes-sandbox/kubernetes/KubernetesRuntime")
  readonly Doctor: typeof import("@hermes-sandbox/kubernetes/Doctor")
  readonly Guarantees: typeof import("@hermes-sandbox/kubernetes/Guarantees")
}

/**
 * import() of the package, or the one a host program lends (Symbol.for("hermes-sandbox.import")):
 * the CLI's launcher runs its bundle through vm.Script with V8's code cache, where Node 20 has no
 * import() (packages/cli/scripts/launcher.cjs).
 */
const importPackage = (): Promise<KubernetesPackage> => {
  const lent = (globalThis as Record<symbol, unknown>)[Symbol.for("hermes-sandbox.import")]
  return typeof lent === "function"
    ? (lent as (specifier: string) => Promise<KubernetesPackage>)("@hermes-sandbox/kubernetes")
    : import("@hermes-sandbox/kubernetes")
}

/** `@hermes-sandbox/kubernetes`, loaded only when asked: the Kubernetes client is large, and optional. */
export const importKubernetes = (): Promise<KubernetesPackage> =>
  importPackage().catch((error: unknown) => {
    throw new InvalidRequest({
      field: "runtime.kubernetes",
      value: "kubernetes",
      allowed: "a runtime whose package is installed (npm install @hermes-sandbox/kubernetes)",
      message: `runtime.kubernetes needs @hermes-sandbox/kubernetes, which cannot be loaded: ${String(error)}`
    })
  })

/** The options as given over the Hermes configuration's, when one is named (options given win). */
export const withHermesDefaults = <O extends CreateExecutorOptions>(explicit: O): O =>
  explicit.hermesConfig === undefined ? explicit : { ...executorOptionsFromHermes(explicit.hermesConfig), ...explicit }

export const createExecutor = async (explicit: CreateExecutorOptions = {}): Promise<SandboxExecutor> => {
  const { docker: options, kubernetes } = splitRuntime(withHermesDefaults(explicit))
  const journal = facadeJournalLayer(options.journal)
  if (kubernetes !== undefined) {
    const { KubernetesExecutor } = await importKubernetes()
    return (
      await openExecutorFacade(KubernetesExecutor.layer({ ...options, kubernetes }).pipe(Layer.provideMerge(journal)))
    ).executor
  }
  return (await openExecutorFacade(DockerExecutor.layer(options).pipe(Layer.provideMerge(journal)))).executor
}
