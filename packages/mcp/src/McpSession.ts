/**
 * One MCP session (a stdio connection, or one HTTP session): the tags its runs are journaled
 * with, the calls it has in flight (all interrupted when it closes), the executions it ran, and
 * its session sandbox — Hermes' `container_persistent: false`: created on the first terminal,
 * file or run_python call, cwd and exported variables carried between calls (and, for run_python,
 * its Python kernel's state), removed when the MCP session ends, by reset_session, or after
 * `sessionIdleS` idle (the next call then gets a fresh one).
 */
import { Effect } from "effect"
import { CellLineage, type ExecuteOptions, Session as SessionService, type Session } from "@hermes-sandbox/core"
import { runAbortable } from "@hermes-sandbox/docker/SandboxServices"
import { McpSessionClosed } from "./errors.js"
import type { McpSandbox, Services } from "./McpSandbox.js"

export interface McpSessionContext {
  /** The MCP session id (HTTP: its Mcp-Session-Id; stdio: one made for the connection). */
  readonly id: string
  readonly transport: "stdio" | "http"
  /** Who connected, for the journal (HTTP: the remote address). */
  readonly client?: string
}

/** Characters of the client's self-reported name and version kept in the journal. */
const MAX_CLIENT_NAME = 200

/** How many execution ids a session remembers (its resources/list). */
const REMEMBERED_EXECUTIONS = 200

export class McpSession {
  private sandbox: Session.Session | undefined
  /**
   * The session sandboxes run_python's cells ran in: the first cell in a new one (the old one gone
   * without reset_session: an idle expiry, a sandbox that died) says state_lost, result and journal.
   */
  readonly cells = CellLineage.make()
  private readonly lock = Effect.unsafeMakeSemaphore(1)
  private readonly aborter = new AbortController()
  private closing: Promise<void> | undefined
  private readonly ran: Array<string> = []
  /** The client's name and version from its initialize request, once known. */
  clientInfo: { readonly name: string; readonly version: string } | undefined

  constructor(
    readonly owner: McpSandbox,
    readonly context: McpSessionContext,
    private readonly onClosed: () => void
  ) {}

  get id(): string {
    return this.context.id
  }

  get closed(): boolean {
    return this.closing !== undefined
  }

  /** Execution ids this session ran, oldest first (the last REMEMBERED_EXECUTIONS). */
  get executions(): ReadonlyArray<string> {
    return this.ran
  }

  /** The journal tags of a run asked for by `tool`. */
  tags(tool: string): Record<string, string> {
    return {
      "mcp.session": this.context.id,
      "mcp.transport": this.context.transport,
      "mcp.tool": tool,
      ...(this.context.client === undefined ? {} : { "mcp.client": this.context.client }),
      // The client names itself: bounded, so a client cannot bloat every event it causes.
      ...(this.clientInfo === undefined
        ? {}
        : { "mcp.client_name": `${this.clientInfo.name} ${this.clientInfo.version}`.slice(0, MAX_CLIENT_NAME) })
    }
  }

  /**
   * Run one call on the services: `signal` (the request's: a notifications/cancelled) or this
   * session's close interrupts it, and it rejects with ExecutionAborted once its container is
   * removed (or its command killed); the journal records why.
   */
  run<A>(
    tool: string,
    make: (hooks: ExecuteOptions) => Effect.Effect<A, unknown, Services>,
    signal: AbortSignal,
    hooks: ExecuteOptions = {}
  ): Promise<A> {
    if (this.closing !== undefined)
      return Promise.reject(new McpSessionClosed({ message: "this MCP session is closed" }))
    return runAbortable(
      this.owner.runtime,
      make,
      AbortSignal.any([signal, this.aborter.signal]),
      {
        ...hooks,
        tags: this.tags(tool),
        onExecutionId: (id) => {
          this.ran.push(id)
          if (this.ran.length > REMEMBERED_EXECUTIONS) this.ran.shift()
          hooks.onExecutionId?.(id)
        }
      },
      {
        noun: tool === "execute_code" ? "execution" : "call",
        closedReason: "the MCP session closed",
        cleaned: tool === "execute_code" ? "its container was removed" : "its command was killed"
      }
    )
  }

  /** The session sandbox, opened (counted against the server's cap) if there is none or it ended. */
  readonly useSandbox: Effect.Effect<Session.Session, unknown, Services> = this.lock.withPermits(1)(
    Effect.suspend((): Effect.Effect<Session.Session, unknown, Services> => {
      if (this.closing !== undefined)
        return Effect.fail(new McpSessionClosed({ message: "this MCP session is closed" }))
      const current = this.sandbox
      const open = Effect.flatMap(SessionService.Sessions, (sessions) =>
        this.owner.withSandboxReserved(
          // The same options as the pool's sessions (McpSandbox.open), so a ready one is claimed.
          sessions.open({
            ...this.owner.sessionOptions,
            lifetimeSeconds: this.owner.limits.sessionIdleS,
            tags: this.tags("terminal")
          })
        )
      ).pipe(
        // Made and remembered in one step: an interrupted first call cannot leave an unowned sandbox.
        Effect.tap((s) => Effect.sync(() => void (this.sandbox = s))),
        Effect.uninterruptible
      )
      if (current === undefined) return open
      return Effect.flatMap(current.status, (status) => (status.open ? Effect.succeed(current) : open))
    })
  )

  /** Destroy the session sandbox (the next call gets a fresh one); its id, or undefined when there was none. */
  readonly reset: Effect.Effect<string | undefined> = this.lock.withPermits(1)(
    Effect.suspend(() => {
      const current = this.sandbox
      this.sandbox = undefined
      // Removed on request: what its cells left is not a loss to report.
      this.cells.forget()
      if (current === undefined) return Effect.succeed(undefined)
      return Effect.as(
        Effect.flatMap(current.status, (s) => (s.open ? current.destroy : Effect.void)),
        current.sessionId
      )
    })
  )

  /** Interrupt every call in flight and remove the session sandbox. Idempotent. */
  close(reason: string): Promise<void> {
    this.closing ??= (async () => {
      this.aborter.abort(reason)
      // Its collected files: no one may read them once it is gone (over HTTP they were its alone).
      this.owner.files.forget(this.id)
      try {
        await this.owner.runtime.runPromise(this.reset)
      } finally {
        this.onClosed()
      }
    })()
    return this.closing
  }
}
