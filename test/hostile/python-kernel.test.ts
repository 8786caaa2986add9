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
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ToolContext } from "@hermes-sandbox/core"
import { createSession, type SandboxSession } from "@hermes-sandbox/docker"
import { sessionTracker } from "../support/sessions.js"
import { MiB, RUNTIMES } from "./support.js"

// The cases run concurrently (each has its own session, closed by `await using`; most of their time
// is waiting on deadlines and sandboxes): what a case leaves after a failure is removed at the end,
// not after each case, which would remove the sessions of the cases still running.
const { track, removeTracked } = sessionTracker()
afterAll(removeTracked)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Python: the records pipe of the running cell (the last pipe the driver opened: a cell can find it). */
const RECORDS_FD =
  "[f for f in sorted(int(x) for x in os.listdir('/proc/self/fd')) if os.path.exists(f'/proc/self/fd/{f}') and os.readlink(f'/proc/self/fd/{f}').startswith('pipe:')][-1]"

/** Python: the driver's own globals (those of the function it put on the shell), which a cell can rewrite. */
const DRIVER_GLOBALS = "driver = get_ipython()._showtraceback.__globals__"

describe.concurrent.each(RUNTIMES)("python kernel: cells as one untrusted domain (%s)", (runtime) => {
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
    const r = await s.runCell({
      code: `import os\nfrom IPython.display import display\ndisplay(1)\n_ = os.write(${RECORDS_FD}, b'garbage')\ndisplay(2)\n`
    })
    expect(r.status).toBe("ok")
    expect(r.displays.map((d) => d.data["text/plain"])).toEqual(["1"])
    expect(r.displaysOmitted.reasons).toEqual({ malformed: 1 })
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", false])
  }, 120_000)

  it("late output from a thread is lateOutput on the next result, never its stdout", async () => {
    await using s = await open()
    const first = await s.runCell({
      code: "import threading, time\ndef tick():\n    for i in range(3):\n        time.sleep(0.3)\n        print('tick', i, flush=True)\nthreading.Thread(target=tick).start()\n"
    })
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const next = await s.runCell({ code: "print('next')" })
    expect(next.stdout).toBe("next\n")
    // What the thread printed while its cell was still ending (a loaded machine: ci49 saw tick 0
    // there) is that cell's; the rest, printed between the cells, is the next result's lateOutput.
    // Every tick once, never in the next cell's stdout, and the last ones late.
    expect(`${first.stdout}${next.lateOutput?.text ?? ""}`).toBe("tick 0\ntick 1\ntick 2\n")
    expect(next.lateOutput?.text).toMatch(/tick 2\n$/)
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

  // Under runc the OOM killer takes the kernel (oom_score_adj 1000) and the session lives on. Under
  // gVisor the host's OOM killer chooses among the sandbox's host processes: the Sentry (the whole
  // sandbox ends: the session ends at once, saying so, since its handle waits on the sandbox's exit,
  // instead of the cell waiting out its 60 s deadline as 'timeout' and the next call failing "not
  // running"), or, seen once on a loaded machine, the kernel's ptrace stub (the sandbox lives on; the
  // supervisor's cgroup counter is the Sentry's own, so the OOM comes from the engine's event log).
  // SECURITY.md, Kernels: the OOM row.
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
  else
    it("an OOM under gVisor is named, never a timeout: the whole sandbox dies (the cell and the next call reject SessionEnded naming the OOM), or only the kernel (crashed, oomKilled, state lost; the session goes on)", async () => {
      await using s = await open({ memory: "256m" })
      await s.runCell({ code: "x = 41" })
      const cell = await s
        .runCell({ code: "b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n", timeoutMs: 60_000 })
        .then(
          (result) => ({ result }),
          (error: unknown) => ({ error })
        )
      if ("error" in cell) {
        expect(cell.error).toMatchObject({ _tag: "SessionEnded", reason: expect.stringMatching(/OOM killed/) })
        await expect(s.run("echo still here")).rejects.toMatchObject({
          _tag: "SessionEnded",
          reason: expect.stringMatching(/^sandbox exited \(exit \d+, OOM killed\)$/)
        })
      } else {
        expect([cell.result.status, cell.result.stateLost, cell.result.oomKilled]).toEqual(["crashed", true, true])
        expect((await s.run("echo still here")).stdout).toBe("still here\n")
      }
    }, 120_000)

  it("done, then busy: a cell that says 'done' itself ends only itself; its later writes go nowhere, the next cell has its own deadline", async () => {
    await using s = await open({ kernel: { interruptGraceMs: 500 } })
    // The cell sends the driver's "done" on the control socket, then stays in the driver's loop,
    // writing to the cell's stdout (closed by then) and swallowing every interrupt.
    const r = await s.runCell({
      code: [
        "import os, socket, time",
        // Replaced whole (rename), never truncated then written: the kill may land between the two.
        "def verdict(v):",
        "    open('/tmp/verdict.new', 'w').write(v)",
        "    os.replace('/tmp/verdict.new', '/tmp/verdict')",
        "print('before', flush=True)",
        "socket.socket(fileno=3).send(b'done ok')",
        "time.sleep(0.3)",
        "while True:",
        "    try:",
        "        os.write(1, b'after\\n')",
        "        verdict('wrote on')",
        "    except BrokenPipeError:",
        "        verdict('EPIPE')",
        "    except KeyboardInterrupt:",
        "        pass",
        "    try:",
        "        time.sleep(0.05)",
        "    except KeyboardInterrupt:",
        "        pass"
      ].join("\n")
    })
    // A write that beat the supervisor's close (a loaded host) was this cell's own output, rightly.
    expect([r.status, r.stdout.replaceAll("after\n", ""), r.stateLost]).toEqual(["ok", "before\n", false])
    const next = await s.runCell({ code: "print('second')", timeoutMs: 1500 })
    expect([next.status, next.stdout, next.stateLost]).toEqual(["timeout", "", true])
    expect(next.lateOutput?.text ?? "").not.toContain("after")
    // Read only now: the domain was killed at the second cell's deadline, the file stays.
    expect((await s.run("cat /tmp/verdict")).stdout).toBe("EPIPE")
    const third = await s.runCell({ code: "1 + 1" })
    expect([third.status, third.result?.data["text/plain"], third.stateLost]).toEqual(["ok", "2", true])
  }, 120_000)

  it("a wedged kernel that claims idle (it answers pings, never runs a cell): later cells end timeout at their own deadlines; restartKernel() ends it", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    // A rewritten driver: a thread takes every message on the control socket, answers pings and
    // drops cells; the driver's own loop stays in this cell, saying "done" at every interrupt.
    const r = await s.runCell({
      code: [
        "import os, socket, threading, time",
        "ctl = socket.socket(fileno=3)",
        "def idle():",
        "    while True:",
        "        msg, fds, _, _ = socket.recv_fds(ctl, 4096, 4)",
        "        for fd in fds:",
        "            os.close(fd)",
        "        words = msg.split()",
        "        if words[:1] == [b'ping']:",
        "            ctl.send(b'pong ' + words[1])",
        "threading.Thread(target=idle, daemon=True).start()",
        "ctl.send(b'done ok')",
        "while True:",
        "    try:",
        "        time.sleep(60)",
        "    except KeyboardInterrupt:",
        "        ctl.send(b'done ok')"
      ].join("\n")
    })
    expect([r.status, r.stateLost]).toEqual(["ok", false])
    for (const count of [3, 4]) {
      const wedged = await s.runCell({ code: "print('ran')\nx", timeoutMs: 1000 })
      // Never ran, said as a timeout; the state is the same process's (its pid and start), so not lost.
      expect([wedged.status, wedged.stdout, wedged.result, wedged.stateLost, wedged.executionCount]).toEqual([
        "timeout",
        "",
        undefined,
        false,
        count
      ])
    }
    await s.restartKernel()
    const fresh = await s.runCell({ code: "print('ran')\n1 + 1" })
    expect([fresh.status, fresh.stdout, fresh.result?.data["text/plain"], fresh.stateLost]).toEqual([
      "ok",
      "ran\n",
      "2",
      false
    ])
    expect([fresh.executionCount, fresh.kernel.generation, fresh.kernel.started]).toEqual([1, 2, true])
  }, 120_000)

  it("blocked in C with SIGINT masked (pause()): killed after the grace, state lost, and the next cell says so", async () => {
    await using s = await open({ kernel: { interruptGraceMs: 500 } })
    const r = await s.runCell({
      code: "x = 41\nimport ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nctypes.CDLL(None).pause()\n",
      timeoutMs: 1500
    })
    expect([r.status, r.stateLost]).toEqual(["timeout", true])
    const next = await s.runCell({ code: "x" })
    expect([next.status, next.error?.name, next.stateLost, next.kernel.generation]).toEqual([
      "error",
      "NameError",
      true,
      2
    ])
  }, 120_000)

  it("a driver that lies (its execution count, ok for an exception, ok at an interrupt): executionCount is the host's, a timeout stays a timeout", async () => {
    await using s = await open()
    const r = await s.runCell({
      code: [
        DRIVER_GLOBALS,
        // The shell's count reads 1000 whatever the driver sets; every "done error" is sent as "done ok".
        "class Liar(type(driver['shell'])):",
        "    execution_count = property(lambda self: 1000, lambda self, value: None)",
        "driver['shell'].__class__ = Liar",
        "said = driver['send']",
        "driver['send'] = lambda text: said(text.replace('done error', 'done ok'))",
        "x = 41"
      ].join("\n")
    })
    expect([r.status, r.executionCount]).toEqual(["ok", 1])
    // ok/error is the kernel's word on its own cell (its error record is its own output too).
    const raised = await s.runCell({ code: "raise ValueError('no')" })
    expect([raised.status, raised.error?.name, raised.executionCount]).toEqual(["ok", "ValueError", 2])
    const counted = await s.runCell({ code: "(get_ipython().execution_count, x)" })
    expect([counted.result?.data["text/plain"], counted.executionCount]).toEqual(["(1000, 41)", 3])
    // Past the deadline only the host's clock speaks: "done ok" at the interrupt is still a timeout.
    const slow = await s.runCell({ code: "import time\ntime.sleep(60)", timeoutMs: 1500 })
    expect([slow.status, slow.stateLost, slow.executionCount]).toEqual(["timeout", false, 4])
  }, 120_000)

  it("a kernel that lies about its state: a planted sitecustomize makes the next kernel pose as the old one; stateLost comes from identity", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    // The kernel's path holds the code directory (/tmp/.hermes): the next kernel imports this first.
    const r = await s.runCell({
      code: [
        "import os, signal",
        "open('/tmp/.hermes/sitecustomize.py', 'w').write(\"import builtins\\nbuiltins.x = 41\\nprint('state kept, x = 41', flush=True)\\n\")",
        "os.kill(os.getpid(), signal.SIGKILL)"
      ].join("\n"),
      timeoutMs: 30_000
    })
    expect([r.status, r.stateLost]).toEqual(["crashed", true])
    const next = await s.runCell({ code: "x" })
    expect(next.result?.data["text/plain"], "the new kernel's claim").toBe("41")
    expect(next.lateOutput?.text).toBe("state kept, x = 41\n")
    expect([next.stateLost, next.kernel.generation, next.kernel.started, next.executionCount]).toEqual([
      true,
      2,
      true,
      1
    ])
    expect(next.kernel.id).not.toBe(r.kernel.id)
  }, 120_000)

  // Registered for runc only, for CI time: the host waits out its whole escalation here (deadline,
  // grace + 5 s for the cell's end, 5 s for 'G', 5 s for the exec, then the killer: ~18 s), the same
  // under gVisor, where this test passed too (2026-12-04, 22 s).
  if (runtime === "runc")
    it("a cell that stops its supervisor (SIGSTOP) ends at its deadline with the state lost, reported as such; the session goes on", async () => {
      await using s = await open({ kernel: { interruptGraceMs: 100 } })
      await s.runCell({ code: "x = 41" })
      const r = await s.runCell({
        code: "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint('stopped')\n",
        timeoutMs: 1500
      })
      expect([r.status, r.stateLost]).toEqual(["timeout", true])
      // The stopped supervisor held the session lock: resumed by the host's killer, it released it.
      expect((await s.run("echo still here", { timeoutMs: 5000 })).stdout).toBe("still here\n")
      const next = await s.runCell({ code: "1 + 1" })
      expect([next.result?.data["text/plain"], next.stateLost, next.kernel.generation]).toEqual(["2", true, 2])
    }, 120_000)

  it("holds the session lock between cells: the next run fails session-locked naming the holder; a cell waiting for it is a timeout that kills the domain", async () => {
    await using s = await open()
    const r = await s.runCell({
      code: "import subprocess\nholder = subprocess.Popen(['flock', '/tmp/.hermes-session/lock', 'sleep', '1000'], start_new_session=True)\nprint(holder.pid)\n"
    })
    const holder = r.stdout.trim()
    expect(holder).toMatch(/^\d+$/)
    // The holder takes the lock once the cell has released it.
    await sleep(500)
    const locked = await s.run("echo never", { timeoutMs: 1500 }).then(
      () => undefined,
      (e: unknown) => e as { reason?: string; message?: string }
    )
    expect(locked?.reason).toBe("session-locked")
    // The holder is named from /proc/locks, which gVisor does not have.
    expect(locked?.message).toContain(
      runtime === "runc" ? `by process ${holder} (flock ` : "by a process the sandbox could not name"
    )
    const waiting = await s.runCell({ code: "print('never')", timeoutMs: 1500 })
    expect([waiting.status, waiting.stdout, waiting.stateLost]).toEqual(["timeout", "", true])
    expect((await s.run("echo free")).stdout).toBe("free\n")
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", true])
  }, 120_000)

  it("planted IPython startup files and configuration (by a run call) do not run in the kernel after restartKernel()", async () => {
    await using s = await open()
    // Each file says it ran (a marker file) and defines `planted`.
    const env = {
      STARTUP: "import builtins\nbuiltins.planted = True\nopen('/tmp/planted-ran', 'a').write(__file__ + '\\n')\n",
      CONFIG:
        "open('/tmp/planted-ran', 'a').write(__file__ + '\\n')\nc.InteractiveShellApp.exec_lines = ['planted = True']\nc.InteractiveShell.banner1 = 'planted'\n"
    }
    // Every profile directory IPython could look in: $HOME/.ipython (HOME is /workspace), the XDG
    // one, and the running kernel's own IPYTHONDIR (a fresh one per kernel).
    const own = (await s.runCell({ code: "import os\nprint(os.environ['IPYTHONDIR'])" })).stdout.trim()
    expect(own).toMatch(/^\/tmp\/\.hermes\/ipython-/)
    const plant = (dir: string) =>
      `mkdir -p ${dir}/profile_default/startup && printf %s "$STARTUP" > ${dir}/profile_default/startup/00-x.py && ` +
      `for f in ipython_config.py ipython_kernel_config.py; do printf %s "$CONFIG" > ${dir}/profile_default/$f; done`
    const planted = await s.run(
      `${plant("$HOME/.ipython")} && ${plant("$HOME/.config/ipython")} && ${plant(own)} && cat $HOME/.ipython/profile_default/startup/00-x.py`,
      { env }
    )
    expect([planted.exitCode, planted.stdout]).toEqual([0, env.STARTUP])
    // The files work: IPython's own application runs them.
    const control = await s.run(
      "cd /tmp && python3 -m IPython -c 'print(planted)'; cat /tmp/planted-ran; rm -f /tmp/planted-ran"
    )
    expect(control.stdout).toContain("True\n")
    expect(control.stdout).toContain("/workspace/.ipython/profile_default/startup/00-x.py")
    await s.restartKernel()
    const fresh = await s.runCell({
      code: "import builtins, os\n(hasattr(builtins, 'planted'), 'planted' in dir(), os.path.exists('/tmp/planted-ran'))"
    })
    expect([fresh.result?.data["text/plain"], fresh.stateLost, fresh.kernel.generation]).toEqual([
      "(False, False, False)",
      false,
      2
    ])
  }, 120_000)

  it("forged frames: a cell writing into its supervisor's stdout is refused (runc) or voids only its kernel (gVisor: protocol)", async () => {
    await using s = await open()
    await s.runCell({ code: "x = 41" })
    // Bytes shaped like a cell's end, with a key the domain does not have.
    const attempt = s.runCell({
      code: [
        "import os",
        "try:",
        "    with open(f'/proc/{os.getppid()}/fd/1', 'wb', buffering=0) as f:",
        "        f.write(bytes(16) + b'Z' + (40).to_bytes(4, 'big') + b'c1 ok 0 0 0 0'.ljust(40))",
        "    print('wrote')",
        "except OSError as e:",
        "    print('refused', e.errno)"
      ].join("\n")
    })
    if (runtime === "runc") {
      // The supervisor is not dumpable: its /proc/<pid>/fd is closed to the domain.
      const r = await attempt
      expect([r.status, r.stdout]).toEqual(["ok", "refused 13\n"])
    } else {
      // gVisor opens it: the host sees bytes without the key, kills the kernel, and says so.
      await expect(attempt).rejects.toMatchObject({ _tag: "ContainerFailed", reason: "protocol" })
    }
    const next = await s.runCell({ code: "1 + 1" })
    expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", runtime !== "runc"])
  }, 120_000)

  it("tool calls between cells never reach the host; a leftover thread calling during the next cell is that cell's", async () => {
    await using s = await open()
    const seen: Array<{ readonly i: number; readonly cell: string }> = []
    const tools = {
      note: {
        parameters: { type: "object", properties: { i: { type: "number" } }, required: ["i"] },
        handler: ({ i }: { i: number }, context: ToolContext) => {
          seen.push({ i, cell: context.executionId })
          return "noted"
        }
      }
    }
    // The cell's own call, then a thread that calls every 100 ms, logging what each call got.
    const first = await s.runCell({
      code: [
        "import threading, time",
        "from hermes_tools import note, ToolError",
        "note(i=0)",
        "log, stop = [], [False]",
        "def pester():",
        "    i = 0",
        "    while not stop[0]:",
        "        i += 1",
        "        try:",
        "            note(i=i)",
        "            log.append('served')",
        "        except ToolError as e:",
        "            log.append(str(e))",
        "        time.sleep(0.1)",
        "threading.Thread(target=pester, daemon=True).start()"
      ].join("\n"),
      tools
    })
    // The thread's first calls may come while the cell is still open: then they are the cell's.
    const atEnd = seen.length
    expect([first.status, first.toolCallsMade]).toEqual(["ok", atEnd])
    expect(seen.every((c) => c.cell === first.cellId)).toBe(true)
    await sleep(1000)
    expect(seen.slice(atEnd), "calls that reached the host between cells").toEqual([])
    const during = await s.runCell({ code: "import time\ntime.sleep(1)", tools })
    const served = seen.slice(atEnd)
    expect(served.length).toBeGreaterThan(0)
    expect(served.every((c) => c.cell === during.cellId)).toBe(true)
    expect(during.toolCallsMade).toBe(served.length)
    const verdict = await s.runCell({
      code: "stop[0] = True\ntime.sleep(0.3)\nsorted(set(e for e in log if e != 'served'))"
    })
    // The thread did call between cells: the channel was not there.
    expect(verdict.result?.data["text/plain"]).toContain("cannot reach the tool channel")
    expect(seen.length).toBe(atEnd + served.length)
  }, 120_000)

  // One session, its cases one after another.
  describe.sequential("bounds (one session)", () => {
    let shared: SandboxSession | undefined
    const session = () => {
      if (shared === undefined) throw new Error("the shared session is used before beforeAll made it")
      return shared
    }
    beforeAll(async () => {
      // Not tracked: destroyed by this block's afterAll.
      shared = await createSession({ runtime, image: "hermes-sandbox/python:latest", outputLimitBytes: 64 * 1024 })
    }, 120_000)
    afterAll(async () => {
      await shared?.destroy()
    })

    it("a stdout and stderr flood: each stream capped at outputLimitBytes, the rest counted, the session goes on", async () => {
      const r = await session().runCell({
        code: "import os, subprocess\nfor _ in range(64):\n    os.write(1, b'x' * (128 << 10))\nsubprocess.run('head -c 3000000 /dev/zero | tr \"\\\\0\" e >&2', shell=True)\nx = 41\n"
      })
      expect([r.status, r.stdoutBytes, r.stdoutTruncated, r.stdout]).toEqual([
        "ok",
        8 * MiB,
        true,
        "x".repeat(64 * 1024)
      ])
      expect([r.stderrBytes, r.stderrTruncated, r.stderr]).toEqual([3_000_000, true, "e".repeat(64 * 1024)])
      const next = await session().runCell({ code: "print('next')\nx + 1" })
      expect([next.stdout, next.stdoutTruncated, next.result?.data["text/plain"], next.stateLost]).toEqual([
        "next\n",
        false,
        "42",
        false
      ])
    }, 120_000)

    it("one 200 MiB bundle (and a driver-made one over maxBundleBytes) is skipped unread and counted; the displays around it arrive", async () => {
      // Streamed on the records pipe in 1 MiB writes. Had the supervisor forwarded it, the host's
      // frame decoder (bounded by maxBundleBytes) would end the kernel as a protocol violation.
      const r = await session().runCell({
        code: [
          "import json, os",
          "from IPython.display import display",
          `fd = ${RECORDS_FD}`,
          "display(1)",
          "os.write(fd, b'D' + (200 << 20).to_bytes(4, 'big'))",
          "chunk = b' ' * (1 << 20)",
          "for _ in range(200):",
          "    b = memoryview(chunk)",
          "    while len(b):",
          "        b = b[os.write(fd, b):]",
          "big = {'text/plain': 'y' * (5 << 20)}",
          "display(big, raw=True)",
          "display(2)",
          "print(len(json.dumps({'data': big, 'metadata': {}})))"
        ].join("\n")
      })
      expect(r.status).toBe("ok")
      expect(r.displays.map((d) => d.data["text/plain"])).toEqual(["1", "2"])
      expect(r.displaysOmitted).toEqual({
        count: 2,
        bytes: 200 * MiB + Number(r.stdout.trim()),
        reasons: { "too-large": 2 }
      })
      const next = await session().runCell({ code: "1 + 1" })
      expect([next.result?.data["text/plain"], next.stateLost]).toEqual(["2", false])
    }, 120_000)
  })
})
