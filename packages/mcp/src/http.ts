/**
 * MCP over Streamable HTTP at /mcp, for clients that cannot spawn a process. The endpoint runs
 * code, so it is closed by default:
 *
 * - a bearer token on every request (compared in constant time); without it 401, nothing runs;
 * - loopback only unless `allowRemote`; the Host header and a browser's Origin must be a loopback
 *   name (any port) or this server's (DNS rebinding: a page cannot reach 127.0.0.1 under its own name);
 * - request bodies are bounded; MCP sessions are bounded per credential (the token a client holds),
 *   per address (every loopback address is one: 127.0.0.2 is the same machine) and in all, and a
 *   session that never made a call expires after a minute;
 * - one MCP server instance per MCP session (the SDK requires it); a session that ends — DELETE,
 *   idle expiry, the server's shutdown — closes its calls and removes its session sandbox.
 *
 * A `mount` (the CLI's dashboard) is served under its own path behind the same Host/Origin checks
 * and tokens.
 *
 * GET /metrics is the server's Prometheus metrics (McpSandbox.metrics), behind the same checks and
 * token as /mcp; or, with `metricsPort`, only on a listener of its own on 127.0.0.1 without a token
 * (its Host header still a loopback name), for a local Prometheus or agent that holds no token.
 */
import { randomUUID } from "node:crypto"
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse
} from "node:http"
import type { AddressInfo } from "node:net"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Metrics } from "@hermes-sandbox/core"
import type { McpSandbox } from "./McpSandbox.js"
import type { McpSession } from "./McpSession.js"
import { type HttpGuard, LOOPBACK_HOST, makeHttpGuard } from "./httpGuard.js"
import { isLoopback } from "./loopback.js"
import { createServer } from "./server.js"

export interface HttpOptions {
  /** Default 127.0.0.1. */
  readonly host?: string
  /** Default 0: a free port (see `url`). */
  readonly port?: number
  /** The bearer token every request must carry (the credential "default"); optional with `clients`. */
  readonly token?: string
  /**
   * More credentials, by name: each client holding its own token has its own share of the
   * sessions (maxSessionsPerClient), so one client cannot lock the others out.
   */
  readonly clients?: Readonly<Record<string, string>>
  /** Listen on a non-loopback address. Without it such a host is refused. */
  readonly allowRemote?: boolean
  /** More Host header values to accept (host:port), e.g. a reverse proxy's name. */
  readonly allowedHosts?: ReadonlyArray<string>
  /** More browser origins to accept, e.g. "https://inspector.example". */
  readonly allowedOrigins?: ReadonlyArray<string>
  /** Largest request body. Default 16 MiB. */
  readonly maxBodyBytes?: number
  /** An MCP session with no request for this long is closed. Default 1800 s. */
  readonly sessionIdleS?: number
  /** MCP sessions open at once per credential (per token). Default 8. */
  readonly maxSessionsPerClient?: number
  /** MCP sessions open at once per client address, all loopback addresses counting as one. Default 32. */
  readonly maxSessionsPerAddress?: number
  /** An MCP session that made no call yet is closed after this long. Default 60 s. */
  readonly unusedSessionIdleS?: number
  /** MCP sessions open at once. Default 64. */
  readonly maxSessions?: number
  /**
   * Serve GET /metrics (Prometheus) on 127.0.0.1 at this port (0: a free one), without a token,
   * instead of on the main port behind the token. Default: on the main port, behind the token.
   */
  readonly metricsPort?: number
  /**
   * More to serve on this server, under a path of its own (the CLI's `mcp --http --dashboard`
   * mounts the dashboard at /dashboard): behind the same Host and Origin checks, its token checked
   * by the mount with the same guard. Closed before the server.
   */
  readonly mount?: HttpMount
}

/** A handler served under a path of the MCP HTTP server (HttpOptions.mount). */
export interface HttpMount {
  /** Its root, e.g. "/dashboard": that path and every one under it. */
  readonly path: string
  /** A request under `path`, once its Host and Origin passed (never while the server stops). */
  readonly handle: (req: IncomingMessage, res: ServerResponse, context: HttpMountContext) => Promise<void>
  readonly close?: () => Promise<void>
}

