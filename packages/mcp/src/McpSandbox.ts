/**
 * What every MCP session of one server shares: the services (ONE executor, so the concurrency
 * limit and queue hold across clients, and the session service, over one journal), the tools'
 * limits, and the count of live session sandboxes against the server's cap. Each MCP session
 * (McpSession.ts) is opened from here and closed with it at the latest.
 */
import { Effect, Either, type Layer, ManagedRuntime, Stream } from "effect"
import {
  Artifacts,
  DEFAULT_KEPT_OUTPUT_BYTES,
  Executor,
  keptOutputBytes,
  MAX_KEPT_OUTPUT_BYTES,
  Session as SessionService,
  type ToolLimits,
  type Tools,
  type ToolSpec
} from "@hermes-sandbox/core"
import { planTools, resolveToolLimits } from "@hermes-sandbox/core/Tools"
import { type Sessions } from "@hermes-sandbox/core/Session"
import { SandboxServices } from "@hermes-sandbox/docker"
import { Journal, type JournalClient, toObservable } from "@hermes-sandbox/events"
import { SessionLimitReached } from "./errors.js"
import { FileStore } from "./fileStore.js"
import { McpSession, type McpSessionContext } from "./McpSession.js"
import { IMAGE_MODES, type ImageMode } from "./tools/images.js"
import { DEFAULT_RESULT_CAPS, type ResultCaps } from "./tools/results.js"
import { McpUpstreamFailed } from "./toolsFromMcp.js"
import type { UpstreamServers } from "./upstreamConfig.js"
import { type ConnectedUpstream, connectUpstreams, mergeTools, upstreamLabel, type Upstreams } from "./upstreams.js"

export type Services = Executor.Executor | Sessions | Journal.Journal

export interface McpToolLimits {
  /** execute_code's and terminal's timeout_s when none is given. Default 50: inside the 60 s request timeout most clients use. */
  readonly defaultTimeoutS?: number
  /** The largest timeout_s accepted. Default 300 (a client must then allow as long, or reset its timeout on progress). */
  readonly maxTimeoutS?: number
  /** Idle seconds after which a session sandbox (terminal, read_file, write_file) is removed. Default 600. */
  readonly sessionIdleS?: number
  /** Live session sandboxes this server holds at most, over all its MCP sessions. Default 16. */
  readonly maxSessionSandboxes?: number
  /** Bytes of a file read_file returns at most per call. Default 256 KiB. */
  readonly maxReadBytes?: number
  /** Bytes write_file writes at most. Default 8 MiB. */
  readonly maxWriteBytes?: number
  /** Bytes of stdout and stderr a result carries. Default the Hermes agent's: 50,000 and 10,000. */
  readonly resultCaps?: ResultCaps
  /** How often a long call sends "still running" progress (when the client asked for progress). Default 5000 ms. */
  readonly progressIntervalMs?: number
  /**
   * What execute_code's `collect` brings back per call. Default the SDK's (100 files, 10 MiB each,
   * 32 MiB in all); maxTotalBytes is never more than fileStoreBytes (a call's files always fit the store).
   */
  readonly collectLimits?: Partial<Artifacts.CollectLimits>
  /**
   * What a call does with the images it produced (execute_code's collected PNG/JPEG/GIF/WebP,
   * run_python's displays), when the call does not say (its `images` argument): "inline" (default)
   * sends each as an `image` content block, for clients that render them; "link" sends none and
   * names each one's resource in the text, for clients that turn content blocks into text (the
   * OpenAI Agents SDK, the Vercel AI SDK); "none" sends neither and only describes them. docs/mcp.md
   * has a table of clients.
   */
  readonly images?: ImageMode
  /** An image up to this size may be sent inline, as an image content block. Default 1 MiB. */
  readonly maxImageBytes?: number
  /** Images sent inline per call at most (the others are named, with their resource). Default 4. */
  readonly maxImages?: number
  /** Bytes of images sent inline per call in all (the base64 of a result is at most 4/3 of it). Default 2 MiB. */
  readonly maxImageTotalBytes?: number
  /** Seconds the collected files stay readable as resources after their call. Default 900 (15 min). */
  readonly fileRetentionS?: number
  /** Bytes of collected files the server keeps in all, over every MCP session; the oldest calls' are evicted first. Default 64 MiB. */
  readonly fileStoreBytes?: number
  /**
   * When a result cuts a stream (resultCaps), the server keeps the stream whole up to this many
   * bytes, in the same store as the collected files (fileStoreBytes, fileRetentionS), and names it
   * in the result (full_output: read_file or resources/read). Default 10 MiB (at most half the
   * store: both streams of a run fit it); 0 keeps none.
   */
  readonly fullOutputBytes?: number
}

