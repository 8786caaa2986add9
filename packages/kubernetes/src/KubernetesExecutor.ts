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
  Metrics,
  type ExecutorOptions,
  type InvalidRequest,
  type SandboxError,
  type SandboxRuntime,
  Session
} from "@hermes-sandbox/core"
import type { Sessions, SessionsOptions } from "@hermes-sandbox/core/Session"
import type { Journal } from "@hermes-sandbox/events"
import * as KubernetesRuntime from "./KubernetesRuntime.js"

export interface KubernetesExecutorOptions extends ExecutorOptions {
  readonly kubernetes: KubernetesRuntime.KubernetesRuntimeOptions
}

/** The session service's own options (the sandbox defaults are the executor's), as on Docker. */
export type SessionServiceOptions = Pick<SessionsOptions, "sessionImage" | "runner" | "reapOnStart" | "pool">

/** An Executor over Kubernetes. Needs a Journal (MemoryJournal.layer() or a SQLite / PostgreSQL one). */
export const layer = (
  options: KubernetesExecutorOptions
): Layer.Layer<Executor.Executor | SandboxRuntime, InvalidRequest | SandboxError, Journal.Journal> => {
  const executorId = options.executorId ?? uuidv7()
  return Executor.layer({ ...options, executorId }).pipe(
    Layer.provideMerge(KubernetesRuntime.layer(options.kubernetes))
  )
}

/**
 * An Executor and Sessions over ONE runtime (one API connection) and identity, as
 * DockerExecutor.layerWithSessions (the MCP server): one-shot runs and session sandboxes in one
 * journal and one startup sweep, the executor's.
 */
export const layerWithSessions = (
  options: KubernetesExecutorOptions & { readonly sessions?: SessionServiceOptions | undefined }
): Layer.Layer<Executor.Executor | Sessions | SandboxRuntime, InvalidRequest | SandboxError, Journal.Journal> => {
  const executorId = options.executorId ?? uuidv7()
  const {
    sessions,
    kubernetes,
    maxConcurrency: _c,
    maxQueue: _q,
    whenQueueFull: _w,
    warmPool: _p,
    awaitRemoval: _r,
    ...defaults
  } = options
  return Layer.merge(
    Executor.layer({ ...options, executorId }),
    Session.layer({ ...defaults, ...sessions, executorId, sweepOnStart: false })
  ).pipe(
    // One Prometheus registry for both (Metrics.ts): executor.metrics covers the sessions too.
    Layer.provide(Metrics.layer()),
    Layer.provideMerge(KubernetesRuntime.layer(kubernetes))
  )
}
