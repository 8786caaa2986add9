#!/usr/bin/env node
// hermes-sandbox watchdog: the Ryuk of this project, without an image to pull.
//
// The executor spawns this script detached, holding the write end of a pipe
// to its stdin. Finalizers cannot run when the executor is SIGKILLed; this
// process notices instead, because the pipe reaches EOF the moment the owner
// dies (the kernel closes its descriptors). It then force-removes every
// container labelled with the owner's executor id, in any state, and exits.
//
// Two ways the pipe ends:
// - the owner closed its executor: it writes "close\n" first. Its containers
//   are already gone (or its removal gave up, e.g. the engine was away): one
//   reaping pass, retried while the engine is unreachable, then exit.
// - the owner died (no "close" line): reap, and keep watching for SETTLE_MS
//   after the death, because an engine call the owner had in flight (a
//   create) can still complete after our first listing.
//
// Plain Node, no dependencies (it speaks the Engine API over the socket), so
// it starts in tens of milliseconds and works wherever the SDK does.
//
// usage: node watchdog.mjs <executorId> <unix socket path | tcp://host:port>
import http from "node:http"

const [executorId, endpoint = "/var/run/docker.sock"] = process.argv.slice(2)
if (!executorId) {
  process.stderr.write("usage: watchdog.mjs <executorId> [socket]\n")
  process.exit(2)
}
const LABEL = "org.hermes-sandbox.executor"
/** After the owner's death, how long to keep looking for containers an in-flight create may still produce. */
const SETTLE_MS = 10_000
/** How long to keep trying while the engine is unreachable (e.g. restarting). */
const GIVE_UP_MS = 120_000
const target = endpoint.startsWith("tcp://")
  ? (() => { const u = new URL(endpoint.replace(/^tcp:/, "http:")); return { host: u.hostname, port: Number(u.port || 2375) } })()
  : { socketPath: endpoint.replace(/^unix:\/\//, "") }

const request = (method, path) =>
  new Promise((resolve, reject) => {
    const req = http.request({ ...target, method, path, timeout: 10_000, agent: false }, (res) => {
      const chunks = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") }))
    })
    req.on("timeout", () => req.destroy(new Error("timeout")))
    req.on("error", reject)
    req.end()
  })

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** One pass: remove every container of the executor. Resolves to how many were found; rejects when the engine did not answer. */
const reapOnce = async () => {
  const filters = encodeURIComponent(JSON.stringify({ label: [`${LABEL}=${executorId}`] }))
  const list = await request("GET", `/containers/json?all=1&filters=${filters}`)
  if (list.status !== 200) throw new Error(`list: HTTP ${list.status}`)
  const containers = JSON.parse(list.body)
  // 404 (already gone) and 409 (removal already in progress) are fine: the next pass checks.
  await Promise.all(containers.map((c) => request("DELETE", `/containers/${c.Id}?force=1&v=1`).catch(() => undefined)))
  return containers.length
}

const reap = async (ownerDied) => {
  const since = Date.now()
  while (Date.now() - since < GIVE_UP_MS) {
    let found
    try {
      found = await reapOnce()
    } catch {
      // engine unreachable: wait and retry
      await sleep(1_000)
      continue
    }
    if (found > 0) {
      await sleep(200)
      continue
    }
    if (!ownerDied || Date.now() - since >= SETTLE_MS) return
    await sleep(500)
  }
}

let reaping = false
let closedByOwner = false
let input = ""
const onOwnerGone = () => {
  if (reaping) return
  reaping = true
  reap(!closedByOwner).finally(() => process.exit(0))
}

process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  // The owner writes only "close\n", right before it closes the pipe on a normal shutdown.
  input += chunk
  if (input.includes("close\n")) closedByOwner = true
})
process.stdin.on("end", onOwnerGone)
process.stdin.on("close", onOwnerGone)
process.stdin.on("error", onOwnerGone)
// Detached, so the owner's terminal signals do not reach us; a signal sent to us directly means "reap now".
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, onOwnerGone)
process.stdin.resume()