export type ResolvedLimits = Required<Omit<McpToolLimits, "collectLimits">> & {
  readonly collectLimits: Artifacts.CollectLimits
}

const MiB = 1024 * 1024

export const resolveLimits = (l: McpToolLimits = {}): ResolvedLimits => {
  if (l.images !== undefined && !IMAGE_MODES.includes(l.images))
    throw new TypeError(`limits.images: one of ${IMAGE_MODES.join(", ")}, got ${JSON.stringify(l.images)}`)
  if (
    l.fullOutputBytes !== undefined &&
    !(l.fullOutputBytes === 0 || keptOutputBytes(l.fullOutputBytes) === l.fullOutputBytes)
  )
    throw new TypeError(
      `limits.fullOutputBytes: 0 or a whole number of bytes up to ${MAX_KEPT_OUTPUT_BYTES}, got ${JSON.stringify(l.fullOutputBytes)}`
    )
  const fileStoreBytes = l.fileStoreBytes ?? 64 * MiB
  return {
    defaultTimeoutS: l.defaultTimeoutS ?? 50,
    maxTimeoutS: l.maxTimeoutS ?? 300,
    sessionIdleS: l.sessionIdleS ?? 600,
    maxSessionSandboxes: l.maxSessionSandboxes ?? 16,
    maxReadBytes: l.maxReadBytes ?? 256 * 1024,
    maxWriteBytes: l.maxWriteBytes ?? 8 * 1024 * 1024,
    resultCaps: l.resultCaps ?? DEFAULT_RESULT_CAPS,
    progressIntervalMs: l.progressIntervalMs ?? 5000,
    collectLimits: {
      maxFiles: l.collectLimits?.maxFiles ?? Artifacts.DEFAULT_COLLECT_LIMITS.maxFiles,
      maxFileBytes: Math.min(
        l.collectLimits?.maxFileBytes ?? Artifacts.DEFAULT_COLLECT_LIMITS.maxFileBytes,
        fileStoreBytes
      ),
      maxTotalBytes: Math.min(
        l.collectLimits?.maxTotalBytes ?? Artifacts.DEFAULT_COLLECT_LIMITS.maxTotalBytes,
        fileStoreBytes
      )
    },
    images: l.images ?? "inline",
    maxImageBytes: l.maxImageBytes ?? MiB,
    maxImages: l.maxImages ?? 4,
    maxImageTotalBytes: l.maxImageTotalBytes ?? 2 * MiB,
    fileRetentionS: l.fileRetentionS ?? 900,
    fileStoreBytes,
    fullOutputBytes: Math.min(l.fullOutputBytes ?? DEFAULT_KEPT_OUTPUT_BYTES, Math.floor(fileStoreBytes / 2))
  }
}

export interface McpSandboxOptions extends SandboxServices.SandboxServicesOptions {
  readonly limits?: McpToolLimits
  /**
   * Upstream MCP servers whose tools execute_code's code may call (`from hermes_tools import
   * fs_read_file`), by name: each connected at open (a server that cannot be used fails open,
   * naming it) and closed with the sandbox. Each tool's name is `prefix` (default `<name>_`) + its
   * upstream name made an identifier. loadUpstreamConfig(path) reads them from a file.
   */
  readonly upstream?: UpstreamServers
  /**
   * Host tools execute_code's code may call, besides the upstream servers' (toolsFromMcp's, or
   * your own): listed in execute_code's description and given to every run. `toolLimits` (the
   * executor's) bound the calls of each run.
   */
  readonly tools?: Tools
  /** Options of every session sandbox (terminal): its image, env... Its idle limit is limits.sessionIdleS. */
  readonly session?: Omit<SessionService.SessionOptions, "lifetimeSeconds" | "tags">
  /**
   * Session sandboxes kept ready, their Python kernels started, for the MCP sessions' first
   * `terminal`, file or `run_python` call (the sessions service's pool, with `session`'s options).
   * They do not count against `maxSessionSandboxes` until an MCP session takes one. Default: none.
   */
  readonly sessionPool?: Omit<SessionService.SessionPoolOptions, "session">
}

