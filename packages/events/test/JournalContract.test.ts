/** The Journal contract (support/journalContract.ts) in memory and on SQLite; PostgreSQL: JournalContract.pg.test.ts. */
import { localImplementations } from "./helpers.js"
import { journalContract } from "./support/journalContract.js"

for (const impl of localImplementations) journalContract(impl)
