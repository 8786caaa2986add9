/**
 * One session call: what a `run` or `runCode` asks for, validated into a CallInput, and its run on
 * the kernel (kernel/Run.ts) — an exec of the supervisor (framed argv mode) whose child is the
 * session shell (internal/sessionShell.ts), given the user's command as an ARGUMENT.
 *
 * The call's supervisor takes the session lock, relays the shell's output in frames and reports
 * its exit: nothing left in the sandbox by an earlier call can forge it. An exec cannot be killed
 * through the engine's API, so the deadline's kill is a second exec, `hermes-run --kill`, which
 * SIGKILLs every process the call started (or every process but PID 1) and exits 0 once none of
 * them is left. The call's supervisor then reports (or its exec ends) within KILL_GRACE; if it does
 * not, the killer's word decides: 0, and the call is over (the engine is late to say so, as on a
 * loaded host); anything else, or no killer run within KILLER_BOUND (a frozen sandbox runs no exec),
 * and only killing the whole sandbox is sure: the session ends. (The engine answers an exec's start
 * before its process runs: on a loaded host the killer took seconds to run, so the grace counts
 * from its exit.)
 */
import { Deferred, Effect, Option, Redacted, type Scope } from "effect"
import { createHash } from "node:crypto"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import { ContainerFailed, type InvalidRequest, invalidRequest, type SandboxError } from "../Errors.js"
import { planExecution } from "../ExecutionRequest.js"
import type { ResolvedSandboxDefaults } from "../ExecutorConfig.js"
import type { ExecuteOptions } from "../Executor.js"
import { SESSION_LOCK, SESSION_STATE_DIR, sessionInvocation } from "../internal/sessionShell.js"
import { type Completion, runToCompletion } from "../kernel/Run.js"
import { makeSupervisedRun, type SupervisedRun } from "../kernel/SupervisedRun.js"
import { encodeRunnerPayload, encodeRunnerPayloadFor, type RunnerPayload } from "../RunnerProtocol.js"
import type { ToolChannel } from "../kernel/ToolChannel.js"
import type { AuditRecorder } from "../internal/auditTrail.js"
import type { ToolLimits, ToolPlan, Tools } from "../Tools.js"
import type { ExecProcess, SandboxRef, SandboxRuntime } from "../SandboxRuntime.js"
import * as Schemas from "../Schemas.js"
import { callTimeoutMs, type SessionPlan } from "./plan.js"

export interface RunOptions extends ExecuteOptions {
  readonly stdin?: string
  /** Variables for this call only (they win over exported ones and are not carried). */
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
}

export interface SessionCodeRequest {
  readonly language: string
  readonly code: string
  readonly stdin?: string
  /** Written into the session's current directory before the program runs. */
  readonly files?: Readonly<Record<string, string | Uint8Array>>
  readonly env?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
  readonly outputLimitBytes?: number
  /** Host tools the snippet may call (as in executeCode); replaces the service's `tools`. */
  readonly tools?: Tools
  readonly toolLimits?: Partial<ToolLimits>
  readonly recordToolArguments?: boolean
}

export interface CallInput {
  readonly language: string
  readonly mode: "eval" | "argv" | "runner"
  readonly args: ReadonlyArray<string>
  readonly stdin: Uint8Array
  /** The command (its text, or its argv as JSON) or the snippet: what recordCode records. */
  readonly code: Uint8Array
  readonly codeBytes: number
  readonly codeSha256: string
  readonly fileCount: number
  readonly timeoutMs: number
  readonly outputLimitBytes: number
  readonly env: Readonly<Record<string, string>>
  /** runCode's tools, checked. */
  readonly tools?: ToolPlan | undefined
}

/** After the killer's work, how long the call's process may take to end before the whole sandbox is killed. */
export const KILL_GRACE = "5 seconds"
/** How long the killer exec may take to run at all (the engine starts it, it kills, it exits). */
const KILLER_BOUND = "20 seconds"
/** How many killers may run, one after another, within KILLER_BOUND. */
const KILLER_ATTEMPTS = 3
const encoder = new TextEncoder()

/** The call's environment: the session's, its secrets, then the call's own (checked with what it is merged over). */
export const callEnv = (plan: SessionPlan, extra: Readonly<Record<string, string>> | undefined) =>
  Effect.gen(function* () {
    const secrets = Object.fromEntries(Object.entries(plan.secretEnv).map(([k, v]) => [k, Redacted.value(v)]))
    // Checked with what it is merged over: the kernel's bound is on the call's whole environment.
    const perCall = extra === undefined ? {} : yield* Schemas.decodeEnvOver("env", extra, { ...plan.env, ...secrets })
    return { ...plan.env, ...secrets, ...perCall }
  })

