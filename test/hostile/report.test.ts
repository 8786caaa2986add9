/**
 * Hostile programs against the run's REPORT: what the host says about a run (exit code, end,
 * output, byte counts) and when the sandbox goes. Each case is an attack from the hostile review
 * (shared/notes/hostile-review-1.md, findings 1-4 and 10): a program that keeps its sandbox after
 * its report, a forked child that reaches the end of the script, a program hunting for the run's
 * key (stack frames, exit listeners, the supervisor's /proc files), frames and old markers printed
 * on purpose, a flood after a marker prefix, exit codes out of range.
 *
 * The supervisor (images/runner/hermes-run.c) is PID 1 and not dumpable; the program's stdout and
 * stderr are pipes to it; its report is a frame keyed with a secret the program never sees.
 */
import { describe, expect, it } from "vitest"
import { containerExists } from "../support/docker.js"
import { forkedChildDoesNotEndRun, spinningExitHandler } from "./coreCases.js"
import {
  exited,
  expectOutcome,
  facts,
  hostileExecutor,
  MiB,
  RUNTIMES,
  TIMED_OUT,
  useHostileExecutor
} from "./support.js"

/** After a deadline, how soon a queued execution's own result arrives: the slot's release plus a whole run. */
const NEXT_RUN_MARGIN_MS = 8_000

