/**
 * How to reach a Docker engine: the dockerode client, the endpoint it talks
 * to (for messages), how it was reached (EngineEndpoint: unix, tcp, tls or
 * ssh, from an option, DOCKER_HOST or a docker context), and a ping with a
 * deadline so an absent engine is a DockerUnavailable within seconds, never a
 * hang.
 */
import { Context, Effect, Either, Layer } from "effect"
import type Docker from "dockerode"
import { DockerUnavailable, type InvalidRequest } from "@hermes-sandbox/core"
import * as EngineEndpoint from "./EngineEndpoint.js"
import { dockerCall, START_ENGINE_HINT } from "./internal/dockerCall.js"

export interface DockerEngineOptions extends EngineEndpoint.EngineEndpointOptions {
  /** Deadline for each short engine call (create, start, inspect, remove...). Default 30 s. */
  readonly callTimeoutMs?: number
  /** Deadline for the initial ping. Default 3 s (10 s over ssh, whose handshake comes first). */
  readonly connectTimeoutMs?: number
}

export class DockerEngine extends Context.Tag("@hermes-sandbox/docker/DockerEngine")<
  DockerEngine,
  {
    readonly docker: Docker
    /** The endpoint, without secrets (description.endpoint). */
    readonly endpoint: string
    /** How the engine was reached: kind, source, whether TLS is verified. */
    readonly description: EngineEndpoint.EngineDescription
    /** For another process reaching the same engine the same way (the watchdog). Holds secrets. */
    readonly transport: EngineEndpoint.EngineTransport
    readonly callTimeoutMs: number
    readonly apiVersion: string
    readonly serverVersion: string
  }
>() {}

/**
 * The engine these options (and the environment) name, with its client. Throws the
 * InvalidRequest of EngineEndpoint.resolve (e.g. plain tcp to a remote host).
 */
export const resolveEndpoint = (
  options: DockerEngineOptions = {}
): EngineEndpoint.EngineEndpoint & { readonly endpoint: string } => {
  const resolved = EngineEndpoint.resolve(options)
  if (Either.isLeft(resolved)) throw resolved.left
  return { ...resolved.right, endpoint: resolved.right.description.endpoint }
}

/** How to get a local engine going: commands a user has, whether or not they have a checkout of the repository. */
export const startEngineHint: string = START_ENGINE_HINT

/** What to check when a remote engine does not answer, by how it is reached. */
export const unreachableHint = (description: EngineEndpoint.EngineDescription): string => {
  switch (description.kind) {
    case "unix":
      return startEngineHint
    case "tcp":
      return `check that the engine listens on ${description.endpoint} (dockerd -H tcp://...)`
    case "tls":
      return (
        `check that the engine listens on ${description.endpoint} with --tlsverify, and that the client certificate is signed by the CA it trusts` +
        (description.tlsVerified ? "; its server certificate must be signed by the given CA and name the host" : "")
      )
    case "ssh":
      return `check 'ssh ${description.endpoint.replace(/^ssh:\/\//, "").replace(/:(\d+)$/, " -p $1")} docker version' works: the key is accepted, the host key is known, and the remote user may run the docker CLI`
  }
}

export const make = (
  options: DockerEngineOptions = {}
): Effect.Effect<DockerEngine["Type"], DockerUnavailable | InvalidRequest> =>
  Effect.gen(function* () {
    const { description, docker, transport } = yield* EngineEndpoint.resolve(options)
    const endpoint = description.endpoint
    const connectTimeoutMs = options.connectTimeoutMs ?? (description.kind === "ssh" ? 10_000 : 3_000)
    const hint = unreachableHint(description)
    const version = yield* dockerCall(
      { endpoint, operation: "ping", containerName: "", timeoutMs: connectTimeoutMs },
      (signal) =>
        (docker as unknown as { version(o: object): Promise<Docker.DockerVersion> }).version({ abortSignal: signal })
    ).pipe(
      Effect.mapError((e) =>
        e._tag === "DockerUnavailable"
          ? // A local socket keeps the call's own hint (it tells a missing engine from a refused permission).
            description.kind === "unix"
            ? e
            : new DockerUnavailable({ endpoint: e.endpoint, operation: e.operation, message: e.message, hint })
          : new DockerUnavailable({ endpoint, operation: "ping", message: e.message, hint })
      )
    )
    return DockerEngine.of({
      docker,
      endpoint,
      description,
      transport,
      callTimeoutMs: options.callTimeoutMs ?? 30_000,
      apiVersion: version.ApiVersion,
      serverVersion: version.Version
    })
  })

export const layer = (
  options: DockerEngineOptions = {}
): Layer.Layer<DockerEngine, DockerUnavailable | InvalidRequest> => Layer.effect(DockerEngine, make(options))
