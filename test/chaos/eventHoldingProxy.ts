/**
 * A Unix-socket proxy in front of the real engine that forwards every request and response
 * byte for byte, except that it holds back what the engine sends on an event SUBSCRIPTION
 * (`GET …/events?` without `until`): those bytes are kept here, never delivered. The engine
 * itself is untouched — it runs, kills and reports the containers as always; only the delivery
 * of its live events is late, as on an engine under heavy load. Bounded event-log queries
 * (`until` set) pass through.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createConnection, createServer, type Server, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The request line of a live subscription: an events request whose target has no `until`. */
const subscriptionLine = /^GET (\S*\/events\?\S*) HTTP\/1\.[01]\r?$/m

export class EventHoldingProxy {
  readonly socketPath: string
  private readonly dir: string
  private readonly server: Server
  private readonly sockets = new Set<Socket>()
  private readonly held: Array<Buffer> = []
  /** Subscriptions seen so far (each one's response is being held). */
  subscriptions = 0

  private constructor(private readonly target: string) {
    this.dir = mkdtempSync(join(tmpdir(), "hermes-event-proxy-"))
    this.socketPath = join(this.dir, "docker.sock")
    // Half-open both ways: the SDK ends a sandbox's stdin and still reads its output on the same socket.
    this.server = createServer({ allowHalfOpen: true }, (client) => this.relay(client))
  }

  static async start(target = "/var/run/docker.sock"): Promise<EventHoldingProxy> {
    const proxy = new EventHoldingProxy(target)
    await new Promise<void>((resolve, reject) => {
      proxy.server.once("error", reject)
      proxy.server.listen(proxy.socketPath, resolve)
    })
    return proxy
  }

  /** Everything held back so far, one event per line (JSON). */
  heldEvents(): Array<{ Action?: string; Actor?: { Attributes?: Record<string, string> } }> {
    return Buffer.concat(this.held)
      .toString("utf8")
      .split("\n")
      .flatMap((line) => {
        try {
          return [JSON.parse(line.trim())]
        } catch {
          return [] // HTTP headers, chunk sizes
        }
      })
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    rmSync(this.dir, { recursive: true, force: true })
  }

  private relay(client: Socket): void {
    const upstream = createConnection({ path: this.target, allowHalfOpen: true })
    this.sockets.add(client).add(upstream)
    let holding = false
    client.on("data", (chunk: Buffer) => {
      // Decided before the request reaches the engine, so no byte of its answer can slip through.
      const line = holding ? null : subscriptionLine.exec(chunk.toString("latin1"))
      if (line !== null && !line[1]!.includes("until=")) {
        holding = true
        this.subscriptions++
      }
      upstream.write(chunk)
    })
    upstream.on("data", (chunk: Buffer) => {
      if (holding) this.held.push(chunk)
      else client.write(chunk)
    })
    client.on("end", () => upstream.end())
    upstream.on("end", () => {
      if (!holding) client.end()
    })
    const drop = () => {
      client.destroy()
      upstream.destroy()
      this.sockets.delete(client)
      this.sockets.delete(upstream)
    }
    client.on("close", drop)
    upstream.on("close", drop)
    client.on("error", drop)
    upstream.on("error", drop)
  }
}
