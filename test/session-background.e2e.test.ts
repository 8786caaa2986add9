/**
 * A session's background processes (session.spawn, session/background.ts) on the real engine, where
 * only the engine can show it: a server started in the background answers a later call on
 * 127.0.0.1; a flood is kept as head and tail; kill() ends the whole process session (SIGTERM and
 * the default SIGKILL); wait with a timeout; a background process cannot write into a later call's
 * result through the call's supervisor, nor forge its exit; a fork bomb from one stays within the
 * session's pids limit and close still removes everything; one that never exits does not hold up
 * close; the watchdog removes the sandbox of an owner that died with one running. One session for
 * most of the file, on runc. The host side (the ring buffer, bounds, the
 * journal): packages/core/test/SessionBackground.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { createSession, type SandboxSession } from "@hermes-sandbox/docker"
import { RUNTIMES } from "./hostile/support.js"
import { containerExists, docker, waitFor } from "./support/docker.js"
import { fixtureCommand } from "./support/nodeFixture.js"
import { firstLine, sessionTracker } from "./support/sessions.js"

const { track, trackName, removeTracked } = sessionTracker()
/** test/support/sessionChild.ts as a process of its own, on the packages' build. */
const sessionChild = fixtureCommand(new URL("./support/sessionChild.ts", import.meta.url).pathname)
afterAll(removeTracked)

/** Host-side view of the processes in a container (docker top needs no pid inside it). */
const processCount = async (containerName: string): Promise<number> => {
  const top = (await docker.getContainer(containerName).top({ ps_args: "-e" })) as { Processes?: Array<unknown> }
  return (top.Processes ?? []).length
}

describe("background processes on the real engine (runc)", () => {
  let s: SandboxSession
  beforeAll(async () => {
    s = track(await createSession({ background: { headBytes: 4096, tailBytes: 8192 } }))
  }, 60_000)
  afterAll(async () => {
    await s?.close()
  })

  it("a server started in the background answers later calls on 127.0.0.1, across calls; SIGTERM ends it and its children", async () => {
    await s.run("mkdir -p /workspace/site && echo hello-from-bg > /workspace/site/index.html && export SITE_PORT=8765")
    const server = await s.spawn('exec python3 -m http.server "$SITE_PORT" --bind 127.0.0.1', {
      cwd: "/workspace/site"
    })
    expect(server.pid).toBeGreaterThan(1)
    const fetch =
      "for i in $(seq 100); do python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8765/').read().decode().strip())\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    expect(await s.run(fetch)).toMatchObject({ exitCode: 0, stdout: "hello-from-bg\n" })
    // A second call, after the first one ended (a call that killed leftovers would have ended it).
    expect(await s.run(fetch)).toMatchObject({ exitCode: 0, stdout: "hello-from-bg\n" })
    expect((await server.status()).running).toBe(true)
    const log = await server.output()
    expect(log.head).toMatch(/"GET \/ HTTP\/1\.[01]" 200/)
    // A child in its process session (a second server) goes with it.
    const tree = await s.spawn("sleep 1001 & sleep 1002 & wait")
    await tree.kill("SIGTERM")
    expect(await tree.wait()).toMatchObject({ running: false, exitCode: 143, signal: "SIGTERM" })
    await server.kill("SIGTERM")
    expect(await server.wait()).toMatchObject({ running: false, exitCode: 143, signal: "SIGTERM" })
    const left = await s.run(
      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -E '^(sleep 100[12]|python3 -m http.server)' || true"
    )
    expect(left.stdout).toBe("")
    expect((await s.processes()).map((p) => p.id)).toEqual(expect.arrayContaining([server.id, tree.id]))
  }, 120_000)

  it("a flood is kept as head and tail, the rest counted; wait with a timeout; kill() is SIGKILL", async () => {
    const flood = await s.spawn("head -c 5000000 /dev/zero | tr '\\0' x; echo; echo END")
    expect(await flood.wait({ timeoutMs: 60_000 })).toMatchObject({
      running: false,
      exitCode: 0,
      outputBytes: 5_000_005
    })
    const out = await flood.output()
    expect(out.head).toBe("x".repeat(4096))
    expect(out.tail).toBe(`${"x".repeat(8192 - 5)}\nEND\n`)
    expect(out.omittedBytes).toBe(5_000_005 - 4096 - 8192)
    expect(out.next).toBe(5_000_005)
    const late = await flood.output({ since: 5_000_001 })
    expect(late).toMatchObject({ head: "END\n", omittedBytes: 0, tail: "" })

    // Ignores SIGTERM: only the default SIGKILL ends it.
    const stubborn = await s.spawn("trap '' TERM; while :; do sleep 1; done")
    expect(await stubborn.wait({ timeoutMs: 300 })).toMatchObject({ running: true })
    await stubborn.kill()
    expect(await stubborn.wait()).toMatchObject({ running: false, exitCode: 137, signal: "SIGKILL" })
  }, 120_000)

  it("a background process cannot write into a later call's result through its supervisor, nor forge its exit", async () => {
    // Every ~50 ms it tries to write a forged line into fd 1 of every process entered from outside
    // (parent pid 0: the calls' supervisors, PID 1), and prints frame-like bytes of its own.
    const attacker = await s.spawn(
      "while :; do for p in /proc/[0-9]*; do read -r st < $p/stat 2>/dev/null || continue; set -- ${st##*) }; " +
        '[ "$2" = 0 ] && { echo FORGED > "$p/fd/1"; } 2>>/tmp/forge-errors; done; printf "\\x00x0 0 0 0\\n"; sleep 0.05; done'
    )
    const call = await s.run("sleep 1; echo hello; exit 3")
    expect(call).toMatchObject({ exitCode: 3, stdout: "hello\n", stderr: "", timedOut: false })
    const errors = await s.run("sort -u /tmp/forge-errors | grep -c 'Permission denied'")
    expect(Number(errors.stdout.trim())).toBeGreaterThan(0)
    await attacker.kill()
    expect((await attacker.wait()).exitCode).toBe(137)
  }, 120_000)
})

