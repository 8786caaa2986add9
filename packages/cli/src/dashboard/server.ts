/**
 * The dashboard's HTTP server: one page (its HTML, script and style, no data in them), and a JSON
 * API the page reads with the bearer token. It follows the journal from its first event into the
 * bounded projection (projection.ts) and answers from it; one execution's history is read from the
 * journal by its stream, a page at a time. Nothing of the journal is ever sent whole.
 *
 * Security is the MCP HTTP server's (`@hermes-sandbox/mcp/httpGuard`): loopback unless
 * `allowRemote`, Host and Origin checked on every request, the token on every API request (the page
 * takes it from its URL's fragment, which no browser sends to a server, and sends it as an
 * Authorization header). Requests are never logged. The page is served with a Content-Security-Policy
 * that allows its own script only, and it writes what the journal holds as text, never as markup.
 *
 * Live updates are long polls with a cursor (`/api/wait?after=SEQUENCE`): answered as soon as the
 * projection passes it, else after 25 s; at most `maxWaiters` at once, and `maxConnections` sockets.
 *
 * One implementation, two ways to serve it: `serveDashboard` (the `hermes-sandbox dashboard`
 * command: a server of its own) and `dashboardMount` (mounted on the MCP HTTP server by `mcp --http
 * --dashboard`, under /dashboard/, behind that server's checks and token; there the MCP server's
 * artifact store is at hand, and an execution's collected images are served while it holds them).
 * The page's URLs are relative, so it works under either root.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { firstValueFrom, take, toArray } from "rxjs"
import type { EventEnvelope, JournalClient } from "@hermes-sandbox/events"
import { Projection } from "@hermes-sandbox/events"
import type { HttpMount } from "@hermes-sandbox/mcp"
import { type HttpGuard, makeHttpGuard } from "@hermes-sandbox/mcp/httpGuard"
import { isLoopback } from "@hermes-sandbox/mcp/loopback"
import { type DashboardLimits, type DashboardProjection, makeDashboardProjection, rowOf } from "./projection.js"
import { PAGE_CSS, PAGE_HTML, PAGE_SCRIPT } from "./page.js"

/** What the dashboard reads of a journal: a JournalClient, or the MCP server's own journal. */
export type DashboardJournal = Pick<JournalClient, "lastSequence" | "follow" | "replay">

/** One collected file the artifact store holds (the MCP server's FileStore). */
export interface HeldFile {
  readonly mime: string
  readonly content: Uint8Array
}

/**
 * The artifact store of the process serving the dashboard (the MCP server's FileStore), for an
 * execution's images: its files while the store holds them, and the MCP session that ran it (its
 * owner: over HTTP only that session's credential may read them).
 */
export interface HeldFiles {
  readonly get: (
    executionId: string
  ) => { readonly owner: string; readonly files: ReadonlyMap<string, HeldFile> } | undefined
}

/** Who asks: the server's checks, and (mounted on the MCP server) the credential of each MCP session. */
export interface DashboardAccess {
  readonly guard: HttpGuard
  readonly sessionClient?: ((mcpSessionId: string) => string | undefined) | undefined
}

export interface DashboardHandlerOptions {
  readonly journal: DashboardJournal
  /** How the journal is named on the page (a URL without its password). */
  readonly journalName: string
  /** Long polls open at once (default 32); more are refused with 429. */
  readonly maxWaiters?: number | undefined
  /** How long a long poll waits (default 25 s). */
  readonly waitMs?: number | undefined
  readonly limits?: DashboardLimits | undefined
  /** The artifact store, when this process holds one (mounted on the MCP server); else "not held by this process". */
  readonly files?: HeldFiles | undefined
  /** The credentials that may read the API (mounted with named clients: --dashboard-client); default every one. */
  readonly viewers?: ReadonlySet<string> | undefined
}

