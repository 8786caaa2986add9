/**
 * The session pool on the real engine (runc and runsc): `createSessions({ pool })` opens sessions
 * ahead with their Python kernel started; an `open` of the pool's options claims one and its first
 * cell finds the kernel up; other options open cold; the pool refills; the close leaves nothing.
 * The fake-runtime cases (recycling, refusal of bad options) are packages/core/test/SessionPool.test.ts.
 */
import { afterAll, describe, expect, it } from "vitest"
import { createSessions } from "@hermes-sandbox/docker"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { RUNTIMES } from "./hostile/support.js"
import { docker, waitFor } from "./support/docker.js"

const poolSandboxes = async (executorId: string) =>
  (
    await docker.listContainers({
      all: true,
      filters: { label: [`org.hermes-sandbox.executor=${executorId}`] }
    })
  ).map((c) => c.Names[0]!)

const removeAll = async (executorId: string) => {
  for (const name of await poolSandboxes(executorId))
    await docker
      .getContainer(name)
      .remove({ force: true })
      .catch(() => {})
}

describe.each(RUNTIMES)("a pool of sessions with their kernels started (%s)", (runtime) => {
  const executorId = `session-pool-test-${runtime}-${process.pid}`
  afterAll(() => removeAll(executorId))

  it("claims a ready session whose first cell finds the kernel up; other options open cold; the pool refills; close removes all", async () => {
    const sessions = await createSessions({
      runtime,
      executorId,
      pool: { size: 1, session: { image: "hermes-sandbox/python:latest" } }
    })
    const events: Array<EventEnvelope> = []
    const sub = sessions.events$.subscribe((e) => events.push(e))
    try {
      expect(await waitFor(async () => (await sessions.poolReady()) === 1, 60_000)).toBe(true)
      const pooledName = (await poolSandboxes(executorId))[0]
      await using s = await sessions.open({ image: "hermes-sandbox/python:latest" })
      expect(s.containerName).toBe(pooledName?.slice(1))
      const first = await s.runCell({ code: "import os\nopen('made-by-cell.txt', 'w').write('x')\n1 + 1" })
      expect(first).toMatchObject({ status: "ok", executionCount: 1, stateLost: false })
      expect(first.result?.data["text/plain"]).toBe("2")
      expect(first.kernel.started).toBe(false)
      // The session's files are the cell's: the pooled kernel started in the session's /workspace.
      expect((await s.readFile("made-by-cell.txt")).content).toEqual(new TextEncoder().encode("x"))
      const mine = events.filter((e) => e.streamId === s.sessionId).map((e) => e.type)
      expect(mine.slice(0, 1)).toEqual(["SessionOpened"])
      expect(mine.indexOf("KernelStarted")).toBeLessThan(mine.indexOf("SessionClaimed"))
      expect(mine.indexOf("SessionClaimed")).toBeLessThan(mine.indexOf("CellExecuted"))

      // Other options: a cold open, its own new sandbox; the pool's next session stays for a match.
      await using cold = await sessions.open({ image: "hermes-sandbox/python:latest", env: { OTHER: "yes" } })
      expect(events.some((e) => e.streamId === cold.sessionId && e.type === "SessionClaimed")).toBe(false)
      expect(await waitFor(async () => (await sessions.poolReady()) === 1, 60_000)).toBe(true)
    } finally {
      sub.unsubscribe()
      await sessions.close()
    }
    expect(await poolSandboxes(executorId)).toEqual([])
  }, 180_000)
})
