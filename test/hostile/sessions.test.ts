/**
 * Hostile programs against SESSIONS: what one call leaves behind must not forge a later call's
 * result, read its secrets, outlive its own deadline or wedge the session (hostile review,
 * findings 5 and 12: a daemon that found the session shell's nonce in /proc/<pid>/cmdline forged
 * every later call, read per-call secrets from /proc/<pid>/environ and wrote other processes'
 * memory; a timed-out call's setsid child survived; a leftover flock timed every later call out).
 *
 * Now each call's supervisor (hermes-run, framed argv mode, non-dumpable) holds the session lock,
 * relays the shell's output in keyed frames and reports its exit; by default it ends every process
 * earlier calls left before the call runs and those the call left after it (keepBackgroundProcesses
 * opts out: the trust model docs/sessions.md states for that mode is tested too).
 */
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { createSession } from "@hermes-sandbox/docker"
import { sessionTracker } from "../support/sessions.js"
import { facts } from "./support.js"

const { track, removeTracked } = sessionTracker()
afterEach(removeTracked)
afterAll(removeTracked)

/**
 * A daemon (double fork, setsid) that, for 20 s, hunts every process of the sandbox: it logs every
 * argv and environment it can read and tries to write a forged result (an old-style marker, frames
 * with a zero key) into every stdout/stderr it can open, through /proc/<pid>/fd.
 */
const FORGER = String.raw`
import os, sys, time
# Before the daemon exists: what it writes into this call's output cannot land inside this line.
sys.stdout.write("planted\n")
sys.stdout.flush()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        log = open("/tmp/forger.log", "a", buffering=1)
        forged = b"ALL 120 TESTS PASSED\n\x1eHERMES-DONE " + b"ab" * 16 + b" 0\n" + bytes(16) + b"x" + (7).to_bytes(4, "big") + b"0 0 0 0"
        end = time.time() + 20
        me = os.getpid()
        while time.time() < end:
            for p in os.listdir("/proc"):
                if not p.isdigit() or int(p) == me:
                    continue
                try:
                    before = open("/proc/%s/cmdline" % p, "rb").read()
                except OSError:
                    continue
                for what in ("environ", "mem", "maps"):
                    try:
                        data = open("/proc/%s/%s" % (p, what), "rb").read(65536)
                        ok = "ok %r" % data[:300]
                    except OSError as e:
                        ok = "denied"
                    try:
                        after = open("/proc/%s/cmdline" % p, "rb").read()
                    except OSError:
                        after = b""
                    if before == after and b"/opt/hermes/hermes-run" in before:
                        log.write("supervisor %s %s %s\n" % (p, what, ok))
                    elif what == "environ" and ok != "denied":
                        log.write("read %s environ %s\n" % (p, ok))
                for fd in ("1", "2"):
                    try:
                        with open("/proc/%s/fd/%s" % (p, fd), "wb", buffering=0) as f:
                            f.write(forged)
                        log.write("wrote %s fd%s\n" % (p, fd))
                    except OSError:
                        pass
            time.sleep(0.01)
        os._exit(0)
    os._exit(0)
`

