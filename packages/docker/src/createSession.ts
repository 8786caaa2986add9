/**
 * The Promise facade for sessions, for users who do not use Effect:
 *
 *   await using s = await createSession({ lifetimeSeconds: 300 })
 *   await s.run("cd /tmp && export GREETING=hi")
 *   const r = await s.run('echo "$GREETING from $PWD"')      // "hi from /tmp"
 *   await s.runCode({ language: "python", code: "import os; print(os.getcwd())" })
 *
 *   const dev = await openPersistent({ profile: "dev" })     // found again after a restart
 *   await dev.close()                                        // detach (it stays); dev.destroy() removes it
 *
 *   const h = await openHermesSandbox()                      // ~/.hermes/config.yaml decides the scope
 *
 * Each facade owns its engine connection (and, for a session, the watchdog that removes its
 * sandbox if this process is killed); `close()` releases them. Errors are the SDK's typed
 * error classes, never Effect's wrappers.
 */
import { type Effect, Exit, Layer, ManagedRuntime } from "effect"
import { Observable } from "rxjs"
import {
  type ExecuteOptions,
  type PersistentOptions,
  type RunOptions,
  type SessionCodeRequest,
  type SessionOptions,
  type SessionResult,
  SessionEnded,
  Sessions,
  type SessionScope
} from "@hermes-sandbox/core"
import type { Session } from "@hermes-sandbox/core/Session"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { type CreateExecutorOptions, createExecutor, type SandboxExecutor } from "./createExecutor.js"
import { runAbortable, squashCause } from "./internal/facadeCall.js"
import * as DockerSessions from "./DockerSessions.js"
import { fromHermesConfig, type HermesConfigSource } from "./HermesOptions.js"
import { type FacadeJournal, facadeJournalLayer } from "./internal/facadeJournal.js"
import { withFacadeLogger } from "./internal/facadeLogger.js"

interface FacadeOptions extends Omit<DockerSessions.DockerSessionsOptions, keyof SessionOptions> {
  /** Where lifecycle events are recorded: as for createExecutor (default: the last 10,000 events in memory). */
  readonly journal?: FacadeJournal
  /** Apply the Hermes agent's `terminal:` configuration under these options (see HermesOptions). */
  readonly hermesConfig?: HermesConfigSource
}

export interface CreateSessionOptions extends FacadeOptions, SessionOptions {}
export interface OpenPersistentOptions extends FacadeOptions, PersistentOptions {}

export interface SessionCallOptions extends RunOptions {
  /** Cancels the call: its process tree is killed; the promise rejects with ExecutionAborted. */
  readonly signal?: AbortSignal
}

export interface SandboxSession extends AsyncDisposable {
  readonly sessionId: string
  readonly scope: SessionScope
  readonly containerName: string
  readonly fingerprint: string
  /** Persistent: an existing sandbox was found again. */
  readonly reconnected: boolean
  /** Persistent: sandboxes of the profile removed because their configuration differed. */
  readonly replaced: ReadonlyArray<string>
  /** A shell command (bash: cd, export, pipes...) or an argv; serialized with the session's other calls. */
  run(command: string | ReadonlyArray<string>, options?: SessionCallOptions): Promise<SessionResult>
  /** A code snippet through the runner, in the session's directory and environment. */
  runCode(request: SessionCodeRequest, options?: ExecuteOptions & { readonly signal?: AbortSignal }): Promise<SessionResult>
  /** Live session events (committed to the journal first). */
  readonly events$: Observable<EventEnvelope>
  /** Session: remove the sandbox. Persistent: detach (it stays for the next process). Idempotent. */
  close(): Promise<void>
  /** Remove the sandbox (persistent too), then close. Idempotent. */
  destroy(): Promise<void>
}


const withHermes = <O extends FacadeOptions & SessionOptions>(options: O): O => {
  if (options.hermesConfig === undefined) return options
  const hermes = fromHermesConfig(options.hermesConfig)
  const diskSize = hermes.executor.diskSize
  return { ...(diskSize === undefined ? {} : { diskSize }), ...hermes.session, ...options }
}