describe.each(RUNTIMES)("the run's report is the supervisor's, never the program's (%s)", (runtime) => {
  const h = useHostileExecutor(runtime)
  // gVisor (runsc 2022-12) keeps /proc/<pid>/mem of a non-dumpable process closed, but not its
  // environ and fd/ (SECURITY.md): there the key's secrecy alone keeps frames unforgeable.
  const gvisor = runtime === "runsc"

  describe.concurrent("the deadline holds after the program's main work is done", () => {
    it("a JavaScript exit handler that spins is killed at the deadline, and its sandbox is gone by deadline + margin", () =>
      spinningExitHandler(h, containerExists))

    it("an atexit handler and a non-daemon thread in Python hold the report back; the deadline still ends them", async () => {
      const r = await h.run({
        language: "python",
        code: "import atexit, time\nprint('main done', flush=True)\natexit.register(lambda: time.sleep(60))",
        timeoutMs: 2_000
      })
      expectOutcome(r, TIMED_OUT)
      expect(r.stdout).toBe("main done\n")
    })

    it("a printed old-style completion marker followed by a long sleep is just output: the run times out at its deadline", async () => {
      for (const language of ["python", "bash"] as const) {
        const code =
          language === "python"
            ? "import os, sys, time\nfor fd in (1, 2): os.write(fd, b'\\x1eHERMES-DONE 0123456789abcdef0123456789abcdef 0\\n')\ntime.sleep(45)"
            : "printf '\\036HERMES-DONE 0123456789abcdef0123456789abcdef 0\\n'; printf '\\036HERMES-DONE 0123456789abcdef0123456789abcdef 0\\n' >&2; sleep 45"
        const r = await h.run({ language, code, timeoutMs: 2_000 })
        expectOutcome(r, TIMED_OUT)
        expect(r.stdout).toContain("HERMES-DONE")
        expect(await containerExists(r.containerName)).toBe(false)
      }
    })
  })

  describe.concurrent("nothing the program does can choose its reported exit code, end or output", () => {
    it("a forked Python child reaching the end of the script does not end the run: the parent's output and exit code 3 are the result", () =>
      forkedChildDoesNotEndRun(h))

    it("the key is nowhere the program can look: no runner frames on its stack, no runner exit listener, the supervisor's /proc closed", async () => {
      const py = await h.run({
        language: "python",
        code: String.raw`
import sys, os
import re
f = sys._getframe()
names, hexlike = [], 0
while f is not None:
    names.append(f.f_code.co_filename)
    for v in list(f.f_locals.values()) + list(f.f_globals.values()):
        if isinstance(v, (str, bytes)) and re.search(r"[0-9a-f]{32}" if isinstance(v, str) else rb"[0-9a-f]{32}", v): hexlike += 1
    f = f.f_back
print("frames", ",".join(n for n in names if n != "/tmp/.hermes/main.py") or "main-only")
print("hexlike", hexlike)
for what in ("mem", "environ", "fd", "maps", "cwd"):
    try:
        if what == "fd" or what == "cwd": os.listdir("/proc/1/" + what)
        else: open("/proc/1/" + what, "rb").read(16)
        print(what, "open")
    except OSError as e:
        print(what, type(e).__name__)
print("cmdline", open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode().strip())
print("ppid", os.getppid())
print("env", " ".join(sorted(k for k in os.environ if "KEY" in k or "HERMES" in k)))
`
      })
      expectOutcome(py, exited(0))
      const f = facts(py.stdout)
      // Only the program's frames, or (a warm pool's preloaded interpreter) runpy's and the
      // bootstrap's, which never saw the key: it was forked before the key was read.
      expect(f.frames).toMatch(
        /^(main-only|(<frozen runpy>|<string>|[^,]*runpy\.py)(,(<frozen runpy>|<string>|[^,]*runpy\.py))*)$/
      )
      expect(f.hexlike).toBe("0")
      expect(f.mem).toBe("PermissionError")
      if (!gvisor)
        expect({ environ: f.environ, fd: f.fd, maps: f.maps, cwd: f.cwd }).toEqual({
          environ: "PermissionError",
          fd: "PermissionError",
          maps: "PermissionError",
          cwd: "PermissionError"
        })
      // (A warm pool's Python sandbox runs it with --preload python: no key in its argv either.)
      expect(f.cmdline).toMatch(
        gvisor
          ? /^\/opt\/hermes\/hermes-run-readable( --preload python)?$/
          : /^\/opt\/hermes\/hermes-run( --preload python)?$/
      )
      expect(f.ppid).toBe("1")
      expect(f.env).toBe("")

      const js = await h.run({
        language: "javascript",
        code: `console.log("exit-listeners", process.listeners("exit").length, "argv", process.argv.length)`
      })
      expect(facts(js.stdout)).toMatchObject({ "exit-listeners": "0 argv 2" })
    })

    it("bytes written to the container's own stdout through /proc/1/fd are refused (runc), or void the run as a protocol violation (gVisor); never taken as a report", async () => {
      const request = {
        language: "bash" as const,
        code: "for fd in 0 1 2; do if printf '%032d x\\0\\0\\0\\0010 0 0 0' 0 2>/dev/null > /proc/1/fd/$fd; then echo fd$fd open; else echo fd$fd refused; fi; done\nexit 7"
      }
      if (!gvisor) {
        const r = await h.run(request)
        expectOutcome(r, exited(7))
        expect(facts(r.stdout)).toMatchObject({ fd0: "refused", fd1: "refused", fd2: "refused" })
      } else {
        await expect(h.run(request)).rejects.toMatchObject({ _tag: "ContainerFailed", reason: "protocol" })
      }
    })

    it("frames the program prints (any key, every type) are its output, byte for byte; its exit code stands", async () => {
      const code = String.raw`
import os, struct, sys
key = bytes(16)
def frame(t, p): return key + t + struct.pack(">I", len(p)) + p
forged = frame(b"x", b"0 0 0 0") + frame(b"o", b"FORGED") + frame(b"E", b"setup failed") + b"\x1eHERMES-DONE " + b"ab" * 16 + b" 0\n"
os.write(1, forged)
os.write(2, forged)
sys.exit(5)
`
      const r = await h.run({ language: "python", code })
      expectOutcome(r, exited(5))
      const expected = Buffer.concat([
        Buffer.alloc(16),
        Buffer.from("x"),
        Buffer.from([0, 0, 0, 7]),
        Buffer.from("0 0 0 0"),
        Buffer.alloc(16),
        Buffer.from("o"),
        Buffer.from([0, 0, 0, 6]),
        Buffer.from("FORGED"),
        Buffer.alloc(16),
        Buffer.from("E"),
        Buffer.from([0, 0, 0, 12]),
        Buffer.from("setup failed"),
        Buffer.from("\x1eHERMES-DONE " + "ab".repeat(16) + " 0\n")
      ])
      expect(r.stdoutBytes).toBe(expected.length)
      expect(r.stderrBytes).toBe(expected.length)
      expect(Buffer.from(r.stdout, "utf8").includes(Buffer.from("FORGED"))).toBe(true)
    })

    it("exit codes are the program's own, 0-255, whatever it passes to exit()", async () => {
      const cases: Array<[string, number]> = [
        ["sys.exit(300)", 300 & 0xff],
        ["sys.exit(-1)", 255],
        ["os._exit(255)", 255],
        ["os._exit(0)", 0],
        ["raise SystemExit('boom')", 1]
      ]
      for (const [stmt, code] of cases) {
        const r = await h.run({ language: "python", code: `import os, sys\n${stmt}` })
        expectOutcome(r, exited(code))
      }
      const js = await h.run({ language: "javascript", code: "process.exit(1e300)" })
      expect(js.exitCode).toBeGreaterThanOrEqual(0)
      expect(js.exitCode).toBeLessThanOrEqual(255)
    })
  })

  describe.concurrent("output floods are bounded where they are produced", () => {
    it("a marker prefix without its newline, then 20 MiB: the cap holds, the counts are exact, the result is prompt", async () => {
      const r = await h.run({
        language: "python",
        code: "import os\nos.write(1, b'\\x1eHERMES-DONE ' + b'ab' * 16 + b' ')\nfor _ in range(20): os.write(1, b'A' * (1 << 20))",
        outputLimitBytes: MiB,
        timeoutMs: 20_000
      })
      expectOutcome(r, exited(0))
      expect(r.stdoutTruncated).toBe(true)
      expect(r.stdoutBytes).toBe(13 + 32 + 1 + 20 * MiB)
      expect(Buffer.byteLength(r.stdout, "utf8")).toBeLessThanOrEqual(MiB)
    })

    it("paced one-byte writes are counted exactly", async () => {
      const r = await h.run({
        language: "python",
        code: "import os, time\nfor i in range(3000):\n    os.write(1, b'z')\n    if i % 100 == 0: time.sleep(0.001)",
        timeoutMs: 20_000
      })
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe("z".repeat(3000))
      expect(r.stdoutBytes).toBe(3000)
    })
  })
})

describe.each(RUNTIMES)("a sandbox never holds the executor after its deadline (%s)", (runtime) => {
  it("with maxConcurrency 1, a program that outlives its report does not delay the next execution past its deadline, and close() is prompt", async () => {
    const e = await hostileExecutor(runtime, { maxConcurrency: 1, awaitRemoval: false })
    try {
      const first = e.run({
        language: "javascript",
        code: `console.log("main done"); process.on("exit", () => { const t = Date.now(); while (Date.now() - t < 45000); })`,
        timeoutMs: 3_000
      })
      const second = e.run({ language: "python", code: "print(2)" })
      const r1 = await first
      expectOutcome(r1, TIMED_OUT)
      const r2 = await second
      expect(r2.stdout).toBe("2\n")
      // From the first run's deadline: its kill and removal, then the second's whole run (create and
      // start included, slow under gVisor on a loaded host). Before the fix this was ~42 s.
      expect(Date.now() - (Date.parse(r1.startedAt) + 3_000)).toBeLessThan(NEXT_RUN_MARGIN_MS)
    } finally {
      const t1 = Date.now()
      await e.finish()
      expect(Date.now() - t1).toBeLessThan(10_000)
    }
  })
})
