/**
 * An Executor and Sessions over ONE runtime and identity, whatever the runtime (Docker's
 * DockerExecutor.layerWithSessions, Kubernetes' KubernetesExecutor.layerWithSessions: what the MCP
 * server runs on): one-shot runs and session sandboxes in one journal, one startup sweep (the
 * executor's) and one Prometheus registry. `sessions` are the session service's own options (its
 * image, runner); the sandbox defaults (limits, network, runtime, env) are the executor's.
 */
import { Layer } from "effect"
import type { Journal } from "@hermes-sandbox/events"
import type { InvalidRequest } from "./Errors.js"
import * as Executor from "./Executor.js"
import type { ExecutorOptions } from "./ExecutorConfig.js"
import * as Metrics from "./Metrics.js"
import type { SandboxRuntime } from "./SandboxRuntime.js"
import * as Session from "./Session.js"
import * as Tracing from "./Tracing.js"

/** The session service's own options (the sandbox defaults are the executor's). */
export type SessionServiceOptions = Pick<Session.SessionsOptions, "sessionImage" | "runner" | "reapOnStart" | "pool">

export const layer = (
  options: ExecutorOptions & { readonly executorId: string; readonly sessions?: SessionServiceOptions | undefined }
): Layer.Layer<Executor.Executor | Session.Sessions, InvalidRequest, SandboxRuntime | Journal.Journal> => {
  // The executor's queue and pool are its own; the rest are the sessions' sandbox defaults too.
  const {
    sessions,
    maxConcurrency: _c,
    maxQueue: _q,
    whenQueueFull: _w,
    warmPool: _p,
    awaitRemoval: _r,
    ...defaults
  } = options
  return Layer.merge(Executor.layer(options), Session.layer({ ...defaults, ...sessions, sweepOnStart: false })).pipe(
    // One Prometheus registry for both (Metrics.ts): executor.metrics covers the sessions too.
    Layer.provide(Metrics.layer()),
    // Built first, ended last: the spans of the last removals are exported before it shuts down.
    Layer.provideMerge(Tracing.layer())
  )
}
