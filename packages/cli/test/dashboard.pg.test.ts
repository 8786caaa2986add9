/**
 * The dashboard on a PostgreSQL journal (the journal tier: the run's throwaway cluster, a database
 * of this file's own): runs on the fake runtime recorded there are summarised as the journal's own
 * projection summarises them, a run made after the dashboard started reaches it live (the journal's
 * LISTEN/NOTIFY), and an execution's history pages through the rows.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, openJournal, PostgresJournal, Projection } from "@hermes-sandbox/events"
import { createDatabase } from "../../../test/support/postgres.js"
import { withFakeExecutor } from "../../core/test/support/fakeExecutor.js"
import { serveDashboard } from "../src/dashboard/server.js"

const TOKEN = "a-dashboard-token-for-postgres-0123"

const get = async <A>(url: string): Promise<A> => {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })
  expect(res.status).toBe(200)
  return (await res.json()) as A
}

describe("the dashboard on a PostgreSQL journal", () => {
  it.live("summarises the runs recorded there, follows new ones live, pages a history", () =>
    Effect.gen(function* () {
      const url = createDatabase("cli_dashboard")
      const runs = (codes: ReadonlyArray<number>) =>
        withFakeExecutor(
          { timeoutMs: 10_000 },
          ({ executor }) =>
            Effect.forEach(codes, (exitCode) =>
              Effect.either(executor.executeCode({ language: "python", code: fakeProgram({ exitCode }) }))
            ),
          PostgresJournal.layer({ url })
        )
      yield* runs([0, 0, 2])
      yield* Effect.promise(async () => {
        const journal = await openJournal({ url })
        const serving = await serveDashboard({ journal, journalName: url, credentials: { default: TOKEN } })
        try {
          await serving.caughtUp
          const events: Array<EventEnvelope> = []
          await new Promise<void>((resolve, reject) =>
            journal.replay().subscribe({ next: (e) => void events.push(e), error: reject, complete: resolve })
          )
          const summary = Projection.summarize(Projection.project(events))
          type Overview = { position: number; summary: { total: number; byOutcome: Record<string, number> } }
          const o = await get<Overview>(`${serving.url}api/overview`)
          expect(o.summary.total).toBe(summary.total)
          expect([o.summary.byOutcome["ok"], o.summary.byOutcome["error"]]).toEqual([2, 1])

          // A run recorded by another executor after the dashboard started: the long poll answers.
          const waiting = get<{ position: number }>(`${serving.url}api/wait?after=${o.position}`)
          await Effect.runPromise(runs([0]))
          expect((await waiting).position).toBeGreaterThan(o.position)
          let after = await get<Overview>(`${serving.url}api/overview`)
          while (after.summary.total < 4) {
            await get(`${serving.url}api/wait?after=${after.position}`)
            after = await get<Overview>(`${serving.url}api/overview`)
          }
          expect(after.summary.byOutcome["ok"]).toBe(3)

          // The newest execution's history, two rows a page.
          const { rows } = await get<{ rows: Array<{ id: string }> }>(`${serving.url}api/executions?limit=1`)
          const id = rows[0]!.id
          const got: Array<EventEnvelope> = []
          let cursor: number | null = 0
          while (cursor !== null) {
            const page: { events: Array<EventEnvelope>; after: number | null } = await get(
              `${serving.url}api/executions/${encodeURIComponent(id)}/events?limit=2&after=${cursor}`
            )
            got.push(...page.events)
            cursor = page.after
          }
          expect(got.map((e) => e.type)[0]).toBe("ExecutionRequested")
          expect(got.map((e) => e.streamId)).toEqual(got.map(() => id))
          expect(got.length).toBeGreaterThanOrEqual(5)
        } finally {
          await serving.close()
          await journal.close()
        }
      })
    })
  )
})