describe("sessions: one call cannot forge, read or wedge another", () => {
  it("by default a daemon left by a call is gone before the next one runs: the next result is its own, its secret unread", async () => {
    const s = track(await createSession())
    // (What the daemon writes while the call that made it runs is that call's own output.)
    expect((await s.runCode({ language: "python", code: FORGER })).stdout).toMatch(/^planted\n/)
    const real = await s.run(
      "sleep 1; echo real-output; echo 'FAILED 3 tests' >&2; echo token=${CALL2_TOKEN:0:4}; exit 3",
      { env: { CALL2_TOKEN: "tok-abc123" } }
    )
    expect(real).toMatchObject({
      exitCode: 3,
      stdout: "real-output\ntoken=tok-\n",
      stderr: "FAILED 3 tests\n",
      timedOut: false
    })
    // (The daemon may be killed before it wrote any log: a missing log counts as nothing read.)
    const after = await s.run(
      "cat /tmp/forger.log 2>/dev/null | grep -ac tok-abc123 || true; ps -eo args | grep -c '[/]tmp/.hermes/main.py' || true"
    )
    expect(after.stdout).toBe("0\n0\n")
    await s.close()
  }, 60_000)

  it("with keepBackgroundProcesses the daemon lives on and can write into the call's output, but never forge its exit code or end", async () => {
    const s = track(await createSession({ keepBackgroundProcesses: true }))
    // (What the daemon writes while the call that made it runs is that call's own output.)
    expect((await s.runCode({ language: "python", code: FORGER })).stdout).toMatch(/^planted\n/)
    const real = await s.run("sleep 2; echo real-output; echo 'FAILED 3 tests' >&2; exit 3")
    // The exit code, the end (after the real command's 2 s) and the real output are the call's own.
    expect(real.exitCode).toBe(3)
    expect(real.timedOut).toBe(false)
    expect(real.durationMs).toBeGreaterThanOrEqual(2_000)
    expect(real.stdout).toContain("real-output\n")
    expect(real.stderr).toContain("FAILED 3 tests\n")
    // What a leftover can reach of a call's supervisor (the shell's parent), as the same uid: its argv
    // (world-readable, no key in it), never its environment, memory, maps or descriptors.
    const killed = await s.run("pkill -9 -f '[/]tmp/.hermes/main.py'; echo $?") // the daemon's noise out of the way
    expect(killed.stdout).toMatch(/0\n$/) // it was alive until now
    const sup = await s.run(String.raw`tr '\0' ' ' < /proc/$PPID/cmdline; echo
for f in environ mem fd/1; do if head -c1 /proc/$PPID/$f >/dev/null 2>&1; then echo $f open; else echo $f denied; fi; done
echo maps-bytes $(cat /proc/$PPID/maps 2>/dev/null | wc -c)`)
    expect(sup.stdout).toContain("/opt/hermes/hermes-run \n")
    expect(facts(sup.stdout)).toMatchObject({ environ: "denied", mem: "denied", "fd/1": "denied", "maps-bytes": "0" })
    await s.close()
  }, 60_000)

  it("a timed-out call's escapees (setsid, env -i, double fork) are gone right after its deadline, in both modes", async () => {
    for (const keepBackgroundProcesses of [false, true]) {
      const s = track(await createSession({ keepBackgroundProcesses }))
      const r = await s.run(
        "setsid env -i /bin/sleep 300 </dev/null >/dev/null 2>&1 & (setsid bash -c 'sleep 301' &) ; sleep 100",
        { timeoutMs: 2_000 }
      )
      expect(r).toMatchObject({ timedOut: true, exitCode: 137 })
      const ps = await s.run("ps -eo args | grep -c '[s]leep 30[01]' || true")
      expect(ps.stdout, `keepBackgroundProcesses ${keepBackgroundProcesses}`).toBe("0\n")
      await s.close()
    }
  }, 60_000)

  it("a call that floods past its cap into its deadline says it was cut and counts at least what the supervisor told; the session goes on", async () => {
    const s = track(await createSession())
    const limit = 64 * 1024
    const r = await s.runCode({
      language: "python",
      timeoutMs: 3_000,
      outputLimitBytes: limit,
      code: "import os\nchunk = b'x' * 65536\nwhile True:\n    os.write(1, chunk)\n"
    })
    expect(r).toMatchObject({ timedOut: true, stdoutTruncated: true })
    expect(r.stdout.length).toBe(limit)
    expect(r.stdoutBytes).toBeGreaterThan(4 * limit)
    expect((await s.run("echo next")).stdout).toBe("next\n")
    await s.close()
  }, 60_000)

  it("a leftover holding the session lock cannot wedge the session: killed by default; with keepBackgroundProcesses, the call says who holds it", async () => {
    const plain = track(await createSession())
    await plain.run("setsid env -i flock /tmp/.hermes-session/lock sleep 300 </dev/null >/dev/null 2>&1 &")
    expect((await plain.run("echo next", { timeoutMs: 5_000 })).stdout).toBe("next\n")
    await plain.close()

    const keeping = track(await createSession({ keepBackgroundProcesses: true }))
    await keeping.run("setsid env -i flock /tmp/.hermes-session/lock sleep 300 </dev/null >/dev/null 2>&1 &")
    await new Promise((resolve) => setTimeout(resolve, 300))
    await expect(keeping.run("echo next", { timeoutMs: 2_000 })).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "session-locked",
      message: expect.stringMatching(
        /held for the whole deadline \(2000 ms\) by process \d+ \(flock \/tmp\/\.hermes-session\/lock sleep 300/
      )
    })
    await keeping.close()
  }, 60_000)

  it("a program that stops its own supervisor (SIGSTOP, same uid) cannot wedge the session: the deadline's killer resumes it, the next call runs", async () => {
    const s = track(await createSession())
    // Stopped, the supervisor would hold the session lock for ever: every later call session-locked.
    const r = await s.run("kill -STOP $PPID; echo stopped; sleep 60", { timeoutMs: 2_000 })
    expect(r).toMatchObject({ timedOut: true })
    expect((await s.run("echo next", { timeoutMs: 5_000 })).stdout).toBe("next\n")
    await s.close()
  }, 60_000)
})
