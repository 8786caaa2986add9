/**
 * `hermes-sandbox mcp`: the MCP server (@hermes-sandbox/mcp) over stdio (default: the protocol
 * alone on standard output, every log line on standard error) or Streamable HTTP (`--http`, at
 * /mcp, a bearer token required). One executor serves every MCP session, so --max-concurrency
 * and the queue hold across clients. It runs until the client leaves (stdio) or a signal.
 * --upstream-config connects upstream MCP servers at start (one that cannot be used stops the
 * start, naming it) whose tools execute_code's code may call; they are closed at shutdown.
 */
import { randomBytes } from "node:crypto"
import type { ImageMode } from "@hermes-sandbox/mcp"
import { JournalLocation } from "@hermes-sandbox/events"
import { isLoopback } from "@hermes-sandbox/mcp/loopback"
import { UsageError } from "../errors.js"
import { ExitCode } from "../exitCodes.js"
import {
  durationOption,
  executorOptionsOf,
  hermesSource,
  numberOption,
  type SandboxCommandOptions
} from "../sandboxOptions.js"
import { trapSignals } from "../signals.js"
import { type HttpCommandOptions, readTokenFile } from "../httpOptions.js"
import { toolLimitsOf, type UpstreamCommandOptions } from "../toolLimitOptions.js"
import { offeredLines, readUpstreamConfig, upstreamStartError } from "../upstreamOptions.js"

export { tokensOf } from "../httpOptions.js"

export interface McpOptions extends SandboxCommandOptions, UpstreamCommandOptions, HttpCommandOptions {
  readonly http?: boolean
  readonly dashboard?: boolean
  readonly dashboardClient?: ReadonlyArray<string>
  readonly metricsPort?: string
  readonly clientSessions?: string
  readonly httpSessionIdle?: string
  readonly image?: string
  readonly memory?: string
  readonly cpus?: string
  readonly timeout?: string
  readonly maxTimeout?: string
  readonly sessionIdle?: string
  readonly maxSessions?: string
  readonly sessionPool?: string
  readonly maxConcurrency?: string
  readonly maxQueue?: string
  readonly images?: string
}

/** The environment variable that may carry the HTTP bearer token. */
export const TOKEN_VARIABLE = "HERMES_SANDBOX_MCP_TOKEN"

const say = (line: string) => process.stderr.write(`hermes-sandbox mcp: ${line}\n`)

/** Where --dashboard serves the dashboard on the MCP HTTP server. */
const DASHBOARD_PATH = "/dashboard"

/** The journal as the dashboard names it (the executor's: --journal, --no-journal, or the default). */
const journalName = (options: McpOptions): string =>
  options.journal === false
    ? "in memory (--no-journal)"
    : JournalLocation.describe(
        JournalLocation.resolve(typeof options.journal === "string" ? options.journal : undefined)
      )

const tokenOf = (
  options: McpOptions
): { readonly token?: string; readonly clients?: Record<string, string>; readonly generated: boolean } => {
  if (options.tokenFile !== undefined) return { ...readTokenFile(options.tokenFile), generated: false }
  const fromEnv = process.env[TOKEN_VARIABLE]
  if (fromEnv !== undefined && fromEnv !== "") {
    if (fromEnv.length < 16) throw new UsageError(`${TOKEN_VARIABLE}: the token must be at least 16 characters`)
    return { token: fromEnv, generated: false }
  }
  return { token: randomBytes(32).toString("base64url"), generated: true }
}

/**
 * Who may see the mounted dashboard: it shows every client's executions (and what recordCode
 * recorded of them), so with named credentials — clients that need not trust each other — only
 * those --dashboard-client names; with one token, its holder.
 */
const dashboardViewersOf = (
  options: McpOptions,
  token: { readonly token?: string; readonly clients?: Record<string, string> }
): ReadonlySet<string> | undefined => {
  const named = Object.keys(token.clients ?? {})
  const given = options.dashboardClient ?? []
  if (options.dashboard !== true) {
    if (given.length > 0) throw new UsageError("--dashboard-client: only with --dashboard")
    return undefined
  }
  if (named.length === 0) {
    if (given.length > 0)
      throw new UsageError("--dashboard-client: names a credential of a --token-file of NAME TOKEN lines")
    return undefined
  }
  if (given.length === 0)
    throw new UsageError(
      `--dashboard shows every client's executions: with named credentials, say which may see it (--dashboard-client NAME; named: ${named.join(", ")})`
    )
  const unknown = given.filter((name) => !named.includes(name) && !(name === "default" && token.token !== undefined))
  if (unknown.length > 0)
    throw new UsageError(`--dashboard-client: no credential named ${unknown.map((n) => JSON.stringify(n)).join(", ")}`)
  return new Set(given)
}

