/**
 * The Promise facades' journal on PostgreSQL: a URL (as a string, { url }, or { path } as the CLI's
 * --journal passes it) is the shared, durable journal, on the run's throwaway cluster here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type FacadeJournal, facadeJournalLayer } from "../src/internal/facadeJournal.js"
import { createDatabase } from "../../../test/support/postgres.js"
import { retained } from "./support/retained.js"

describe("the facades' journal", () => {
  it.live("a PostgreSQL URL, { url } or { path } holding one: everything, durably, in that database", () =>
    Effect.gen(function* () {
      const variants: Array<(url: string) => FacadeJournal> = [
        (url) => url as FacadeJournal,
        (url) => ({ url }),
        (url) => ({ path: url })
      ]
      for (const variant of variants) {
        const url = createDatabase("facade")
        expect(yield* retained(facadeJournalLayer(variant(url)), 30)).toEqual({ last: 30, kept: 30 })
        // Reopened: still there.
        expect(yield* retained(facadeJournalLayer(variant(url)), 1)).toEqual({ last: 31, kept: 31 })
      }
    })
  )
})
