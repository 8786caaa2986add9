/** `hermes-sandbox events [--follow] [--execution ID] [--json]` and `events summary`. */
import { existsSync } from "node:fs"
import { lastValueFrom, type Observable, tap } from "rxjs"
import {
  type EventEnvelope,
  type JournalClient,
  JournalLocation,
  openJournal,
  PostgresJournal,
  Projection
} from "@hermes-sandbox/events"
import { ExitCode } from "../exitCodes.js"
import { formatEvent } from "../formatEvent.js"
import { formatSummary } from "../formatSummary.js"
import { trapSignals } from "../signals.js"
import { NotFound, UsageError } from "../errors.js"

export interface EventsOptions {
  readonly journal?: string
  readonly follow?: boolean
  readonly execution?: string
  readonly from?: string
  readonly json?: boolean
}

/**
 * Opens an existing journal for reading. Opening a SQLite file creates it (and its folders): a
 * mistyped --journal must say so, not print an empty timeline from a new empty file. A
 * PostgreSQL URL (--journal or HERMES_SANDBOX_JOURNAL) opens the database's journal (an
 * unreachable server or a refused login is a JournalError naming the server, never the password).
 */
export const openExisting = async (path: string | undefined): Promise<JournalClient> => {
  const at = JournalLocation.resolve(path)
  if (PostgresJournal.isPostgresUrl(at)) return openJournal({ url: at })
  if (!existsSync(at))
    throw new NotFound(
      `no journal at ${at}${path === undefined ? " (nothing recorded yet: run something first, or give --journal PATH)" : ""}`
    )
  return openJournal({ path: at })
}

/**
 * The execution (stream) an --execution argument means: the full id, or a unique prefix or
 * suffix of one (the timeline prints the last 12 characters). Nothing matching, or more than
 * one, is said and fails.
 */
const resolveStream = async (journal: JournalClient, given: string): Promise<string> => {
  if ((await journal.streamVersion(given)) > 0) return given
  const matches = new Set<string>()
  await lastValueFrom(
    journal.replay().pipe(
      tap((e) => {
        if (e.streamId.startsWith(given) || e.streamId.endsWith(given)) matches.add(e.streamId)
      })
    ),
    { defaultValue: undefined }
  )
  const [only, ...others] = [...matches]
  if (only === undefined) throw new NotFound(`no execution ${given} in the journal`)
  if (others.length > 0) {
    const shown = [only, ...others].slice(0, 5).join(", ")
    throw new UsageError(
      `--execution ${given} matches ${matches.size} executions (${shown}${matches.size > 5 ? ", …" : ""}); give more of the id`
    )
  }
  return only
}

export const events = async (options: EventsOptions): Promise<number> => {
  const fromSequence = options.from === undefined ? undefined : Number(options.from)
  if (fromSequence !== undefined && !(Number.isInteger(fromSequence) && fromSequence >= 0)) {
    throw new UsageError(`--from: expected a sequence number, got ${JSON.stringify(options.from)}`)
  }
  const journal = await openExisting(options.journal)
  const signals = trapSignals()
  try {
    const filter = {
      ...(options.execution === undefined ? {} : { streamId: await resolveStream(journal, options.execution) }),
      ...(fromSequence === undefined ? {} : { fromSequence })
    }
    const print = (e: EventEnvelope) => {
      // A reader that went away (`| head`) has all it wanted.
      if (!signals.stdoutClosed()) process.stdout.write(`${options.json ? JSON.stringify(e) : formatEvent(e)}\n`)
    }
    await until(options.follow ? journal.follow(filter) : journal.replay(filter), print, signals.signal)
  } finally {
    await journal.close()
    signals.dispose()
  }
  if (signals.stdoutClosed()) return ExitCode.ok
  return signals.exitCode() ?? ExitCode.ok
}

/** Prints the events until the stream ends or the command is stopped (a signal, standard output closed). */
const until = (
  events$: Observable<EventEnvelope>,
  print: (e: EventEnvelope) => void,
  stop: AbortSignal
): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    if (stop.aborted) return resolve()
    const subscription = events$.subscribe({ next: print, error: reject, complete: resolve })
    stop.addEventListener("abort", () => {
      subscription.unsubscribe()
      resolve()
    })
  })

export const eventsSummary = async (options: { journal?: string; json?: boolean }): Promise<number> => {
  const journal = await openExisting(options.journal)
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
  process.stdout.write(formatSummary(summary))
  return ExitCode.ok
}