/** --images' values (every ImageMode, checked by the compiler), before the SDK loads. */
const IMAGE_MODES: Record<ImageMode, true> = { inline: true, link: true, none: true }

export const imageModeOf = (given: string | undefined): ImageMode | undefined => {
  if (given === undefined) return undefined
  if (!Object.hasOwn(IMAGE_MODES, given))
    throw new UsageError(`--images: one of ${Object.keys(IMAGE_MODES).join(", ")}, got ${JSON.stringify(given)}`)
  return given as ImageMode
}

const seconds = (flag: string, given: string | undefined): number | undefined => {
  const ms = durationOption(flag, given)
  if (ms !== undefined && ms < 1000) throw new UsageError(`${flag}: at least 1s, got ${JSON.stringify(given)}`)
  return ms === undefined ? undefined : ms / 1000
}

export const mcp = async (options: McpOptions): Promise<number> => {
  // Every usage error before the SDK loads.
  const hermes = hermesSource(options)
  const port = options.port === undefined ? undefined : Number(options.port)
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535))
    throw new UsageError(`--port: expected 0 (a free port) to 65535, got ${JSON.stringify(options.port)}`)
  if (
    options.http !== true &&
    ((options.host ?? options.port ?? options.tokenFile ?? options.metricsPort) !== undefined ||
      options.dashboard === true)
  )
    throw new UsageError("--host, --port, --token-file, --metrics-port and --dashboard: only with --http")
  const metricsPort = options.metricsPort === undefined ? undefined : Number(options.metricsPort)
  if (metricsPort !== undefined && (!/^[0-9]+$/.test(options.metricsPort!) || metricsPort > 65535))
    throw new UsageError(
      `--metrics-port: expected 0 (a free port) to 65535, got ${JSON.stringify(options.metricsPort)}`
    )
  if (options.host !== undefined && !isLoopback(options.host) && options.allowRemote !== true) {
    throw new UsageError(
      `--host ${options.host}: not a loopback address, and this endpoint runs code; pass --allow-remote to listen on it anyway (behind TLS)`
    )
  }
  const defaultTimeoutS = seconds("--timeout", options.timeout)
  const maxTimeoutS = seconds("--max-timeout", options.maxTimeout)
  const sessionIdleS = seconds("--session-idle", options.sessionIdle)
  const maxSessionSandboxes = numberOption("--max-sessions", options.maxSessions, true)
  const sessionPool = numberOption("--session-pool", options.sessionPool, true)
  const maxSessionsPerClient = numberOption("--client-sessions", options.clientSessions, true)
  const httpSessionIdleS = seconds("--http-session-idle", options.httpSessionIdle)
  if (options.http !== true && (maxSessionsPerClient ?? httpSessionIdleS) !== undefined)
    throw new UsageError("--client-sessions and --http-session-idle: only with --http")
  const maxConcurrency = numberOption("--max-concurrency", options.maxConcurrency, true)
  const maxQueue = numberOption("--max-queue", options.maxQueue, true)
  const cpus = numberOption("--cpus", options.cpus)
  const imageMode = imageModeOf(options.images)
  if (defaultTimeoutS !== undefined && maxTimeoutS !== undefined && defaultTimeoutS > maxTimeoutS)
    throw new UsageError("--timeout: larger than --max-timeout")
  const toolLimits = toolLimitsOf(options)
  const token = options.http === true ? tokenOf(options) : undefined
  const dashboardViewers = token === undefined ? undefined : dashboardViewersOf(options, token)
  const images =
    options.image === undefined ? undefined : { python: options.image, javascript: options.image, bash: options.image }

  const { McpSandbox, serveHttp, serveStdio } = await import("@hermes-sandbox/mcp")
  const upstream = await readUpstreamConfig(options)
  for (const warning of upstream?.warnings ?? []) say(`warning: ${warning}`)
  // The Hermes agent's terminal: section as its own Docker backend applies it: image, limits, env
  // and forwarded variables for every sandbox; docker_volumes and lifetime_seconds for the session
  // sandbox (terminal, read_file, write_file) only — execute_code's single-use sandboxes take no mounts.
  const fromHermes =
    hermes === undefined ? undefined : (await import("@hermes-sandbox/docker")).fromHermesConfig(hermes)
  for (const warning of fromHermes?.loaded.warnings ?? []) say(`warning: ${warning}`)
  const { lifetimeSeconds: hermesIdleS, tags: _tags, ...hermesSession } = fromHermes?.session ?? {}
  const signals = trapSignals()
  const sandbox = await McpSandbox.open({
    ...fromHermes?.executor,
    ...executorOptionsOf(options, undefined),
    ...(images === undefined ? {} : { images }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
    ...(cpus === undefined ? {} : { cpus }),
    ...(maxConcurrency === undefined ? {} : { maxConcurrency }),
    ...(maxQueue === undefined ? {} : { maxQueue }),
    session: {
      ...hermesSession,
      ...(options.image === undefined ? {} : { image: options.image }),
      ...(options.memory === undefined ? {} : { memory: options.memory }),
      ...(cpus === undefined ? {} : { cpus }),
      ...(options.network === undefined ? {} : { network: options.network })
    },
    limits: {
      ...(defaultTimeoutS === undefined ? {} : { defaultTimeoutS }),
      ...(maxTimeoutS === undefined ? {} : { maxTimeoutS }),
      ...((sessionIdleS ?? hermesIdleS) === undefined ? {} : { sessionIdleS: sessionIdleS ?? hermesIdleS }),
      ...(maxSessionSandboxes === undefined ? {} : { maxSessionSandboxes }),
      ...(imageMode === undefined ? {} : { images: imageMode })
    },
    ...(upstream === undefined ? {} : { upstream: upstream.servers }),
    ...(toolLimits === undefined ? {} : { toolLimits }),
    ...(sessionPool === undefined ? {} : { sessionPool: { size: sessionPool } })
  }).catch(async (error: unknown) => {
    signals.dispose()
    throw await upstreamStartError(options, error)
  })
  if (upstream !== undefined) for (const line of offeredLines(options, sandbox.upstreams, "execute_code")) say(line)
  const stopped = new Promise<void>((resolve) =>
    signals.signal.addEventListener("abort", () => resolve(), { once: true })
  )
  try {
    if (options.http !== true) {
      const serving = await serveStdio(sandbox)
      say(`serving MCP over stdio (executor ${sandbox.executorId})`)
      await Promise.race([serving.closed, stopped])
      await serving.close()
    } else {
      // The dashboard of this server's journal, and its artifact store for the images (dashboard/server.ts).
      const mount =
        options.dashboard === true
          ? await (await import("../dashboard/server.js")).dashboardMount({
              path: DASHBOARD_PATH,
              journal: sandbox.journal,
              journalName: journalName(options),
              files: sandbox.files,
              viewers: dashboardViewers
            })
          : undefined
      const serving = await serveHttp(sandbox, {
        ...(mount === undefined ? {} : { mount }),
        ...(token!.token === undefined ? {} : { token: token!.token }),
        ...(token!.clients === undefined || Object.keys(token!.clients).length === 0
          ? {}
          : { clients: token!.clients }),
        ...(options.host === undefined ? {} : { host: options.host }),
        ...(port === undefined ? {} : { port }),
        ...(metricsPort === undefined ? {} : { metricsPort }),
        ...(options.allowRemote === true ? { allowRemote: true } : {}),
        ...(options.allowedHost === undefined ? {} : { allowedHosts: options.allowedHost }),
        ...(options.allowedOrigin === undefined ? {} : { allowedOrigins: options.allowedOrigin }),
        ...(maxSessionsPerClient === undefined ? {} : { maxSessionsPerClient }),
        ...(httpSessionIdleS === undefined ? {} : { sessionIdleS: httpSessionIdleS })
      })
      say(`serving MCP over Streamable HTTP at ${serving.url} (executor ${sandbox.executorId})`)
      if (mount !== undefined)
        say(`dashboard at ${new URL(`${DASHBOARD_PATH}/`, serving.url)}#token=<the bearer token>`)
      say(
        `Prometheus metrics at ${serving.metricsUrl}${metricsPort === undefined ? " (behind the bearer token)" : " (loopback, no token)"}`
      )
      if (token!.generated)
        say(`bearer token (generated; pass --token-file or ${TOKEN_VARIABLE} to choose one): ${token!.token}`)
      await stopped
      await serving.close()
    }
  } finally {
    await sandbox.close()
    signals.dispose()
  }
  return signals.exitCode() ?? ExitCode.ok
}
