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
 *   await using many = await createSessions({ pool: { size: 2 } })  // many sessions on one connection
 *   await using p = await many.open()                    // claimed from a pool, its kernel started
 *
 *   await using h = await openHermesSandbox()                // ~/.hermes/config.yaml decides the scope
 *   await h.run("ls /workspace")                             // whatever the scope
 *
 *   await s.writeFile("data/in.csv", "a,b\n1,2\n")            // relative to /workspace; no shell involved
 *   const { content } = await s.readFile("/workspace/data/in.csv")
 *
 *   await s.runCell({ code: "import pandas as pd; df = pd.read_csv('data/in.csv')" })   // a Python kernel
 *   const cell = await s.runCell({ code: "df.describe()" })  // state kept: cell.result.data["text/html"]
 *
 * Each facade owns its engine connection (and, for a session, the watchdog that removes its
 * sandbox if this process is killed); `close()` releases them. Errors are the SDK's typed
 * error classes, never Effect's wrappers.
 */
import { Effect, Exit, Layer, ManagedRuntime } from "effect"
// The class alone, not rxjs's index (events/src/Rx.ts says why).
import { Observable } from "rxjs/internal/Observable"
import {
  CellLineage,
  type CellResult,
  type ExecuteOptions,
  type ExecutionResult,
  InvalidRequest,
  type PersistentOptions,
  Session as SessionService,
  type SessionOptions,
  SessionEnded
} from "@hermes-sandbox/core"
import {
  type BackgroundProcess,
  type CellOptions,
  type CellRequest,
  type ProcessOutput,
  type ProcessSignal,
  type ProcessStatus,
  type SpawnOptions,
  type FileCallOptions,
  type ListFilesResult,
  type PatchFileResult,
  type PatchSpec,
  type ReadFileOptions,
  type ReadFileResult,
  type RunOptions,
  type SearchFilesOptions,
  type SearchFilesResult,
  type SessionCodeRequest,
  type SessionResult,
  Sessions,
  type SessionScope,
  type WriteFileOptions,
  type WriteFileResult
} from "@hermes-sandbox/core/Session"
import type { Session, SessionPoolOptions } from "@hermes-sandbox/core/Session"
import * as Tracing from "@hermes-sandbox/core/Tracing"
import type { EventEnvelope, Journal } from "@hermes-sandbox/events"
import type { ReplayOptions } from "@hermes-sandbox/events/Journal"
import {
  type CreateExecutorOptions,
  createExecutor,
  importKubernetes,
  type KubernetesChoice,
  type SandboxExecutor
} from "./createExecutor.js"
import { runAbortable, squashCause } from "./internal/facadeCall.js"
import * as DockerSessions from "./DockerSessions.js"
import { fromHermesConfig, type HermesConfigSource } from "./HermesOptions.js"
import { type FacadeJournal, facadeJournalLayer } from "./internal/facadeJournal.js"
import { withFacadeLogger } from "./internal/facadeLogger.js"
import { facadeReplay } from "./internal/facadeReplay.js"

interface FacadeOptions extends Omit<DockerSessions.DockerSessionsOptions, keyof SessionOptions | "pool" | "runtime"> {
  /**
   * Where the session sandboxes run: on Docker (the default), the OCI runtime's name (e.g. "runsc");
   * or `{ kubernetes: { namespace, … } }`, as for createExecutor (docs/kubernetes.md; bind mounts
   * are refused there).
   */
  readonly runtime?: DockerSessions.DockerSessionsOptions["runtime"] | KubernetesChoice
  /** Where lifecycle events are recorded: as for createExecutor (default: the last 10,000 events in memory). */
  readonly journal?: FacadeJournal
  /** Apply the Hermes agent's `terminal:` configuration under these options (see HermesOptions). */
  readonly hermesConfig?: HermesConfigSource
  /**
   * When the sandbox was removed for being idle (`lifetimeSeconds`), the next call opens a new one
   * with the same options and runs there, as the Hermes agent re-creates its sandbox, instead of
   * failing with SessionEnded. What the old one held (files, cwd, exported variables) is gone;
   * `sessionId` and `containerName` then name the new one. Default false.
   */
  readonly reopenWhenIdleExpired?: boolean
}