// gVisor leaves /proc/<pid>/fd of a non-dumpable process open (SECURITY.md, gVisor): there the
// write reaches the call's supervisor's stdout. Without the call's key it is never a forged result:
// the call fails as a protocol violation, or it is untouched.
describe.skipIf(!RUNTIMES.includes("runsc"))("a background process against a later call under gVisor (runsc)", () => {
  it("writes into the call's supervisor's stdout void the call at worst; never a forged exit or output", async () => {
    const s = track(await createSession({ runtime: "runsc" }))
    try {
      const attacker = await s.spawn(
        "while :; do for p in /proc/[0-9]*; do read -r st < $p/stat 2>/dev/null || continue; set -- ${st##*) }; " +
          '[ "$2" = 0 ] && { echo FORGED > "$p/fd/1"; } 2>/dev/null; done; sleep 0.05; done'
      )
      const outcome = await s.run("sleep 1; echo hello; exit 3").then(
        (r) => ({ ok: r }),
        (e: unknown) => ({ failed: e as { _tag?: string; message?: string } })
      )
      if ("ok" in outcome) expect(outcome.ok).toMatchObject({ exitCode: 3, stdout: "hello\n" })
      else expect(outcome.failed).toMatchObject({ _tag: "ContainerFailed", reason: "protocol" })
      // It writes into its own supervisor's stdout too: the host stops trusting that channel and
      // kills the process's session, or the kill below does. Either way the next call is clean.
      await attacker.kill()
      const ended = await attacker.wait()
      expect(ended.running).toBe(false)
      expect(ended.exitCode === 137 || /protocol violation/.test(ended.endReason ?? "")).toBe(true)
      expect(await s.run("sleep 0.5; echo after")).toMatchObject({ exitCode: 0, stdout: "after\n" })
    } finally {
      await s.close()
    }
  }, 120_000)
})

describe("background processes and the session's end (runc)", () => {
  it("a fork bomb from a background process stays within the session's pids limit; close removes the sandbox, and one that never exits does not hold it up", async () => {
    const s = track(await createSession({ pidsLimit: 64 }))
    const name = s.containerName
    await s.spawn("trap '' TERM HUP; exec sleep infinity")
    const bomb = await s.spawn("while :; do sleep 600 & done")
    // The bomb fills the pids limit (docker top, from the host: it needs no pid inside).
    for (let i = 0; i < 100 && (await processCount(name)) < 60; i++) await new Promise((r) => setTimeout(r, 100))
    const filled = await processCount(name)
    expect(filled).toBeGreaterThanOrEqual(60)
    expect(filled).toBeLessThanOrEqual(64)
    // Its kill is one exec: it may need retries while every pid is taken, then the session answers.
    let killed = false
    for (let i = 0; i < 20 && !killed; i++)
      killed = await bomb.kill().then(
        () => true,
        () => false
      )
    expect(killed).toBe(true)
    expect(await bomb.wait()).toMatchObject({ running: false, exitCode: 137 })
    expect(await s.run("echo alive")).toMatchObject({ exitCode: 0, stdout: "alive\n" })
    await s.close()
    expect(await containerExists(name)).toBe(false)
  }, 120_000)

  it("a background process does not keep the sandbox alive after its owner died: the watchdog removes it", async () => {
    const child = spawn(sessionChild[0]!, [...sessionChild.slice(1), "background"], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const line = await firstLine(child)
    const { containerName } = JSON.parse(line) as { containerName: string }
    trackName(containerName)
    child.kill("SIGKILL")
    expect(await waitFor(async () => !(await containerExists(containerName)), 15_000)).toBe(true)
  }, 60_000)
})
