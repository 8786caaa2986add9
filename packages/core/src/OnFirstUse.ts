/**
 * A dependency that loads on first use: events/OnFirstUse.ts, the lowest package, where the SQLite
 * journal's driver needs it too; kept here under core's name for the packages that import it so.
 */
export { onFirstUse } from "@hermes-sandbox/events/OnFirstUse"