export interface CreateSessionOptions extends FacadeOptions, SessionOptions {}
export interface OpenPersistentOptions extends FacadeOptions, PersistentOptions {}

export interface SessionCallOptions extends RunOptions {
  /** Cancels the call: its process tree is killed; the promise rejects with ExecutionAborted. */
  readonly signal?: AbortSignal
}

/**
 * A session in Promise form. Its identity (`sessionId`, `containerName`, `fingerprint`,
 * `reconnected`, `replaced`) is the current sandbox's: a new one after a reopen (see
 * `reopenWhenIdleExpired`).
 */
export interface SandboxSession
  extends AsyncDisposable,
    Pick<Session, "sessionId" | "scope" | "containerName" | "fingerprint" | "reconnected" | "replaced"> {
  /** A shell command (bash: cd, export, pipes...) or an argv; serialized with the session's other calls. */
  run(command: string | ReadonlyArray<string>, options?: SessionCallOptions): Promise<SessionResult>
  /** A code snippet through the runner, in the session's directory and environment. */
  runCode(
    request: SessionCodeRequest,
    options?: ExecuteOptions & { readonly signal?: AbortSignal }
  ): Promise<SessionResult>
  /**
   * A regular file's bytes, from `offset` (default 0), at most `limit` (default 8 MiB, at most 64 MiB).
   * Paths are absolute under /workspace or /tmp, or relative to /workspace (not to the shell's
   * current directory); a symlink is never followed. Serialized with the calls, done without a shell.
   * Rejects with FileNotFound, SandboxFileError (its errno in `code`) or InvalidRequest (the path, the rule).
   */
  readFile(path: string, options?: FileOperationOptions<ReadFileOptions>): Promise<ReadFileResult>
  /** Create or replace a regular file (parents made), at most 64 MiB; `mode` default 0o644. */
  writeFile(
    path: string,
    content: string | Uint8Array,
    options?: FileOperationOptions<WriteFileOptions>
  ): Promise<WriteFileResult>
  /** A directory's entries (default /workspace), sorted by name, at most 10,000; symlinks listed, not followed. */
  listFiles(dir?: string, options?: FileOperationOptions<FileCallOptions>): Promise<ListFilesResult>
  /** Remove a file, a symlink (itself, not its target) or an empty directory. */
  removeFile(path: string, options?: FileOperationOptions<FileCallOptions>): Promise<void>
  /**
   * Edit a text file in place: `{ oldString, newString, replaceAll? }` (exact text; it must occur
   * once unless replaceAll) or `{ diff }` (a unified diff). Read, replaced and written back as one
   * operation serialized with the calls, at most 8 MiB; rejects with PatchFailed (nothing written:
   * `reason`, `matches`, `lines`), FileNotFound, SandboxFileError or InvalidRequest.
   */
  patchFile(path: string, patch: PatchSpec, options?: FileOperationOptions<FileCallOptions>): Promise<PatchFileResult>
  /**
   * Lines matching a regular expression (GNU grep -E; `target: "files"`: file names matching a glob,
   * find -name) under `path` (default /workspace), without following symlinks; at most `maxResults`
   * (default 100), `truncated` when more existed.
   */
  searchFiles(options: FileOperationOptions<SearchFilesOptions>): Promise<SearchFilesResult>
  /**
   * A cell of Python on the session's kernel (started by the first cell): imports, variables and
   * threads persist from cell to cell. Resolves with the cell's result whatever the cell did (an
   * exception, a timeout, an abort through `signal`: its `status`); rejects with KernelUnavailable
   * (an image without the kernel), SessionEnded, InvalidRequest, or ContainerFailed. After a reopen
   * (`reopenWhenIdleExpired`) the first cell in the new sandbox says `stateLost`.
   */
  runCell(request: CellRequest, options?: CellOptions): Promise<CellResult>
  /** End the kernel and its state; the next cell starts a new one. */
  restartKernel(): Promise<void>
  /**
   * Start a shell command in the background: a dev server, a watcher, a long job. It runs in the
   * session's directory and variables, lives across calls until killed or until the session ends,
   * and its output is kept as a head and a tail (`background` session options). While one runs,
   * calls and the kernel share its trust domain, as with `keepBackgroundProcesses` (docs/sessions.md).
   * Rejects with InvalidRequest (at most `background.maxProcesses` at once; not on a persistent sandbox).
   */
  spawn(command: string, options?: SpawnOptions): Promise<SandboxProcess>
  /** The session's background processes: running ones, and the latest ended ones. */
  processes(): Promise<ReadonlyArray<ProcessStatus>>
  /** Live session events (committed to the journal first); opened by `createSessions`, those of all its sessions. */
  readonly events$: Observable<EventEnvelope>
  /** Past events of this facade's journal (the in-memory one too), completing after the last stored one. */
  replay(options?: ReplayOptions): Observable<EventEnvelope>
  /**
   * The Prometheus metrics of the sessions service this session runs on, in the text exposition
   * format (content type `Metrics.CONTENT_TYPE` of `@hermes-sandbox/core`; docs/observability.md):
   * its own registry for `createSession`/`openPersistent`, the shared one of `createSessions`.
   * Never prom-client's global registry.
   */
  metrics(): Promise<string>
  /** Session: remove the sandbox. Persistent: detach (it stays for the next process). Idempotent. */
  close(): Promise<void>
  /** Remove the sandbox (persistent too), then close. Idempotent. */
  destroy(): Promise<void>
}

