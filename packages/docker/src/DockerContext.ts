/**
 * Docker CLI contexts, read the way the docker CLI stores them (dockerode does not read them):
 *
 *   $DOCKER_CONFIG/config.json                                   { "currentContext": "NAME" }
 *   $DOCKER_CONFIG/contexts/meta/<sha256(NAME)>/meta.json        { "Endpoints": { "docker": { "Host", "SkipTLSVerify" } } }
 *   $DOCKER_CONFIG/contexts/tls/<sha256(NAME)>/docker/{ca,cert,key}.pem
 *
 * ($DOCKER_CONFIG defaults to ~/.docker.) Only what reaching the engine needs is read; the
 * context named "default" is the one the CLI builds from DOCKER_HOST or the local socket, so it
 * has no files and reads as undefined.
 */
import { createHash } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"

export interface DockerContext {
  readonly name: string
  /** Endpoints.docker.Host: unix:///..., tcp://host:port, ssh://user@host[:port]. */
  readonly host: string
  readonly skipTlsVerify: boolean
  /** The context's TLS material (PEM), when its tls directory holds it. */
  readonly tls?: { readonly ca?: string; readonly cert?: string; readonly key?: string }
}

/** Where the docker CLI keeps its configuration: $DOCKER_CONFIG, else ~/.docker. */
export const configDir = (env: NodeJS.ProcessEnv, home: string): string =>
  env.DOCKER_CONFIG !== undefined && env.DOCKER_CONFIG !== "" ? env.DOCKER_CONFIG : join(home, ".docker")

/** The context the CLI would use: $DOCKER_CONTEXT, else config.json's currentContext; undefined for none or "default". */
export const currentName = (env: NodeJS.ProcessEnv, home: string): string | undefined => {
  const fromEnv = env.DOCKER_CONTEXT
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv === "default" ? undefined : fromEnv
  const file = join(configDir(env, home), "config.json")
  if (!existsSync(file)) return undefined
  let config: { currentContext?: unknown }
  try {
    config = JSON.parse(readFileSync(file, "utf8")) as { currentContext?: unknown }
  } catch (error) {
    throw new Error(`${file} is not valid JSON: ${(error as Error).message}`)
  }
  const name = config.currentContext
  return typeof name === "string" && name !== "" && name !== "default" ? name : undefined
}

/** The directory name the CLI stores a context under. */
export const contextDigest = (name: string): string => createHash("sha256").update(name).digest("hex")

const readIfPresent = (file: string): string | undefined => (existsSync(file) ? readFileSync(file, "utf8") : undefined)

/**
 * The context `name` from its files. Throws an Error naming the file for a context that does not
 * exist or has no docker endpoint ("default" is not stored: it reads as undefined).
 */
export const read = (name: string, env: NodeJS.ProcessEnv, home: string): DockerContext | undefined => {
  if (name === "default") return undefined
  const dir = configDir(env, home)
  const digest = contextDigest(name)
  const metaFile = join(dir, "contexts", "meta", digest, "meta.json")
  if (!existsSync(metaFile))
    throw new Error(`docker context "${name}" does not exist (no ${metaFile}; 'docker context ls' lists them)`)
  let meta: { Endpoints?: { docker?: { Host?: unknown; SkipTLSVerify?: unknown } } }
  try {
    meta = JSON.parse(readFileSync(metaFile, "utf8")) as typeof meta
  } catch (error) {
    throw new Error(`${metaFile} is not valid JSON: ${(error as Error).message}`)
  }
  const endpoint = meta.Endpoints?.docker
  if (typeof endpoint?.Host !== "string" || endpoint.Host === "")
    throw new Error(`docker context "${name}" has no docker endpoint (${metaFile})`)
  const tlsDir = join(dir, "contexts", "tls", digest, "docker")
  const ca = readIfPresent(join(tlsDir, "ca.pem"))
  const cert = readIfPresent(join(tlsDir, "cert.pem"))
  const key = readIfPresent(join(tlsDir, "key.pem"))
  const tls =
    ca === undefined && cert === undefined && key === undefined
      ? undefined
      : {
          ...(ca === undefined ? {} : { ca }),
          ...(cert === undefined ? {} : { cert }),
          ...(key === undefined ? {} : { key })
        }
  return {
    name,
    host: endpoint.Host,
    skipTlsVerify: endpoint.SkipTLSVerify === true,
    ...(tls === undefined ? {} : { tls })
  }
}