export interface HttpMountContext {
  /** The request's path below the mount's ("" for the mount's path itself, else "/..."), without the query. */
  readonly path: string
  /** The server's checks: `guard.check(req)` for the token (and the credential it is). */
  readonly guard: HttpGuard
  /** The credential whose client opened this MCP session, while it is open. */
  readonly sessionClient: (mcpSessionId: string) => string | undefined
}

export interface HttpServing {
  /** http://host:port/mcp */
  readonly url: string
  readonly port: number
  /** MCP sessions open now. */
  readonly sessions: () => number
  /** Where GET /metrics is served: http://host:port/metrics (with `metricsPort`, the loopback listener's). */
  readonly metricsUrl: string
  /** Stop listening, close every MCP session (their sandboxes removed). Idempotent. */
  close(): Promise<void>
}

interface Entry {
  readonly session: McpSession
  readonly transport: StreamableHTTPServerTransport
  /** The credential's name. */
  readonly client: string
  /** The address it came from (every loopback address as "loopback"). */
  readonly address: string
  /** A tool was called (until then the session expires after unusedSessionIdleS). */
  used: boolean
  lastSeen: number
  /** POSTs being answered now (a call running): the session is not idle while one runs. */
  running: number
}

/** GET (or HEAD) /metrics: the sandbox's metrics in Prometheus' text format. */
const serveMetrics = async (sandbox: McpSandbox, req: IncomingMessage, res: ServerResponse) => {
  if (req.method !== "GET" && req.method !== "HEAD")
    return reply(res, 405, "method not allowed: GET /metrics", { allow: "GET, HEAD" })
  const text = await sandbox.metrics()
  res.writeHead(200, { "content-type": Metrics.CONTENT_TYPE, "cache-control": "no-store" })
  res.end(req.method === "HEAD" ? undefined : text)
}

const reply = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) => {
  if (res.headersSent) return res.end()
  res.writeHead(status, { "content-type": "application/json", ...headers })
  // A JSON-RPC error object, as the SDK's own refusals are.
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }))
}

class BodyTooLarge extends Error {}

const readBody = (req: IncomingMessage, max: number): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > max) {
        // Read on and drop the rest: destroying the request resets the connection under a client
        // still sending, which then never reads the 413 (the server's requestTimeout bounds it).
        chunks.length = 0
        reject(new BodyTooLarge())
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

/**
 * A client whose connection drops while its request runs (the response stream closed before the
 * response was written) cannot receive the result: the request is cancelled as if the client had
 * sent notifications/cancelled, so its sandbox is killed and removed now, not at its deadline.
 */
const cancelOnDisconnect = (transport: StreamableHTTPServerTransport, res: ServerResponse, body: unknown) => {
  const requests = (Array.isArray(body) ? body : [body]).filter(
    (m): m is { id: string | number; method: string } =>
      typeof m === "object" && m !== null && "id" in m && "method" in m
  )
  if (requests.length === 0) return
  res.once("close", () => {
    if (res.writableFinished) return
    for (const r of requests) {
      transport.onmessage?.({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: r.id, reason: "the client disconnected" }
      })
    }
  })
}

