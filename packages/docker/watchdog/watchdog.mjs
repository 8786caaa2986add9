#!/usr/bin/env node
// hermes-sandbox watchdog: the Ryuk of this project, without an image to pull.
//
// The executor spawns this script detached, holding the write end of a pipe
// to its stdin. Finalizers cannot run when the executor is SIGKILLed; this
// process notices instead, because the pipe reaches EOF the moment the owner
// dies (the kernel closes its descriptors). It then force-removes every
// container labelled with the owner's executor id, in any state, and exits.
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
const target = endpoint.startsWith("tcp://")
  ? (() => { const u = new URL(endpoint.replace(/^tcp:/, "http:")); return { host: u.hostname, port: Number(u.port || 2375) } })()
  : { socketPath: endpoint.replace(/^unix:\/\//, "") }

const request = (method, path) =>
  new Promise((resolve, reject) => {
    const req = http.request({ ...target, method, path, timeout: 10_000 }, (res) => {
      const chunks = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") }))
    })
    req.on("timeout", () => req.destroy(new Error("timeout")))
    req.on("error", reject)
    req.end()
  })

const reap = async () => {
  const filters = encodeURIComponent(JSON.stringify({ label: [`${LABEL}=${executorId}`] }))
  // Retry while the engine is briefly unavailable (e.g. restarting), for up to ~2 minutes.
  for (let attempt = 0; attempt < 60; attempt++) {
    try {
      const list = await request("GET", `/containers/json?all=1&filters=${filters}`)
      if (list.status !== 200) throw new Error(`list: HTTP ${list.status}`)
      const containers = JSON.parse(list.body)
      if (containers.length === 0) return
      await Promise.all(containers.map((c) => request("DELETE", `/containers/${c.Id}?force=1&v=1`)))
    } catch {
      // engine unreachable: wait and retry
    }
    await new Promise((r) => setTimeout(r, 2_000))
  }
}

let reaping = false
const onOwnerGone = () => {
  if (reaping) return
  reaping = true
  reap().finally(() => process.exit(0))
}

process.stdin.on("data", () => {}) // the owner writes nothing; data just keeps the pipe open
process.stdin.on("end", onOwnerGone)
process.stdin.on("close", onOwnerGone)
process.stdin.on("error", onOwnerGone)
// The owner's process group may get SIGINT/SIGTERM/SIGHUP; outlive it and reap.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, onOwnerGone)
process.stdin.resume()
