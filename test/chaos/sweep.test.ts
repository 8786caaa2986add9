/**
 * When even the watchdog is gone (SIGKILLed with its owner, or never started), the next
 * executor's startup sweep is the last line: it removes containers of dead owners, in any
 * state, and closes their lifecycles in the journal (ExecutionInterrupted + ContainerDestroyed
 * "orphan-reaped"), so a replay shows every lifecycle closed.
 */
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Sweep } from "@hermes-sandbox/core"
import { createExecutor, DockerExecutor } from "@hermes-sandbox/docker"
import { poolOn } from "../support/executor.js"
import { SqliteJournal } from "@hermes-sandbox/events"
import {
  containerExists,
  containersOf,
  containerState,
  journalProblems,
  Leftovers,
  readJournal,
  removeContainersOf,
  sleep,
  spawnVictim,
  stillRunning,
  tempDir,
  track,
  typesOf,
  type Victim,
  waitFor
} from "./support.js"

const executorIds: Array<string> = []
const leftovers = new Leftovers()
afterAll(async () => {
  leftovers.killAll()
  await removeContainersOf(executorIds)
})

/** A victim with `executions` long executions started (or created, for stall-start), ready to be killed. */
const prepare = async (victim: Victim, executions: number, until: "started" | "created") => {
  const ready = await victim.next("ready")
  executorIds.push(ready.executorId)
  leftovers.add(ready.pid, ready.watchdogPid)
  expect(await waitFor(() => victim.messages.filter((m) => m.type === until).length >= executions, 60_000)).toBe(true)
  const created = victim.messages.filter((m) => m.type === "created") as Array<{
    executionId: string
    containerName: string
    containerId: string
    claimed?: boolean
  }>
  return { ready, created }
}

const killBoth = async (victim: Victim, watchdogPid: number | null) => {
  const watchdog = track(watchdogPid)
  expect(watchdog, "the watchdog is running").toBeDefined()
  process.kill(watchdog!.pid, "SIGKILL")
  victim.child.kill("SIGKILL")
  await victim.exited
  expect(await waitFor(() => !stillRunning(watchdog!), 5_000)).toBe(true)
}

const sweepWith = (journal: string) =>
  Effect.runPromise(
    Sweep.sweep({ executorId: `chaos-sweeper-${process.pid}` }).pipe(
      Effect.provide(DockerExecutor.runtimeLayer()),
      Effect.provide(SqliteJournal.layer({ path: journal }))
    )
  )

