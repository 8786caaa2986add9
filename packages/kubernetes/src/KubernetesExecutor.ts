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
  type InvalidRequest,
  type SandboxError,
  type SandboxRuntime
} from "@hermes-sandbox/core"
import type { Journal } from "@hermes-sandbox/events"
import * as KubernetesRuntime from "./KubernetesRuntime.js"

export interface KubernetesExecutorOptions extends ExecutorOptions {
  readonly kubernetes: KubernetesRuntime.KubernetesRuntimeOptions
}

/** An Executor over Kubernetes. Needs a Journal (MemoryJournal.layer() or a SQLite / PostgreSQL one). */
export const layer = (
  options: KubernetesExecutorOptions
): Layer.Layer<Executor.Executor | SandboxRuntime, InvalidRequest | SandboxError, Journal.Journal> => {
  const executorId = options.executorId ?? uuidv7()
  return Executor.layer({ ...options, executorId }).pipe(
    Layer.provideMerge(KubernetesRuntime.layer(options.kubernetes))
  )
}
