/**
 * Who owns a container, and whether it is provably gone (ProcessIdentity, over ProcessStart's
 * start time and isRunning): a zombie — killed, its parent not
 * waiting for it — is not running, though its pid answers kill(0) and its /proc entry remains.
 * Some inits reap orphans only every few seconds, so "SIGKILLed a moment ago" is often a zombie.
 */
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { describe, expect, it } from "vitest"
import { ProcessIdentity } from "@hermes-sandbox/core"
import { ProcessStart } from "@hermes-sandbox/events"

const waitUntil = async (check: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline && !check()) await new Promise((r) => setTimeout(r, 10))
  return check()
}

describe("ProcessIdentity and ProcessStart", () => {
  it("this process runs and has a start time; a pid nobody has does not run", () => {
    expect(ProcessStart.isRunning(process.pid)).toBe(true)
    expect(ProcessStart.startTimeOf(process.pid)).toMatch(/^\d+$/)
    expect(ProcessStart.isRunning(2 ** 22 + 1)).toBe(false)
    expect(ProcessStart.startTimeOf(2 ** 22 + 1)).toBeUndefined()
    expect(ProcessIdentity.isGone(ProcessIdentity.self)).toBe(false)
    expect(ProcessIdentity.isGone({ ...ProcessIdentity.self, pid: 2 ** 22 + 1 })).toBe(true)
    // Another host's process is never proven gone by a pid (its lease decides).
    expect(ProcessIdentity.isGone({ host: `${ProcessIdentity.self.host}-elsewhere`, pid: 2 ** 22 + 1 })).toBe(false)
  })

  it("pid 1 (another user's process: kill(0) answers EPERM when not root) runs", () => {
    expect(ProcessStart.isRunning(1)).toBe(true)
  })

  it("a zombie does not run, though kill(0) still reaches it and its start time is still readable", async () => {
    // perl forks a child that exits at once and never waits for it. (Not `sh -c "sleep 0 & exec
    // sleep 30"`: a shell may reap its background job before the exec when the job ends first.)
    const parent = spawn("perl", ["-e", '$| = 1; my $p = fork(); exit 0 if $p == 0; print "$p\\n"; sleep 30'], {
      stdio: ["ignore", "pipe", "ignore"]
    })
    try {
      const line = await new Promise<string>((resolve) =>
        createInterface({ input: parent.stdout! }).once("line", resolve)
      )
      const zombie = Number(line)
      expect(zombie).toBeGreaterThan(0)
      const started = ProcessStart.startTimeOf(zombie)
      expect(await waitUntil(() => !ProcessStart.isRunning(zombie), 5_000)).toBe(true)
      // Still there as a zombie: the pid answers and /proc still has it.
      expect(() => process.kill(zombie, 0)).not.toThrow()
      expect(ProcessStart.startTimeOf(zombie)).toMatch(/^\d+$/)
      expect(ProcessStart.isRunning(parent.pid!)).toBe(true)
      // An owner that is a zombie is gone: the sweep need not wait for init to reap it.
      expect(ProcessIdentity.isGone({ host: ProcessIdentity.self.host, pid: zombie, started })).toBe(true)
      expect(
        ProcessIdentity.isGone({
          host: ProcessIdentity.self.host,
          pid: parent.pid!,
          started: ProcessStart.startTimeOf(parent.pid!)
        })
      ).toBe(false)
    } finally {
      parent.kill("SIGKILL")
    }
  })
})
