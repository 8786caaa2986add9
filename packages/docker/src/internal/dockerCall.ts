/**
 * Every engine call goes through here: it gets a deadline (nothing hangs when
 * the engine stops answering), is aborted when interrupted, and its failure is
 * mapped to the SDK's typed errors.
 */
import { Effect } from "effect"
import { inspect } from "node:util"
import {
  ContainerFailed,
  type ContainerFailureReason,
  DockerUnavailable,
  type SandboxError
} from "@hermes-sandbox/core"
import { isQuotaRefusal } from "../DiskQuota.js"
import { imageBuildCommand, imageNotFound } from "../ImageBuild.js"

export interface CallContext {
  readonly endpoint: string
  readonly operation: string
  readonly containerName: string
  readonly timeoutMs: number
  readonly image?: string
}

/** How this install builds the images: the workspace's script in a checkout, the installed CLI otherwise. */
export const IMAGE_BUILD_COMMAND = imageBuildCommand()

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "EACCES",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND"
])

interface DockerodeError {
  readonly statusCode?: number
  readonly code?: string
  readonly message?: string
  readonly json?: { readonly message?: string } | null
}

/**
 * How to get a local engine going (DockerEngine.startEngineHint): commands an installed user has,
 * not the repository's scripts, which no package ships.
 */
export const START_ENGINE_HINT =
  "start a Docker engine: 'sudo systemctl start docker' (or 'sudo dockerd &' where there is no systemd), " +
  "or install one first (Debian/Ubuntu: 'sudo apt-get install docker.io'); set DOCKER_HOST if it listens elsewhere"

export const engineMessage = (error: unknown): string => {
  const e = error as DockerodeError
  const fromJson = e?.json && typeof e.json === "object" ? e.json.message : undefined
  return (fromJson ?? e?.message ?? String(error)).trim()
}

export const mapDockerError = (ctx: CallContext, error: unknown): SandboxError => {
  const e = error as DockerodeError
  const message = engineMessage(error)
  if (e?.statusCode === undefined) {
    const hint =
      e?.code === "EACCES"
        ? "the current user may not use the Docker socket: run as root or add the user to the 'docker' group"
        : START_ENGINE_HINT
    if (e?.code === undefined || CONNECTION_CODES.has(e.code) || /socket hang up|aborted/i.test(message)) {
      return new DockerUnavailable({
        endpoint: ctx.endpoint,
        operation: ctx.operation,
        message: `${ctx.operation}: cannot reach the engine at ${ctx.endpoint}: ${message}`,
        hint
      })
    }
  }
  if (
    e?.statusCode === 404 &&
    /no such image|not found/i.test(message) &&
    ctx.image !== undefined &&
    ctx.operation !== "start"
  ) {
    return imageNotFound(ctx.image)
  }
  if (/no space left on device/i.test(message)) {
    return new ContainerFailed({
      operation: ctx.operation,
      containerName: ctx.containerName,
      statusCode: e?.statusCode ?? 500,
      reason: "engine",
      message: `the engine's disk is full: ${message}`
    })
  }
  return new ContainerFailed({
    operation: ctx.operation,
    containerName: ctx.containerName,
    ...(e?.statusCode === undefined ? {} : { statusCode: e.statusCode }),
    reason: reasonOf(e?.statusCode, message),
    message: `${ctx.operation} ${ctx.containerName}: ${message}`
  })
}

/** The one place the engine's status codes and words are read; callers branch on the reason. */
const reasonOf = (statusCode: number | undefined, message: string): ContainerFailureReason =>
  statusCode === 404
    ? "not-found"
    : statusCode === 409
      ? "conflict"
      : statusCode === 304
        ? "already-started"
        : isQuotaRefusal(message)
          ? "quota-unsupported"
          : "engine"

/**
 * One engine call with a deadline; interruption or the deadline aborts the request.
 *
 * Written as one `Effect.async` with its own timer rather than `tryPromise` + `timeoutFail`:
 * this wraps every engine call of every execution, and the combinators cost ~0.2 ms of CPU
 * per call here (a racing fiber, its sleep, its interruption), a measurable share of the
 * SDK's client CPU under load (BENCHMARKS.md).
 */
export const dockerCall = <A>(
  ctx: CallContext,
  f: (signal: AbortSignal) => Promise<A>
): Effect.Effect<A, SandboxError> =>
  Effect.async<A, SandboxError>((resume) => {
    const controller = new AbortController()
    // docker-modem util.inspect()s every request's options (signal included) for its debug log,
    // even when that log is off; an AbortSignal's internals are costly to walk.
    Object.defineProperty(controller.signal, inspect.custom, { value: inspectAsName })
    const timer = setTimeout(() => {
      controller.abort()
      resume(
        Effect.fail(
          new DockerUnavailable({
            endpoint: ctx.endpoint,
            operation: ctx.operation,
            message: `${ctx.operation}${ctx.containerName ? ` ${ctx.containerName}` : ""}: the engine at ${ctx.endpoint} did not answer within ${ctx.timeoutMs} ms`,
            hint: "check that dockerd is alive ('docker info'); restart it if it hangs"
          })
        )
      )
    }, ctx.timeoutMs)
    // Once resumed (deadline, interruption), later settlements are ignored by Effect.async.
    let promise: Promise<A>
    try {
      promise = f(controller.signal)
    } catch (error) {
      clearTimeout(timer)
      resume(Effect.fail(mapDockerError(ctx, error)))
      return
    }
    promise.then(
      (a) => {
        clearTimeout(timer)
        resume(Effect.succeed(a))
      },
      (error: unknown) => {
        clearTimeout(timer)
        resume(Effect.fail(mapDockerError(ctx, error)))
      }
    )
    return Effect.sync(() => {
      clearTimeout(timer)
      controller.abort()
    })
  })

const inspectAsName = () => "AbortSignal"

/** The container no longer exists: "already in the state you want" for idempotent operations. */
export const isGone = (error: SandboxError) => error._tag === "ContainerFailed" && error.reason === "not-found"

/** Someone else (the watchdog, a sweep, another process's reaper) is removing it right now: 409 "removal … already in progress". */
export const isRemovalInProgress = (error: SandboxError) =>
  error._tag === "ContainerFailed" && error.reason === "conflict" && /already in progress/.test(error.message)

/** Killing it is moot: it is not running (conflict) or gone (not found). */
export const isNotRunning = (error: SandboxError) =>
  error._tag === "ContainerFailed" && (error.reason === "conflict" || error.reason === "not-found")
