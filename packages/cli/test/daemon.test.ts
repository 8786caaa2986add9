/**
 * The daemon's wire protocol and where its socket may be trusted (SECURITY.md, "The CLI's local
 * daemon"), and the client's hand-back: no engine here (test/cli-daemon.e2e.test.ts runs the
 * daemon itself against the engine, both ways).
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runThroughDaemon } from "../src/daemon/client.js"
import { encodeFrame, fitKey, Frame, FrameReader, MAX_REQUEST_FRAME_BYTES, sameFit } from "../src/daemon/protocol.js"
import { shapedRequest } from "../src/daemon/server.js"
import { daemonDirectory, ensureDaemonDirectory, socketPath, trustedSocket } from "../src/daemon/socketPath.js"

const dirs: Array<string> = []
const servers: Array<Server> = []
afterEach(() => {
  for (const s of servers.splice(0)) s.close()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), "hs-daemon-"))
  dirs.push(d)
  return d
}

describe("daemon frames", () => {
  it("reads frames split at every byte, and several in one chunk", () => {
    const frames = Buffer.concat([
      encodeFrame(Frame.accepted),
      encodeFrame(Frame.stdout, new Uint8Array([0, 1, 2, 255])),
      encodeFrame(Frame.result, '{"exitCode":0}')
    ])
    for (let cut = 0; cut <= frames.byteLength; cut++) {
      const got: Array<[number, string]> = []
      const reader = new FrameReader(
        1024,
        (type, payload) => got.push([type, payload.toString("hex")]),
        (reason) => {
          throw new Error(reason)
        }
      )
      reader.push(frames.subarray(0, cut))
      reader.push(frames.subarray(cut))
      expect(got).toEqual([
        [Frame.accepted, ""],
        [Frame.stdout, "000102ff"],
        [Frame.result, Buffer.from('{"exitCode":0}').toString("hex")]
      ])
    }
  })

  it("a header announcing more than the bound is a violation, reported once, and nothing after it is read", () => {
    const violations: Array<string> = []
    const got: Array<number> = []
    const reader = new FrameReader(
      MAX_REQUEST_FRAME_BYTES,
      (type) => got.push(type),
      (reason) => violations.push(reason)
    )
    const header = Buffer.alloc(5)
    header.writeUInt32BE(MAX_REQUEST_FRAME_BYTES + 2, 0)
    reader.push(header)
    reader.push(encodeFrame(Frame.status))
    expect(violations).toHaveLength(1)
    expect(got).toEqual([])
    // A zero length (no type byte) too.
    const zero: Array<string> = []
    new FrameReader(
      16,
      () => {},
      (r) => zero.push(r)
    ).push(Buffer.alloc(4))
    expect(zero).toHaveLength(1)
  })
})

describe("what a daemon serves", () => {
  it("only runs with its options and its engine's and journal's environment", () => {
    const options = { network: false, journal: "default" } as const
    const env = { HOME: "/home/a", DOCKER_HOST: "unix:///run/docker.sock" }
    const daemon = fitKey(options, env)
    expect(sameFit(fitKey(options, { ...env, TERM: "x" }), daemon)).toBe(true)
    for (const other of [
      { HOME: "/home/a" },
      { HOME: "/home/a", DOCKER_HOST: "ssh://elsewhere" },
      { HOME: "/home/b", DOCKER_HOST: "unix:///run/docker.sock" },
      { ...env, DOCKER_CONTEXT: "remote" },
      { ...env, HERMES_SANDBOX_JOURNAL: "/tmp/j.sqlite" }
    ])
      expect(sameFit(fitKey(options, other), daemon), JSON.stringify(other)).toBe(false)
    for (const other of [
      { network: true },
      { runtime: "runsc" },
      { limitsUnsupported: "warn" as const },
      // The daemon records no code: a run with --record-code runs directly.
      { recordCode: true },
      { journal: "memory" }
    ])
      expect(sameFit(fitKey({ ...options, ...other }, env), daemon), JSON.stringify(other)).toBe(false)
    // A message without the environment (another version) is not a fit either.
    expect(sameFit({ ...daemon, env: undefined } as never, daemon)).toBe(false)
  })
})

describe("a pool made with the daemon's image and limits", () => {
  it("serves a request that names them, and hands back one that leaves them to run's defaults", () => {
    const base = { language: "python", code: "print(1)" }
    expect(shapedRequest(base, {})).toEqual(base)
    const shape = { image: "my/python:1", memory: "256m", cpus: 0.5, timeoutMs: 60_000 }
    const asked = { ...base, image: "my/python:1", memory: "256m", cpus: 0.5, timeoutMs: 5_000 }
    // The image is the pool's: left to the executor's configuration (a named image never takes a warm sandbox).
    expect(shapedRequest(asked, shape)).toEqual({ ...base, memory: "256m", cpus: 0.5, timeoutMs: 5_000 })
    for (const key of ["image", "memory", "cpus", "timeoutMs"] as const) {
      const { [key]: _, ...without } = asked
      expect(shapedRequest(without, shape), key).toBeUndefined()
    }
    expect(shapedRequest({ ...asked, image: "other:1" }, shape)).toBeUndefined()
  })
})

describe("the daemon's socket", () => {
  it("lives in $XDG_RUNTIME_DIR/hermes-sandbox, else in a per-uid directory under the temp dir", () => {
    expect(socketPath({ XDG_RUNTIME_DIR: "/run/user/1000" })).toBe("/run/user/1000/hermes-sandbox/daemon.sock")
    expect(daemonDirectory({})).toMatch(/\/hermes-sandbox-\d+$/)
    // A relative runtime directory is not one.
    expect(daemonDirectory({ XDG_RUNTIME_DIR: "run" })).toMatch(/\/hermes-sandbox-\d+$/)
  })

  it("its directory is made 0700; one that others may enter or write is refused, by the daemon and the client", async () => {
    const runtime = scratch()
    const env = { XDG_RUNTIME_DIR: runtime }
    const dir = ensureDaemonDirectory(env)
    expect(dir).toBe(join(runtime, "hermes-sandbox"))
    const { statSync } = await import("node:fs")
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    // A socket there is trusted.
    const server = createServer()
    servers.push(server)
    await new Promise<void>((r) => server.listen(socketPath(env), () => r()))
    expect(trustedSocket(env)).toBe(socketPath(env))
    // Opened to the group: neither side uses it.
    chmodSync(dir, 0o770)
    expect(trustedSocket(env)).toBeUndefined()
    expect(() => ensureDaemonDirectory(env)).toThrow(/accessible to others/)
    chmodSync(dir, 0o700)
    // A file that is not a socket is not one.
    const other = scratch()
    mkdirSync(join(other, "hermes-sandbox"), { mode: 0o700 })
    writeFileSync(join(other, "hermes-sandbox", "daemon.sock"), "")
    expect(trustedSocket({ XDG_RUNTIME_DIR: other })).toBeUndefined()
  })
})

describe("the daemon's client hands a run back", () => {
  /** A daemon stand-in that answers every run with `reply`, and records what it was sent. */
  const fakeDaemon = async (reply: (socket: import("node:net").Socket) => void) => {
    const path = join(scratch(), "d.sock")
    const seen: Array<{ type: number; body: string }> = []
    const server = createServer((socket) => {
      const reader = new FrameReader(
        MAX_REQUEST_FRAME_BYTES,
        (type, payload) => {
          seen.push({ type, body: payload.toString("utf8") })
          reply(socket)
        },
        () => socket.destroy()
      )
      socket.on("data", (c: Buffer) => reader.push(c))
    })
    servers.push(server)
    await new Promise<void>((r) => server.listen(path, () => r()))
    return { path, seen }
  }
  const argv = (...args: Array<string>) => ["node", "hermes-sandbox", "run", ...args]

  it("when the daemon does not fit it, or refuses it, or goes away before accepting it", async () => {
    for (const reply of [
      (s: import("node:net").Socket) => s.end(encodeFrame(Frame.noFit, "no")),
      (s: import("node:net").Socket) => s.end(encodeFrame(Frame.failure, '{"error":{"_tag":"X","message":"x"}}')),
      (s: import("node:net").Socket) => s.destroy()
    ]) {
      const { path, seen } = await fakeDaemon(reply)
      expect(await runThroughDaemon(argv("-e", "print(1)"), path)).toBeUndefined()
      // It was asked: the request as the direct path makes it, the options it would use.
      expect(seen).toHaveLength(1)
      const message = JSON.parse(seen[0]!.body)
      expect(message.request).toEqual({ language: "python", code: "print(1)" })
      expect(message.fit).toMatchObject({
        network: false,
        runtime: null,
        limitsUnsupported: "fail",
        journal: "default"
      })
      // The variables that choose the engine and the journal travel with it (the daemon compares them).
      if (process.env["HOME"] !== undefined) expect(message.fit.env.HOME).toBe(process.env["HOME"])
    }
  })

  it("without asking, for what only the direct path serves, a usage error, or no daemon at the socket", async () => {
    const { path, seen } = await fakeDaemon((s) => s.end(encodeFrame(Frame.noFit)))
    for (const args of [
      ["--no-daemon", "-e", "print(1)"],
      ["--events", "-e", "print(1)"],
      ["--hermes", "-e", "print(1)"],
      ["--collect", "*.png", "--json", "-e", "print(1)"],
      ["--upstream-config", "u.json", "-e", "print(1)"],
      ["-e", "print(1)", "prog.py"],
      ["--env", "NOVALUE", "-e", "print(1)"],
      ["--bogus", "-e", "print(1)"],
      ["--help"]
    ])
      expect(await runThroughDaemon(argv(...args), path)).toBeUndefined()
    expect(seen).toEqual([])
    expect(await runThroughDaemon(argv("-e", "print(1)"), join(scratch(), "none.sock"))).toBeUndefined()
  })
})
