/**
 * One remote engine per describe block, for the suites that must hold over TLS and over ssh:
 * `useRemote("tls")` starts a TlsEngine (private dockerd, images copied in), `useRemote("ssh")`
 * an SshServer in front of the shared engine; both are destroyed after the block. `engine` is a
 * client on the engine's own unix socket, for the test's checks (what exists there).
 */
import Docker from "dockerode"
import { afterAll, beforeAll } from "vitest"
import type { CreateExecutorOptions } from "@hermes-sandbox/docker"
import { SshServer, TlsEngine } from "./harness.js"

export type TransportName = "tls" | "ssh"
export const TRANSPORTS: ReadonlyArray<TransportName> = ["tls", "ssh"]

export interface Remote {
  readonly name: TransportName
  /** Executor options that reach the engine over this transport only. */
  readonly options: CreateExecutorOptions
  /** The engine's own socket, for checks. */
  readonly engine: Docker
  readonly tls: TlsEngine | undefined
  readonly ssh: SshServer | undefined
}

const shared = new Docker({ socketPath: "/var/run/docker.sock" })

export const useRemote = (name: TransportName): Remote => {
  let tls: TlsEngine | undefined
  let ssh: SshServer | undefined
  beforeAll(async () => {
    if (name === "tls") {
      tls = await TlsEngine.create()
      await tls.start()
      tls.loadImages()
    } else {
      ssh = await SshServer.create()
      await ssh.start()
    }
  }, 300_000)
  afterAll(async () => {
    await tls?.destroy()
    await ssh?.destroy()
  }, 120_000)
  const get = () => {
    const h = tls ?? ssh
    if (h === undefined) throw new Error(`the ${name} engine is used before beforeAll started it`)
    return h
  }
  return {
    name,
    get options() {
      return get().options
    },
    get engine() {
      return tls?.local ?? shared
    },
    get tls() {
      return tls
    },
    get ssh() {
      return ssh
    }
  }
}

/** Whether a container exists on this engine. */
export const existsOn = async (engine: Docker, nameOrId: string): Promise<boolean> => {
  try {
    await engine.getContainer(nameOrId).inspect()
    return true
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return false
    throw error
  }
}
