/**
 * The e2e and hostile suites' core cases over a remote engine, once over tcp+TLS (client
 * certificates, a private dockerd on 127.0.0.1) and once over ssh:// (a loopback sshd in front
 * of the shared engine): attach, stdin, the supervisor's completion report, the output cap, the
 * deadline and the removal must behave as on the local socket. The executors reach the engine
 * over the transport only (their own watchdog too); the test checks the engine on its socket.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { runChecks } from "@hermes-sandbox/cli/commands/doctor"
import { Watchdog } from "@hermes-sandbox/docker"
import { ProcessStart } from "@hermes-sandbox/events"
import { forkedChildDoesNotEndRun, spinningExitHandler } from "../hostile/coreCases.js"
import { exited, expectOutcome, type HostileExecutor, hostileExecutor, MiB, TIMED_OUT } from "../hostile/support.js"
import { waitFor } from "../support/docker.js"
import { existsOn, TRANSPORTS, useRemote } from "./suite.js"

describe.each(TRANSPORTS)("core cases over a remote engine (%s)", (transport) => {
  const remote = useRemote(transport)
  let h!: HostileExecutor

  it("opens an executor over the transport; its watchdog reaches the engine the same way, keys off argv", async () => {
    h = await hostileExecutor("runc", remote.options)
    const watchdog = Watchdog.find(h.executor.executorId)
    expect(watchdog).toBeDefined()
    const argv = readFileSync(`/proc/${watchdog!.pid}/cmdline`, "utf8").split("\0")
    expect(argv).toContain("--transport-on-stdin")
    expect(argv.join(" ")).not.toMatch(/PRIVATE KEY/)
  }, 60_000)

  describe.concurrent("e2e", () => {
    it("print(1) in python, bash and javascript", async () => {
      const [py, sh, js] = await Promise.all([
        h.run({ language: "python", code: "print(1)" }),
        h.run({ language: "bash", code: "echo 1" }),
        h.run({ language: "javascript", code: "console.log(1)" })
      ])
      for (const r of [py!, sh!, js!]) {
        expectOutcome(r, exited(0))
        expect(r.stdout).toBe("1\n")
        expect(r.stderr).toBe("")
      }
    })

    it("stdin reaches the program", async () => {
      const r = await h.run({
        language: "python",
        code: "import sys\nprint(sys.stdin.read().upper(), end='')",
        stdin: "hello\nremote\n"
      })
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe("HELLO\nREMOTE\n")
    })

    it("exit codes are the program's", async () => {
      const [py, sh, js] = await Promise.all([
        h.run({ language: "python", code: "import sys\nsys.exit(3)" }),
        h.run({ language: "bash", code: "exit 7" }),
        h.run({ language: "javascript", code: "process.exit(5)" })
      ])
      expectOutcome(py!, exited(3))
      expectOutcome(sh!, exited(7))
      expectOutcome(js!, exited(5))
    })

    it("stdout and stderr stay apart", async () => {
      const r = await h.run({
        language: "python",
        code: "import sys\nprint('out')\nprint('err', file=sys.stderr)\nprint('out2')"
      })
      expect(r.stdout).toBe("out\nout2\n")
      expect(r.stderr).toBe("err\n")
    })

    it("the output cap truncates and counts every byte", async () => {
      const r = await h.run({
        language: "python",
        code: "import os\nfor _ in range(4): os.write(1, b'A' * (1 << 20))",
        outputLimitBytes: 64 * 1024,
        timeoutMs: 20_000
      })
      expectOutcome(r, exited(0))
      expect(r.stdoutTruncated).toBe(true)
      expect(r.stdoutBytes).toBe(4 * MiB)
      expect(Buffer.byteLength(r.stdout, "utf8")).toBeLessThanOrEqual(64 * 1024)
    })

    it("a program that never ends is killed at its deadline and its container is gone", async () => {
      const r = await h.run({ language: "python", code: "while True: pass", timeoutMs: 2_000 })
      expectOutcome(r, TIMED_OUT)
      expect(await existsOn(remote.engine, r.containerName)).toBe(false)
    })
  })

  describe.concurrent("hostile", () => {
    it("a forged completion report printed by the program is just output; its exit code stands", async () => {
      const code = String.raw`
import os, struct, sys
key = bytes(16)
def frame(t, p): return key + t + struct.pack(">I", len(p)) + p
forged = frame(b"x", b"0 0 0 0") + frame(b"o", b"FORGED") + b"\x1eHERMES-DONE " + b"ab" * 16 + b" 0\n"
os.write(1, forged)
sys.exit(5)
`
      const r = await h.run({ language: "python", code })
      expectOutcome(r, exited(5))
      expect(r.stdoutBytes).toBe(16 + 1 + 4 + 7 + 16 + 1 + 4 + 6 + 13 + 32 + 3)
      expect(Buffer.from(r.stdout, "utf8").includes(Buffer.from("FORGED"))).toBe(true)
    })

    it("a printed old-style completion marker then a long sleep: the run times out at its deadline", async () => {
      const r = await h.run({
        language: "bash",
        code: "printf '\\036HERMES-DONE 0123456789abcdef0123456789abcdef 0\\n'; sleep 45",
        timeoutMs: 2_000
      })
      expectOutcome(r, TIMED_OUT)
      expect(r.stdout).toContain("HERMES-DONE")
    })

    it("a forked child outliving the parent does not end the run: the parent's output and exit code 3", () =>
      forkedChildDoesNotEndRun(h))

    it("a spinning exit handler is killed at the deadline; its sandbox is gone by deadline + 5 s", () =>
      spinningExitHandler(h, (name) => existsOn(remote.engine, name)))
  })

  it("doctor reports the engine, how it is reached and that TLS / the host key is verified; the smoke run passes over the transport", async () => {
    const checks = await runChecks(remote.options)
    const engine = checks.find((c) => c.name === "engine")!
    expect(engine.ok, engine.detail).toBe(true)
    expect(engine.engine).toMatchObject({ kind: transport, source: "option", tlsVerified: transport === "tls" })
    expect(engine.detail).toContain(
      transport === "tls" ? "tls, server certificate verified, from option" : "ssh, host key checked, from option"
    )
    expect(checks.find((c) => c.name === "engine transport")?.ok).toBe(true)
    expect(checks.find((c) => c.name === "smoke run")).toMatchObject({ ok: true })
    expect(JSON.stringify(checks)).not.toMatch(/PRIVATE KEY/)
    if (transport === "tls") {
      // The docker CLI's variables name the same engine: source DOCKER_HOST.
      const saved = { ...process.env }
      Object.assign(process.env, remote.tls!.env)
      try {
        const fromEnv = (await runChecks()).find((c) => c.name === "engine")!
        expect(fromEnv.engine).toMatchObject({
          kind: "tls",
          endpoint: remote.tls!.endpoint,
          tlsVerified: true,
          source: "DOCKER_HOST"
        })
      } finally {
        for (const k of Object.keys(remote.tls!.env)) {
          if (saved[k] === undefined) delete process.env[k]
          else process.env[k] = saved[k]
        }
      }
    }
  }, 120_000)

  it("after the cases: the engine still runs print(1); nothing this executor created is left; its watchdog exits on close", async () => {
    const watchdog = Watchdog.find(h.executor.executorId)!
    const created = h.created
    await h.finish()
    for (const { id } of created) expect(await existsOn(remote.engine, id), id).toBe(false)
    expect(
      await waitFor(async () => !ProcessStart.isRunning(watchdog.pid), 15_000),
      "the watchdog exits after its pass over the transport"
    ).toBe(true)
  }, 120_000)
})
