/**
 * `hermes-sandbox run` through the daemon (SECURITY.md, "The CLI's local daemon"): the command
 * line parsed as the CLI parses it (runCommand.ts), the request made as the direct path makes it
 * (runRequest.ts), sent over the daemon's socket, and its output and outcome reported as the
 * direct path reports them (runOutput.ts). Plain Node, commander and the CLI's own light modules:
 * no Effect, no SDK.
 *
 * Whatever this path does not serve it hands back (undefined) before anything ran, and the full
 * CLI runs the command as without a daemon: a usage error (the full CLI reports it), an option the
 * daemon does not serve, no daemon answering, a daemon whose options or pool do not fit. Once the
 * daemon accepted the run, its outcome is this path's to report.
 */
import { connect, type Socket } from "node:net"
import { Command, CommanderError } from "commander"
import type { ExecuteRequest, ExecutionResult } from "@hermes-sandbox/core"
import type { ExecuteCallOptions } from "@hermes-sandbox/docker"
import { reportFailure } from "../reportError.js"
import { defineRunCommand } from "../runCommand.js"
import { prepareRun, type RunOptions } from "../runRequest.js"
import { programOutput, runAndReport } from "../runOutput.js"
import { trapSignals } from "../signals.js"
import {
  encodeFrame,
  fitKey,
  Frame,
  journalKey,
  FrameReader,
  MAX_REPLY_FRAME_BYTES,
  MAX_REQUEST_FRAME_BYTES,
  type RunMessage,
  type WireRequest
} from "./protocol.js"

/** Options whose runs the daemon does not serve (the direct path runs them). */
const directOnly = (options: RunOptions): boolean =>
  options.daemon === false ||
  options.config !== undefined ||
  options.hermes === true ||
  options.envFile !== undefined ||
  options.upstreamConfig !== undefined ||
  options.events === true ||
  (options.collect ?? []).length > 0 ||
  options.out !== undefined ||
  options.jsonContent === true

/** The command line's `run`, parsed quietly: undefined for anything commander refuses or answers itself (--help). */
const parseRun = (argv: ReadonlyArray<string>): { file: string | undefined; options: RunOptions } | undefined => {
  let parsed: { file: string | undefined; options: RunOptions } | undefined
  const program = new Command("hermes-sandbox")
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} })
  defineRunCommand(program)
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} })
    .action((file: string | undefined, options: RunOptions) => {
      parsed = { file, options }
    })
  try {
    program.parse([...argv])
  } catch (error) {
    if (error instanceof CommanderError) return undefined
    throw error
  }
  return parsed
}

/** A reply frame's JSON. */
const json = <A>(payload: Buffer): A => JSON.parse(payload.toString("utf8")) as A

/**
 * The run, through the daemon at `socketPath`: its exit code, or undefined when this path hands
 * it back (nothing has run, nothing was written).
 */
export const runThroughDaemon = async (
  argv: ReadonlyArray<string>,
  socketPath: string
): Promise<number | undefined> => {
  const parsed = parseRun(argv)
  if (parsed === undefined || directOnly(parsed.options)) return undefined
  const { file, options } = parsed
  let message: RunMessage
  let request: ExecuteRequest
  try {
    const prepared = prepareRun(file, options)
    request = prepared.request
    const { executorOptions } = prepared
    const wire: WireRequest = {
      ...request,
      ...(request.files === undefined
        ? {}
        : {
            files: Object.fromEntries(
              Object.entries(request.files).map(([path, bytes]) => [path, Buffer.from(bytes).toString("base64")])
            )
          })
    } as WireRequest
    message = {
      fit: fitKey({
        network: executorOptions.network,
        runtime: executorOptions.runtime,
        limitsUnsupported: executorOptions.limitsUnsupported,
        recordCode: executorOptions.recordCode,
        journal: journalKey(options.journal)
      }),
      request: wire
    }
  } catch {
    // A usage error: the full CLI finds it again and reports it (standard input stays read: runRequest.ts).
    return undefined
  }
  const frame = encodeFrame(Frame.run, JSON.stringify(message))
  if (frame.byteLength - 5 > MAX_REQUEST_FRAME_BYTES) return undefined

  const socket = await new Promise<Socket | undefined>((done) => {
    const s = connect(socketPath)
    s.once("connect", () => done(s))
    s.once("error", () => done(undefined))
  })
  if (socket === undefined) return undefined
  return await exchange(socket, frame, options, request)
}

type Outcome =
  | { readonly _tag: "result"; readonly result: ExecutionResult }
  | { readonly _tag: "failure"; readonly error: unknown }

const exchange = (
  socket: Socket,
  frame: Buffer,
  options: RunOptions,
  request: ExecuteRequest
): Promise<number | undefined> =>
  new Promise<number | undefined>((settle) => {
    let accepted = false
    let hooks: ExecuteCallOptions | undefined
    // Frames that came before the run's hooks were given (the same chunk as `accepted`).
    const early: Array<[number, Buffer]> = []
    let finish: ((outcome: Outcome) => void) | undefined
    let outcome: Outcome | undefined
    const conclude = (o: Outcome) => {
      if (outcome !== undefined) return
      outcome = o
      finish?.(o)
    }

    const deliver = (type: number, payload: Buffer) => {
      if (type === Frame.stdout) hooks?.onStdout?.(new Uint8Array(payload))
      else if (type === Frame.stderr) hooks?.onStderr?.(new Uint8Array(payload))
      else if (type === Frame.result) conclude({ _tag: "result", result: json<ExecutionResult>(payload) })
      else if (type === Frame.failure)
        conclude({ _tag: "failure", error: json<{ error: Record<string, unknown> }>(payload).error })
    }

    const start = () => {
      const program = programOutput()
      const signals = trapSignals()
      const execute = (given: ExecuteCallOptions) =>
        new Promise<ExecutionResult>((ok, fail) => {
          hooks = given
          given.signal?.addEventListener("abort", () => {
            const reason = given.signal?.reason
            if (!socket.destroyed) socket.write(encodeFrame(Frame.cancel, String(reason ?? "aborted")))
          })
          finish = (o) => (o._tag === "result" ? ok(o.result) : fail(o.error))
          for (const [type, payload] of early.splice(0)) deliver(type, payload)
          if (outcome !== undefined) finish(outcome)
        })
      runAndReport(execute, request, options, program, signals)
        .catch((error: unknown) => reportFailure(error, options.json === true))
        .then((code) => {
          signals.dispose()
          socket.destroy()
          settle(code)
        })
    }

    const reader = new FrameReader(
      MAX_REPLY_FRAME_BYTES,
      (type, payload) => {
        if (!accepted) {
          if (type === Frame.accepted) {
            accepted = true
            start()
            return
          }
          // Handed back (noFit), or refused before the run was requested: the direct path decides.
          reader.stop()
          socket.destroy()
          settle(undefined)
          return
        }
        if (hooks === undefined) early.push([type, Buffer.from(payload)])
        else deliver(type, payload)
      },
      (reason) => {
        socket.destroy()
        if (!accepted) settle(undefined)
        else conclude({ _tag: "failure", error: { _tag: "DaemonProtocolError", message: `the daemon sent ${reason}` } })
      }
    )
    socket.on("data", (chunk: Buffer) => reader.push(chunk))
    socket.on("error", () => {})
    socket.on("close", () => {
      if (!accepted) return settle(undefined)
      conclude({
        _tag: "failure",
        error: {
          _tag: "DaemonGone",
          message:
            "the hermes-sandbox daemon went away mid-run (its sandbox is removed by its watchdog); run again, or with --no-daemon"
        }
      })
    })
    socket.write(frame)
  })
