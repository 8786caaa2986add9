/** Crash consistency (support/crash.ts) of a PostgreSQL journal: the server rolls a killed writer back. */
import { crashConsistency, crashTargets } from "./support/crash.js"

crashConsistency(crashTargets.postgres)