const facade = async (
  options: FacadeOptions,
  scope: SessionScope,
  open: (sessions: Sessions["Type"]) => Effect.Effect<Session, unknown>
): Promise<SandboxSession> => {
  const layer = DockerSessions.layer({
    ...options,
    // Persistent sandboxes outlive this process by design: no watchdog for them.
    watchdog: options.watchdog ?? scope === "session"
  }).pipe(Layer.provide(facadeJournalLayer(options.journal)))
  const runtime = ManagedRuntime.make(withFacadeLogger(layer))
  const built = await runtime.runPromiseExit(Sessions)
  if (Exit.isFailure(built)) {
    await runtime.dispose()
    throw squashCause(built.cause)
  }
  const sessions: Sessions["Type"] = built.value
  const opened = await runtime.runPromiseExit(open(sessions))
  if (Exit.isFailure(opened)) {
    await runtime.dispose()
    throw squashCause(opened.cause)
  }
  const session: Session = opened.value
  let closing: Promise<void> | undefined

  /** One call; `make` gets the hooks that learn its execution id and give the journal the abort's reason. */
  const call = <A>(make: (hooks: ExecuteOptions) => Effect.Effect<A, unknown>, signal: AbortSignal | undefined, given: ExecuteOptions): Promise<A> => {
    if (closing !== undefined) {
      return Promise.reject(new SessionEnded({ sessionId: session.sessionId, reason: endReason, message: `session ${session.sessionId} has ended (${endReason}); open a new one` }))
    }
    return runAbortable(runtime, make, signal, given, { noun: "call", closedReason: "the session was closed", cleaned: "its processes were killed" })
  }
  let endReason = "closed"
  const end = (how: "close" | "destroy"): Promise<void> => {
    if (closing === undefined) endReason = how === "destroy" ? "destroyed" : scope === "session" ? "closed" : "detached"
    return (closing ??= runtime.runPromise(how === "close" ? session.close : session.destroy).finally(() => runtime.dispose()))
  }

  return {
    sessionId: session.sessionId,
    scope: session.scope,
    containerName: session.containerName,
    fingerprint: session.fingerprint,
    reconnected: session.reconnected,
    replaced: session.replaced,
    run: (command, o = {}) => {
      const { signal, ...rest } = o
      return call((hooks) => session.run(command, { ...rest, ...hooks }), signal, rest)
    },
    runCode: (request, o = {}) => {
      const { signal, ...given } = o
      return call((hooks) => session.runCode(request, hooks), signal, given)
    },
    events$: new Observable<EventEnvelope>((subscriber) => sessions.unsafeSubscribe((event: EventEnvelope) => subscriber.next(event))),
    close: () => end("close"),
    destroy: async () => {
      if (closing !== undefined && scope === "persistent") {
        // Detached already: remove it through a fresh connection.
        await closing
        const again = await openPersistent({ ...(options as OpenPersistentOptions), onConfigChange: "refuse" })
        return again.destroy()
      }
      return end("destroy")
    },
    [Symbol.asyncDispose]: () => end("close")
  }
}

/** A fresh sandbox for one session (Hermes `container_persistent: false`). */
export const createSession = async (options: CreateSessionOptions = {}): Promise<SandboxSession> => {
  const o = withHermes(options)
  return facade(o, "session", (sessions) => sessions.open(o))
}

/** The profile's persistent sandbox (Hermes `container_persistent: true`), found again by its labels. */
export const openPersistent = async (options: OpenPersistentOptions = {}): Promise<SandboxSession> => {
  const o = withHermes(options)
  return facade(o, "persistent", (sessions) => sessions.openPersistent(o))
}

export type HermesSandbox =
  | { readonly scope: "oneShot"; readonly executor: SandboxExecutor; close(): Promise<void> }
  | { readonly scope: "session" | "persistent"; readonly session: SandboxSession; close(): Promise<void> }

/**
 * The drop-in for Hermes agent users: reads the `terminal:` configuration and opens what it
 * asks for — `container_persistent` absent: one-shot executions; false: a fresh session;
 * true: the persistent sandbox of `profile` (default "default").
 */
export const openHermesSandbox = async (
  options: { readonly hermesConfig?: HermesConfigSource; readonly profile?: string; readonly journal?: FacadeOptions["journal"] } = {}
): Promise<HermesSandbox> => {
  const source = options.hermesConfig ?? true
  const hermes = fromHermesConfig(source)
  const journal = options.journal === undefined ? {} : { journal: options.journal }
  if (hermes.scope === "oneShot") {
    const executor = await createExecutor({ ...journal, hermesConfig: source } as CreateExecutorOptions)
    return { scope: "oneShot", executor, close: () => executor.close() }
  }
  const session = hermes.scope === "session"
    ? await createSession({ ...journal, hermesConfig: source })
    : await openPersistent({ ...journal, hermesConfig: source, ...(options.profile === undefined ? {} : { profile: options.profile }) })
  return { scope: hermes.scope, session, close: () => session.close() }
}