describe("crash recovery by the startup sweep (real engine, SQLite journal)", () => {
  it("SIGKILL of the owner AND its watchdog mid-execution: the next executor's startup sweep removes the containers and closes the lifecycles", async () => {
    const journal = join(tempDir("sweep"), "journal.sqlite")
    const victim = spawnVictim({ journal, executions: 3 })
    const { created, ready } = await prepare(victim, 3, "started")
    await killBoth(victim, ready.watchdogPid)
    // Nobody of the owner's is left to clean up: the containers keep running. (Another executor
    // starting on this engine meanwhile, from another suite, may sweep them first: that is the
    // product working, so it is only reported.)
    await sleep(1_000)
    const running = (await Promise.all(created.map((c) => containerState(c.containerId)))).filter(
      (s) => s === "running"
    ).length
    if (running < created.length)
      console.warn(`${created.length - running} orphan(s) were swept by another executor before ours started`)

    const t0 = performance.now()
    const next = await createExecutor({ journal: { path: journal } })
    const startupMs = performance.now() - t0
    executorIds.push(next.executorId)
    try {
      for (const c of created) expect(await containerExists(c.containerId)).toBe(false)
      expect(await containersOf([ready.executorId])).toEqual([])
      // And the new executor works.
      expect((await next.executeCode({ language: "python", code: "print('after')" })).stdout).toBe("after\n")
    } finally {
      await next.close()
    }
    const events = await readJournal(journal)
    for (const c of created) {
      expect(typesOf(events, c.executionId)).toEqual(
        c.claimed === true
          ? // A warm sandbox (the engine-pool project): claimed already running.
            ["ExecutionRequested", "ContainerClaimed", "ExecutionInterrupted", "ContainerDestroyed"]
          : ["ExecutionRequested", "ContainerCreated", "ContainerStarted", "ExecutionInterrupted", "ContainerDestroyed"]
      )
      const destroyed = events.find((e) => e.streamId === c.executionId && e.type === "ContainerDestroyed")
      expect(destroyed?.data).toMatchObject({ reason: "orphan-reaped", containerName: c.containerName })
    }
    expect(journalProblems(events)).toEqual([])
    // With a warm pool (the engine-pool project) the victim waits for it: one execution was a claim.
    expect(created.filter((c) => c.claimed === true)).toHaveLength(poolOn ? 1 : 0)
    console.log(`executor startup including the sweep of 3 orphans: ${Math.round(startupMs)} ms`)
  }, 120_000)

  it("a crash between create and start (container left in 'created'): the sweep removes it and closes the lifecycle", async () => {
    const journal = join(tempDir("created"), "journal.sqlite")
    const victim = spawnVictim({ mode: "stall-start", journal, executions: 2 })
    const { created, ready } = await prepare(victim, 2, "created")
    for (const c of created) expect(await containerState(c.containerId)).toBe("created")
    await killBoth(victim, ready.watchdogPid)

    const report = await sweepWith(journal)
    for (const c of created) {
      // Removed by this sweep (unless another suite's executor swept it a moment earlier), and closed by it.
      if (!report.removed.includes(c.containerName))
        console.warn(`${c.containerName} was swept by another executor first`)
      expect(report.closed).toContain(c.executionId)
      expect(await containerExists(c.containerId)).toBe(false)
    }
    expect(report.failed).toEqual([])
    console.log(
      `sweep: removed ${report.removed.length}, closed ${report.closed.length} lifecycles in ${report.durationMs} ms`
    )
    const events = await readJournal(journal)
    for (const c of created) {
      expect(typesOf(events, c.executionId)).toEqual([
        "ExecutionRequested",
        "ContainerCreated",
        "ExecutionInterrupted",
        "ContainerDestroyed"
      ])
    }
    expect(journalProblems(events)).toEqual([])
    // A second sweep finds nothing more to do.
    const again = await sweepWith(journal)
    expect(again.closed.filter((id) => created.some((c) => c.executionId === id))).toEqual([])
  }, 120_000)

  it("a crash between create and start with the watchdog alive: the watchdog removes the created container; the next sweep closes the journal", async () => {
    const journal = join(tempDir("created-wd"), "journal.sqlite")
    const victim = spawnVictim({ mode: "stall-start", journal })
    const { created, ready } = await prepare(victim, 1, "created")
    const c = created[0]!
    expect(await containerState(c.containerId)).toBe("created")
    const t0 = performance.now()
    victim.child.kill("SIGKILL")
    expect(await waitFor(async () => !(await containerExists(c.containerId)), 15_000, 20)).toBe(true)
    console.log(`watchdog removed a 'created' container ${Math.round(performance.now() - t0)} ms after the SIGKILL`)
    // The watchdog does not write the journal: the lifecycle stays open until a sweep.
    expect(journalProblems(await readJournal(journal))).not.toEqual([])
    const report = await sweepWith(journal)
    expect(report.closed).toContain(c.executionId)
    const events = await readJournal(journal)
    expect(typesOf(events, c.executionId)).toEqual([
      "ExecutionRequested",
      "ContainerCreated",
      "ExecutionInterrupted",
      "ContainerDestroyed"
    ])
    expect(journalProblems(events)).toEqual([])
    expect(ready.watchdogPid).toBeGreaterThan(0)
  }, 120_000)

  it("the watchdog and a sweep racing for the same orphans, and two sweeps racing for the same journal: every container removed, every lifecycle closed exactly once", async () => {
    const journal = join(tempDir("race"), "journal.sqlite")
    const victim = spawnVictim({ journal, executions: 4 })
    const { created } = await prepare(victim, 4, "started")
    // Only the owner dies: its watchdog starts removing while two executors start and sweep.
    victim.child.kill("SIGKILL")
    await victim.exited
    const [a, b] = await Promise.all([
      createExecutor({ journal: { path: journal } }),
      createExecutor({ journal: { path: journal } })
    ])
    executorIds.push(a.executorId, b.executorId)
    await Promise.all([a.close(), b.close()])
    for (const c of created)
      expect(await waitFor(async () => !(await containerExists(c.containerId)), 15_000)).toBe(true)
    // Whoever removed them, the journal closes each lifecycle once (a sweep now closes what the race left open).
    await sweepWith(journal)
    const events = await readJournal(journal)
    for (const c of created) {
      const types = typesOf(events, c.executionId)
      expect(types.filter((t) => t === "ExecutionInterrupted")).toHaveLength(1)
      expect(types.filter((t) => t === "ContainerDestroyed")).toHaveLength(1)
    }
    expect(journalProblems(events)).toEqual([])
  }, 120_000)
})
