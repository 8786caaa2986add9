/**
 * Layers that compose the Executor over Docker, for Effect users:
 *
 *   program.pipe(Effect.provide(DockerExecutor.layer({ timeoutMs: 10_000 })), Effect.provide(MemoryJournal.layer()))
 *
 * Composition: engine connection -> runtime + watchdog -> executor. The
 * executor is built last and closed first, so its finalizers (remove every
 * container) run while the engine connection and the watchdog still exist.
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
import * as DockerEngine from "./DockerEngine.js"
import * as DockerRuntime from "./DockerRuntime.js"
import * as Watchdog from "./Watchdog.js"

export interface DockerExecutorOptions
  extends ExecutorOptions,
    DockerEngine.DockerEngineOptions,
    DockerRuntime.DockerRuntimeOptions {
  /** A detached process that removes this executor's containers if the process dies (even by SIGKILL). Default true. */
  readonly watchdog?: boolean
}

/** The Docker runtime with its engine connection. */
export const runtimeLayer = (options: DockerEngine.DockerEngineOptions & DockerRuntime.DockerRuntimeOptions = {}) =>
  DockerRuntime.layer(options).pipe(Layer.provideMerge(DockerEngine.layer(options)))

/** The engine connection, the runtime and (unless turned off) the watchdog of `executorId`. */
const infraLayer = (options: DockerExecutorOptions, executorId: string) => {
  const watchdog = options.watchdog === false ? Layer.empty : Layer.scopedDiscard(Watchdog.forEngine(executorId))
  return Layer.merge(DockerRuntime.layer(options), watchdog).pipe(Layer.provideMerge(DockerEngine.layer(options)))
}

/** An Executor over Docker. Needs a Journal (MemoryJournal.layer() or SqliteJournal.layer). */
export const layer = (
  options: DockerExecutorOptions = {}
): Layer.Layer<
  Executor.Executor | DockerEngine.DockerEngine | SandboxRuntime,
  InvalidRequest | SandboxError,
  Journal.Journal
> => {
  const executorId = options.executorId ?? uuidv7()
  return Executor.layer({ ...options, executorId }).pipe(
    Layer.provideMerge(infraLayer(options, executorId)),
    // OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set; ended last, after the executor's removals.
    Layer.provideMerge(Tracing.layer())
  )
}

/**
 * An Executor and Sessions over ONE engine connection, runtime, watchdog and identity (the MCP
 * server: one-shot runs and session sandboxes in one journal, both covered by one watchdog and
 * one startup sweep, the executor's): ExecutorWithSessions over Docker.
 */
export type SessionServiceOptions = ExecutorWithSessions.SessionServiceOptions

export const layerWithSessions = (
  options: DockerExecutorOptions & { readonly sessions?: SessionServiceOptions } = {}
): Layer.Layer<
  Executor.Executor | Sessions | DockerEngine.DockerEngine | SandboxRuntime,
  InvalidRequest | SandboxError,
  Journal.Journal
> => {
  const executorId = options.executorId ?? uuidv7()
  return ExecutorWithSessions.layer({ ...options, executorId }).pipe(
    Layer.provideMerge(infraLayer(options, executorId))
  )
}