/** A background process of a session (`SandboxSession.spawn`). */
export interface SandboxProcess {
  readonly id: string
  /** Its pid inside the sandbox. */
  readonly pid: number
  status(): Promise<ProcessStatus>
  /** Its output (stdout and stderr as they arrived) from byte `since` (default 0): head, omitted bytes, tail, next offset. */
  output(options?: { readonly since?: number }): Promise<ProcessOutput>
  /** Resolves when it ended, or after `timeoutMs` with `running` still true. */
  wait(options?: { readonly timeoutMs?: number }): Promise<ProcessStatus>
  /** Send the signal (default SIGKILL) to its whole process session; nothing once it ended. */
  kill(signal?: ProcessSignal): Promise<void>
}

/** A file operation's options, and a signal that cancels it (it then rejects with ExecutionAborted). */
export type FileOperationOptions<O> = O & { readonly signal?: AbortSignal }

const withHermes = <O extends FacadeOptions & SessionOptions>(options: O): O => {
  if (options.hermesConfig === undefined) return options
  const hermes = fromHermesConfig(options.hermesConfig)
  const diskSize = hermes.executor.diskSize
  return { ...(diskSize === undefined ? {} : { diskSize }), ...hermes.session, ...options }
}

/** A sessions service with its own engine connection (and journal), for one facade or many. */
interface SessionsRuntime {
  readonly runtime: ManagedRuntime.ManagedRuntime<Sessions | Journal.Journal, unknown>
  readonly sessions: Sessions["Type"]
}

