/**
 * A session's background processes (`session.spawn`): dev servers, watchers, long jobs that live
 * across calls until killed or until the session ends.
 *
 * Each is one exec of the supervisor in framed mode, as a call is, whose child is the session shell
 * in "background" mode (internal/session-shell.sh): the session's working directory and exported
 * variables, the command given as an ARGUMENT and run with `eval`, nothing saved back. It runs
 * under `setsid -w`, so it leads its own session (its process tree, as far as kill() is concerned).
 * Unlike a call it takes no session lock (it must not block calls), kills no leftovers, has no
 * output cap (the host's ring buffer keeps the head and the tail) and no deadline: kill(), the
 * session's end (its sandbox is removed) or the session's maximum lifetime end it.
 *
 * Trust: while one lives, the session's calls and kernel are ONE domain with it (SECURITY.md,
 * Background processes): calls then run as with `keepBackgroundProcesses: true` (handle.ts reads
 * `live()`), since a call that killed leftovers would kill the background's processes.
 *
 * Bounds on what the sandbox controls: output per process (head + tail bytes, the rest counted),
 * processes per session (running ones, and as many ended ones kept for their status and output).
 */
import { Clock, Deferred, Effect, FiberSet, Option, type Scope } from "effect"
import { createHash } from "node:crypto"
import { v7 as uuidv7 } from "uuid"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import {
  ContainerFailed,
  type InvalidRequest,
  invalidRequest,
  type SandboxError,
  type SessionEnded
} from "../Errors.js"
import type { ResolvedSandboxDefaults } from "../ExecutorConfig.js"
import { headText, RECORDED_CODE_BYTES } from "../internal/auditTrail.js"
import { backgroundInvocation, SESSION_STATE_DIR, sessionInvocation } from "../internal/sessionShell.js"
import { makeSupervisedRun, type SupervisorReport } from "../kernel/SupervisedRun.js"
import { encodeRunnerPayloadFor } from "../RunnerProtocol.js"
import { type CallDeps, callEnv } from "./call.js"
import type { BackgroundSettings } from "./plan.js"

/** The signals kill() sends (to every process in the background process's session). */
export const PROCESS_SIGNALS = ["SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"] as const
export type ProcessSignal = (typeof PROCESS_SIGNALS)[number]

/** How long the signal's exec may take (the engine starts it, it signals, it exits). */
const SIGNAL_BOUND = "20 seconds"
/** wait()'s longest timeout: a day. */
const MAX_WAIT_MS = 86_400_000

export interface SpawnOptions {
  /** Where it starts: relative to the session's working directory, or absolute. Default: that directory. */
  readonly cwd?: string
  /** Variables for this process only, over the session's (as a call's `env`). */
  readonly env?: Readonly<Record<string, string>>
}

export interface ProcessStatus {
  readonly id: string
  /** Its pid inside the sandbox (the leader of its own process session). */
  readonly pid: number
  /** The command as given to spawn. */
  readonly command: string
  readonly running: boolean
  /** Once ended: its exit code (128 + n when signal n ended it), unless the host stopped following it. */
  readonly exitCode: number | undefined
  /** The signal kill() sent, if it was asked to. */
  readonly signal: ProcessSignal | undefined
  /** Why it is no longer followed when there is no exit code (the session ended, a protocol violation). */
  readonly endReason: string | undefined
  readonly startedAt: Date
  readonly durationMs: number
  /** Bytes it wrote (stdout and stderr), kept or not. */
  readonly outputBytes: number
}

export interface ProcessOutput {
  /** What is kept from `since` on, up to the gap (all of it when nothing was dropped). */
  readonly head: string
  /** Bytes from `since` on that were not kept: the middle, between the head and the tail. */
  readonly omittedBytes: number
  /** What is kept after the gap ("" when there is none). */
  readonly tail: string
  /** The next `since` (every byte written so far). */
  readonly next: number
  readonly running: boolean
}

