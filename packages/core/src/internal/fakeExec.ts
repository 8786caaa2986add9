/**
 * `exec` for the fake runtime. Faithful where sessions depend on the engine: an exec needs a
 * running sandbox (409 otherwise, 404 once removed), gets its own stdin/stdout/stderr, sees
 * the sandbox's env plus its own, ends with 137 when killed or when the sandbox stops, and
 * `exit` only completes once the process ended.
 *
 * What a process does is read from a `#!fake {json}` argument (the last one that starts so),
 * or, for the runner, from the RunnerProtocol payload on its stdin. The supervisor of a session
 * call (framed argv mode) is emulated: its argv comes from the payload, its output goes out in
 * frames, its report last. The session shell (internal/sessionShell.ts) is emulated from that
 * argv: the saved cwd and exported variables per state dir, keep-names that win and are never
 * saved, the "idle" probe, and background processes (a 'p' frame, then the program until it ends
 * or a "signal" exec names it). A session's file operations are answered from the sandbox's
 * in-memory filesystem (internal/fakeFiles.ts), where snippet files and programs' writes land too.
 * A call with tools starts once its header is whole, and its program's tool calls are relayed on
 * the exec's stdout and answered on its stdin, as for a one-shot run (fakeToolCalls).
 */
import { Clock, Deferred, Effect, Fiber, FiberSet } from "effect"
import { ContainerFailed, type SandboxError } from "../Errors.js"
import {
  type FakeProgram,
  type FakeToolChannel,
  fakeToolCalls,
  fromRunnerPayload,
  headerWithTools,
  lastProgramArg,
  makeFakeStdin,
  MALFORMED_PAYLOAD_MESSAGE,
  outputFrames,
  toolHeaderOf
} from "./fakeProgram.js"
import type {
  ExecProcess,
  ExecSpec,
  ExitStatus,
  OutputReceiver,
  SandboxRef,
  SandboxSpec,
  SandboxState
} from "../SandboxRuntime.js"
import {
  decodeRunnerPayload,
  encodeFrame,
  RUNNER_PROTOCOL_ERROR_EXIT,
  SUPERVISOR,
  SUPERVISOR_READABLE
} from "../RunnerProtocol.js"
import { RUNNER_MODES } from "../RunnerProtocolTable.js"
import { FakeFiles } from "./fakeFiles.js"
import { runFakeKernel } from "./fakeKernel.js"
import { parseSessionInvocation } from "./sessionShell.js"

/** The parts of a fake sandbox exec needs (read live: status changes in place). */
export interface FakeExecSandbox {
  readonly id: string
  readonly name: string
  readonly spec: SandboxSpec
  readonly status: SandboxState["status"]
  /** Completed when the sandbox's main process ended (kill, remove, exit). */
  readonly outputClosed: Deferred.Deferred<void>
}

export interface FakeExecDeps {
  readonly engineCheck: (operation: string) => Effect.Effect<void, SandboxError>
  readonly find: (ref: SandboxRef, operation: string) => Effect.Effect<FakeExecSandbox, SandboxError>
  readonly programs: FiberSet.FiberSet<void>
}

interface ShellState {
  cwd: string
  env: Record<string, string>
  lastActivityMs: number | undefined
}

const encoder = new TextEncoder()
const SIGNAL_NUMBERS: Record<string, number> = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, USR1: 10, USR2: 12, TERM: 15 }

