/**
 * Every engine call goes through here: it gets a deadline (nothing hangs when
 * the engine stops answering), is aborted when interrupted, and its failure is
 * mapped to the SDK's typed errors.
 */
import { Effect } from "effect"
import { ContainerFailed, DockerUnavailable, ImageNotFound, type SandboxError } from "@hermes-sandbox/core"

export interface CallContext {
  readonly endpoint: string
  readonly operation: string
  readonly containerName: string
  readonly timeoutMs: number
  readonly image?: string
}

export const IMAGE_BUILD_COMMAND = "pnpm hermes-sandbox image build"
const CONNECTION_CODES = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND"])

interface DockerodeError {
  readonly statusCode?: number
  readonly code?: string
  readonly message?: string
  readonly json?: { readonly message?: string } | null
}

export const engineMessage = (error: unknown): string => {
  const e = error as DockerodeError
  const fromJson = e?.json && typeof e.json === "object" ? e.json.message : undefined
  return (fromJson ?? e?.message ?? String(error)).trim()
}

export const mapDockerError = (ctx: CallContext, error: unknown): SandboxError => {
  const e = error as DockerodeError
  const message = engineMessage(error)
  if (e?.statusCode === undefined) {
    const hint = e?.code === "EACCES"
      ? "the current user may not use the Docker socket: run as root or add the user to the 'docker' group"
      : "start a Docker engine (on Debian as root: 'bash scripts/ensure-engine.sh'), or set DOCKER_HOST"
    if (e?.code === undefined || CONNECTION_CODES.has(e.code) || /socket hang up|aborted/i.test(message)) {
      return new DockerUnavailable({ endpoint: ctx.endpoint, operation: ctx.operation, message: `${ctx.operation}: cannot reach the engine at ${ctx.endpoint}: ${message}`, hint })
    }
  }
  if (e?.statusCode === 404 && /no such image|not found/i.test(message) && ctx.image !== undefined && ctx.operation !== "start") {
    return new ImageNotFound({
      image: ctx.image,
      buildCommand: IMAGE_BUILD_COMMAND,
      message: `image ${ctx.image} is not on the engine; build it with: ${IMAGE_BUILD_COMMAND}`
    })
  }
  if (/no space left on device/i.test(message)) {
    return new ContainerFailed({ operation: ctx.operation, containerName: ctx.containerName, statusCode: e?.statusCode ?? 500, message: `the engine's disk is full: ${message}` })
  }
  return new ContainerFailed({
    operation: ctx.operation,
    containerName: ctx.containerName,
    ...(e?.statusCode === undefined ? {} : { statusCode: e.statusCode }),
    message: `${ctx.operation} ${ctx.containerName}: ${message}`
  })
}

export const dockerCall = <A>(ctx: CallContext, f: (signal: AbortSignal) => Promise<A>): Effect.Effect<A, SandboxError> =>
  Effect.tryPromise({ try: f, catch: (error) => mapDockerError(ctx, error) }).pipe(
    Effect.timeoutFail({
      duration: ctx.timeoutMs,
      onTimeout: () =>
        new DockerUnavailable({
          endpoint: ctx.endpoint,
          operation: ctx.operation,
          message: `${ctx.operation}${ctx.containerName ? ` ${ctx.containerName}` : ""}: the engine at ${ctx.endpoint} did not answer within ${ctx.timeoutMs} ms`,
          hint: "check that dockerd is alive ('docker info'); restart it if it hangs"
        })
    })
  )

/** Status codes that mean "already in the state you want" for idempotent operations. */
export const isGone = (error: SandboxError) => error._tag === "ContainerFailed" && error.statusCode === 404
