/**
 * The checks a request to one of this project's HTTP servers passes before anything else: the MCP
 * endpoint (`serveHttp`) and the CLI's dashboard (`hermes-sandbox dashboard`) share them. Its own
 * module, free of the MCP SDK, so the dashboard does not load it.
 *
 * - the Host header must be a loopback name (any port), the server's own address, or one allowed
 *   (DNS rebinding: a page cannot reach 127.0.0.1 under its own name);
 * - a browser's Origin, when sent, must be a loopback origin or one allowed;
 * - the bearer token must be one of the credentials', compared in constant time (every one of them,
 *   so the time says nothing of which).
 */
import { timingSafeEqual } from "node:crypto"
import type { IncomingMessage } from "node:http"

/** localhost, 127.0.0.1 or [::1], with or without a port. */
export const LOOPBACK_HOST = /^(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?$/
/** A page served from localhost, 127.0.0.1 or [::1], over http or https, on any port. */
export const LOOPBACK_ORIGIN = /^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?$/

export interface HttpGuardOptions {
  /** The address the server listens on. */
  readonly host: string
  /** Its port (known once it listens: a free port is chosen then). */
  readonly port: () => number
  /** The bearer tokens accepted, by credential name (each at least 16 characters). */
  readonly credentials: Readonly<Record<string, string>>
  /** More Host header values to accept (host:port), e.g. a reverse proxy's name. */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /** More browser origins to accept, e.g. "https://inspector.example". */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
}

/** Why a request is refused: its status, a message to send, and the headers that go with it. */
export interface HttpRefusal {
  readonly status: 401 | 403
  readonly message: string
  readonly headers: Readonly<Record<string, string>>
}

export interface HttpGuard {
  readonly hostAllowed: (req: IncomingMessage) => boolean
  readonly originAllowed: (req: IncomingMessage) => boolean
  /** The credential the request's bearer token is, if any. */
  readonly credentialOf: (req: IncomingMessage) => string | undefined
  /** Host and Origin only (what is served without a token): the refusal, or undefined. */
  readonly checkSite: (req: IncomingMessage) => HttpRefusal | undefined
  /** Host, then Origin, then the token: the refusal, or the credential's name. */
  readonly check: (req: IncomingMessage) => { readonly refused: HttpRefusal } | { readonly credential: string }
}

/** Throws when no credential is given or a token is shorter than 16 characters. */
export const checkCredentials = (credentials: Readonly<Record<string, string>>): void => {
  if (Object.keys(credentials).length === 0) throw new Error("a bearer token is required (token, or clients)")
  for (const [name, token] of Object.entries(credentials))
    if (token.length < 16)
      throw new Error(
        `the bearer token${name === "default" ? "" : ` of ${JSON.stringify(name)}`} must be at least 16 characters`
      )
}

export const makeHttpGuard = (options: HttpGuardOptions): HttpGuard => {
  checkCredentials(options.credentials)
  const credentials = Object.entries(options.credentials).map(([name, t]) => ({ name, token: Buffer.from(t, "utf8") }))
  const allowedHosts = (options.allowedHosts ?? []).map((h) => h.toLowerCase())
  const allowedOrigins = (options.allowedOrigins ?? []).map((o) => o.toLowerCase())
  const hostAllowed = (req: IncomingMessage) => {
    const value = (req.headers.host ?? "").toLowerCase()
    return LOOPBACK_HOST.test(value) || value === `${options.host}:${options.port()}` || allowedHosts.includes(value)
  }
  const originAllowed = (req: IncomingMessage) => {
    const origin = req.headers.origin
    if (origin === undefined) return true
    return LOOPBACK_ORIGIN.test(origin.toLowerCase()) || allowedOrigins.includes(origin.toLowerCase())
  }
  const credentialOf = (req: IncomingMessage) => {
    const header = req.headers.authorization ?? ""
    const given = Buffer.from(header.startsWith("Bearer ") ? header.slice(7).trim() : "", "utf8")
    let found: string | undefined
    for (const c of credentials) if (given.length === c.token.length && timingSafeEqual(given, c.token)) found = c.name
    return found
  }
  const checkSite = (req: IncomingMessage): HttpRefusal | undefined => {
    if (!hostAllowed(req))
      return {
        status: 403,
        message: `forbidden: Host ${JSON.stringify(req.headers.host ?? "")} is not this server's`,
        headers: {}
      }
    if (!originAllowed(req))
      return {
        status: 403,
        message: `forbidden: Origin ${JSON.stringify(req.headers.origin)} is not allowed`,
        headers: {}
      }
    return undefined
  }
  return {
    hostAllowed,
    originAllowed,
    credentialOf,
    checkSite,
    check: (req) => {
      const refused = checkSite(req)
      if (refused !== undefined) return { refused }
      const credential = credentialOf(req)
      if (credential === undefined)
        return {
          refused: {
            status: 401,
            message: "unauthorized: send Authorization: Bearer <token>",
            headers: { "www-authenticate": `Bearer realm="hermes-sandbox"` }
          }
        }
      return { credential }
    }
  }
}
