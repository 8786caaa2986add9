/**
 * `hermes-sandbox session list | reap`: the long-lived sandboxes on the engine (sessions and
 * persistent ones) and removal of persistent ones idle past their limit or past their maximum
 * lifetime (SessionReaper: decided from the journal's records and the engine, never from inside
 * the sandbox; a sandbox this journal has no record of counts as idle since its creation).
 * Sessions themselves are opened from code (createSession / openPersistent); a CLI process
 * would end them at once.
 */
import { Effect, Layer, Logger } from "effect"
import { Label, ProjectName } from "@hermes-sandbox/core/Labels"
import { SandboxRuntime, SessionReaper } from "@hermes-sandbox/core"
import { Sessions } from "@hermes-sandbox/core/Session"
import { DockerExecutor, DockerSessions } from "@hermes-sandbox/docker"
import { Journal, JournalLocation, MemoryJournal } from "@hermes-sandbox/events"

/** Diagnostics go to standard error: standard output is the report (JSON lines with --json). */
const logToStderr = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

const journalLayer = (path: string | false | undefined): Layer.Layer<Journal.Journal, unknown> =>
  path === false ? MemoryJournal.layer() : JournalLocation.layer(path)

export const sessionList = async (options: { json?: boolean }): Promise<number> => {
  const rows = await Effect.runPromise(
    Effect.gen(function* () {
      const runtime = yield* SandboxRuntime
      const all = yield* runtime.list({ [Label.project]: ProjectName })
      return all
        .filter((c) => c.labels[Label.scope] === "session" || c.labels[Label.scope] === "persistent")
        .map((c) => ({
          name: c.name,
          scope: c.labels[Label.scope] ?? "",
          status: c.status,
          profile: c.labels[Label.profile] ?? null,
          idleSeconds: c.labels[Label.idleSeconds] === undefined ? null : Number(c.labels[Label.idleSeconds]),
          ownerPid: c.labels[Label.ownerPid] === undefined ? null : Number(c.labels[Label.ownerPid]),
          createdAt: new Date(c.createdAt).toISOString(),
          // When the sweep/reaper removes it whatever it does (the deadline label = creation + maximum lifetime).
          deadline: ((d) => (d === undefined ? null : new Date(d).toISOString()))(
            SessionReaper.deadlineOf(c.labels, c.createdAt)
          ),
          fingerprint: (c.labels[Label.fingerprint] ?? "").slice(0, 12)
        }))
    }).pipe(Effect.provide(DockerExecutor.runtimeLayer()), Effect.provide(logToStderr))
  )
  if (options.json) {
    for (const row of rows) process.stdout.write(`${JSON.stringify(row)}\n`)
  } else if (rows.length === 0) {
    process.stdout.write("no session or persistent sandboxes\n")
  } else {
    for (const r of rows) {
      const who = r.scope === "persistent" ? `profile ${r.profile}` : `owner pid ${r.ownerPid}`
      const idle = r.idleSeconds === null ? "no idle limit" : `idle limit ${r.idleSeconds}s`
      const until = r.deadline === null ? "" : `, removed by ${r.deadline}`
      process.stdout.write(
        `${r.name}  ${r.scope.padEnd(10)}  ${r.status.padEnd(8)}  ${who}, ${idle}, created ${r.createdAt}${until}, config ${r.fingerprint}\n`
      )
    }
  }
  return 0
}

export const sessionReap = async (options: { json?: boolean; journal?: string | false }): Promise<number> => {
  const report = await Effect.runPromise(
    Effect.flatMap(Sessions, (s) => s.reap).pipe(
      Effect.scoped,
      Effect.provide(
        DockerSessions.layer({ watchdog: false, reapOnStart: false, sweepOnStart: false }).pipe(
          Layer.provide(journalLayer(options.journal))
        )
      ),
      Effect.provide(logToStderr)
    )
  )
  if (options.json) process.stdout.write(`${JSON.stringify(report)}\n`)
  else {
    process.stdout.write(
      `checked ${report.checked} persistent sandbox(es); removed ${report.removed.length}${report.removed.length > 0 ? `: ${report.removed.join(", ")}` : ""}\n`
    )
    for (const d of report.decisions) {
      const idle = d.idleMs === undefined ? "" : `, idle ${Math.round(d.idleMs / 1000)}s by the host's records`
      process.stdout.write(`  ${d.name}: ${d.removed ? "removed" : "kept"} (${d.reason}${idle})\n`)
    }
  }
  return 0
}
