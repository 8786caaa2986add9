import { PG_URL_ENV, startCluster } from "./support/postgres.js"

// One throwaway PostgreSQL cluster per vitest run (test/support/postgres.ts), for the journal's
// PostgreSQL tests; each test file creates its own database on it. Its URL reaches the test
// workers through the environment (they are forked after this runs). A URL already set is used
// as it is (a server of one's own); nothing is started then.
export default async function setup() {
  const given = process.env[PG_URL_ENV]
  if (given !== undefined && given !== "") return () => {}
  const cluster = await startCluster()
  process.env[PG_URL_ENV] = cluster.url
  // On Ctrl-C vitest ends through process.exit, where no teardown runs: kill the cluster then,
  // synchronously. (A hard kill of vitest is covered by startCluster's watcher shell.)
  process.once("exit", cluster.kill)
  return async () => {
    process.off("exit", cluster.kill)
    await cluster.stop()
  }
}