export interface DashboardServerOptions extends DashboardHandlerOptions {
  readonly journal: JournalClient
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** Default 0: a free port. */
  readonly port?: number | undefined
  /** The bearer tokens accepted, by credential name. */
  readonly credentials: Readonly<Record<string, string>>
  readonly allowRemote?: boolean | undefined
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /** Sockets open at once (default 64). */
  readonly maxConnections?: number | undefined
}

export interface DashboardServing {
  /** http://host:port/ (without the token). */
  readonly url: string
  readonly port: number
  /** Resolves once the projection has read every event committed when the server started. */
  readonly caughtUp: Promise<void>
  readonly projection: DashboardProjection
  close(): Promise<void>
}

/** Events per history page at most, and the page's JSON at most (one event is always sent). */
const MAX_HISTORY_PAGE = 200
const MAX_HISTORY_BYTES = 1024 * 1024
/** A stream's events folded for its detail at most (tool calls and files listed up to 500 each). */
const MAX_DETAIL_EVENTS = 5_000
const MAX_LISTED = 500

/** Collected files served as images (an <img> of the page, from a blob: the token travels as a header). */
const IMAGE_TYPES: ReadonlySet<string> = new Set([
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "image/svg+xml"
])
/** A file's type when it is served as an image (its parameters dropped), else undefined. */
const imageType = (mime: string): string | undefined => {
  const type = mime.split(";")[0]!.trim().toLowerCase()
  return IMAGE_TYPES.has(type) ? type : undefined
}
/** An image is served with its own policy: nothing of it runs, even opened by itself (an SVG's script). */
const IMAGE_HEADERS = {
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
  "content-disposition": "attachment"
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

const send = (
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Uint8Array,
  headers: Record<string, string> = {}
) => {
  if (res.headersSent) return res.end()
  res.writeHead(status, { ...SECURITY_HEADERS, "content-type": type, ...headers })
  res.end(body)
}
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  send(res, status, "application/json; charset=utf-8", JSON.stringify(body), headers)
const refuse = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) =>
  json(res, status, { error: message }, headers)

/** A non-negative integer query parameter, or undefined; NaN when given and not one. */
const intParam = (url: URL, name: string): number | undefined => {
  const given = url.searchParams.get(name)
  if (given === null) return undefined
  return /^[0-9]{1,15}$/.test(given) ? Number(given) : Number.NaN
}

/** An execution's files in the store, and whether the asking credential may read them. */
type Held = { readonly files: ReadonlyMap<string, HeldFile>; readonly readable: boolean } | undefined

/** The dashboard's requests, for a server that has made the Host and Origin checks (guard.checkSite). */
export interface DashboardHandler {
  /**
   * Serve one request: `path` is below the dashboard's root ("/" the page, "/api/..." the API),
   * `guard` checks the token of API requests.
   */
  readonly handle: (req: IncomingMessage, res: ServerResponse, path: string, access: DashboardAccess) => Promise<void>
  /** Resolves once the projection has read every event committed when it started. */
  readonly caughtUp: Promise<void>
  readonly projection: DashboardProjection
  /** Stop following the journal, answer the long polls. Idempotent. */
  readonly close: () => Promise<void>
}

