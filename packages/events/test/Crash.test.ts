/** Crash consistency (support/crash.ts) of a SQLite journal file. */
import { crashConsistency, crashTargets } from "./support/crash.js"

crashConsistency(crashTargets.sqlite)
