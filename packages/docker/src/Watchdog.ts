/**
 * A detached watcher process per executor (see watchdog/watchdog.mjs): when
 * the executor's process dies, even by SIGKILL, the watcher's stdin pipe hits
 * EOF and it removes every container labelled with the executor's id, then
 * keeps looking for a few seconds (a create in flight at the death can still
 * land). On a normal close the executor removes its containers itself and
 * says "close" down the pipe: the watcher makes one pass (which also catches
 * a removal that gave up while the engine was away) and exits.
 *
 * It reaches the engine the way the executor does (EngineEndpoint's transport): a unix socket
 * or plain tcp is named on its argv as before; for TLS and ssh, whose transport holds the
 * client's key, argv names only the endpoint and the transport is the first line on the
 * watcher's stdin. The pipe's write end is the owner's alone, so the key reaches no other
 * process and no file (argv is readable by every user in /proc; an environment variable would
 * be readable by the same uid in /proc/PID/environ for the watcher's whole life).
 */
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { DockerEngine } from "./DockerEngine.js"
import type { EngineTransport } from "./EngineEndpoint.js"
import { packageRoot } from "./internal/packageRoot.js"

export const watchdogScript = fileURLToPath(new URL("watchdog/watchdog.mjs", packageRoot))

export interface WatchdogHandle {
  readonly executorId: string
  /** The watcher's process id (-1 if it could not be spawned). */
  readonly pid: number
}

const running = new Map<string, WatchdogHandle>()

/** The watchdog this process started for an executor, while that executor is open (diagnostics, chaos tests). */
export const find = (executorId: string): WatchdogHandle | undefined => running.get(executorId)

/** The watcher's argv after the script, and the line (with the keys) it reads first on stdin, if any. */
const invocation = (
  target: string | EngineTransport
): { readonly args: ReadonlyArray<string>; readonly firstLine?: string } => {
  if (typeof target === "string") return { args: [target] }
  switch (target.kind) {
    case "unix":
      return { args: [target.socketPath] }
    case "tcp":
      return { args: [`tcp://${target.host.includes(":") ? `[${target.host}]` : target.host}:${target.port}`] }
    case "tls":
      return {
        args: [
          `tcp://${target.host.includes(":") ? `[${target.host}]` : target.host}:${target.port}`,
          "--transport-on-stdin"
        ],
        firstLine: `${JSON.stringify(target)}\n`
      }
    case "ssh":
      return {
        args: [`ssh://${target.username}@${target.host}:${target.port}`, "--transport-on-stdin"],
        firstLine: `${JSON.stringify(target)}\n`
      }
  }
}

/**
 * Spawn the watcher for `executorId`, reaching the engine at `target` (a socket path or
 * tcp://host:port, or the engine's transport); it is released (told "close", pipe closed) when
 * the scope closes.
 */
export const start = (executorId: string, target: string | EngineTransport) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const { args, firstLine } = invocation(target)
      const child = spawn(process.execPath, [watchdogScript, executorId, ...args], {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"]
      })
      // Written before anything else: the pipe's buffer takes it at once, the watcher reads it first.
      if (firstLine !== undefined) child.stdin?.write(firstLine)
      // A failed spawn (no such executable, EAGAIN) surfaces as an 'error' event: never crash the owner for it.
      child.on("error", () => running.delete(executorId))
      child.stdin?.on("error", () => {})
      // Neither the child nor the pipe may keep the owner's event loop alive.
      child.unref()
      const stdin = child.stdin as unknown as { unref?: () => void } | null
      stdin?.unref?.()
      ;(child.stdin as unknown as { _handle?: { unref?: () => void } } | null)?._handle?.unref?.()
      const handle: WatchdogHandle = { executorId, pid: child.pid ?? -1 }
      running.set(executorId, handle)
      return { child, handle }
    }),
    ({ child }) =>
      Effect.sync(() => {
        running.delete(executorId)
        child.stdin?.end("close\n")
      })
  ).pipe(Effect.map(({ handle }) => handle))

export const layer = (executorId: string, endpoint: string | EngineTransport): Layer.Layer<never> =>
  Layer.scopedDiscard(start(executorId, endpoint))

/** The watcher for `executorId` on the engine this layer reaches, the way it reaches it. */
export const forEngine = (executorId: string) =>
  Effect.flatMap(DockerEngine, (engine) => start(executorId, engine.transport))
