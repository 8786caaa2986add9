/**
 * 1,000 executions at concurrency 16 on the real engine, journalled to SQLite: zero failures,
 * zero leaks, exactly 1,000 closed lifecycles with no violation. Its own file so it runs in
 * parallel with the other suites (a few minutes on 2 cores: ~0.3 s of engine and kernel CPU per
 * container, a third of the whole suite's CPU).
 *
 * Both paths at once: the executor keeps a warm pool of 1, which 16 executions at a time drain,
 * so most executions create their own sandbox (the cold path) and some claim a pooled one; the
 * test requires both by the hundred and the dozen, and every pool stream closed too. (It ran twice,
 * without a pool and with one; the run with the pool took the cold path for ~925 of its 1,000, so
 * the run without covered nothing more, for 1,000 containers' worth of CPU.)
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { summarize, project } from "@hermes-sandbox/events/Projection"
import { testExecutor } from "../support/executor.js"
import { containersOf, journalProblems, readJournal, removeContainersOf, tempDir } from "./support.js"

const N = 1_000
const CONCURRENCY = 16
const WARM_POOL = 1

describe(`${N} executions at concurrency ${CONCURRENCY}`, () => {
  it("no failure, no leak, every lifecycle closed", async () => {
    const journal = join(tempDir("thousand"), "journal.sqlite")
    const executor = await testExecutor({
      journal: { path: journal },
      maxConcurrency: CONCURRENCY,
      maxQueue: N,
      timeoutMs: 120_000,
      warmPool: { size: WARM_POOL }
    })
    let peak = 0
    const sampler = setInterval(() => {
      executor.stats().then(
        (s) => (peak = Math.max(peak, s.inFlight)),
        () => {}
      )
    }, 50)
    const t0 = performance.now()
    let settled: Array<PromiseSettledResult<Awaited<ReturnType<typeof executor.executeCode>>>>
    try {
      settled = await Promise.allSettled(
        Array.from({ length: N }, (_, i) => executor.executeCode({ language: "python", code: `print(${i} * 2)` }))
      )
    } finally {
      clearInterval(sampler)
    }
    const wallMs = performance.now() - t0
    await executor.close()
    const closeMs = performance.now() - t0 - wallMs

    const failures = settled.flatMap((s, i) =>
      s.status === "rejected" ? [`#${i}: ${(s.reason as { _tag?: string })._tag} ${(s.reason as Error).message}`] : []
    )
    expect(failures.slice(0, 5), `${failures.length} failures`).toEqual([])
    settled.forEach((s, i) => {
      if (s.status !== "fulfilled") return
      expect(s.value.exitCode).toBe(0)
      expect(s.value.stdout).toBe(`${i * 2}\n`)
    })
    expect(new Set(settled.map((s) => (s.status === "fulfilled" ? s.value.containerName : ""))).size).toBe(N)
    expect(await containersOf([executor.executorId])).toEqual([])
    expect(peak).toBeLessThanOrEqual(CONCURRENCY)

    const events = await readJournal(journal)
    const states = project(events)
    const summary = summarize(states)
    expect(journalProblems(events)).toEqual([])
    expect(summary.total).toBe(N)
    expect(summary.byOutcome).toEqual({ exited: N, timedOut: 0, interrupted: 0, failed: 0, open: 0 })
    expect(summary.openLifecycles).toBe(0)
    expect(summary.containersAlive).toBe(0)
    // One destroy per execution (a claimed pooled container is destroyed in the claiming execution's
    // stream); pool containers never claimed are destroyed in their own streams, closed above.
    const executionStreams = new Set(events.filter((e) => e.type === "ExecutionRequested").map((e) => e.streamId))
    expect(executionStreams.size).toBe(N)
    expect(events.filter((e) => e.type === "ContainerDestroyed" && executionStreams.has(e.streamId))).toHaveLength(N)
    const claimed = events.filter((e) => e.type === "ContainerClaimed" && executionStreams.has(e.streamId)).length
    const cold = events.filter((e) => e.type === "ContainerCreated" && executionStreams.has(e.streamId)).length
    expect(claimed + cold, "every execution claimed a pooled sandbox or created its own").toBe(N)
    expect(claimed, `with a warm pool of ${WARM_POOL}, executions claim pooled sandboxes`).toBeGreaterThanOrEqual(10)
    expect(cold, "with 16 at a time draining the pool, most executions take the cold path").toBeGreaterThanOrEqual(500)
    console.log(
      `${N} executions at concurrency ${CONCURRENCY}: wall ${(wallMs / 1000).toFixed(1)} s, ` +
        `${(N / (wallMs / 1000)).toFixed(1)} executions/s, close ${Math.round(closeMs)} ms, peak in flight ${peak}, ` +
        `start-to-exit p50 ${summary.durationMs.p50} ms / p95 ${summary.durationMs.p95} ms, ${events.length} events` +
        `, ${cold} created their own sandbox, ${claimed} claimed a pooled one (pool of ${WARM_POOL})`
    )
    await removeContainersOf([executor.executorId])
  }, 900_000)
})
