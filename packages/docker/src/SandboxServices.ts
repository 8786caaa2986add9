/**
 * The services behind the Promise facades, for a facade of one's own built on them (the MCP
 * server): an Executor and Sessions over one runtime (Docker's engine connection and watchdog, or
 * a Kubernetes cluster with `runtime: { kubernetes }`) and one journal,
 * configured like createExecutor (Hermes configuration, journal choice), logging to standard
 * error (a stdio protocol owns standard output); and the facades' bridge from an Effect call to a
 * Promise, so an AbortSignal interrupts a call the same way everywhere.
 */
import { Effect, Layer } from "effect"
import type { Executor, InvalidRequest, SandboxError, SandboxRuntime } from "@hermes-sandbox/core"
import type { Sessions } from "@hermes-sandbox/core/Session"
import type { Journal } from "@hermes-sandbox/events"
import { type CreateExecutorOptions, importKubernetes, splitRuntime, withHermesDefaults } from "./createExecutor.js"
import * as DockerExecutor from "./DockerExecutor.js"
import { facadeJournalLayer } from "./internal/facadeJournal.js"
import { withFacadeLogger } from "./internal/facadeLogger.js"

export { abortReason, type CallWording, runAbortable, squashCause } from "./internal/facadeCall.js"

export interface SandboxServicesOptions extends CreateExecutorOptions {
  /** The session service's own options (the sandbox defaults are the executor's). */
  readonly sessions?: DockerExecutor.SessionServiceOptions
}

/** (On Docker the layer gives the DockerEngine too; on Kubernetes there is none.) */
export type SandboxServices = Executor.Executor | Sessions | Journal.Journal | SandboxRuntime

/** Executor + Sessions + Journal, built as createExecutor builds its executor. */
export const layer = (
  explicit: SandboxServicesOptions = {}
): Layer.Layer<SandboxServices, InvalidRequest | SandboxError | unknown> => {
  const { docker: options, kubernetes } = splitRuntime(withHermesDefaults(explicit))
  const services: Layer.Layer<Exclude<SandboxServices, Journal.Journal>, unknown, Journal.Journal> = kubernetes ===
  undefined
    ? DockerExecutor.layerWithSessions(options)
    : Layer.unwrapEffect(
        Effect.map(Effect.tryPromise({ try: importKubernetes, catch: (error) => error }), ({ KubernetesExecutor }) =>
          KubernetesExecutor.layerWithSessions({ ...options, kubernetes })
        )
      )
  return withFacadeLogger(services.pipe(Layer.provideMerge(facadeJournalLayer(options.journal))))
}
