/**
 * Layers that compose Sessions over Docker, for Effect users:
 *
 *   Effect.gen(function*() {
 *     const sessions = yield* Sessions
 *     const s = yield* sessions.open({ lifetimeSeconds: 300 })
 *     yield* s.run("cd /tmp && export A=1")
 *   }).pipe(Effect.provide(DockerSessions.layer()), Effect.provide(MemoryJournal.layer()))
 *
 * Composition as in DockerExecutor: engine connection -> runtime + watchdog -> sessions. The
 * watchdog removes this process's SESSION sandboxes if it dies (executor label); persistent
 * sandboxes carry no executor label and outlive it by design.
 */
import { Layer } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type InvalidRequest, type SandboxError, type SandboxRuntime, Session } from "@hermes-sandbox/core"
import { type Sessions, type SessionsOptions } from "@hermes-sandbox/core/Session"
import type { Journal } from "@hermes-sandbox/events"
import * as DockerEngine from "./DockerEngine.js"
import * as DockerRuntime from "./DockerRuntime.js"
import * as Watchdog from "./Watchdog.js"

export interface DockerSessionsOptions
  extends SessionsOptions,
    DockerEngine.DockerEngineOptions,
    DockerRuntime.DockerRuntimeOptions {
  /** A detached process that removes this process's session sandboxes if it dies (even by SIGKILL). Default true. */
  readonly watchdog?: boolean
}

/** Sessions over Docker. Needs a Journal (MemoryJournal.layer() or SqliteJournal.layer). */
export const layer = (
  options: DockerSessionsOptions = {}
): Layer.Layer<
  Sessions | DockerEngine.DockerEngine | SandboxRuntime,
  InvalidRequest | SandboxError,
  Journal.Journal
> => {
  const executorId = options.executorId ?? uuidv7()
  const watchdog = options.watchdog === false ? Layer.empty : Layer.scopedDiscard(Watchdog.forEngine(executorId))
  const infra = Layer.merge(DockerRuntime.layer(options), watchdog).pipe(
    Layer.provideMerge(DockerEngine.layer(options))
  )
  return Session.layer({ ...options, executorId }).pipe(Layer.provideMerge(infra))
}
