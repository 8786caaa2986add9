/**
 * The services behind the Promise facades, for a facade of one's own built on them (the MCP
 * server): an Executor and Sessions over one engine connection, runtime, watchdog and journal,
 * configured like createExecutor (Hermes configuration, journal choice), logging to standard
 * error (a stdio protocol owns standard output); and the facades' bridge from an Effect call to a
 * Promise, so an AbortSignal interrupts a call the same way everywhere.
 */
import { Layer } from "effect"
import { type Executor, InvalidRequest, type SandboxError, type SandboxRuntime } from "@hermes-sandbox/core"
import type { Sessions } from "@hermes-sandbox/core/Session"
import type { Journal } from "@hermes-sandbox/events"
import { type CreateExecutorOptions, splitRuntime, withHermesDefaults } from "./createExecutor.js"
import type * as DockerEngine from "./DockerEngine.js"
import * as DockerExecutor from "./DockerExecutor.js"
import { facadeJournalLayer } from "./internal/facadeJournal.js"
import { withFacadeLogger } from "./internal/facadeLogger.js"

export { abortReason, type CallWording, runAbortable, squashCause } from "./internal/facadeCall.js"

export interface SandboxServicesOptions extends CreateExecutorOptions {
  /** The session service's own options (the sandbox defaults are the executor's). */
  readonly sessions?: DockerExecutor.SessionServiceOptions
}

export type SandboxServices =
  | Executor.Executor
  | Sessions
  | Journal.Journal
  | DockerEngine.DockerEngine
  | SandboxRuntime

/** Executor + Sessions + Journal, built as createExecutor builds its executor. */
export const layer = (
  explicit: SandboxServicesOptions = {}
): Layer.Layer<SandboxServices, InvalidRequest | SandboxError | unknown> => {
  const { docker: options, kubernetes } = splitRuntime(withHermesDefaults(explicit))
  if (kubernetes !== undefined)
    return Layer.fail(
      new InvalidRequest({
        field: "runtime.kubernetes",
        value: "kubernetes",
        allowed: "Docker (no runtime.kubernetes): sessions and the MCP server do not run on Kubernetes yet",
        message:
          "invalid runtime.kubernetes: sessions and the MCP server do not run on Kubernetes yet (one-shot executions do: createExecutor)"
      })
    )
  return withFacadeLogger(
    DockerExecutor.layerWithSessions(options).pipe(Layer.provideMerge(facadeJournalLayer(options.journal)))
  )
}
