/** The Journal contract (support/journalContract.ts) on PostgreSQL, the run's throwaway cluster. */
import { postgresImplementation } from "./helpers.js"
import { journalContract } from "./support/journalContract.js"

journalContract(postgresImplementation)