export const makeFakeExec = (deps: FakeExecDeps) => {
  const shells = new Map<string, ShellState>()
  const filesystems = new Map<string, FakeFiles>()
  const filesOf = (sandboxId: string) => {
    let fs = filesystems.get(sandboxId)
    if (fs === undefined) filesystems.set(sandboxId, (fs = new FakeFiles(() => Date.now())))
    return fs
  }
  const inFlight = new Map<string, number>()
  /** Background processes running, by `<sandbox id>:<pid>`: a "signal" exec ends one with 128 + the signal. */
  const backgrounds = new Map<string, { readonly start: string; readonly signalled: Deferred.Deferred<number> }>()
  let backgroundPids = 0
  let peak = 0
  let kernels = 0

  const exec = (ref: SandboxRef, spec: ExecSpec, output: OutputReceiver): Effect.Effect<ExecProcess, SandboxError> =>
    Effect.gen(function* () {
      yield* deps.engineCheck("exec")
      const s = yield* deps.find(ref, "exec")
      if (s.status !== "running") {
        return yield* new ContainerFailed({
          operation: "exec",
          containerName: s.name,
          statusCode: 409,
          reason: "conflict",
          message: `Container ${s.id} is not running`
        })
      }
      const stdin = makeFakeStdin()
      if (!spec.stdin) yield* stdin.end
      const exited = yield* Deferred.make<ExitStatus, SandboxError>()
      let detached = false
      // A framed supervisor (set once its payload is read) wraps output in frames, as the real one.
      let key: string | undefined
      // A call with tools: the supervisor relays its program's calls (set with the key).
      let toolChannel: FakeToolChannel | undefined
      const bytes = { out: 0, err: 0 }
      const framed = (k: string, type: "o" | "e", b: Uint8Array) => outputFrames(k, type, b).forEach(output.stdout)
      const out = (b: Uint8Array) =>
        detached || ((bytes.out += b.byteLength), key === undefined ? output.stdout(b) : framed(key, "o", b))
      const err = (b: Uint8Array) =>
        detached || ((bytes.err += b.byteLength), key === undefined ? output.stderr(b) : framed(key, "e", b))
      const readStdin = stdin.until((bytes, ended) => (ended ? bytes : undefined))

      // Counts programs running (not exec lifetimes: the real shell, too, is still exiting after its marker).
      let counted = false
      const count = (running: boolean) =>
        Effect.sync(() => {
          if (running === counted) return
          counted = running
          const n = (inFlight.get(s.id) ?? 0) + (running ? 1 : -1)
          inFlight.set(s.id, n)
          peak = Math.max(peak, n)
        })

      /** Runs one program with a shell's view of cwd and env; returns its exit code (never, if it hangs). */
      const runProgram = (
        program: FakeProgram,
        view: { cwd: string; env: Record<string, string> },
        programStdin: Effect.Effect<Uint8Array>
      ) =>
        Effect.gen(function* () {
          yield* count(true)
          const fs = filesOf(s.id)
          if (program.stdout) out(encoder.encode(program.stdout))
          if (program.stdoutBase64) out(Buffer.from(program.stdoutBase64, "base64"))
          if (program.echoStdin) out(yield* programStdin)
          if (program.toolCalls !== undefined && program.toolCalls.length > 0) {
            yield* fakeToolCalls(program.toolCalls, program.toolCallsConcurrently === true, toolChannel, out)
          }
          if (program.stderr) err(encoder.encode(program.stderr))
          if (program.cd !== undefined) {
            // Like `mkdir -p DIR && cd DIR`.
            fs.mkdirs(program.cd)
            view.cwd = program.cd
          }
          if (program.export) Object.assign(view.env, program.export)
          if (program.printCwd) out(encoder.encode(`${view.cwd}\n`))
          if (program.printEnv !== undefined) out(encoder.encode(`${view.env[program.printEnv] ?? ""}\n`))
          if (program.hang) return yield* Effect.never
          if (program.sleepMs) yield* Effect.sleep(program.sleepMs)
          if (program.writeFile !== undefined)
            fs.write(program.writeFile.path, encoder.encode(program.writeFile.content), 0o644, view.cwd)
          let missing = false
          if (program.cat !== undefined) {
            const content = fs.read(program.cat, view.cwd)
            if (content === undefined) err(encoder.encode(`cat: ${program.cat}: No such file or directory\n`))
            else out(content)
            missing = content === undefined
          }
          yield* count(false)
          return program.oom ? 137 : (program.exitCode ?? (missing ? 1 : 0))
        })

      const body = Effect.gen(function* () {
        let command = spec.command
        if (
          command.length === 3 &&
          (command[0] === SUPERVISOR || command[0] === SUPERVISOR_READABLE) &&
          command[1] === RUNNER_MODES.kernel.arg
        ) {
          // A session's kernel: its own supervisor mode, for as long as the kernel lives (not
          // counted as a running call: it waits for cells, which the session's lock serializes).
          return yield* runFakeKernel({
            stdin,
            send: (b) => void (detached || output.stdout(b)),
            stderr: (b) => void (detached || output.stderr(b)),
            pid: 100 + ++kernels
          })
        }
        let callStdin: Effect.Effect<Uint8Array> = readStdin
        if (command.length === 1 && (command[0] === SUPERVISOR || command[0] === SUPERVISOR_READABLE)) {
          // A session call's supervisor: its argv and the command's stdin come from the payload
          // (with tools, from the header: the rest of its stdin is the host's replies).
          const payload = yield* stdin.until((bytes, ended) => (ended || headerWithTools(bytes) ? bytes : undefined))
          const decoded = decodeRunnerPayload(payload)
          if (decoded === undefined) {
            output.stderr(encoder.encode(MALFORMED_PAYLOAD_MESSAGE))
            return RUNNER_PROTOCOL_ERROR_EXIT
          }
          const tools = toolHeaderOf(payload, decoded)
          if (typeof tools === "string") {
            output.stderr(encoder.encode(tools))
            return RUNNER_PROTOCOL_ERROR_EXIT
          }
          key = decoded.key
          if (tools !== undefined && key !== undefined) {
            toolChannel = { key, tools, stdin, send: (frame) => void (detached || output.stdout(frame)) }
          }
          command = decoded.args
          callStdin = Effect.succeed(decoded.stdin)
          if (decoded.fileOp !== undefined) {
            // A session's file operation: the supervisor does it itself, no program runs.
            if (key === undefined) {
              output.stderr(encoder.encode("hermes-run: a file operation needs framed mode\n"))
              return RUNNER_PROTOCOL_ERROR_EXIT
            }
            yield* count(true)
            const frames = filesOf(s.id).answer(key, decoded.fileOp)
            yield* count(false)
            if (!detached) for (const f of [...frames, encodeFrame(key, "x", "0 0 0 0")]) output.stdout(f)
            return 0
          }
        }
        const report = (code: number) => {
          if (key !== undefined && !detached)
            output.stdout(encodeFrame(key, "x", `${code} ${bytes.out} ${bytes.err} 0`))
          return code
        }
        const invocation = parseSessionInvocation(command)
        if (invocation === undefined) {
          const view = { cwd: spec.workingDir ?? s.spec.workingDir, env: { ...s.spec.env, ...spec.env } }
          return report(yield* runProgram(lastProgramArg(command), view, callStdin))
        }
        const shellKey = `${s.id}:${invocation.stateDir}`
        const shell = shells.get(shellKey) ?? { cwd: s.spec.workingDir, env: {}, lastActivityMs: undefined }
        if (invocation.mode === "idle") {
          const now = yield* Clock.currentTimeMillis
          out(
            encoder.encode(
              shell.lastActivityMs === undefined ? "none\n" : `${Math.floor((now - shell.lastActivityMs) / 1000)}\n`
            )
          )
          return report(0)
        }
        if (invocation.mode === "signal") {
          // A background process's kill (session/background.ts): its leader by pid and start time.
          const [sig = "", pid = "", start = ""] = invocation.args
          const target = backgrounds.get(`${s.id}:${pid}`)
          if (target === undefined || target.start !== start) return report(3)
          yield* Deferred.succeed(target.signalled, 128 + (SIGNAL_NUMBERS[sig] ?? 15))
          return report(0)
        }
        const keep = new Set(invocation.keep)
        const view = { cwd: shell.cwd, env: { ...s.spec.env, ...shell.env, ...spec.env } }
        if (invocation.mode === "background") {
          // A background process: 'p' first (its pid), then it runs until it ends or is signalled;
          // nothing is saved back.
          const pid = 1000 + ++backgroundPids
          const signalled = yield* Deferred.make<number>()
          backgrounds.set(`${s.id}:${pid}`, { start: "77", signalled })
          if (key !== undefined && !detached) output.stdout(encodeFrame(key, "p", `${pid} 77`))
          const code = yield* Effect.raceFirst(
            runProgram(lastProgramArg(invocation.args), { cwd: view.cwd, env: { ...view.env } }, callStdin),
            Deferred.await(signalled)
          ).pipe(Effect.ensuring(Effect.sync(() => backgrounds.delete(`${s.id}:${pid}`))))
          return report(code)
        }
        let program: FakeProgram
        let programStdin: Effect.Effect<Uint8Array> = callStdin
        if (invocation.mode === "runner") {
          const parsed = fromRunnerPayload(yield* callStdin)
          program = parsed.program
          programStdin = Effect.succeed(parsed.stdin)
          // The runner writes the snippet's files into the session's current directory.
          for (const [path, content] of parsed.files) filesOf(s.id).write(path, content, 0o644, view.cwd)
        } else {
          program = lastProgramArg(invocation.args)
        }
        const code = yield* runProgram(program, view, programStdin)
        // Save what the command changed, as the script's EXIT trap does.
        const saved: Record<string, string> = {}
        for (const [k, v] of Object.entries(view.env)) if (!keep.has(k) && s.spec.env[k] !== v) saved[k] = v
        shells.set(shellKey, { cwd: view.cwd, env: saved, lastActivityMs: yield* Clock.currentTimeMillis })
        return report(code)
      })

      // The process ends by itself, or with 137 when killed or when the sandbox's main process ends.
      const fiber = yield* FiberSet.run(
        deps.programs,
        body.pipe(
          // The supervisor gives up on the host's replies: its 'E', exit 126, taking the program with it.
          Effect.catchTag("FakeToolChannelBroken", (e) =>
            Effect.sync(() => {
              if (key !== undefined && !detached) output.stdout(encodeFrame(key, "E", e.message))
              return RUNNER_PROTOCOL_ERROR_EXIT
            })
          ),
          Effect.raceFirst(Deferred.await(s.outputClosed).pipe(Effect.as(137))),
          Effect.onInterrupt(() => Deferred.succeed(exited, { exitCode: 137 })),
          Effect.tap((exitCode) => Deferred.succeed(exited, { exitCode })),
          Effect.ensuring(count(false)),
          Effect.asVoid,
          // A process is killable whatever the caller's interruptibility (exec may be called from an acquire).
          Effect.interruptible
        )
      )
      const process: ExecProcess = {
        write: stdin.write,
        end: stdin.end,
        exit: Deferred.await(exited),
        kill: Fiber.interrupt(fiber).pipe(Effect.asVoid),
        detach: Effect.sync(() => {
          detached = true
        })
      }
      return process
    })

  return { exec, maxConcurrentExecs: Effect.sync(() => peak) }
}