/** Follow the journal into the projection and answer the page's requests (its server's checks made). */
export const makeDashboardHandler = async (options: DashboardHandlerOptions): Promise<DashboardHandler> => {
  const journal = options.journal
  const projection = makeDashboardProjection(options.limits)
  const maxWaiters = options.maxWaiters ?? 32
  const waitMs = options.waitMs ?? 25_000
  const waiters = new Set<() => void>()
  let failure: string | undefined
  let closing: Promise<void> | undefined

  // The journal, followed from its first event; each batch of events wakes the long polls once.
  const target = await journal.lastSequence()
  let markCaughtUp: () => void = () => {}
  const caughtUp = new Promise<void>((resolve) => {
    markCaughtUp = resolve
  })
  if (target === 0) markCaughtUp()
  let wakeScheduled = false
  const wake = () => {
    wakeScheduled = false
    for (const w of [...waiters]) w()
  }
  const subscription = journal.follow({ fromSequence: 1 }).subscribe({
    next: (envelope) => {
      projection.apply(envelope)
      if (envelope.sequence >= target) markCaughtUp()
      if (!wakeScheduled) {
        wakeScheduled = true
        setImmediate(wake)
      }
    },
    error: (error: unknown) => {
      failure = `the journal cannot be followed: ${(error as Error).message}`
      markCaughtUp()
      wake()
    }
  })

  const overview = (res: ServerResponse) =>
    json(res, 200, {
      journal: options.journalName,
      target,
      failure: failure ?? null,
      now: Date.now(),
      ...projection.overview(Date.now())
    })

  const executions = (res: ServerResponse, url: URL) => {
    const before = intParam(url, "before")
    const limit = intParam(url, "limit") ?? 25
    if (Number.isNaN(before) || Number.isNaN(limit) || limit < 1 || limit > 200)
      return refuse(res, 400, "before: a sequence; limit: 1 to 200")
    return json(res, 200, projection.executions({ before, limit }))
  }

  /** A stream's events from `after` on, at most `limit` and about 1 MiB (never fewer than one). */
  const history = async (res: ServerResponse, id: string, url: URL) => {
    const after = intParam(url, "after") ?? 0
    const limit = intParam(url, "limit") ?? 50
    if (Number.isNaN(after) || Number.isNaN(limit) || limit < 1 || limit > MAX_HISTORY_PAGE)
      return refuse(res, 400, `after: a sequence; limit: 1 to ${MAX_HISTORY_PAGE}`)
    const events = await firstValueFrom(
      journal.replay({ streamId: id, fromSequence: after + 1 }).pipe(take(limit + 1), toArray())
    )
    const page: Array<EventEnvelope> = []
    let bytes = 0
    for (const e of events.slice(0, limit)) {
      bytes += JSON.stringify(e).length
      if (page.length > 0 && bytes > MAX_HISTORY_BYTES) break
      page.push(e)
    }
    const more = page.length < events.length
    return json(res, 200, { events: page, after: more ? page.at(-1)!.sequence : null })
  }

  /** One stream's summary: its row, tool calls and collected files, folded from its events (bounded). */
  const detail = async (res: ServerResponse, id: string, held: Held) => {
    const events = await firstValueFrom(journal.replay({ streamId: id }).pipe(take(MAX_DETAIL_EVENTS), toArray()))
    if (events.length === 0) return refuse(res, 404, "no such execution in the journal")
    let state: Projection.ExecutionState | undefined
    const calls = new Map<
      string,
      { callId: number; tool: string; outcome?: string; durationMs?: number; reason?: string }
    >()
    let callsOmitted = 0
    const files: Array<{ path: string; size: number; mime: string }> = []
    let filesOmitted = 0
    let skipped = 0
    const recorded = new Set<string>()
    for (const e of events) {
      state = Projection.evolve(state, e)
      switch (e.type) {
        case "ToolCallRequested": {
          const key = `${e.data.cellId ?? ""}/${e.data.callId}`
          if (calls.size < MAX_LISTED) calls.set(key, { callId: e.data.callId, tool: e.data.tool })
          else callsOmitted++
          break
        }
        case "ToolCallCompleted":
        case "ToolCallFailed":
        case "ToolCallRefused": {
          const call = calls.get(`${e.data.cellId ?? ""}/${e.data.callId}`)
          if (call === undefined) break
          call.outcome = e.type.slice("ToolCall".length).toLowerCase()
          if ("durationMs" in e.data) call.durationMs = e.data.durationMs
          if ("reason" in e.data) call.reason = e.data.reason
          break
        }
        case "ArtifactsCollected":
          for (const f of e.data.files)
            if (files.length < MAX_LISTED) files.push({ path: f.path, size: f.size, mime: f.mime })
            else filesOmitted++
          skipped += e.data.skipped.length + (e.data.skippedOmitted ?? 0)
          break
        default:
          if ((e.type as string) === "CodeRecorded" || (e.type as string) === "OutputRecorded") recorded.add(e.type)
      }
    }
    const row =
      projection.find(id) ?? rowOf(state!, { files: files.length + filesOmitted, closedSequence: state!.lastSequence })
    return json(res, 200, {
      id,
      kind: state!.kind,
      phase: state!.phase,
      row,
      containerName: state!.containerName ?? null,
      violations: state!.violations.slice(0, 20),
      toolCalls: [...calls.values()],
      toolCallsOmitted: callsOmitted,
      // Each file: whether the artifact store holds it for this credential, and whether it is shown as an image.
      files: files.map((f) => ({
        ...f,
        held: held?.readable === true && held.files.has(f.path),
        image: imageType(f.mime) !== undefined
      })),
      // "here": this process has the artifact store (mounted on the MCP server); "elsewhere": the standalone dashboard.
      store: options.files === undefined ? "elsewhere" : "here",
      filesOmitted,
      skipped,
      recorded: [...recorded],
      eventsRead: events.length,
      eventsCapped: events.length === MAX_DETAIL_EVENTS
    })
  }

  /** One collected image, while the artifact store holds it and the credential may read it. */
  const image = (res: ServerResponse, filePath: string, held: Held) => {
    if (options.files === undefined)
      return refuse(
        res,
        404,
        "not held by this process: the artifact store is the MCP server's (mcp --http --dashboard)"
      )
    const file = held?.files.get(filePath)
    if (held === undefined || file === undefined) return refuse(res, 404, "not held (any more) by the artifact store")
    if (!held.readable) return refuse(res, 404, "held for another client's MCP session")
    const type = imageType(file.mime)
    if (type === undefined) return refuse(res, 415, "not an image: only PNG, JPEG, GIF, WebP and SVG are served")
    return send(res, 200, type, file.content, IMAGE_HEADERS)
  }

  const wait = (req: IncomingMessage, res: ServerResponse, url: URL) => {
    const after = intParam(url, "after")
    if (after === undefined || Number.isNaN(after)) return refuse(res, 400, "after: a sequence")
    if (projection.position() > after || failure !== undefined || closing !== undefined)
      return json(res, 200, { position: projection.position() })
    if (waiters.size >= maxWaiters)
      return refuse(res, 429, `${waiters.size} live updates are open (at most ${maxWaiters}): close a tab`, {
        "retry-after": "5"
      })
    const done = () => {
      clearTimeout(timer)
      waiters.delete(check)
      json(res, 200, { position: projection.position() })
    }
    const check = () => {
      if (projection.position() > after || closing !== undefined) done()
    }
    const timer = setTimeout(done, waitMs)
    waiters.add(check)
    req.once("close", () => {
      if (!res.writableEnded) {
        clearTimeout(timer)
        waiters.delete(check)
      }
    })
  }

  /** The store's files of an execution, and whether this credential may read them (its MCP session's). */
  const heldFor = (id: string, credential: string, access: DashboardAccess) => {
    const held = options.files?.get(id)
    return held === undefined
      ? undefined
      : { files: held.files, readable: access.sessionClient?.(held.owner) === credential }
  }

  const handle = async (req: IncomingMessage, res: ServerResponse, path: string, access: DashboardAccess) => {
    const url = new URL(req.url ?? "/", "http://dashboard.invalid")
    if (req.method !== "GET" && req.method !== "HEAD")
      return refuse(res, 405, "method not allowed", { allow: "GET, HEAD" })
    // The page itself holds no data: it is served without the token, which it reads from its fragment.
    if (path === "/") return send(res, 200, "text/html; charset=utf-8", PAGE_HTML)
    if (path === "/dashboard.js") return send(res, 200, "text/javascript; charset=utf-8", PAGE_SCRIPT)
    if (path === "/dashboard.css") return send(res, 200, "text/css; charset=utf-8", PAGE_CSS)
    if (path === "/favicon.ico") return send(res, 204, "image/x-icon", "")
    if (!path.startsWith("/api/")) return refuse(res, 404, "not found")
    const checked = access.guard.check(req)
    if ("refused" in checked)
      return refuse(res, checked.refused.status, checked.refused.message, checked.refused.headers)
    if (options.viewers !== undefined && !options.viewers.has(checked.credential))
      return refuse(res, 403, "this credential may not see the dashboard (--dashboard-client)")
    if (closing !== undefined) return refuse(res, 503, "the dashboard is stopping")
    if (path === "/api/overview") return overview(res)
    if (path === "/api/executions") return executions(res, url)
    if (path === "/api/wait") return wait(req, res, url)
    const match = /^\/api\/executions\/([^/]{1,400})(\/events|\/files\/([^/]{1,4096}))?$/.exec(path)
    if (match !== null) {
      let id: string
      let file: string | undefined
      try {
        id = decodeURIComponent(match[1]!)
        file = match[3] === undefined ? undefined : decodeURIComponent(match[3])
      } catch {
        return refuse(res, 400, "a stream id (and a file's path), URL-encoded")
      }
      if (file !== undefined) return image(res, file, heldFor(id, checked.credential, access))
      return match[2] === undefined ? detail(res, id, heldFor(id, checked.credential, access)) : history(res, id, url)
    }
    return refuse(res, 404, "not found")
  }

  return {
    handle: async (req, res, path, access) => void (await handle(req, res, path, access)),
    caughtUp,
    projection,
    close: () =>
      (closing ??= (async () => {
        subscription.unsubscribe()
        wake()
      })())
  }
}

