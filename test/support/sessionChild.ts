/**
 * A separate process for session e2e tests (a "restart" is a new process):
 *   (run by session.e2e in plain Node on the packages' build: test/support/nodeFixture.ts)
 *   sessionChild persistent <profile> <memory>   -> opens, prints JSON timings, detaches
 *   sessionChild session [journal.sqlite]       -> opens a session, prints its name, then waits to be killed
 *   sessionChild background                     -> the same, with a background process that ignores SIGTERM
 */
import { createSession, openPersistent } from "@hermes-sandbox/docker"

const [mode, profile = "default", memory = "256m"] = process.argv.slice(2)

if (mode === "persistent") {
  const t0 = performance.now()
  const s = await openPersistent({ profile, memory, workingDir: "/workspace" })
  const openMs = performance.now() - t0
  const r = await s.run('printf "%s|%s" "$PWD" "${CARRIED-}"')
  const firstCallMs = performance.now() - t0 - openMs
  await s.close()
  process.stdout.write(
    JSON.stringify({
      reconnected: s.reconnected,
      containerName: s.containerName,
      openMs,
      firstCallMs,
      state: r.stdout
    }) + "\n"
  )
  process.exit(0)
} else if (mode === "background") {
  const s = await createSession()
  await s.spawn("trap '' TERM HUP INT; while :; do sleep 1; done")
  process.stdout.write(JSON.stringify({ containerName: s.containerName }) + "\n")
  setInterval(() => {}, 1000)
} else {
  const journalPath = process.argv[3]
  const s = await createSession(journalPath === undefined ? {} : { journal: { path: journalPath } })
  process.stdout.write(JSON.stringify({ containerName: s.containerName }) + "\n")
  setInterval(() => {}, 1000)
}
