/**
 * How to reach a Docker engine: the dockerode client, the endpoint it talks
 * to (for messages), and a ping with a deadline so an absent engine is a
 * DockerUnavailable within seconds, never a hang.
 */
import { Context, Effect, Layer } from "effect"
import Docker from "dockerode"
import { DockerUnavailable } from "@hermes-sandbox/core"
import { dockerCall } from "./internal/dockerCall.js"

export interface DockerEngineOptions {
  /** Unix socket path. Default: $DOCKER_HOST (unix://...) or /var/run/docker.sock. */
  readonly socketPath?: string
  /** tcp host, e.g. "127.0.0.1" (with port); takes precedence over socketPath. */
  readonly host?: string
  readonly port?: number
  /** Deadline for each short engine call (create, start, inspect, remove...). Default 30 s. */
  readonly callTimeoutMs?: number
  /** Deadline for the initial ping. Default 3 s. */
  readonly connectTimeoutMs?: number
}

export class DockerEngine extends Context.Tag("@hermes-sandbox/docker/DockerEngine")<
  DockerEngine,
  {
    readonly docker: Docker
    readonly endpoint: string
    readonly callTimeoutMs: number
    readonly apiVersion: string
    readonly serverVersion: string
  }
>() {}

export const resolveEndpoint = (options: DockerEngineOptions = {}): { docker: Docker; endpoint: string } => {
  if (options.host !== undefined) {
    const port = options.port ?? 2375
    return { docker: new Docker({ host: options.host, port }), endpoint: `tcp://${options.host}:${port}` }
  }
  const fromEnv = process.env.DOCKER_HOST
  if (options.socketPath === undefined && fromEnv !== undefined && fromEnv !== "") {
    if (fromEnv.startsWith("unix://")) {
      const socketPath = fromEnv.slice("unix://".length)
      return { docker: new Docker({ socketPath }), endpoint: fromEnv }
    }
    const url = new URL(fromEnv.replace(/^tcp:/, "http:"))
    return { docker: new Docker({ host: url.hostname, port: Number(url.port || 2375) }), endpoint: fromEnv }
  }
  const socketPath = options.socketPath ?? "/var/run/docker.sock"
  return { docker: new Docker({ socketPath }), endpoint: `unix://${socketPath}` }
}

export const startEngineHint =
  "start a Docker engine: on Debian as root run 'bash scripts/ensure-engine.sh' from the hermes-sandbox repo (installs docker.io and starts dockerd), " +
  "or 'sudo systemctl start docker'; set DOCKER_HOST if it listens elsewhere"

export const make = (options: DockerEngineOptions = {}) =>
  Effect.gen(function*() {
    const { docker, endpoint } = resolveEndpoint(options)
    const connectTimeoutMs = options.connectTimeoutMs ?? 3_000
    const version = yield* dockerCall(
      { endpoint, operation: "ping", containerName: "", timeoutMs: connectTimeoutMs },
      (signal) => (docker as unknown as { version(o: object): Promise<Docker.DockerVersion> }).version({ abortSignal: signal })
    ).pipe(
      Effect.mapError((e) =>
        e._tag === "DockerUnavailable"
          ? e
          : new DockerUnavailable({ endpoint, operation: "ping", message: e.message, hint: startEngineHint })
      )
    )
    return DockerEngine.of({
      docker,
      endpoint,
      callTimeoutMs: options.callTimeoutMs ?? 30_000,
      apiVersion: version.ApiVersion,
      serverVersion: version.Version
    })
  })

export const layer = (options: DockerEngineOptions = {}): Layer.Layer<DockerEngine, DockerUnavailable> =>
  Layer.effect(DockerEngine, make(options))
