/**
 * Cancel a run with an AbortSignal (its container is removed before the
 * promise rejects), record into a SQLite journal, and replay it afterwards.
 *
 *   npx tsx examples/abort-and-journal.ts [journal.sqlite]
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { lastValueFrom, toArray } from "rxjs"
import { createExecutor } from "@hermes-sandbox/docker"
import { openJournal, Projection } from "@hermes-sandbox/events"

const path = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), "hermes-journal-")), "journal.sqlite")
{
  await using executor = await createExecutor({ journal: { path } })
  await executor.executeCode({ language: "python", code: "print('recorded')" })
  const controller = new AbortController()
  setTimeout(() => controller.abort("changed my mind"), 1_000)
  const aborted = await executor
    .executeCode({ language: "python", code: "import time; time.sleep(60)" }, { signal: controller.signal })
    .catch((e: { _tag: string }) => e._tag)
  console.log(`second run: ${String(aborted)}`)
}

await using journal = await openJournal({ path })
const events = await lastValueFrom(journal.replay().pipe(toArray()))
const summary = Projection.summarize(Projection.project(events).values())
console.log(`replayed ${events.length} events from ${path}`)
console.log(`outcomes: ${JSON.stringify(summary.byOutcome)}, containers alive: ${summary.containersAlive}`)