export interface BackgroundProcess {
  readonly id: string
  readonly pid: number
  readonly status: Effect.Effect<ProcessStatus>
  /** Its output (stdout and stderr, as they arrived) from byte `since` (default 0). */
  readonly output: (options?: { readonly since?: number }) => Effect.Effect<ProcessOutput, InvalidRequest>
  /** Until it ends, or `timeoutMs` passed (then `running` is still true). */
  readonly wait: (options?: { readonly timeoutMs?: number }) => Effect.Effect<ProcessStatus, InvalidRequest>
  /** Send the signal (default SIGKILL) to its whole process session; a no-op once it ended. */
  readonly kill: (signal?: ProcessSignal) => Effect.Effect<void, InvalidRequest | SandboxError>
}

/**
 * A byte stream's first `headBytes` and last `tailBytes`, in at most that much memory whatever was
 * written (the tail is one circular buffer, so a million one-byte writes cost bytes, not objects).
 */
export class OutputRing {
  private head = new Uint8Array(0)
  private headLen = 0
  private tail: Uint8Array | undefined
  /** Bytes pushed in all. */
  total = 0

  constructor(
    readonly headBytes: number,
    readonly tailBytes: number
  ) {}

  readonly push = (chunk: Uint8Array): void => {
    let c = chunk
    if (this.headLen < this.headBytes) {
      const n = Math.min(this.headBytes - this.headLen, c.byteLength)
      if (this.headLen + n > this.head.byteLength) {
        let size = Math.max(this.head.byteLength * 2, 4096)
        while (size < this.headLen + n) size *= 2
        const grown = new Uint8Array(Math.min(size, this.headBytes))
        grown.set(this.head.subarray(0, this.headLen))
        this.head = grown
      }
      this.head.set(c.subarray(0, n), this.headLen)
      this.headLen += n
      this.total += n
      c = c.subarray(n)
    }
    if (c.byteLength === 0) return
    const t = this.tailBytes
    this.tail ??= new Uint8Array(t)
    if (c.byteLength > t) {
      this.total += c.byteLength - t
      c = c.subarray(c.byteLength - t)
    }
    const at = (this.total - this.headBytes) % t
    const first = Math.min(c.byteLength, t - at)
    this.tail.set(c.subarray(0, first), at)
    if (first < c.byteLength) this.tail.set(c.subarray(first), 0)
    this.total += c.byteLength
  }

  read(since: number): { head: Uint8Array; omittedBytes: number; tail: Uint8Array; next: number } {
    const s = Math.min(Math.max(0, since), this.total)
    const h = this.headLen
    const head = s < h ? this.head.slice(s, h) : new Uint8Array(0)
    if (this.tail === undefined || this.total <= h)
      return { head, omittedBytes: 0, tail: new Uint8Array(0), next: this.total }
    const tailStart = Math.max(h, this.total - this.tailBytes)
    const omittedBytes = Math.max(0, tailStart - Math.max(s, h))
    const from = Math.max(s, tailStart)
    const out = new Uint8Array(this.total - from)
    const at = (from - this.headBytes) % this.tailBytes
    const first = Math.min(out.byteLength, this.tailBytes - at)
    out.set(this.tail.subarray(at, at + first), 0)
    if (first < out.byteLength) out.set(this.tail.subarray(0, out.byteLength - first), first)
    // Nothing dropped between them: one piece.
    if (omittedBytes === 0 && head.byteLength > 0) {
      const joined = new Uint8Array(head.byteLength + out.byteLength)
      joined.set(head)
      joined.set(out, head.byteLength)
      return { head: joined, omittedBytes: 0, tail: new Uint8Array(0), next: this.total }
    }
    return omittedBytes === 0
      ? { head: out, omittedBytes, tail: new Uint8Array(0), next: this.total }
      : { head, omittedBytes, tail: out, next: this.total }
  }
}

interface Tracked {
  readonly id: string
  readonly pid: number
  readonly start: string
  readonly command: string
  readonly startedAtMs: number
  readonly ring: OutputRing
  readonly bytes: () => { readonly stdout: number; readonly stderr: number }
  readonly done: Deferred.Deferred<void>
  endedAtMs: number | undefined
  exitCode: number | undefined
  signal: ProcessSignal | undefined
  endReason: string | undefined
}

