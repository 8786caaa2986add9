/**
 * Hostile cases that run both on the local engine (report.test.ts) and over remote engines
 * (test/remote/core.remote.test.ts): one body each, so a remote engine is held to exactly the
 * local socket's assertions.
 */
import { expect } from "vitest"
import { exited, expectOutcome, type HostileExecutor, TIMED_OUT } from "./support.js"

/** SECURITY.md: a sandbox is gone by its deadline + 5 s (kill, exit report, removal). */
export const GONE_MARGIN_MS = 5_000

/**
 * A JavaScript exit handler that spins for 60 s is killed at the 3 s deadline, and its sandbox is
 * gone by deadline + margin (awaitRemoval: gone when the result arrives; measured from the deadline).
 */
export const spinningExitHandler = async (h: HostileExecutor, exists: (containerName: string) => Promise<boolean>) => {
  const r = await h.run({
    language: "javascript",
    code: `console.log("done"); process.on("exit", () => { const t = Date.now(); while (Date.now() - t < 60000); })`,
    timeoutMs: 3_000
  })
  expectOutcome(r, TIMED_OUT)
  expect(r.stdout).toBe("done\n")
  expect(Date.now() - (Date.parse(r.startedAt) + 3_000)).toBeLessThan(GONE_MARGIN_MS)
  expect(await exists(r.containerName)).toBe(false)
}

/** A forked Python child reaching the end of the script does not end the run: the parent's output and exit code 3 are the result. */
export const forkedChildDoesNotEndRun = async (h: HostileExecutor) => {
  const r = await h.run({
    language: "python",
    code: "import os, sys, time\npid = os.fork()\nif pid == 0:\n    print('child: done quickly', flush=True)\nelse:\n    time.sleep(1.5)\n    print('parent: done', flush=True)\n    sys.exit(3)",
    timeoutMs: 10_000
  })
  expectOutcome(r, exited(3))
  expect(r.stdout).toBe("child: done quickly\nparent: done\n")
  expect(r.durationMs).toBeGreaterThanOrEqual(1_500)
}
