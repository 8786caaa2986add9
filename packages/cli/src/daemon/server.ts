/**
 * The daemon (`hermes-sandbox daemon serve`, started in the background by `daemon start`): one
 * executor with a warm pool, serving `run` requests from this user over a unix socket (protocol.ts;
 * SECURITY.md, "The CLI's local daemon", says who may connect, what a request may ask and the
 * bounds held here). A request the daemon's options or its pool do not fit is handed back before
 * anything is recorded or created (the executor's `warmPoolOnly`); the client then runs it itself.
 * The deadline is the executor's, here. Containers are the executor's: labelled, removed with
 * their runs, drained with the pool on stop, and reaped by its watchdog if this process dies.
 */
import { chmodSync, unlinkSync } from "node:fs"
import { createServer, type Server, type Socket } from "node:net"
import { join } from "node:path"
import type { ExecuteRequest } from "@hermes-sandbox/core"
import { errorJson } from "@hermes-sandbox/core/ErrorJson"
import { type CreateExecutorOptions, createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"
import { askDaemon } from "./control.js"
import {
  type DaemonStatus,
  encodeFrame,
  type FitKey,
  Frame,
  FrameReader,
  MAX_CLIENT_BACKLOG_BYTES,
  MAX_CONNECTIONS,
  MAX_REQUEST_FRAME_BYTES,
  REQUEST_TIMEOUT_MS,
  type RunMessage,
  sameFit
} from "./protocol.js"
import { ensureDaemonDirectory, SOCKET_NAME } from "./socketPath.js"

export interface DaemonPool {
  readonly size: number
  readonly languages: ReadonlyArray<"python" | "javascript" | "bash">
  readonly idleTtlMs?: number
}

/**
 * What the daemon's command line set apart from `run`'s defaults, for its pool: the request of a
 * run served must say the same (`run` without `-m` means 512m, not the daemon's), and an image
 * equal to the pool's is taken as the pool's.
 */
export interface PoolShape {
  readonly image?: string
  readonly memory?: string
  readonly cpus?: number
  readonly timeoutMs?: number
}

export interface ServeOptions {
  /** The executor's options as `run` would make them from the same flags (no warm pool yet). */
  readonly executorOptions: CreateExecutorOptions
  readonly shape: PoolShape
  readonly fit: FitKey
  readonly pool: DaemonPool
  /** Called once the socket listens. */
  readonly onListening?: (socketPath: string) => void
}

/** A request's own fields, taken one by one (anything else in the message is ignored); files from base64. */
const requestOf = (wire: RunMessage["request"]): ExecuteRequest => {
  const w = wire as Partial<Record<keyof RunMessage["request"], unknown>>
  const str = (v: unknown) => (typeof v === "string" ? v : undefined)
  const files =
    typeof w.files === "object" && w.files !== null
      ? Object.fromEntries(
          Object.entries(w.files as Record<string, unknown>).map(([path, b64]) => [
            path,
            new Uint8Array(Buffer.from(str(b64) ?? "", "base64"))
          ])
        )
      : undefined
  return {
    language: str(w.language) ?? "",
    code: str(w.code) ?? "",
    ...(typeof w.timeoutMs === "number" ? { timeoutMs: w.timeoutMs } : {}),
    ...(str(w.memory) === undefined ? {} : { memory: str(w.memory)! }),
    ...(typeof w.cpus === "number" ? { cpus: w.cpus } : {}),
    ...(str(w.stdin) === undefined ? {} : { stdin: str(w.stdin)! }),
    ...(typeof w.env === "object" && w.env !== null ? { env: w.env as Record<string, string> } : {}),
    ...(files === undefined ? {} : { files }),
    ...(str(w.image) === undefined ? {} : { image: str(w.image)! })
  }
}

/**
 * The request as the pool serves it, or undefined when the direct path would run it otherwise: a
 * limit the daemon set that the request leaves to `run`'s default. An image equal to the pool's
 * is left out (the executor takes any image named for the pool's other).
 */
export const shapedRequest = (request: ExecuteRequest, shape: PoolShape): ExecuteRequest | undefined => {
  if (shape.memory !== undefined && request.memory === undefined) return undefined
  if (shape.cpus !== undefined && request.cpus === undefined) return undefined
  if (shape.timeoutMs !== undefined && request.timeoutMs === undefined) return undefined
  if (shape.image === undefined) return request
  if (request.image !== shape.image) return undefined
  const { image: _, ...rest } = request
  return rest
}

const isWarmPoolRefusal = (error: unknown): boolean =>
  (error as { _tag?: unknown; field?: unknown })?._tag === "InvalidRequest" &&
  (error as { field?: unknown }).field === "warmPool"

/** Serves until `stop` (a client's, or SIGINT/SIGTERM); resolves once the pool is drained and the socket gone. */
export const serve = async (options: ServeOptions): Promise<void> => {
  const dir = ensureDaemonDirectory()
  const path = join(dir, SOCKET_NAME)
  if ((await askDaemon(Frame.status, path)) !== undefined)
    throw new Error(`a daemon already answers on ${path} (hermes-sandbox daemon stop)`)
  try {
    unlinkSync(path) // a dead daemon's socket
  } catch {
    // none
  }

  const { shape } = options
  const executor: SandboxExecutor = await createExecutor({
    ...options.executorOptions,
    ...(shape.memory === undefined ? {} : { memory: shape.memory }),
    ...(shape.cpus === undefined ? {} : { cpus: shape.cpus }),
    ...(shape.timeoutMs === undefined ? {} : { timeoutMs: shape.timeoutMs }),
    ...(shape.image === undefined
      ? {}
      : { images: Object.fromEntries(options.pool.languages.map((l) => [l, shape.image!])) }),
    warmPool: {
      size: options.pool.size,
      languages: [...options.pool.languages],
      ...(options.pool.idleTtlMs === undefined ? {} : { idleTtlMs: options.pool.idleTtlMs })
    }
  })
  const startedAt = new Date().toISOString()
  let served = 0
  let handedBack = 0
  let connections = 0
  let stopping: Promise<void> | undefined

  const status = async (): Promise<DaemonStatus> => {
    const stats = await executor.stats()
    return {
      pid: process.pid,
      socket: path,
      fit: options.fit,
      pool: options.pool,
      shape,
      warm: stats.warm,
      inFlight: stats.inFlight,
      served,
      handedBack,
      startedAt
    }
  }

  const serveRun = (socket: Socket, message: RunMessage, cancels: AbortController) => {
    const send = (type: number, payload?: Uint8Array | string) => {
      if (socket.destroyed) return
      socket.write(encodeFrame(type, payload))
      if (socket.writableLength > MAX_CLIENT_BACKLOG_BYTES) cancels.abort("the client is not reading its output")
    }
    if (
      typeof message !== "object" ||
      message === null ||
      typeof message.fit !== "object" ||
      typeof message.request !== "object" ||
      !sameFit(message.fit, options.fit)
    ) {
      handedBack++
      send(Frame.noFit, "the daemon's options differ")
      socket.end()
      return
    }
    const request = shapedRequest(requestOf(message.request), shape)
    if (request === undefined) {
      handedBack++
      send(Frame.noFit, "the daemon's pool was made with other limits or another image")
      socket.end()
      return
    }
    let accepted = false
    executor
      .executeCode(request, {
        signal: cancels.signal,
        warmPoolOnly: true,
        onExecutionId: () => {
          accepted = true
          send(Frame.accepted)
        },
        onStdout: (chunk) => send(Frame.stdout, chunk),
        onStderr: (chunk) => send(Frame.stderr, chunk)
      })
      .then(
        (result) => {
          served++
          send(Frame.result, JSON.stringify(result))
        },
        (error: unknown) => {
          if (!accepted) {
            // Refused before it was requested (the pool does not fit it, the request is invalid,
            // the daemon is closing): the client runs it itself and reports what it finds.
            handedBack++
            send(Frame.noFit, isWarmPoolRefusal(error) ? "the warm pool does not fit the request" : "refused")
          } else {
            served++
            send(Frame.failure, JSON.stringify(errorJson(error)))
          }
        }
      )
      .finally(() => socket.end())
  }

  const onConnection = (socket: Socket) => {
    if (connections >= MAX_CONNECTIONS || stopping !== undefined) return void socket.destroy()
    connections++
    const cancels = new AbortController()
    let first = true
    const timer = setTimeout(() => socket.destroy(), REQUEST_TIMEOUT_MS)
    socket.on("error", () => {})
    socket.on("close", () => {
      connections--
      clearTimeout(timer)
      // A client that went away (killed, its second Ctrl-C) interrupts its run; its container is removed.
      cancels.abort("the client went away")
    })
    const reader = new FrameReader(
      MAX_REQUEST_FRAME_BYTES,
      (type, payload) => {
        if (!first) {
          if (type === Frame.cancel) cancels.abort(payload.toString("utf8").slice(0, 200) || "cancelled")
          else socket.destroy()
          return
        }
        first = false
        clearTimeout(timer)
        if (type === Frame.run) {
          let message: RunMessage
          try {
            message = JSON.parse(payload.toString("utf8")) as RunMessage
          } catch {
            return void socket.destroy()
          }
          serveRun(socket, message, cancels)
        } else if (type === Frame.status || type === Frame.stop) {
          void status().then((s) => {
            if (!socket.destroyed) socket.end(encodeFrame(Frame.status, JSON.stringify(s)))
            if (type === Frame.stop) void stop()
          })
        } else socket.destroy()
      },
      () => socket.destroy()
    )
    socket.on("data", (chunk: Buffer) => reader.push(chunk))
  }

  const server: Server = createServer(onConnection)
  const stop = () =>
    (stopping ??= (async () => {
      server.close()
      try {
        unlinkSync(path)
      } catch {
        // gone already
      }
      // Interrupts what still runs (their containers removed) and drains the pool.
      await executor.close()
    })())

  // The socket is this user's alone from its creation (umask), and stays so (chmod).
  const umask = process.umask(0o077)
  try {
    await new Promise<void>((listening, failed) => {
      server.once("error", failed)
      server.listen(path, () => listening())
    })
  } catch (error) {
    await executor.close()
    throw error
  } finally {
    process.umask(umask)
  }
  chmodSync(path, 0o600)
  const onSignal = () => void stop()
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  options.onListening?.(path)
  await new Promise<void>((closed) => server.once("close", () => closed()))
  await stop()
  process.off("SIGINT", onSignal)
  process.off("SIGTERM", onSignal)
}