/** `run(command)`: a shell command string (run by bash) or an argv run as is. */
export const commandInput = (
  plan: SessionPlan,
  config: ResolvedSandboxDefaults,
  command: string | ReadonlyArray<string>,
  o: RunOptions
): Effect.Effect<CallInput, InvalidRequest> =>
  Effect.gen(function* () {
    const argv = typeof command === "string" ? undefined : command
    if (argv !== undefined && (argv.length === 0 || argv.some((a) => typeof a !== "string" || a.includes("\0")))) {
      return yield* Effect.fail(
        invalidRequest("command", argv, "a non-empty argv of strings without NUL bytes, or a shell command string")
      )
    }
    if (typeof command === "string" && (command.trim() === "" || command.includes("\0"))) {
      return yield* Effect.fail(invalidRequest("command", command, "a non-empty shell command without NUL bytes"))
    }
    const text = typeof command === "string" ? command : JSON.stringify(command)
    const bytes = encoder.encode(text)
    if (bytes.byteLength > config.maxCodeBytes)
      return yield* Effect.fail(
        invalidRequest("command", `${bytes.byteLength} bytes`, `at most ${config.maxCodeBytes} bytes (maxCodeBytes)`)
      )
    if (o.stdin !== undefined && typeof o.stdin !== "string")
      return yield* Effect.fail(invalidRequest("stdin", o.stdin, "a string"))
    return {
      language: "bash",
      mode: argv === undefined ? "eval" : "argv",
      args: argv === undefined ? [command as string] : argv,
      stdin: o.stdin === undefined ? new Uint8Array(0) : encoder.encode(o.stdin),
      code: bytes,
      codeBytes: bytes.byteLength,
      codeSha256: createHash("sha256").update(bytes).digest("hex"),
      fileCount: 0,
      timeoutMs: yield* callTimeoutMs(o, plan.timeoutMs),
      outputLimitBytes: plan.outputLimitBytes,
      env: yield* callEnv(plan, o.env)
    }
  })

/** `runCode(request)`: a snippet through the runner, in the session's current directory and environment. */
export const codeInput = (
  plan: SessionPlan,
  config: ResolvedSandboxDefaults,
  runner: ReadonlyArray<string>,
  request: SessionCodeRequest
): Effect.Effect<CallInput, InvalidRequest> =>
  Effect.gen(function* () {
    for (const field of ["memory", "cpus", "pidsLimit", "image"] as const) {
      if ((request as unknown as Record<string, unknown>)[field] !== undefined) {
        return yield* Effect.fail(
          invalidRequest(
            field,
            (request as unknown as Record<string, unknown>)[field],
            "nothing per call in a session: set it when opening the session"
          )
        )
      }
    }
    const p = yield* planExecution(
      {
        language: request.language,
        code: request.code,
        ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
        ...(request.files === undefined ? {} : { files: request.files }),
        ...(request.outputLimitBytes === undefined ? {} : { outputLimitBytes: request.outputLimitBytes }),
        ...(request.tools === undefined ? {} : { tools: request.tools }),
        ...(request.toolLimits === undefined ? {} : { toolLimits: request.toolLimits }),
        ...(request.recordToolArguments === undefined ? {} : { recordToolArguments: request.recordToolArguments }),
        timeoutMs: request.timeoutMs ?? plan.timeoutMs
      },
      config,
      // Its files land in the session's current directory, which may be a larger mount.
      { checkSandboxSizes: false }
    )
    return {
      language: p.language,
      mode: "runner",
      args: runner,
      stdin: encodeRunnerPayload({ language: p.language, code: p.code, files: p.files, stdin: p.stdin }),
      code: p.code,
      codeBytes: p.code.byteLength,
      codeSha256: p.codeSha256,
      fileCount: p.files.length,
      timeoutMs: p.timeoutMs,
      outputLimitBytes: request.outputLimitBytes === undefined ? plan.outputLimitBytes : p.outputLimitBytes,
      env: yield* callEnv(plan, request.env),
      tools: p.tools
    }
  })

export interface CallDeps {
  readonly runtime: SandboxRuntime["Type"]
  readonly container: SandboxRef
  readonly plan: SessionPlan
  /** The supervisor binary this runtime can load. */
  readonly supervisor: string
  /** Something in the sandbox outlived a kill: the sandbox was killed; the session must end. */
  readonly sandboxKilled: (reason: string) => Effect.Effect<void>
}