export interface BackgroundDeps {
  readonly call: CallDeps
  readonly config: ResolvedSandboxDefaults
  readonly settings: BackgroundSettings
  /** The session's stream. */
  readonly append: (event: JournalEvent) => Effect.Effect<void, JournalError>
  readonly appendQuietly: (event: JournalEvent) => Effect.Effect<void>
  /** Where each process is followed: the session's end interrupts them (its sandbox goes with them). */
  readonly fibers: FiberSet.FiberSet<unknown, unknown>
  /** The start runs under the session's call lock: a call running then finishes first (it may kill leftovers). */
  readonly serialized: <A, E>(body: () => Effect.Effect<A, E, Scope.Scope>) => Effect.Effect<A, E | SessionEnded>
}

const decoder = () => new TextDecoder("utf-8", { fatal: false })

/** recordCode: the command's head in ProcessStarted, bounded as CodeRecorded's code (internal/auditTrail.ts). */
const recordedCommand = (enabled: boolean, command: Uint8Array) => {
  if (!enabled) return {}
  const head = headText(command, RECORDED_CODE_BYTES)
  return { command: head.text, commandTruncated: head.cut }
}

export const makeBackground = (deps: BackgroundDeps) => {
  const tracked = new Map<string, Tracked>()
  let starting = 0
  const live = () => starting + [...tracked.values()].filter((t) => t.endedAtMs === undefined).length

  const statusOf = (t: Tracked, now: number): ProcessStatus => {
    const b = t.bytes()
    return {
      id: t.id,
      pid: t.pid,
      command: t.command,
      running: t.endedAtMs === undefined,
      exitCode: t.exitCode,
      signal: t.signal,
      endReason: t.endReason,
      startedAt: new Date(t.startedAtMs),
      durationMs: Math.max(0, (t.endedAtMs ?? now) - t.startedAtMs),
      outputBytes: b.stdout + b.stderr
    }
  }

  const ended = (t: Tracked, how: { exitCode?: number; reason?: string }) =>
    Effect.gen(function* () {
      if (t.endedAtMs !== undefined) return undefined
      t.endedAtMs = yield* Clock.currentTimeMillis
      t.exitCode = how.exitCode
      t.endReason = how.reason
      yield* Deferred.succeed(t.done, undefined)
      const b = t.bytes()
      // Forget the oldest ended ones beyond as many as may run: what the host holds stays bounded.
      const endedOnes = [...tracked.values()].filter((x) => x.endedAtMs !== undefined)
      for (const old of endedOnes.slice(0, Math.max(0, endedOnes.length - deps.settings.maxProcesses)))
        tracked.delete(old.id)
      const event: JournalEvent = {
        type: "ProcessExited",
        data: {
          processId: t.id,
          ...(how.exitCode === undefined ? {} : { exitCode: how.exitCode }),
          ...(t.signal === undefined ? {} : { signal: t.signal }),
          ...(how.reason === undefined ? {} : { reason: how.reason }),
          durationMs: Math.max(0, t.endedAtMs - t.startedAtMs),
          stdoutBytes: b.stdout,
          stderrBytes: b.stderr
        }
      }
      return event
    })

  const exitOf = (r: SupervisorReport): { exitCode?: number; reason?: string } =>
    r._tag === "Exited"
      ? { exitCode: r.exit.exitCode }
      : r._tag === "SetupFailed"
        ? { exitCode: 126, reason: `setup failed: ${r.message.slice(0, 200)}` }
        : { reason: `protocol violation: ${r.reason.slice(0, 200)}` }

  const start = (command: string, env: Readonly<Record<string, string>>, cwd: string) =>
    Effect.gen(function* () {
      const { runtime, container, supervisor } = deps.call
      const id = uuidv7()
      const ring = new OutputRing(deps.settings.headBytes, deps.settings.tailBytes)
      const startedAt = yield* Deferred.make<{ readonly pid: number; readonly start: string }>()
      // No head capture (0): the ring keeps the output; the captures count it.
      const run = yield* makeSupervisedRun(0, {
        onStdout: ring.push,
        onStderr: ring.push,
        onStarted: (s) => Deferred.unsafeDone(startedAt, Effect.succeed(s))
      })
      const argv = backgroundInvocation({ stateDir: SESSION_STATE_DIR, keep: Object.keys(env), args: [cwd, command] })
      // No lock (calls go on), no leftovers kill, no cap (the ring bounds what is kept).
      const payload = encodeRunnerPayloadFor(runtime, { key: run.key, args: argv, stdin: new Uint8Array(0) })
      const proc = yield* runtime.exec(container, { command: [supervisor], env, stdin: true }, run.receiver)
      const over = Effect.raceFirst(
        Effect.map(Deferred.await(run.report), (r) => exitOf(r)),
        Effect.flatMap(Effect.either(proc.exit), (e) =>
          Effect.flatMap(Deferred.isDone(run.report), (reported) =>
            reported
              ? Effect.map(Deferred.await(run.report), (r) => exitOf(r))
              : Effect.succeed<{ exitCode?: number; reason?: string }>({
                  reason:
                    e._tag === "Right"
                      ? `its exec ended (${e.right.exitCode}) without the supervisor's report`
                      : `its exec failed: ${e.left.message}`
                })
          )
        )
      )
      const began = yield* Effect.gen(function* () {
        yield* proc.write(payload)
        yield* proc.end
        return yield* Effect.raceFirst(
          Effect.map(Deferred.await(startedAt), (s) => ({ _tag: "started" as const, s })),
          Effect.map(over, (how) => ({ _tag: "over" as const, how }))
        )
      }).pipe(Effect.onError(() => proc.kill.pipe(Effect.ignore, Effect.zipRight(proc.detach))))
      // Started and already over: the 'p' frame came first in the stream.
      const polled = yield* Deferred.poll(startedAt)
      const s = began._tag === "started" ? began.s : Option.isSome(polled) ? yield* polled.value : undefined
      if (s === undefined) {
        yield* proc.detach
        const how = began._tag === "over" ? began.how : {}
        return yield* new ContainerFailed({
          operation: "spawn",
          containerName: container.name,
          reason: "engine",
          message: `the background process never started in ${container.name}: ${
            how.reason ?? `exit ${how.exitCode}`
          }${run.diagnostics() === "" ? "" : ` (${run.diagnostics().slice(0, 300)})`}`
        })
      }
      const t: Tracked = {
        id,
        pid: s.pid,
        start: s.start,
        command,
        startedAtMs: yield* Clock.currentTimeMillis,
        ring,
        bytes: () => ({ stdout: run.stdout.total, stderr: run.stderr.total }),
        done: yield* Deferred.make<void>(),
        endedAtMs: undefined,
        exitCode: undefined,
        signal: undefined,
        endReason: undefined
      }
      tracked.set(id, t)
      const commandBytes = new TextEncoder().encode(command)
      yield* deps.append({
        type: "ProcessStarted",
        data: {
          processId: id,
          pid: s.pid,
          commandBytes: commandBytes.byteLength,
          commandSha256: createHash("sha256").update(commandBytes).digest("hex"),
          ...recordedCommand(deps.config.recordCode, commandBytes)
        }
      })
      // Followed until it ends; the session's end interrupts this (and removes the sandbox).
      yield* FiberSet.run(
        deps.fibers,
        Effect.gen(function* () {
          const how = yield* over
          // No exit code: its channel was tampered with or its exec ended without a report, while the
          // process may live on. What the host no longer follows must not run: its session is killed.
          if (how.exitCode === undefined) yield* Effect.ignore(signalOne(t, "SIGKILL"))
          const event = yield* ended(t, how)
          if (event !== undefined) yield* deps.appendQuietly(event)
        }).pipe(
          Effect.onInterrupt(() =>
            Effect.flatMap(ended(t, { reason: "the session ended" }), (event) =>
              event === undefined ? Effect.void : deps.appendQuietly(event)
            )
          ),
          Effect.ensuring(proc.detach)
        )
      )
      return handleOf(t)
    })

  const signalOne = (t: Tracked, signal: ProcessSignal) =>
    Effect.gen(function* () {
      const { runtime, container } = deps.call
      const argv = sessionInvocation({
        stateDir: SESSION_STATE_DIR,
        keep: [],
        mode: "signal",
        args: [signal.slice(3), String(t.pid), t.start]
      })
      const code = yield* runtime
        .exec(container, { command: argv, env: {}, stdin: false }, { stdout: () => {}, stderr: () => {} })
        .pipe(
          Effect.flatMap((p) =>
            p.exit.pipe(
              Effect.map((s) => s.exitCode),
              Effect.ensuring(p.detach)
            )
          ),
          Effect.timeoutFail({
            duration: SIGNAL_BOUND,
            onTimeout: () =>
              new ContainerFailed({
                operation: "kill background process",
                containerName: container.name,
                reason: "engine",
                message: `the signal's exec did not end within ${SIGNAL_BOUND}`
              })
          })
        )
      // 3: its leader is gone (it ended meanwhile): nothing to signal.
      if (code !== 0 && code !== 3)
        return yield* new ContainerFailed({
          operation: "kill background process",
          containerName: container.name,
          reason: "engine",
          message: `the signal's exec exited ${code}`
        })
    })

  const handleOf = (t: Tracked): BackgroundProcess => ({
    id: t.id,
    pid: t.pid,
    status: Effect.map(Clock.currentTimeMillis, (now) => statusOf(t, now)),
    output: (o = {}) =>
      Effect.gen(function* () {
        const since = o.since ?? 0
        if (!Number.isSafeInteger(since) || since < 0)
          return yield* Effect.fail(invalidRequest("since", since, "a byte offset: an integer >= 0"))
        const r = t.ring.read(since)
        return {
          head: decoder().decode(r.head),
          omittedBytes: r.omittedBytes,
          tail: decoder().decode(r.tail),
          next: r.next,
          running: t.endedAtMs === undefined
        }
      }),
    wait: (o = {}) =>
      Effect.gen(function* () {
        const timeoutMs = o.timeoutMs
        if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_WAIT_MS))
          return yield* Effect.fail(invalidRequest("timeoutMs", timeoutMs, `an integer from 0 to ${MAX_WAIT_MS}`))
        const done = Deferred.await(t.done)
        yield* timeoutMs === undefined ? done : Effect.timeoutOption(done, timeoutMs)
        return statusOf(t, yield* Clock.currentTimeMillis)
      }),
    kill: (signal = "SIGKILL") =>
      Effect.gen(function* () {
        if (!(PROCESS_SIGNALS as ReadonlyArray<string>).includes(signal))
          return yield* Effect.fail(invalidRequest("signal", signal, PROCESS_SIGNALS.join(", ")))
        if (t.endedAtMs !== undefined) return
        t.signal = signal
        yield* signalOne(t, signal)
      })
  })

  const spawn = (
    command: string,
    o: SpawnOptions = {}
  ): Effect.Effect<BackgroundProcess, InvalidRequest | SandboxError | SessionEnded | JournalError> =>
    Effect.gen(function* () {
      const plan = deps.call.plan
      if (typeof command !== "string" || command.trim() === "" || command.includes("\0"))
        return yield* Effect.fail(invalidRequest("command", command, "a non-empty shell command without NUL bytes"))
      const bytes = new TextEncoder().encode(command).byteLength
      if (bytes > deps.config.maxCodeBytes)
        return yield* Effect.fail(
          invalidRequest("command", `${bytes} bytes`, `at most ${deps.config.maxCodeBytes} bytes (maxCodeBytes)`)
        )
      if (o.cwd !== undefined && (typeof o.cwd !== "string" || o.cwd === "" || o.cwd.includes("\0")))
        return yield* Effect.fail(invalidRequest("cwd", o.cwd, "a non-empty path without NUL bytes"))
      const env = yield* callEnv(plan, o.env)
      if (live() >= deps.settings.maxProcesses)
        return yield* Effect.fail(
          invalidRequest(
            "spawn",
            `${live()} background processes running`,
            `at most ${deps.settings.maxProcesses} at once (background.maxProcesses): kill one first`
          )
        )
      starting++
      return yield* deps
        .serialized(() => start(command, env, o.cwd ?? ""))
        .pipe(Effect.ensuring(Effect.sync(() => void starting--)))
    })

  return {
    spawn,
    processes: Effect.map(Clock.currentTimeMillis, (now) => [...tracked.values()].map((t) => statusOf(t, now))),
    /** A handle on a tracked process by id (MCP's process tool). */
    process: (id: string): BackgroundProcess | undefined => {
      const t = tracked.get(id)
      return t === undefined ? undefined : handleOf(t)
    },
    /** Background processes running (or starting): while any does, calls keep leftovers. */
    live
  }
}
