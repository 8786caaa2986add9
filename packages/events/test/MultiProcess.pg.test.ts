/** Several processes appending to one PostgreSQL journal (support/multiProcess.ts). */
import { acrossProcesses, multiProcessTargets } from "./support/multiProcess.js"

acrossProcesses(multiProcessTargets.postgres)