/** Run one call to its end on the kernel; records ContainerExited | ExecutionTimedOut through `record`. */
export const runCall = (
  deps: CallDeps,
  input: CallInput,
  hooks: ExecuteOptions,
  record: (event: JournalEvent) => Effect.Effect<void, JournalError>,
  tools?: ToolChannel,
  recorder?: AuditRecorder
): Effect.Effect<
  { readonly done: Completion; readonly run: SupervisedRun },
  ContainerFailed | SandboxError | JournalError,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const run = yield* makeSupervisedRun(input.outputLimitBytes, hooks, undefined, undefined, tools)
    recorder?.captures(run.stdout, run.stderr)
    const shell = sessionInvocation({
      stateDir: SESSION_STATE_DIR,
      keep: Object.keys(input.env),
      mode: input.mode,
      args: input.args
    })
    const done = yield* superviseExec(
      deps,
      run,
      {
        env: input.env,
        timeoutMs: input.timeoutMs,
        what: "command",
        payload: {
          key: run.key,
          capBytes: run.capBytes,
          lock: SESSION_LOCK,
          killLeftovers: !deps.plan.keepBackgroundProcesses,
          args: shell,
          tools: tools?.header,
          stdin: input.stdin
        },
        tools
      },
      record
    )
    return { done, run }
  })

/**
 * The deadline's kill from inside: `hermes-run --kill <pid> <start> since|all` as a second exec, which
 * SIGKILLs every process started since `started` (all: every one but PID 1 and parent-pid-0
 * supervisors) and exits 0 once none is left. On a loaded host an exec may fail to start, or a
 * killer's passes end before a process with thousands of threads is torn down: another killer
 * runs, KILLER_ATTEMPTS in all, within KILLER_BOUND. Some(true): a killer left nothing; Some(false):
 * none could clear it (`killExec` ran when no killer even started); None: the bound passed. `said`
 * keeps what the killers did, for the log line when the sandbox has to go.
 */
export const runKillers = (
  deps: Pick<CallDeps, "runtime" | "container" | "supervisor">,
  started: { readonly pid: number; readonly start: string },
  scope: "since" | "all",
  killExec: Effect.Effect<void>,
  said: { value: string },
  what: string
): Effect.Effect<Option.Option<boolean>> => {
  const killOnce = deps.runtime
    .exec(
      deps.container,
      { command: [deps.supervisor, "--kill", String(started.pid), started.start, scope], env: {}, stdin: false },
      { stdout: () => {}, stderr: () => {} }
    )
    .pipe(
      Effect.flatMap((killer) =>
        killer.exit.pipe(
          Effect.map((status) => status.exitCode),
          Effect.ensuring(killer.detach)
        )
      ),
      Effect.option
    )
  return Effect.gen(function* () {
    let anyStarted = false
    for (let attempt = 1; attempt <= KILLER_ATTEMPTS; attempt++) {
      const code = yield* killOnce
      anyStarted ||= Option.isSome(code)
      if (Option.isSome(code) && code.value === 0) {
        said.value = `the killer left nothing, but ${what} did not end within the grace`
        return Option.some(true)
      }
      said.value = Option.isNone(code)
        ? `no killer could be started in the sandbox (${attempt} tries)`
        : `the killer exited ${code.value}: something outlived every pass (${attempt} tries)`
    }
    // No killer ever started: the exec itself is all that is left to kill.
    if (!anyStarted) yield* killExec
    return Option.some(false)
  }).pipe(
    // The bound cuts the killers short even when called from an uninterruptible region.
    Effect.interruptible,
    Effect.timeoutTo({
      duration: KILLER_BOUND,
      onSuccess: (ran) => ran,
      onTimeout: () => Option.none<boolean>()
    })
  )
}

/**
 * One exec of the supervisor with a framed payload (a call, or a file operation: session/files.ts),
 * run to its end on the kernel under the call's deadline; the session lock is the payload's.
 */