/**
 * The tools checked now, as every run would check them (names, schemas that compile), so a tool
 * that cannot be offered fails the server's start, naming where it came from, not every call.
 */
const specsOf = (
  tools: Tools,
  limits: ToolLimits,
  sources: ReadonlyArray<readonly [string, Tools]>
): ReadonlyArray<ToolSpec> => {
  const planned = Effect.runSync(Effect.either(planTools(tools, limits)))
  if (Either.isRight(planned)) return [...(planned.right?.tools.values() ?? [])].map((t) => t.spec)
  const error = planned.left
  const tool = /^tools\.([A-Za-z0-9_]+)/.exec(error.field)?.[1]
  const source = sources.find(([, t]) => tool !== undefined && tool in t)?.[0]
  if (source === undefined || source === "the tools option") throw error
  throw new McpUpstreamFailed({
    upstream: source,
    reason: "invalid-options",
    message: `${source}'s tool ${tool} cannot be offered: ${error.message} (exclude it)`
  })
}

export class McpSandbox {
  readonly limits: ResolvedLimits
  /** execute_code's collected files, readable as resources for a while (fileStore.ts). */
  readonly files: FileStore
  private readonly sessions = new Set<McpSession>()
  /** Session ids of the session sandboxes alive now (released by their SessionClosed). */
  private readonly liveSandboxes = new Set<string>()
  private opening = 0
  private closing: Promise<void> | undefined
  private readonly unsubscribe: () => void
  /** What execute_code's code may call, as its generated modules show it (checked at open), in the order given. */
  readonly toolSpecs: ReadonlyArray<ToolSpec>
  /** The limits on one run's tool calls (the executor's toolLimits over the defaults). */
  readonly toolLimits: ToolLimits
  /** The upstream MCP servers connected at open. */
  readonly upstreams: ReadonlyArray<ConnectedUpstream>

  private constructor(
    readonly runtime: ManagedRuntime.ManagedRuntime<Services, unknown>,
    readonly executorId: string,
    /** The executor's Prometheus metrics (its sessions service's included: one registry). */
    private readonly metricsText: Effect.Effect<string>,
    /** Live events of the executor and of the sessions service (each delivered after it committed). */
    readonly subscribe: Sessions["Type"]["unsafeSubscribe"],
    readonly sessionOptions: McpSandboxOptions["session"],
    limits: McpToolLimits | undefined,
    /** Every run of execute_code gets these (empty: none). */
    readonly tools: Tools,
    callable: { readonly specs: ReadonlyArray<ToolSpec>; readonly limits: ToolLimits },
    private readonly connections: Upstreams | undefined
  ) {
    this.toolSpecs = callable.specs
    this.toolLimits = callable.limits
    this.upstreams = connections?.servers ?? []
    this.limits = resolveLimits(limits)
    this.files = new FileStore({ maxBytes: this.limits.fileStoreBytes, retentionMs: this.limits.fileRetentionS * 1000 })
    this.unsubscribe = subscribe((e) => {
      if (e.type === "SessionClosed") this.liveSandboxes.delete(e.streamId)
    })
  }

