/** Several processes appending to one SQLite journal file (support/multiProcess.ts). */
import { acrossProcesses, multiProcessTargets } from "./support/multiProcess.js"

acrossProcesses(multiProcessTargets.sqlite)
