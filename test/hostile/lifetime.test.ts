/**
 * Hostile programs against the sandbox's lifetime: they try to run past the deadline,
 * ignore polite signals, outlive the main program, flood the process table with zombies,
 * or attack the sandbox's init (the supervisor, hermes-run, PID 1). The host-side deadline is the
 * authority (SIGKILL of the whole container, no grace period), and after each result the
 * container and every process of it are gone.
 */
import { randomUUID } from "node:crypto"
import { describe, expect, it } from "vitest"
import { containerExists } from "../support/docker.js"
import {
  exited,
  expectOutcome,
  facts,
  useHostileExecutor,
  hostProcessesMatching,
  RUNTIMES,
  TIMED_OUT
} from "./support.js"

/** How late the deadline's kill may land: the kill and the exit report, on a loaded 2-core machine. */
const KILL_MARGIN_MS = 5_000

describe.each(RUNTIMES)("the sandbox's lifetime is the SDK's to end (%s)", (runtime) => {
  const gvisor = runtime === "runsc"
  const h = useHostileExecutor(runtime)

  describe.concurrent("deadline", () => {
    it("a busy loop past the timeout is killed at the deadline: timedOut, 137, not OOM", async () => {
      const r = await h.run({ language: "python", code: "while True:\n    pass", timeoutMs: 2_000 })
      expectOutcome(r, TIMED_OUT)
      expect(r.durationMs).toBeGreaterThanOrEqual(2_000)
      expect(r.durationMs).toBeLessThan(2_000 + KILL_MARGIN_MS)
      expect(await containerExists(r.containerName)).toBe(false)
    })

    it("a program ignoring SIGTERM, SIGINT and SIGHUP is still killed at the deadline (SIGKILL, no grace period)", async () => {
      const r = await h.run({
        language: "bash",
        code: "trap '' TERM INT HUP\necho armed\nwhile :; do :; done",
        timeoutMs: 2_000
      })
      expectOutcome(r, TIMED_OUT)
      expect(r.stdout).toBe("armed\n")
      expect(r.durationMs).toBeLessThan(2_000 + KILL_MARGIN_MS)
    })

    it("a program that stops itself (SIGSTOP) is still ended at the deadline", async () => {
      const r = await h.run({
        language: "python",
        code: "import os, signal\nprint('stopping', flush=True)\nos.kill(os.getpid(), signal.SIGSTOP)",
        timeoutMs: 2_000
      })
      expectOutcome(r, TIMED_OUT)
      expect(r.stdout).toBe("stopping\n")
    })
  })

  describe.concurrent("processes that try to outlive the program", () => {
    it("a double-forked, setsid daemon does not outlive the program: the result comes at once and nothing is left", async () => {
      const marker = `hermes-hostile-daemon-${randomUUID()}`
      const r = await h.run({
        language: "python",
        code: String.raw`
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("bash", ["bash", "-c", "exec -a ${marker} sleep 1000"])
    os._exit(0)
time.sleep(0.3)
print("parent", "done")
`
      })
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe("parent done\n")
      expect(r.durationMs).toBeLessThan(5_000)
      expect(await containerExists(r.containerName)).toBe(false)
      // Not on the host either (under runc sandbox processes are host processes; under gVisor
      // the Sentry is, and finish() checks no process refers to the container any more).
      expect(hostProcessesMatching(marker)).toEqual([])
    })

    it("zombie storm: orphans re-parented to the init are reaped, so they never exhaust the pids limit", async () => {
      // More orphans than the pids limit (256) under runc; gVisor forks ~30/s here, so fewer.
      const orphans = gvisor ? 120 : 600
      const r = await h.run({
        language: "python",
        code: String.raw`
import os, time
created = 0
for _ in range(${orphans}):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os._exit(0)  # the grandchild exits at once: an orphan zombie for PID 1 to reap
        os._exit(0)
    os.waitpid(pid, 0)
    created += 1
time.sleep(0.5)
zombies = 0
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[0] == "Z":
                zombies += 1
        except OSError:
            pass
print("orphans", created)
print("zombies", zombies)
print("init", open("/proc/1/cmdline").read().split("\0")[0])
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      expect(f.orphans).toBe(String(orphans))
      expect(Number(f.zombies)).toBeLessThanOrEqual(2)
      expect(f.init).toBe(gvisor ? "/opt/hermes/hermes-run-readable" : "/opt/hermes/hermes-run")
    })
  })

  describe.concurrent("signals to the sandbox's init (PID 1)", () => {
    it("kill -9 1 and kill -STOP 1: the init survives (runc); under gVisor the init dies and the sandbox ends with 137", async () => {
      const r = await h.run({
        language: "bash",
        code: "kill -9 1; echo kill9 $?\nkill -STOP 1; echo stop $?\nsleep 0.3\necho alive\necho init $(cut -d' ' -f3 /proc/1/stat)"
      })
      if (!gvisor) {
        // The kernel ignores SIGKILL/SIGSTOP sent to a PID namespace's init from inside it.
        expectOutcome(r, exited(0))
        // Not stopped ("T"): sleeping, or running while it relays this very output.
        expect(facts(r.stdout)).toMatchObject({
          kill9: "0",
          stop: "0",
          alive: "",
          init: expect.stringMatching(/^[SR]$/)
        })
      } else {
        // gVisor delivers the SIGKILL to its init: the whole sandbox ends, which the SDK reports
        // as a 137 that is neither a timeout nor an OOM kill.
        expectOutcome(r, exited(137))
        expect(r.stdout).not.toContain("alive")
      }
    })

    it("kill -TERM 1: the supervisor forwards it to the program, which is the one that dies (143)", async () => {
      for (const language of ["bash", "python"] as const) {
        const code =
          language === "bash"
            ? "echo before\nkill -TERM 1\nsleep 5\necho after"
            : "import os, time\nprint('before', flush=True)\nos.kill(1, 15)\ntime.sleep(5)\nprint('after')"
        const r = await h.run({ language, code })
        expectOutcome(r, exited(143)) // 128 + SIGTERM
        expect(r.stdout).toBe("before\n")
        expect(r.durationMs).toBeLessThan(5_000)
      }
    })
  })
})