export const serveHttp = async (sandbox: McpSandbox, options: HttpOptions): Promise<HttpServing> => {
  const host = options.host ?? "127.0.0.1"
  if (!isLoopback(host) && options.allowRemote !== true) {
    throw new Error(
      `refusing to listen on ${host}: not a loopback address, and this endpoint runs code; pass allowRemote (--allow-remote) to do it anyway, behind TLS`
    )
  }
  // Host/Origin and the token: the checks the CLI's dashboard makes too (httpGuard.ts).
  const guard = makeHttpGuard({
    host,
    port: () => port,
    credentials: { ...options.clients, ...(options.token === undefined ? {} : { default: options.token }) },
    allowedHosts: options.allowedHosts,
    allowedOrigins: options.allowedOrigins
  })
  const maxBody = options.maxBodyBytes ?? 16 * 1024 * 1024
  const idleMs = (options.sessionIdleS ?? 1800) * 1000
  const perClient = options.maxSessionsPerClient ?? 8
  const perAddress = options.maxSessionsPerAddress ?? 32
  const unusedIdleMs = (options.unusedSessionIdleS ?? 60) * 1000
  const maxSessions = options.maxSessions ?? 64
  const entries = new Map<string, Entry>()
  let port = 0
  let closing: Promise<void> | undefined

  const closeEntry = async (id: string, reason: string) => {
    const entry = entries.get(id)
    if (entry === undefined) return
    entries.delete(id)
    await entry.session.close(reason)
    await entry.transport.close().catch(() => {})
  }

  const metricsHere = options.metricsPort === undefined
  const mount = options.mount
  const mountContext = (path: string): HttpMountContext => ({
    path,
    guard,
    sessionClient: (id) => entries.get(id)?.client
  })
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0]!
    if (mount !== undefined && (path === mount.path || path.startsWith(`${mount.path}/`))) {
      const site = guard.checkSite(req)
      if (site !== undefined) return reply(res, site.status, site.message, site.headers)
      if (closing !== undefined) return reply(res, 503, "the server is stopping")
      return mount.handle(req, res, mountContext(path.slice(mount.path.length)))
    }
    if (path !== "/mcp" && !(metricsHere && path === "/metrics"))
      return reply(res, 404, "not found: the MCP endpoint is /mcp")
    const checked = guard.check(req)
    if ("refused" in checked)
      return reply(res, checked.refused.status, checked.refused.message, checked.refused.headers)
    const { credential } = checked
    if (closing !== undefined) return reply(res, 503, "the server is stopping")
    if (path === "/metrics") return serveMetrics(sandbox, req, res)

    let body: unknown
    if (req.method === "POST") {
      try {
        body = JSON.parse((await readBody(req, maxBody)).toString("utf8"))
      } catch (error) {
        if (error instanceof BodyTooLarge) return reply(res, 413, `request body over ${maxBody} bytes`)
        res.writeHead(400, { "content-type": "application/json" })
        return res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            error: { code: -32700, message: "Parse error: the body is not JSON" },
            id: null
          })
        )
      }
    }

    const sessionId = req.headers["mcp-session-id"]
    if (typeof sessionId === "string") {
      const entry = entries.get(sessionId)
      // Another credential's session is not found either (its id is not a secret of that client alone).
      if (entry === undefined || entry.client !== credential)
        return reply(res, 404, "no such MCP session (it ended or expired): initialize a new one")
      entry.lastSeen = Date.now()
      // Idle time counts from a call's end, not its start. Not a GET: its standing event stream
      // would keep a session that makes no calls alive forever.
      if (req.method === "POST") {
        if (
          (Array.isArray(body) ? body : [body]).some(
            (m) => typeof m === "object" && m !== null && (m as { method?: unknown }).method === "tools/call"
          )
        )
          entry.used = true
        entry.running++
        res.once("close", () => {
          entry.running--
          entry.lastSeen = Date.now()
        })
      }
      cancelOnDisconnect(entry.transport, res, body)
      return entry.transport.handleRequest(req, res, body)
    }
    if (req.method !== "POST" || !(Array.isArray(body) ? body.some(isInitializeRequest) : isInitializeRequest(body))) {
      return reply(res, 400, "no Mcp-Session-Id header: the first request must be initialize")
    }
    const remote = req.socket.remoteAddress ?? "unknown"
    const address = isLoopback(remote) ? "loopback" : remote
    const client = credential
    if (entries.size >= maxSessions)
      return reply(res, 429, `this server has ${entries.size} MCP sessions open (at most ${maxSessions})`)
    const fromClient = [...entries.values()].filter((e) => e.client === client).length
    const shownClient = client === "default" ? "this token" : `client ${JSON.stringify(client)}`
    if (fromClient >= perClient)
      return reply(
        res,
        429,
        `${shownClient} has ${fromClient} MCP sessions open (at most ${perClient} per client): end one (DELETE) first`
      )
    const fromAddress = [...entries.values()].filter((e) => e.address === address).length
    if (fromAddress >= perAddress)
      return reply(
        res,
        429,
        `${address === "loopback" ? "this machine" : address} has ${fromAddress} MCP sessions open (at most ${perAddress} per address): end one (DELETE) first`
      )

    const id = randomUUID()
    const session = sandbox.openSession({
      id,
      transport: "http",
      client: client === "default" ? remote : `${client}@${remote}`
    })
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessionclosed: (closedId) => void closeEntry(closedId, "the client ended the MCP session (DELETE)")
    })
    transport.onclose = () => void closeEntry(id, "the transport closed")
    const entry: Entry = { session, transport, client, address, used: false, lastSeen: Date.now(), running: 0 }
    entries.set(id, entry)
    const server = createServer(session)
    await server.connect(transport)
    await transport.handleRequest(req, res, body)
    // An initialize that did not initialize (the SDK refused it) leaves no session behind.
    if (transport.sessionId === undefined) await closeEntry(id, "initialization failed")
  }

  const http: HttpServer = createHttpServer((req, res) => {
    handle(req, res).catch((error: unknown) => reply(res, 500, `internal error: ${(error as Error).message}`))
  })
  const sweep = setInterval(
    () => {
      const now = Date.now()
      for (const [id, e] of entries) {
        if (e.running > 0) continue
        if (now - e.lastSeen > idleMs) void closeEntry(id, `idle for more than ${idleMs / 1000} s`)
        else if (!e.used && now - e.lastSeen > unusedIdleMs)
          void closeEntry(id, `no call within ${unusedIdleMs / 1000} s of its start`)
      }
    },
    Math.max(250, Math.min(idleMs, unusedIdleMs, 30_000) / 4)
  )
  sweep.unref()

  await new Promise<void>((resolve, reject) => {
    http.once("error", reject)
    http.listen(options.port ?? 0, host, () => {
      http.off("error", reject)
      resolve()
    })
  })
  port = (http.address() as AddressInfo).port
  const shown = host.includes(":") ? `[${host}]` : host

  // /metrics alone, without a token, on loopback: the Host header must still be a loopback name
  // (a page's own name never passes), and nothing else is served there.
  let metricsServer: HttpServer | undefined
  let metricsUrl = `http://${shown}:${port}/metrics`
  if (options.metricsPort !== undefined) {
    const server = createHttpServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0]
      if (path !== "/metrics") return reply(res, 404, "not found: this port serves /metrics only")
      if (!LOOPBACK_HOST.test((req.headers.host ?? "").toLowerCase()))
        return reply(res, 403, `forbidden: Host ${JSON.stringify(req.headers.host ?? "")} is not a loopback name`)
      if (!guard.originAllowed(req))
        return reply(res, 403, `forbidden: Origin ${JSON.stringify(req.headers.origin)} is not allowed`)
      serveMetrics(sandbox, req, res).catch((error: unknown) =>
        reply(res, 500, `internal error: ${(error as Error).message}`)
      )
    })
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject)
        server.listen(options.metricsPort, "127.0.0.1", () => {
          server.off("error", reject)
          resolve()
        })
      })
    } catch (error) {
      await new Promise<void>((resolve) => http.close(() => resolve()))
      clearInterval(sweep)
      throw error
    }
    metricsServer = server
    metricsUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`
  }
  return {
    url: `http://${shown}:${port}/mcp`,
    port,
    metricsUrl,
    sessions: () => entries.size,
    close: () =>
      (closing ??= (async () => {
        clearInterval(sweep)
        await mount?.close?.()
        if (metricsServer !== undefined) {
          const m = metricsServer
          await new Promise<void>((resolve) => {
            m.close(() => resolve())
            m.closeAllConnections()
          })
        }
        const stopped = new Promise<void>((resolve) => http.close(() => resolve()))
        await Promise.allSettled([...entries.keys()].map((id) => closeEntry(id, "the server is stopping")))
        http.closeAllConnections()
        await stopped
      })())
  }
}
