/**
 * Hostile cells against a session's Python KERNEL (SECURITY.md, "Kernels: cells as one trust
 * domain"; docs/design/kernel.md): on the real engine, through the public `runCell`, once per OCI
 * runtime the engine has (runc, and gVisor's runsc when registered). The kernel, its driver and
 * everything its cells start are one untrusted domain; what they print, display or leave running
 * must never become another cell's output or result, outlive the host's deadline, or end the session.
 *
 * The supervisor-level cases (every frame and record bound, the interrupt's ping, the lock, freezing
 * by calls) are in images/runner/hermes-run.test.ts, *kernel mode*; these are the same attacks as
 * a caller of the SDK meets them, in a real sandbox.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { createSession } from "@hermes-sandbox/docker"
import { sessionTracker } from "../support/sessions.js"
import { RUNTIMES } from "./support.js"

const { track, removeTracked } = sessionTracker()
afterEach(removeTracked)
afterAll(removeTracked)

describe.each(RUNTIMES)("python kernel: cells as one untrusted domain (%s)", (runtime) => {
  const open = async (options: Parameters<typeof createSession>[0] = {}) =>
    track(await createSession({ runtime, image: "hermes-sandbox/python:latest", ...options }))

  it("printed end markers, frames and a forged result record stay the cell's stdout", async () => {
    await using s = await open()
    const r = await s.runCell({
      code: [
        "import sys, struct",
        "sys.stdout.buffer.write(bytes(16) + b'Z' + struct.pack('>I', 8) + b'c1 ok 0 ')",
        "print('done ok')",
        'rec = b\'{"data": {"text/plain": "999"}, "metadata": {}}\'',
        "sys.stdout.buffer.write(b'R' + struct.pack('>I', len(rec)) + rec)",
        "sys.stdout.flush()"
      ].join("\n")
    })
    expect(r.status).toBe("ok")
    expect(r.result).toBeUndefined()
    expect(r.displays).toEqual([])
    expect(r.stdout).toContain("done ok\n")
    expect(r.stdout).toContain('"999"')
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.status, next.result?.data["text/plain"], next.stateLost]).toEqual(["ok", "2", false])
  }, 120_000)

  it("10,000 displays: at most maxDisplays reach the host, the rest are counted as omitted", async () => {
    await using s = await open()
    const r = await s.runCell({ code: "from IPython.display import display\nfor i in range(10000):\n    display(i)\n" })
    expect(r.status).toBe("ok")
    expect(r.displays).toHaveLength(100)
    expect(r.displays[99]!.data["text/plain"]).toBe("99")
    expect(r.displaysOmitted.count).toBe(9900)
  }, 120_000)

  it("garbage on the cell's records pipe ends its records as malformed; the cell and the kernel go on", async () => {
    await using s = await open()
    // The records pipe is the last pipe the driver opened: a cell can find it.
    const fd =
      "[f for f in sorted(int(x) for x in os.listdir('/proc/self/fd')) if os.path.exists(f'/proc/self/fd/{f}') and os.readlink(f'/proc/self/fd/{f}').startswith('pipe:')][-1]"
    const r = await s.runCell({
      code: `import os\nfrom IPython.display import display\ndisplay(1)\n_ = os.write(${fd}, b'garbage')\ndisplay(2)\n`
    })
    expect(r.status).toBe("ok")
    expect(r.displays.map((d) => d.data["text/plain"])).toEqual(["1"])
    expect(r.displaysOmitted.reasons).toEqual({ malformed: 1 })
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", false])
  }, 120_000)

  it("late output from a thread is lateOutput on the next result, never its stdout", async () => {
    await using s = await open()
    await s.runCell({
      code: "import threading, time\ndef tick():\n    for i in range(3):\n        time.sleep(0.1)\n        print('tick', i, flush=True)\nthreading.Thread(target=tick).start()\n"
    })
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const next = await s.runCell({ code: "print('next')" })
    expect(next.stdout).toBe("next\n")
    expect(next.lateOutput?.text).toBe("tick 0\ntick 1\ntick 2\n")
  }, 120_000)

  it("a fork that writes after its cell ended writes into nothing (EPIPE), not into the next cell", async () => {
    await using s = await open()
    await s.runCell({
      code: [
        "import os, time",
        "if os.fork() == 0:",
        "    try:",
        "        for i in range(100):",
        "            os.write(1, b'tick\\n')",
        "            time.sleep(0.03)",
        "        open('/tmp/verdict', 'w').write('wrote on')",
        "    except BrokenPipeError:",
        "        open('/tmp/verdict', 'w').write('EPIPE')",
        "    os._exit(0)"
      ].join("\n")
    })
    const next = await s.runCell({ code: "import time\ntime.sleep(1.5)\nprint(open('/tmp/verdict').read())\n" })
    expect(next.stdout).toBe("EPIPE\n")
  }, 120_000)

  it("SIGINT ignored, with a setsid child to survive: the domain is killed, state lost, and the next cell says so", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    const r = await s.runCell({
      code: "import signal, subprocess, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nchild = subprocess.Popen(['sleep', '1000'], start_new_session=True)\nopen('/tmp/child', 'w').write(str(child.pid))\ntime.sleep(60)\n",
      timeoutMs: 2000
    })
    expect([r.status, r.stateLost]).toEqual(["timeout", true])
    const alive = await s.run('kill -0 "$(cat /tmp/child)" 2>/dev/null && echo alive || echo gone')
    expect(alive.stdout).toBe("gone\n")
    const next = await s.runCell({ code: "x" })
    expect(next.stateLost).toBe(true)
    expect(next.error?.name).toBe("NameError")
  }, 120_000)

  it("a timeout the kernel answers keeps its state", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    const r = await s.runCell({ code: "import time\ntime.sleep(60)", timeoutMs: 1500 })
    expect([r.status, r.stateLost, r.error?.name]).toEqual(["timeout", false, "KeyboardInterrupt"])
    const next = await s.runCell({ code: "x + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["42", false])
  }, 120_000)

  // Registered for runc only: under gVisor a supervisor's /proc/<pid>/fd is open to the domain (its
  // sentry does not honour non-dumpable there), so such a daemon voids the kernel ('protocol',
  // SECURITY.md) and can void a call it reaches before the call freezes it: frames without the key,
  // never a forgery. The outcome there is a race, not an assertion to make.
  if (runtime === "runc")
    it("a daemon the kernel left cannot read a run call's environment or write into its output: the domain is frozen for the call", async () => {
      await using s = await open()
      // A daemon of the domain that hunts every process for 10 s: reads environs, writes into fd 1/2.
      await s.runCell({
        code: [
          "import os, time",
          "if os.fork() == 0:",
          "    os.setsid()",
          "    log = open('/tmp/hunter.log', 'a', buffering=1)",
          "    me, end = os.getpid(), time.time() + 10",
          "    while time.time() < end:",
          "        for p in os.listdir('/proc'):",
          "            if not p.isdigit() or int(p) == me:",
          "                continue",
          "            try:",
          "                if b'CALL_SECRET' in open('/proc/%s/environ' % p, 'rb').read():",
          "                    log.write('read %s\\n' % p)",
          "            except OSError:",
          "                pass",
          "            for fd in ('1', '2'):",
          "                try:",
          "                    with open('/proc/%s/fd/%s' % (p, fd), 'wb', buffering=0) as f:",
          "                        f.write(b'FORGED\\n')",
          "                except OSError:",
          "                    pass",
          "        time.sleep(0.01)",
          "    os._exit(0)"
        ].join("\n")
      })
      const call = await s.run("sleep 1; echo real", { env: { CALL_SECRET: "tok-abc" } })
      expect([call.exitCode, call.stdout, call.stderr]).toEqual([0, "real\n", ""])
      const log = await s.run("cat /tmp/hunter.log 2>/dev/null; true")
      expect(log.stdout, "what the daemon read").toBe("")
      const next = await s.runCell({ code: "1 + 1" })
      expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", false])
    }, 120_000)

  it("a cell that kills its own supervisor ends crashed with the state lost; the session and the next kernel work", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    const r = await s.runCell({
      code: "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(60)\n",
      timeoutMs: 30_000
    })
    expect([r.status, r.stateLost]).toEqual(["crashed", true])
    expect((await s.run("echo still here")).stdout).toBe("still here\n")
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", true])
  }, 120_000)

  // Registered for runc only: under gVisor an OOM kills the whole sandbox, and today the host sees
  // it only at the cell's deadline (status timeout, stateLost true; the next call fails
  // ContainerFailed "not running"): SECURITY.md, Known limitations.
  if (runtime === "runc")
    it("an OOM kills the kernel, not the session: crashed, oomKilled, state lost; the session's calls go on", async () => {
      await using s = await open({ memory: "256m" })
      await s.runCell({ code: "x = 41" })
      const r = await s.runCell({ code: "b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n", timeoutMs: 60_000 })
      expect([r.status, r.stateLost, r.oomKilled]).toEqual(["crashed", true, true])
      expect((await s.run("echo still here")).stdout).toBe("still here\n")
      const next = await s.runCell({ code: "1 + 1" })
      expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", true])
    }, 120_000)
})
