/**
 * A detached watcher process per executor (see watchdog/watchdog.mjs): when
 * the executor's process dies, even by SIGKILL, the watcher's stdin pipe hits
 * EOF and it removes every container labelled with the executor's id, then
 * keeps looking for a few seconds (a create in flight at the death can still
 * land). On a normal close the executor removes its containers itself and
 * says "close" down the pipe: the watcher makes one pass (which also catches
 * a removal that gave up while the engine was away) and exits.
 */
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
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

/** Spawn the watcher for `executorId`; it is released (told "close", pipe closed) when the scope closes. */
export const start = (executorId: string, endpoint: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, [watchdogScript, executorId, endpoint], {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"]
      })
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

export const layer = (executorId: string, endpoint: string): Layer.Layer<never> => Layer.scopedDiscard(start(executorId, endpoint))