/**
 * The dashboard mounted on the MCP HTTP server (`serveHttp`'s `mount`) under `path`: the server's
 * Host/Origin checks and tokens; its own journal; its artifact store (`files`) for the images.
 */
export const dashboardMount = async (
  options: DashboardHandlerOptions & { readonly path: string }
): Promise<HttpMount> => {
  const handler = await makeDashboardHandler(options)
  return {
    path: options.path,
    handle: (req, res, context) => {
      // The page's URLs are relative to its root: /dashboard goes to /dashboard/.
      if (context.path === "") {
        res.writeHead(308, { ...SECURITY_HEADERS, location: `${options.path}/` })
        return Promise.resolve(void res.end())
      }
      return handler.handle(req, res, context.path, context)
    },
    close: handler.close
  }
}

export const serveDashboard = async (options: DashboardServerOptions): Promise<DashboardServing> => {
  const host = options.host ?? "127.0.0.1"
  if (!isLoopback(host) && options.allowRemote !== true)
    throw new Error(
      `refusing to listen on ${host}: not a loopback address; pass --allow-remote to do it anyway, behind TLS`
    )
  let port = 0
  const guard = makeHttpGuard({
    host,
    port: () => port,
    credentials: options.credentials,
    allowedHosts: options.allowedHosts,
    allowedOrigins: options.allowedOrigins
  })
  const handler = await makeDashboardHandler(options)
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const site = guard.checkSite(req)
    if (site !== undefined) return refuse(res, site.status, site.message, site.headers)
    return handler.handle(req, res, new URL(req.url ?? "/", "http://dashboard.invalid").pathname, { guard })
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => refuse(res, 500, `internal error: ${(error as Error).message}`))
  })
  server.maxConnections = options.maxConnections ?? 64
  server.headersTimeout = 10_000
  server.requestTimeout = 30_000
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(options.port ?? 0, host, () => {
        server.off("error", reject)
        resolve()
      })
    })
  } catch (error) {
    await handler.close()
    throw error
  }
  port = (server.address() as AddressInfo).port
  const shown = host.includes(":") ? `[${host}]` : host
  let closing: Promise<void> | undefined
  return {
    url: `http://${shown}:${port}/`,
    port,
    caughtUp: handler.caughtUp,
    projection: handler.projection,
    close: () =>
      (closing ??= (async () => {
        await handler.close()
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
        server.closeAllConnections()
        await stopped
      })())
  }
}