/** Connect and start the sessions service (its pool, when `options.pool` asks, starts filling). */
const startSessions = async (
  options: FacadeOptions & Pick<DockerSessions.DockerSessionsOptions, "pool">,
  watchdog: boolean
): Promise<SessionsRuntime> => {
  const { runtime: choice, ...rest } = options
  const services: Layer.Layer<Sessions, unknown, Journal.Journal> =
    typeof choice === "object" && choice !== null
      ? Layer.unwrapEffect(
          Effect.map(Effect.tryPromise({ try: importKubernetes, catch: (error) => error }), ({ KubernetesRuntime }) =>
            SessionService.layer(rest).pipe(Layer.provideMerge(KubernetesRuntime.layer(choice.kubernetes)))
          )
        )
      : DockerSessions.layer({
          ...rest,
          ...(choice === undefined ? {} : { runtime: choice }),
          watchdog: options.watchdog ?? watchdog
        })
  const layer = services.pipe(
    Layer.provideMerge(facadeJournalLayer(options.journal)),
    // OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set (core's Tracing.ts); ended last.
    Layer.provideMerge(Tracing.layer())
  )
  const runtime = ManagedRuntime.make(withFacadeLogger(layer))
  const built = await runtime.runPromiseExit(Sessions)
  if (Exit.isFailure(built)) {
    await runtime.dispose()
    throw squashCause(built.cause)
  }
  return { runtime, sessions: built.value }
}

/**
 * One session in Promise form. With `shared`, it runs on that service (createSessions), which
 * outlives it; without, it starts its own and ends it with the session.
 */