export const superviseExec = (
  deps: CallDeps,
  run: SupervisedRun,
  input: {
    readonly env: Readonly<Record<string, string>>
    readonly timeoutMs: number
    /** What never ran when the lock stayed held, in the error: "command", "file operation". */
    readonly what: string
    /** Encoded for the runtime here (its stdin in the header where the runtime's stdin cannot end). */
    readonly payload: RunnerPayload
    readonly tools?: ToolChannel | undefined
  },
  record: (event: JournalEvent) => Effect.Effect<void, JournalError>
): Effect.Effect<Completion, ContainerFailed | SandboxError | JournalError, Scope.Scope> =>
  Effect.gen(function* () {
    const { runtime, container, plan, supervisor } = deps
    const proc: ExecProcess = yield* Effect.acquireRelease(
      runtime.exec(container, { command: [supervisor], env: input.env, stdin: true }, run.receiver),
      (p, exit) => (exit._tag === "Failure" ? p.kill.pipe(Effect.ignore) : Effect.void).pipe(Effect.zipRight(p.detach))
    )
    const atDeadline = (sup: SupervisedRun) =>
      Effect.gen(function* () {
        const holder = sup.lockWait()
        if (holder !== undefined) {
          // Never ran: the lock stayed held for the whole deadline (by another handle's call, or by a
          // process left behind that holds it). Said as such, never as the command's own timeout.
          const [pid, ...cmd] = holder.split(" ")
          // The supervisor names the holder from /proc/locks; pid 0 when there is none (gVisor has none).
          const by =
            pid === undefined || !/^[1-9]\d*$/.test(pid)
              ? "by a process the sandbox could not name (it has no /proc/locks, as under gVisor)"
              : `by process ${pid} (${cmd.join(" ").trim() || "unknown command"})`
          yield* proc.kill.pipe(Effect.ignore)
          return yield* new ContainerFailed({
            operation: "session call",
            containerName: container.name,
            reason: "session-locked",
            message:
              `the session lock in ${container.name} was held for the whole deadline (${input.timeoutMs} ms) ${by}; ` +
              `the ${input.what} never ran. Another handle's call is still running, or a process left in the sandbox holds ${SESSION_LOCK}: end it, or destroy the session`
          })
        }
        // Everything the call started dies now, escapees (setsid, double fork, env -i) included: every
        // process started since the call began (all of them but PID 1 when leftovers are not kept).
        const started = sup.started()
        // Before the program started (no 'p' frame), its supervisor's own process tree is the call.
        if (started === undefined) yield* proc.kill.pipe(Effect.ignore)
        // The call's supervisor reports once its child died, or the exec ends. Its grace runs from
        // the killer's exit (or from now when there is no killer: the exec itself was killed).
        const reported = Effect.raceFirst(Effect.asVoid(Deferred.await(sup.report)), Effect.asVoid(proc.exit)).pipe(
          Effect.as(true)
        )
        // What the killer did, for the log line when the sandbox has to go (the reason stays one).
        const said = {
          value:
            started === undefined
              ? "the program had not started: its exec was killed"
              : "the killer did not end within its bound"
        }
        const killerCleared =
          started === undefined
            ? Effect.succeed(Option.some(false))
            : runKillers(
                deps,
                started,
                plan.keepBackgroundProcesses ? "since" : "all",
                proc.kill.pipe(Effect.ignore),
                said,
                "the call"
              )
        const afterGrace = Effect.flatMap(killerCleared, (cleared) =>
          Option.isNone(cleared) ? Effect.succeed(false) : Effect.as(Effect.sleep(KILL_GRACE), cleared.value)
        )
        const afterKill = yield* Effect.raceFirst(reported, afterGrace).pipe(Effect.orElseSucceed(() => false))
        if (!afterKill) {
          // Something in the sandbox outlived the kill: only killing the sandbox is sure.
          yield* runtime.kill(container).pipe(Effect.ignore)
          yield* Effect.logWarning(
            `${container.name}: a timed-out ${input.what} could not be killed inside (${said.value}); the sandbox was killed`
          )
          yield* deps.sandboxKilled(`a timed-out ${input.what} could not be killed inside; the sandbox was killed`)
        }
        return 137
      })
    return yield* runToCompletion({
      target: {
        containerName: container.name,
        kind: "call",
        write: proc.write,
        end: proc.end,
        exit: proc.exit,
        // The exec's exit comes after its output streams ended.
        drained: Effect.void,
        kill: proc.kill.pipe(Effect.ignore),
        atDeadline,
        outsideKill: Effect.succeedNone,
        oomKilled: () =>
          runtime.inspect(container).pipe(
            Effect.option,
            Effect.map((s) => Option.isSome(s) && s.value.oomKilled)
          )
      },
      run,
      payload: encodeRunnerPayloadFor(runtime, input.payload),
      timeoutMs: input.timeoutMs,
      record,
      tools: input.tools
    })
  })
