/**
 * A detached watcher process per executor (see watchdog/watchdog.mjs): when
 * the executor's process dies, even by SIGKILL, the watcher's stdin pipe hits
 * EOF and it removes every container labelled with the executor's id. On a
 * normal close the executor removes its containers itself; closing the pipe
 * then lets the watcher find nothing and exit.
 */
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

export const watchdogScript = fileURLToPath(new URL("../watchdog/watchdog.mjs", import.meta.url))

export interface WatchdogHandle {
  readonly pid: number
}

/** Spawn the watcher for `executorId`; it is released (pipe closed) when the scope closes. */
export const start = (executorId: string, endpoint: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, [watchdogScript, executorId, endpoint], {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"]
      })
      // Neither the child nor the pipe may keep the owner's event loop alive.
      child.unref()
      const stdin = child.stdin as unknown as { unref?: () => void } | null
      stdin?.unref?.()
      ;(child.stdin as unknown as { _handle?: { unref?: () => void } } | null)?._handle?.unref?.()
      return { child, handle: { pid: child.pid ?? -1 } satisfies WatchdogHandle }
    }),
    ({ child }) => Effect.sync(() => child.stdin?.end())
  ).pipe(Effect.map(({ handle }) => handle))

export const layer = (executorId: string, endpoint: string): Layer.Layer<never> => Layer.scopedDiscard(start(executorId, endpoint))