const sessionFacade = async (
  options: FacadeOptions,
  scope: SessionScope,
  open: (sessions: Sessions["Type"]) => Effect.Effect<Session, unknown>,
  shared?: SessionsRuntime
): Promise<SandboxSession> => {
  // Persistent sandboxes outlive this process by design: no watchdog for them.
  const { runtime, sessions } = shared ?? (await startSessions(options, scope === "session"))
  const release = () => (shared === undefined ? runtime.dispose() : Promise.resolve())
  const opened = await runtime.runPromiseExit(open(sessions))
  if (Exit.isFailure(opened)) {
    await release()
    throw squashCause(opened.cause)
  }
  let session: Session = opened.value
  let closing: Promise<void> | undefined
  /** A reopen in progress: concurrent calls wait for the same new session. */
  let reopening: Promise<void> | undefined

  const idleExpired = (e: unknown) => e instanceof SessionEnded && e.reason === "idle-expired"
  /** Replace an idle-expired session by a new one with the same options (once, whoever asks first). */
  const reopen = (expired: Session): Promise<void> =>
    session !== expired
      ? Promise.resolve()
      : (reopening ??= runtime.runPromiseExit(open(sessions)).then((exit) => {
          reopening = undefined
          if (Exit.isFailure(exit)) throw squashCause(exit.cause)
          session = exit.value
        }))

  /** One call; `make` gets the hooks that learn its execution id and give the journal the abort's reason. */
  const call = async <A>(
    make: (s: Session, hooks: ExecuteOptions) => Effect.Effect<A, unknown>,
    signal: AbortSignal | undefined,
    given: ExecuteOptions,
    noun = "call"
  ): Promise<A> => {
    if (closing !== undefined) {
      throw new SessionEnded({
        sessionId: session.sessionId,
        reason: endReason,
        message: `session ${session.sessionId} has ended (${endReason}); open a new one`
      })
    }
    const attempt = (s: Session) =>
      runAbortable(runtime, (hooks) => make(s, hooks), signal, given, {
        noun,
        closedReason: "the session was closed",
        cleaned: "its processes were killed"
      })
    if (options.reopenWhenIdleExpired !== true) return attempt(session)
    const current = session
    if ((await runtime.runPromise(current.status)).endReason === "idle-expired") await reopen(current)
    try {
      return await attempt(session)
    } catch (e) {
      // Expired between the check and the call (the call never ran): once more, in a new sandbox.
      if (!idleExpired(e)) throw e
      await reopen(current)
      return attempt(session)
    }
  }
  /**
   * The sessions this facade's cells ran in: the first cell after a reopen (an idle expiry replaced
   * the sandbox, and its kernel with it) says stateLost, in its result and its CellExecuted alike.
   */
  const cells = CellLineage.make()
  // A background process's status and output stay readable after the session ended (host data).
  const direct = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
    runtime.runPromise(Effect.either(effect)).then((e) => (e._tag === "Left" ? Promise.reject(e.left) : e.right))
  const processOf = (p: BackgroundProcess): SandboxProcess => ({
    id: p.id,
    pid: p.pid,
    status: () => runtime.runPromise(p.status),
    output: (o) => direct(p.output(o)),
    wait: (o) => direct(p.wait(o)),
    kill: (signal) => direct(p.kill(signal))
  })
  let endReason = "closed"
  const end = (how: "close" | "destroy"): Promise<void> => {
    if (closing === undefined) endReason = how === "destroy" ? "destroyed" : scope === "session" ? "closed" : "detached"
    return (closing ??= Promise.resolve(reopening)
      .catch(() => {})
      .then(() => runtime.runPromise(how === "close" ? session.close : session.destroy))
      .finally(release))
  }

  return {
    get sessionId() {
      return session.sessionId
    },
    scope: session.scope,
    get containerName() {
      return session.containerName
    },
    get fingerprint() {
      return session.fingerprint
    },
    get reconnected() {
      return session.reconnected
    },
    get replaced() {
      return session.replaced
    },
    run: (command, o = {}) => {
      const { signal, ...rest } = o
      return call((s, hooks) => s.run(command, { ...rest, ...hooks }), signal, rest)
    },
    runCode: (request, o = {}) => {
      const { signal, ...given } = o
      return call((s, hooks) => s.runCode(request, hooks), signal, given)
    },
    // File operations: no execution (no journal stream), the same bridge, reopen and cancellation.
    readFile: (path, o = {}) => {
      const { signal, ...rest } = o
      return call((s) => s.readFile(path, rest), signal, {}, "file operation")
    },
    writeFile: (path, content, o = {}) => {
      const { signal, ...rest } = o
      return call((s) => s.writeFile(path, content, rest), signal, {}, "file operation")
    },
    listFiles: (dir, o = {}) => {
      const { signal, ...rest } = o
      return call((s) => s.listFiles(dir, rest), signal, {}, "file operation")
    },
    removeFile: (path, o = {}) => {
      const { signal, ...rest } = o
      return call((s) => s.removeFile(path, rest), signal, {}, "file operation")
    },
    patchFile: (path, patch, o = {}) => {
      const { signal, ...rest } = o
      return call((s) => s.patchFile(path, patch, rest), signal, {}, "file operation")
    },
    searchFiles: (o) => {
      const { signal, ...rest } = o
      return call((s) => s.searchFiles(rest), signal, {}, "file operation")
    },
    // A cell's signal interrupts the cell (a result, `interrupted`), never the call: not the bridge's.
    runCell: (request, o = {}) => call((s) => cells.runCell(s, request, o), undefined, {}, "cell"),
    restartKernel: () => call((s) => cells.restartKernel(s), undefined, {}, "kernel restart"),
    spawn: (command, o) => call((s) => s.spawn(command, o), undefined, {}, "spawn").then(processOf),
    processes: () => runtime.runPromise(session.processes),
    events$: new Observable<EventEnvelope>((subscriber) =>
      sessions.unsafeSubscribe((event: EventEnvelope) => subscriber.next(event))
    ),
    replay: facadeReplay(
      runtime,
      () => closing !== undefined,
      () =>
        new SessionEnded({
          sessionId: session.sessionId,
          reason: endReason,
          message: `session ${session.sessionId} has ended (${endReason}): replay while it is open (its journal closed with it)`
        })
    ),
    metrics: () => runtime.runPromise(sessions.metrics),
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
  return sessionFacade(o, "session", (sessions) => sessions.open(o))
}

/** The profile's persistent sandbox (Hermes `container_persistent: true`), found again by its labels. */
export const openPersistent = async (options: OpenPersistentOptions = {}): Promise<SandboxSession> => {
  const o = withHermes(options)
  return sessionFacade(o, "persistent", (sessions) => sessions.openPersistent(o))
}

/*
 * Many sessions on one engine connection, with an optional pool of sessions opened ahead of demand
 * (their Python kernels started):
 *
 *   await using sessions = await createSessions({ pool: { size: 2 } })
 *   await using s = await sessions.open()                  // claimed from the pool when it has one ready
 *   const cell = await s.runCell({ code: "1 + 1" })        // the kernel is already up
 *
 * An `open` whose options resolve to the pool's session (`pool.session`, default `{}`) claims one;
 * any other opens cold, as `createSession` does. Each session is used once and removed at its
 * close; `close()` here ends every session still open and the pool's (docs/sessions.md, "A pool
 * of sessions").
 */

export interface CreateSessionsOptions extends FacadeOptions {
  /** Sessions opened ahead of demand, their kernels started (`size`, `idleTtlMs`, `kernel`, `session`). */
  readonly pool?: SessionPoolOptions
}

/** What an `open` takes: a session's options, and the facade's reopen. */
export interface SessionsOpenOptions extends SessionOptions, Pick<FacadeOptions, "reopenWhenIdleExpired"> {}

export interface SandboxSessions extends AsyncDisposable {
  /** A session: claimed from the pool when its options are the pool's and one is ready, else a new one. */
  open(options?: SessionsOpenOptions): Promise<SandboxSession>
  /** The profile's persistent sandbox (never pooled), on this connection. */
  openPersistent(options?: PersistentOptions & Pick<FacadeOptions, "reopenWhenIdleExpired">): Promise<SandboxSession>
  /** Sessions waiting in the pool, ready (0 without a pool). */
  poolReady(): Promise<number>
  /** Live events of every session opened here and of the pool's. */
  readonly events$: Observable<EventEnvelope>
  /** The Prometheus metrics of these sessions (one registry for all of them and the pool), in the text exposition format. */
  metrics(): Promise<string>
  /** End every session still open (their sandboxes removed; persistent ones detached) and the pool. */
  close(): Promise<void>
}

export const createSessions = async (options: CreateSessionsOptions = {}): Promise<SandboxSessions> => {
  const o = withHermes(options)
  const shared: SessionsRuntime = await startSessions(o, true)
  let closing: Promise<void> | undefined
  const refuseClosed = () =>
    closing === undefined
      ? undefined
      : Promise.reject(
          new SessionEnded({ sessionId: "", reason: "service closed", message: "these sessions are closed (close())" })
        )
  const close = () => (closing ??= shared.runtime.dispose())
  return {
    open: (given = {}) =>
      refuseClosed() ?? sessionFacade({ ...o, ...given }, "session", (sessions) => sessions.open(given), shared),
    openPersistent: (given = {}) =>
      refuseClosed() ??
      sessionFacade({ ...o, ...given }, "persistent", (sessions) => sessions.openPersistent(given), shared),
    poolReady: () => shared.runtime.runPromise(shared.sessions.poolReady),
    metrics: () => shared.runtime.runPromise(shared.sessions.metrics),
    events$: new Observable<EventEnvelope>((subscriber) =>
      shared.sessions.unsafeSubscribe((event: EventEnvelope) => subscriber.next(event))
    ),
    close,
    [Symbol.asyncDispose]: close
  }
}

/** What `openHermesSandbox` opened: one-shot executions, a session, or a persistent sandbox. */
export type HermesSandbox = HermesSandboxCommon &
  (
    | { readonly scope: "oneShot"; readonly executor: SandboxExecutor }
    | ({ readonly scope: "session" | "persistent"; readonly session: SandboxSession } & Pick<
        SandboxSession,
        "readFile" | "writeFile" | "listFiles" | "removeFile" | "restartKernel"
      >)
  )

interface HermesSandboxCommon extends AsyncDisposable {
  /**
   * A shell command (bash), whatever the scope: a one-shot sandbox of its own (nothing carries
   * over), or the next call of the session (cwd and exported variables carry over).
   */
  run(command: string, options?: SessionCallOptions): Promise<ExecutionResult>
  /** A code snippet, whatever the scope (`files` land in /workspace, or in the session's directory). */
  runCode(
    request: SessionCodeRequest,
    options?: ExecuteOptions & { readonly signal?: AbortSignal }
  ): Promise<ExecutionResult>
  /**
   * A cell of Python on the session's kernel (SandboxSession.runCell). A one-shot scope keeps no
   * state between runs: it rejects with InvalidRequest (field "scope").
   */
  runCell(request: CellRequest, options?: CellOptions): Promise<CellResult>
  close(): Promise<void>
}

/**
 * The drop-in for Hermes agent users: reads the `terminal:` configuration and opens what it
 * asks for — `container_persistent` absent: one-shot executions; false: a fresh session;
 * true: the persistent sandbox of `profile` (default "default"). `run`/`runCode` work the same
 * on each; `await using` closes it.
 */
export const openHermesSandbox = async (
  options: {
    readonly hermesConfig?: HermesConfigSource
    readonly profile?: string
    readonly journal?: FacadeOptions["journal"]
    /** As for createSession: after an idle expiry the next call runs in a new sandbox (what Hermes does). Default true. */
    readonly reopenWhenIdleExpired?: boolean
  } = {}
): Promise<HermesSandbox> => {
  const source = options.hermesConfig ?? true
  const hermes = fromHermesConfig(source)
  const journal = options.journal === undefined ? {} : { journal: options.journal }
  if (hermes.scope === "oneShot") {
    const executor = await createExecutor({ ...journal, hermesConfig: source } as CreateExecutorOptions)
    const close = () => executor.close()
    return {
      scope: "oneShot",
      executor,
      run: (command, o = {}) => {
        const { env, stdin, timeoutMs, ...call } = o
        return executor.executeCode(
          {
            language: "bash",
            code: command,
            ...(env === undefined ? {} : { env }),
            ...(stdin === undefined ? {} : { stdin }),
            ...(timeoutMs === undefined ? {} : { timeoutMs })
          },
          call
        )
      },
      runCode: (request, o) => executor.executeCode(request, o),
      runCell: () =>
        Promise.reject(
          new InvalidRequest({
            field: "scope",
            value: "oneShot",
            allowed: "a session (terminal.container_persistent false or true)",
            message:
              'invalid scope: got "oneShot"; allowed: a session (terminal.container_persistent false or true): a one-shot sandbox keeps no kernel between runs'
          })
        ),
      close,
      [Symbol.asyncDispose]: close
    }
  }
  const reopen = { reopenWhenIdleExpired: options.reopenWhenIdleExpired ?? true }
  const session =
    hermes.scope === "session"
      ? await createSession({ ...journal, ...reopen, hermesConfig: source })
      : await openPersistent({
          ...journal,
          ...reopen,
          hermesConfig: source,
          ...(options.profile === undefined ? {} : { profile: options.profile })
        })
  const close = () => session.close()
  return {
    scope: hermes.scope,
    session,
    run: (command, o) => session.run(command, o),
    runCode: (request, o) => session.runCode(request, o),
    runCell: (request, o) => session.runCell(request, o),
    restartKernel: () => session.restartKernel(),
    // A one-shot sandbox keeps no files between runs: file operations exist on a session's only.
    readFile: (path, o) => session.readFile(path, o),
    writeFile: (path, content, o) => session.writeFile(path, content, o),
    listFiles: (dir, o) => session.listFiles(dir, o),
    removeFile: (path, o) => session.removeFile(path, o),
    close,
    [Symbol.asyncDispose]: close
  }
}