  /** Build the services of `layer` (the Docker ones by default; a fake runtime's in tests). */
  static async open(options: McpSandboxOptions = {}, layer?: Layer.Layer<Services, unknown>): Promise<McpSandbox> {
    // The tools go to execute_code's runs, not to the executor's defaults: the session service
    // (terminal) has no use for them, and execute_code lists what it passes.
    const { upstream, tools: given, sessionPool, ...rest } = options
    // The pool's sessions are opened as useSandbox opens one (McpSession), but for the tags.
    const services =
      sessionPool === undefined
        ? rest
        : {
            ...rest,
            sessions: {
              ...rest.sessions,
              pool: {
                ...sessionPool,
                session: { ...options.session, lifetimeSeconds: resolveLimits(options.limits).sessionIdleS }
              }
            }
          }
    const connections =
      upstream === undefined || Object.keys(upstream).length === 0 ? undefined : await connectUpstreams(upstream)
    let runtime: ManagedRuntime.ManagedRuntime<Services, unknown> | undefined
    try {
      const sources = [
        ...(given === undefined ? [] : [["the tools option", given] as const]),
        ...(connections?.servers ?? []).map((c) => [upstreamLabel(c.name), c.tools] as const)
      ]
      const tools = mergeTools(sources)
      const toolLimits = resolveToolLimits(services.toolLimits)
      const specs = specsOf(tools, toolLimits, sources)
      runtime = ManagedRuntime.make(layer ?? SandboxServices.layer(services))
      const { executorId, subscribe, metrics } = await runtime.runPromise(
        Effect.gen(function* () {
          const executor = yield* Executor.Executor
          const sessions = yield* SessionService.Sessions
          const subscribe: Sessions["Type"]["unsafeSubscribe"] = (listener) => {
            const fromExecutor = executor.unsafeSubscribe(listener)
            const fromSessions = sessions.unsafeSubscribe(listener)
            return () => {
              fromExecutor()
              fromSessions()
            }
          }
          return { executorId: executor.executorId, subscribe, metrics: executor.metrics }
        })
      )
      return new McpSandbox(
        runtime,
        executorId,
        metrics,
        subscribe,
        options.session,
        options.limits,
        tools,
        { specs, limits: toolLimits },
        connections
      )
    } catch (error) {
      await runtime?.dispose()
      await connections?.close()
      throw error
    }
  }

  /**
   * The server's Prometheus metrics in the text exposition format (Metrics.CONTENT_TYPE): the
   * executor's and the session sandboxes' (docs/observability.md). serveHttp serves it at /metrics.
   */
  metrics(): Promise<string> {
    return this.runtime.runPromise(this.metricsText)
  }

  /**
   * The server's own journal, read as a JournalClient reads one (what the CLI's dashboard follows
   * when mounted on this server: `mcp --http --dashboard`). Its Observables end when the sandbox closes.
   */
  readonly journal: Pick<JournalClient, "lastSequence" | "follow" | "replay"> = {
    lastSequence: () => this.runtime.runPromise(Effect.flatMap(Journal.Journal, (j) => j.lastSequence)),
    follow: (options) =>
      toObservable(Stream.unwrap(Effect.map(Journal.Journal, (j) => j.follow(options))), this.runtime),
    replay: (options) => toObservable(Stream.unwrap(Effect.map(Journal.Journal, (j) => j.read(options))), this.runtime)
  }

  /** A new MCP session (one per stdio connection, one per HTTP session). */
  openSession(context: McpSessionContext): McpSession {
    if (this.closing !== undefined) throw new Error("the MCP sandbox is closed")
    const session = new McpSession(this, context, () => this.sessions.delete(session))
    this.sessions.add(session)
    return session
  }

  /**
   * Open a session sandbox counted against the server's cap: refused when the cap is reached,
   * counted from the moment it is asked for (two first calls at once cannot both pass), and
   * uncounted when its SessionClosed is recorded (closed, reset, idle-expired).
   */
  withSandboxReserved = <A extends { readonly sessionId: string }, E, R>(
    open: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | SessionLimitReached, R> =>
    Effect.suspend((): Effect.Effect<A, E | SessionLimitReached, R> => {
      const held = this.liveSandboxes.size + this.opening
      if (held >= this.limits.maxSessionSandboxes) {
        return Effect.fail(
          new SessionLimitReached({
            limit: this.limits.maxSessionSandboxes,
            scope: "server",
            message: `this server already holds ${held} session sandboxes (at most ${this.limits.maxSessionSandboxes}): end another MCP session, call reset_session in one, or wait for an idle one to expire (${this.limits.sessionIdleS} s)`
          })
        )
      }
      this.opening++
      return open.pipe(
        Effect.tap((s) => Effect.sync(() => void this.liveSandboxes.add(s.sessionId))),
        Effect.ensuring(Effect.sync(() => void this.opening--))
      )
    })

  get liveSessionSandboxes(): number {
    return this.liveSandboxes.size
  }

  /** Close every MCP session (their calls interrupted, their sandboxes removed), then the services. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.sessions].map((s) => s.close("the server is stopping")))
      this.unsubscribe()
      this.files.clear()
      // After the runs (their tool calls cancelled with them), so no call finds its upstream gone.
      try {
        await this.runtime.dispose()
      } finally {
        await this.connections?.close()
      }
    })()
    return this.closing
  }
}
