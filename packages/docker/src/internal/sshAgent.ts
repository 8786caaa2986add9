/**
 * An http.Agent that reaches the engine over ONE ssh connection: each HTTP connection is an ssh
 * channel running `docker system dial-stdio` on the remote (as the docker CLI does), kept alive
 * between requests like a socket.
 *
 * docker-modem's own ssh transport opens a new ssh connection (key exchange, authentication)
 * for every request; measured on loopback that is 0.5-1 s per request, several seconds per run.
 * Here the connection is made once, re-made on the next request after it drops, and unref'd
 * so it never keeps the process alive; it ends after IDLE_MS without a channel.
 *
 * ssh2 is the one docker-modem depends on, loaded from where it is installed (this package's
 * dockerode, its docker-modem), only when an ssh:// engine is used.
 */
import { Agent } from "node:http"
import { createRequire } from "node:module"
import type { Duplex } from "node:stream"
import { fileURLToPath } from "node:url"
import { packageRoot } from "./packageRoot.js"

/** Where an ssh engine is and who logs in (EngineEndpoint's ssh transport carries the same). */
export interface SshLogin {
  readonly host: string
  readonly port: number
  readonly username: string
  readonly privateKey?: string
  readonly passphrase?: string
  readonly agent?: string
}

/** What is used of ssh2 (its types are not a dependency of this package). */
export interface ConnectConfig extends SshLogin {
  readonly hostVerifier: (key: Buffer) => boolean
  readonly readyTimeout: number
}
type ClientChannel = Duplex
interface Client {
  once(event: "ready" | "close", f: () => void): void
  on(event: "error", f: (error: Error) => void): void
  connect(config: ConnectConfig): void
  exec(command: string, f: (error: Error | undefined, channel: ClientChannel) => void): void
  end(): void
}

/** How long the ssh connection stays open with no channel. */
const IDLE_MS = 10_000

const loadSsh2 = (): { Client: new () => Client } => {
  const fromPackage = createRequire(fileURLToPath(new URL("package.json", packageRoot)))
  const modem = createRequire(createRequire(fromPackage.resolve("dockerode")).resolve("docker-modem"))
  return modem("ssh2") as { Client: new () => Client }
}

/** A channel as the http module uses a socket (it calls these on its sockets). */
const asSocket = (channel: ClientChannel): Duplex => {
  const s = channel as unknown as Record<string, unknown>
  for (const name of ["setKeepAlive", "setNoDelay", "setTimeout", "ref", "unref"]) s[name] ??= () => channel
  return channel
}

export const sshAgent = (config: ConnectConfig): Agent => {
  let connection: Promise<Client> | undefined
  let open = 0
  let idle: ReturnType<typeof setTimeout> | undefined
  let socket: { ref?: () => void; unref?: () => void } | undefined
  const channels = new Set<ClientChannel>()
  const connect = (): Promise<Client> => {
    if (connection !== undefined) return connection
    const { Client } = loadSsh2()
    const client = new Client()
    const attempt = new Promise<Client>((resolve, reject) => {
      client.once("ready", () => resolve(client))
      // Also after "ready" (the connection dropped): "close" follows, and the next request reconnects.
      client.on("error", reject)
    })
    const forget = () => {
      if (connection === attempt) connection = undefined
    }
    client.once("close", () => {
      forget()
      // ssh2 leaves its channels open when the connection drops: end them as a dropped socket
      // would end, so a request in flight (an attach, a wait) fails now, not at its deadline.
      for (const channel of channels)
        channel.destroy(Object.assign(new Error("the ssh connection to the engine closed"), { code: "ECONNRESET" }))
    })
    attempt.then(() => {
      socket = (client as unknown as { _sock?: typeof socket })._sock
      if (open === 0) socket?.unref?.()
    }, forget)
    connection = attempt
    client.connect(config)
    return attempt
  }
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 8 })
  ;(agent as unknown as { createConnection: unknown }).createConnection = (
    _options: unknown,
    done: (error: Error | null, socket?: Duplex) => void
  ) => {
    if (idle !== undefined) clearTimeout(idle)
    connect().then(
      (client) =>
        client.exec("docker system dial-stdio", (error, channel) => {
          if (error) {
            // A connection that no longer takes channels (cut, or the server's MaxSessions): the next request reconnects.
            if (connection !== undefined) connection = undefined
            client.end()
            done(error)
            return
          }
          // While a channel is open (a request, an attach) the connection keeps the process alive, as a socket would.
          if (open++ === 0) socket?.ref?.()
          channels.add(channel)
          channel.once("close", () => {
            channels.delete(channel)
            if (--open > 0) return
            socket?.unref?.()
            idle = setTimeout(() => {
              if (open > 0) return
              connection = undefined
              client.end()
            }, IDLE_MS)
            idle.unref()
          })
          done(null, asSocket(channel))
        }),
      (error: Error) => done(error)
    )
    return undefined
  }
  return agent
}
