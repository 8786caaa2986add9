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
// Plain Node, no dependencies for a unix socket or plain tcp (it speaks the
// Engine API itself), so it starts in tens of milliseconds and works wherever
// the SDK does. It reaches the engine the way the owner does: over TLS with
// the owner's client certificate, or over ssh (docker-modem's transport:
// ssh2 and `docker system dial-stdio` on the remote, loaded only then).
//
// usage: node watchdog.mjs <executorId> <unix socket path | tcp://host:port>
//        node watchdog.mjs <executorId> <tcp://host:port | ssh://user@host:port> --transport-on-stdin
//
// With --transport-on-stdin the owner's first line on stdin is the transport
// as JSON (EngineEndpoint.EngineTransport: certificates, the ssh key): keys
// never go on argv, which every user of the host can read in /proc; the
// endpoint argument is only there for `ps`. Then "close\n" or EOF, as above.
import http from "node:http"
import https from "node:https"
import { createRequire } from "node:module"

const [executorId, endpoint = "/var/run/docker.sock", flag] = process.argv.slice(2)
if (!executorId) {
  process.stderr.write("usage: watchdog.mjs <executorId> [socket | tcp://host:port] [--transport-on-stdin]\n")
  process.exit(2)
}
const LABEL = "org.hermes-sandbox.executor"
/** After the owner's death, how long to keep looking for containers an in-flight create may still produce. */
const SETTLE_MS = 10_000
/** How long to keep trying while the engine is unreachable (e.g. restarting). */
const GIVE_UP_MS = 120_000

/** http.request options (and the module) that reach the engine, from the argv endpoint or the transport line. */
const targetOf = (transport) => {
  switch (transport.kind) {
    case "unix":
      return { module: http, options: { socketPath: transport.socketPath } }
    case "tcp":
      return { module: http, options: { host: transport.host, port: transport.port } }
    case "tls":
      return {
        module: https,
        options: {
          host: transport.host,
          port: transport.port,
          cert: transport.cert,
          key: transport.key,
          ca: transport.ca,
          rejectUnauthorized: transport.verify
        }
      }
    case "ssh": {
      // The owner's dockerode brings docker-modem, which brings ssh2: the same ssh code as the owner's.
      const require = createRequire(import.meta.url)
      const modemRequire = createRequire(createRequire(require.resolve("dockerode")).resolve("docker-modem"))
      const sshAgent = modemRequire("./ssh.js")
      const connect = {
        host: transport.host,
        port: transport.port,
        username: transport.username,
        privateKey: transport.privateKey,
        passphrase: transport.passphrase,
        agent: transport.agent,
        readyTimeout: 10_000,
        hostVerifier: (key) => !transport.verifyHostKey || transport.hostKeys.includes(key.toString("base64"))
      }
      // docker-modem's agent is one ssh connection for one request (it closes with it).
      return { module: http, options: { host: transport.host, port: transport.port }, agent: () => sshAgent(connect) }
    }
    default:
      throw new Error(`unknown transport ${transport.kind}`)
  }
}

const fromArgv = () =>
  endpoint.startsWith("tcp://")
    ? (() => {
        const u = new URL(endpoint.replace(/^tcp:/, "http:"))
        return { kind: "tcp", host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || 2375) }
      })()
    : { kind: "unix", socketPath: endpoint.replace(/^unix:\/\//, "") }

/** Set once the transport is known: at once from argv, or from the owner's first stdin line. */
let target = flag === "--transport-on-stdin" ? undefined : targetOf(fromArgv())

const request = (method, path) =>
  new Promise((resolve, reject) => {
    const { module, options, agent } = target
    // A timer of our own, not the request's `timeout` option: that sets a socket timeout, which an
    // ssh2 channel (the ssh transport's "socket") answers by hanging up at once.
    const timer = setTimeout(() => req.destroy(new Error("timeout")), 10_000)
    const req = module.request({ ...options, method, path, agent: agent === undefined ? false : agent() }, (res) => {
      const chunks = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => {
        clearTimeout(timer)
        resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") })
      })
    })
    req.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
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
  if (target === undefined) {
    // The owner died before its transport line arrived (within microseconds of spawning us): nothing to reach.
    process.stderr.write("watchdog: the owner left before sending the engine's transport\n")
    process.exit(1)
  }
  reap(!closedByOwner).finally(() => process.exit(0))
}

process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  input += chunk
  if (target === undefined) {
    const newline = input.indexOf("\n")
    if (newline < 0) return
    try {
      target = targetOf(JSON.parse(input.slice(0, newline)))
    } catch (error) {
      process.stderr.write(`watchdog: bad transport line: ${error.message}\n`)
      process.exit(2)
    }
    input = input.slice(newline + 1)
  }
  // Then the owner writes only "close\n", right before it closes the pipe on a normal shutdown.
  if (input.includes("close\n")) closedByOwner = true
})
process.stdin.on("end", onOwnerGone)
process.stdin.on("close", onOwnerGone)
process.stdin.on("error", onOwnerGone)
// Detached, so the owner's terminal signals do not reach us; a signal sent to us directly means "reap now".
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, onOwnerGone)
process.stdin.resume()
