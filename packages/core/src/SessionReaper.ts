/**
 * The reaper of idle PERSISTENT sandboxes nobody holds.
 *
 * Who removes a long-lived sandbox, and when:
 * - session, owner alive: its owner's in-process idle reaper (Session.ts) after
 *   `lifetimeSeconds` without a call, or at its hard cap;
 * - session, owner gone: the startup sweep (owner labels: pid + start time on this host) and,
 *   after a SIGKILL, the owner's watchdog (executor label) — running or not;
 * - session, hard cap passed: the startup sweep (the `deadline` label = open + maxLifetimeMs);
 * - persistent: it has no owner and no deadline (it must outlive processes). THIS reaper removes
 *   it when idle longer than its `idle-seconds` label.
 *
 * Docker labels cannot change after create, so an idle DEADLINE cannot live in a label. The
 * label holds the allowed idle duration and the last activity is read from inside the sandbox:
 * the session shell rewrites its state file at the end of every call, and its "idle" probe
 * prints the seconds since (one exec, ~50 ms). No state file yet: idle since creation. A
 * stopped persistent sandbox (engine restart) has lost its tmpfs state: idle since creation.
 * A probe that fails leaves the sandbox alone (never remove on a guess).
 */
import { Clock, Effect } from "effect"
import type { JournalEvent } from "@hermes-sandbox/events"
import type { SandboxError } from "./Errors.js"
import { SESSION_STATE_DIR, sessionInvocation } from "./internal/sessionShell.js"
import { ContainerNamePrefix, Label, ProjectName } from "./Labels.js"
import { SandboxRuntime, type SandboxInfo } from "./SandboxRuntime.js"

export interface ReapReport {
  /** Persistent sandboxes with an idle limit that were looked at. */
  readonly checked: number
  readonly removed: ReadonlyArray<string>
}

export interface ReapOptions {
  /** Sandboxes held open by this process are never reaped here (their own reaper decides). */
  readonly skip: (containerName: string) => boolean
  /** Journal appends (already published-after-commit by the caller). */
  readonly append: (streamId: string, ...events: ReadonlyArray<JournalEvent>) => Effect.Effect<void>
}

const PROBE_TIMEOUT = "10 seconds"
const decoder = new TextDecoder()

/** Seconds since the last call ended, `null` when no call ever ran, undefined when the probe failed. */
export const probeIdleSeconds = (container: { readonly id: string; readonly name: string }) =>
  Effect.gen(function*() {
    const runtime = yield* SandboxRuntime
    let out = ""
    const command = sessionInvocation({ stateDir: SESSION_STATE_DIR, keep: [], mode: "idle", args: [] })
    const proc = yield* runtime.exec(container, { command, env: {}, stdin: false }, { stdout: (b) => void (out += decoder.decode(b)), stderr: () => {} })
    const status = yield* proc.exit.pipe(Effect.timeout(PROBE_TIMEOUT), Effect.ensuring(proc.detach))
    if (status.exitCode !== 0) return undefined
    const text = out.trim()
    if (text === "none") return null
    const seconds = Number(text)
    return Number.isFinite(seconds) ? seconds : undefined
  }).pipe(Effect.catchAll(() => Effect.succeed(undefined)))

export const reapIdle = (options: ReapOptions): Effect.Effect<ReapReport, SandboxError, SandboxRuntime> =>
  Effect.gen(function*() {
    const runtime = yield* SandboxRuntime
    const found = yield* runtime.list({ [Label.project]: ProjectName, [Label.scope]: "persistent" })
    const candidates = found.filter((c) => c.labels[Label.idleSeconds] !== undefined && !options.skip(c.name))
    const removed: Array<string> = []
    const idleMsOf = (c: SandboxInfo, now: number) =>
      Effect.gen(function*() {
        if (c.status !== "running") return now - c.createdAt
        const seconds = yield* probeIdleSeconds(c)
        if (seconds === undefined) return undefined
        return seconds === null ? now - c.createdAt : seconds * 1000
      })
    yield* Effect.forEach(
      candidates,
      (c) =>
        Effect.gen(function*() {
          const limitMs = Number(c.labels[Label.idleSeconds]) * 1000
          if (!Number.isFinite(limitMs) || limitMs <= 0) return
          const now = yield* Clock.currentTimeMillis
          const idleMs = yield* idleMsOf(c, now)
          if (idleMs === undefined || idleMs <= limitMs) return
          yield* runtime.remove(c)
          removed.push(c.name)
          const sessionId = c.labels[Label.session] ?? c.name.slice(ContainerNamePrefix.length)
          yield* options.append(
            sessionId,
            { type: "SessionIdleExpired", data: { sessionId, idleMs: Math.max(0, idleMs) } },
            { type: "ContainerDestroyed", data: { containerName: c.name, containerId: c.id, reason: "idle-expired" } },
            { type: "SessionClosed", data: { sessionId, reason: "idle-expired (reaper)" } }
          )
        }),
      { concurrency: 4, discard: true }
    )
    if (removed.length > 0) yield* Effect.logInfo(`session reaper: removed ${removed.length} idle persistent sandbox(es): ${removed.join(", ")}`)
    return { checked: candidates.length, removed }
  })
