/**
 * The Executor (and Sessions) over Kubernetes, for Effect users, as DockerExecutor is over Docker:
 *
 *   program.pipe(Effect.provide(KubernetesExecutor.layer({ kubernetes: { namespace: "sandboxes" } })), Effect.provide(MemoryJournal.layer()))
 *
 * There is no watchdog process: a pod's own `activeDeadlineSeconds` (the sandbox's deadline label)
 * ends it if this process dies, and the startup sweep removes what is left.
 */
import { Layer } from "effect"
import { v7 as uuidv7 } from "uuid"
import {
  Executor,
  type ExecutorOptions,
  ExecutorWithSessions,
  type InvalidRequest,
  type SandboxError,
  type SandboxRuntime,
  Tracing
} from "@hermes-sandbox/core"
import type { Sessions } from "@hermes-sandbox/core/Session"
import type { Journal } from "@hermes-sandbox/events"
import * as KubernetesRuntime from "./KubernetesRuntime.js"

export interface KubernetesExecutorOptions extends ExecutorOptions {
  readonly kubernetes: KubernetesRuntime.KubernetesRuntimeOptions
}

/** The session service's own options (the sandbox defaults are the executor's), as on Docker. */
export type SessionServiceOptions = ExecutorWithSessions.SessionServiceOptions

/** An Executor over Kubernetes. Needs a Journal (MemoryJournal.layer() or a SQLite / PostgreSQL one). */
export const layer = (
  options: KubernetesExecutorOptions
): Layer.Layer<Executor.Executor | SandboxRuntime, InvalidRequest | SandboxError, Journal.Journal> => {
  const executorId = options.executorId ?? uuidv7()
  return Executor.layer({ ...options, executorId }).pipe(
    Layer.provideMerge(KubernetesRuntime.layer(options.kubernetes)),
    // OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set; ended last, after the executor's removals.
    Layer.provideMerge(Tracing.layer())
  )
}

/**
 * An Executor and Sessions over ONE runtime (one API connection) and identity, as
 * DockerExecutor.layerWithSessions (the MCP server): ExecutorWithSessions over Kubernetes.
 */
export const layerWithSessions = (
  options: KubernetesExecutorOptions & { readonly sessions?: SessionServiceOptions | undefined }
): Layer.Layer<Executor.Executor | Sessions | SandboxRuntime, InvalidRequest | SandboxError, Journal.Journal> => {
  const { kubernetes, ...rest } = options
  return ExecutorWithSessions.layer({ ...rest, executorId: options.executorId ?? uuidv7() }).pipe(
    Layer.provideMerge(KubernetesRuntime.layer(kubernetes))
  )
}
