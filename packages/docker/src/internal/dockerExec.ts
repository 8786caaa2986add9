/**
 * `SandboxRuntime.exec` over the Engine API: create an exec, start it with a hijacked
 * stream (stdin writable, stdout/stderr demultiplexed — no TTY), and read the exit code with
 * `exec inspect` once the process is gone.
 *
 * Kill: the API cannot signal an exec'd process. Every exec carries a random marker in its
 * environment (ExecMarkerVariable); `kill` runs a second exec, as the same user (root inside a
 * cap-dropped sandbox could not signal it anyway), that SIGKILLs every process whose initial
 * environment holds the marker, and each one's process group. See ExecProcess in core.
 *
 * Measured on Docker 20.10: an exec round trip is ~50 ms; a background child that keeps the
 * exec's stdout open delays the END of that exec's stream and, oddly, of the next exec's
 * stream too, while output and `exec inspect` (Running=false, ExitCode) are prompt. So `exit`
 * resolves on the stream's end OR, once a kill was sent, on `exec inspect` polling.
 */
import { Deferred, Effect } from "effect"
import { randomBytes } from "node:crypto"
import { Writable, type Duplex } from "node:stream"
import type Docker from "dockerode"
import {
  ContainerFailed,
  ExecKillScript,
  ExecMarkerVariable,
  type ExecProcess,
  type ExecSpec,
  type ExitStatus,
  type OutputReceiver,
  type SandboxError,
  type SandboxRef
} from "@hermes-sandbox/core"
import { type CallContext, dockerCall, isNotRunning } from "./dockerCall.js"

/** After the stream ended, how long `exec inspect` may keep saying "running". */
const SETTLE_POLLS = 50
const POLL_MS = 100

interface ExecInspect {
  readonly Running: boolean
  readonly ExitCode: number | null
}

export const makeDockerExec = (docker: Docker, context: (operation: string, containerName: string) => CallContext) => {
  /** Start an exec; its output goes to the receiver, its stream is returned. */
  const startExec = (ref: SandboxRef, spec: ExecSpec, marker: string, output: OutputReceiver) =>
    Effect.gen(function* () {
      const exec = yield* dockerCall(context("exec", ref.name), (signal) =>
        docker.getContainer(ref.id).exec({
          Cmd: [...spec.command],
          Env: [...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), `${ExecMarkerVariable}=${marker}`],
          ...(spec.workingDir === undefined ? {} : { WorkingDir: spec.workingDir }),
          ...(spec.user === undefined ? {} : { User: spec.user }),
          AttachStdin: spec.stdin,
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
          abortSignal: signal
        } as Docker.ExecCreateOptions)
      )
      const stream = (yield* dockerCall(context("exec start", ref.name), (signal) =>
        exec.start({ hijack: true, stdin: spec.stdin, abortSignal: signal } as Docker.ExecStartOptions)
      )) as unknown as Duplex
      let detached = false
      const sink = (deliver: (chunk: Uint8Array) => void) =>
        new Writable({
          write(chunk: Buffer, _encoding, callback) {
            if (!detached) deliver(chunk)
            callback()
          }
        })
      docker.modem.demuxStream(stream, sink(output.stdout), sink(output.stderr))
      const ended = new Promise<void>((resolve) => {
        stream.once("end", resolve)
        stream.once("close", resolve)
        stream.once("error", () => resolve())
      })
      if (!spec.stdin) stream.end()
      return {
        exec,
        stream,
        ended,
        detach: () => {
          detached = true
          stream.destroy()
        }
      }
    })

  const inspectExec = (ref: SandboxRef, exec: Docker.Exec) =>
    dockerCall(
      context("exec inspect", ref.name),
      (signal) => exec.inspect({ abortSignal: signal } as object) as Promise<ExecInspect>
    )

  /** Polls until the engine reports the process gone; its exit code. */
  const settledExit = (ref: SandboxRef, exec: Docker.Exec, polls: number) =>
    Effect.gen(function* () {
      for (let i = 0; ; i++) {
        const state = yield* inspectExec(ref, exec)
        if (!state.Running) return { exitCode: state.ExitCode ?? -1 } satisfies ExitStatus
        if (i >= polls) {
          return yield* new ContainerFailed({
            operation: "exec inspect",
            containerName: ref.name,
            reason: "engine",
            message: `the exec in ${ref.name} still runs although its streams ended`
          })
        }
        yield* Effect.sleep(POLL_MS)
      }
    })

  const exec = (ref: SandboxRef, spec: ExecSpec, output: OutputReceiver): Effect.Effect<ExecProcess, SandboxError> =>
    Effect.gen(function* () {
      const marker = randomBytes(12).toString("hex")
      const started = yield* startExec(ref, spec, marker, output)
      const outcome = yield* Deferred.make<ExitStatus, SandboxError>()
      const killed = yield* Deferred.make<void>()
      const onStreamEnd = Effect.promise(() => started.ended).pipe(
        Effect.zipRight(settledExit(ref, started.exec, SETTLE_POLLS))
      )
      const afterKill = Deferred.await(killed).pipe(
        Effect.zipRight(settledExit(ref, started.exec, Number.MAX_SAFE_INTEGER))
      )
      // Settled once, in the background; `exit` only awaits it, so abandoning the await is harmless.
      yield* Effect.raceFirst(onStreamEnd, afterKill).pipe(
        Effect.exit,
        Effect.flatMap((exit) => Deferred.done(outcome, exit)),
        Effect.forkDaemon
      )
      const process: ExecProcess = {
        write: (data) =>
          Effect.async<void, SandboxError>((resume) => {
            started.stream.write(data, (error) =>
              resume(
                error
                  ? Effect.fail(
                      new ContainerFailed({
                        operation: "exec write stdin",
                        containerName: ref.name,
                        reason: "engine",
                        message: error.message
                      })
                    )
                  : Effect.void
              )
            )
          }),
        end: Effect.sync(() => {
          started.stream.end()
        }),
        exit: Deferred.await(outcome),
        kill: Effect.gen(function* () {
          if (yield* Deferred.isDone(outcome)) return
          const killer = yield* startExec(
            ref,
            {
              command: ["sh", "-c", ExecKillScript, "hermes-kill", `${ExecMarkerVariable}=${marker}`],
              env: {},
              user: spec.user,
              stdin: false
            },
            `${marker}-killer`,
            { stdout: () => {}, stderr: () => {} }
          )
          yield* Effect.promise(() => killer.ended).pipe(Effect.timeout("10 seconds"), Effect.ignore)
          killer.detach()
          yield* Deferred.succeed(killed, undefined)
        }).pipe(
          // The sandbox already stopped or is gone: so is the process.
          Effect.catchIf(isNotRunning, () => Deferred.succeed(killed, undefined)),
          Effect.asVoid
        ),
        detach: Effect.sync(started.detach)
      }
      return process
    })

  return exec
}
