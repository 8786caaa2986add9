/** `hermes-sandbox events [--follow] [--execution ID] [--json]` and `events summary`. */
import { lastValueFrom, tap } from "rxjs"
import { openJournal, Projection } from "@hermes-sandbox/events"
import { ExitCode } from "../exitCodes.js"
import { formatEvent } from "../formatEvent.js"
import { trapSignals } from "../signals.js"

export interface EventsOptions {
  readonly journal?: string
  readonly follow?: boolean
  readonly execution?: string
  readonly from?: string
  readonly json?: boolean
}

export const events = async (options: EventsOptions): Promise<number> => {
  const journal = await openJournal(options.journal === undefined ? {} : { path: options.journal })
  const filter = {
    ...(options.execution === undefined ? {} : { streamId: options.execution }),
    ...(options.from === undefined ? {} : { fromSequence: Number(options.from) })
  }
  const print = tap((e: Parameters<typeof formatEvent>[0]) => process.stdout.write(`${options.json ? JSON.stringify(e) : formatEvent(e)}\n`))
  const signals = trapSignals()
  try {
    if (options.follow) {
      await new Promise<void>((resolve, reject) => {
        const subscription = journal.follow(filter).pipe(print).subscribe({ error: reject, complete: resolve })
        signals.signal.addEventListener("abort", () => {
          subscription.unsubscribe()
          resolve()
        })
      })
    } else {
      await lastValueFrom(journal.replay(filter).pipe(print), { defaultValue: undefined })
    }
  } finally {
    await journal.close()
    signals.dispose()
  }
  return signals.exitCode() ?? ExitCode.ok
}

export const eventsSummary = async (options: { journal?: string; json?: boolean }): Promise<number> => {
  const journal = await openJournal(options.journal === undefined ? {} : { path: options.journal })
  const projector = Projection.makeProjector()
  try {
    await lastValueFrom(journal.replay().pipe(tap((e) => projector.apply(e))), { defaultValue: undefined })
  } finally {
    await journal.close()
  }
  const summary = projector.summary()
  if (options.json) {
    process.stdout.write(`${JSON.stringify(summary)}\n`)
    return ExitCode.ok
  }
  const lines = [
    `executions        ${summary.total}`,
    `outcomes          ${Object.entries(summary.byOutcome).map(([k, v]) => `${k} ${v}`).join(", ")}`,
    `duration (ms)     p50 ${summary.durationMs.p50}, p95 ${summary.durationMs.p95}, p99 ${summary.durationMs.p99}, max ${summary.durationMs.max} (n=${summary.durationMs.count})`,
    `exit codes        ${Object.entries(summary.exitCodes).map(([k, v]) => `${k}: ${v}`).join(", ") || "-"}`,
    `containers alive  ${summary.containersAlive}`,
    `open lifecycles   ${summary.openLifecycles}`
  ]
  process.stdout.write(`${lines.join("\n")}\n`)
  return ExitCode.ok
}
