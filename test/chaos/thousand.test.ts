/**
 * 1,000 executions at concurrency 16 on the real engine, journalled to SQLite: zero failures,
 * zero leaks, exactly 1,000 closed lifecycles with no violation. Its own file so it runs in
 * parallel with the other suites (a few minutes on 2 cores: ~0.2 s of engine CPU per container).
 * With HERMES_SANDBOX_TEST_WARM_POOL=N (the heavy-pool project) the executor keeps a warm pool: the same
 * invariants hold, executions claim pooled sandboxes, and every pool stream is closed too.
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { summarize, project } from "@hermes-sandbox/events"
import { poolOn, testExecutor, warmPoolSize } from "../support/executor.js"
import { containersOf, journalProblems, readJournal, removeContainersOf, tempDir } from "./support.js"

const N = 1_000
const CONCURRENCY = 16

describe(`${N} executions at concurrency ${CONCURRENCY}`, () => {
  it("no failure, no leak, every lifecycle closed", async () => {
    const journal = join(tempDir("thousand"), "journal.sqlite")
    const executor = await testExecutor({ journal: { path: journal }, maxConcurrency: CONCURRENCY, maxQueue: N, timeoutMs: 120_000 })
    let peak = 0
    const sampler = setInterval(() => {
      executor.stats().then((s) => (peak = Math.max(peak, s.inFlight)), () => {})
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

    const failures = settled.flatMap((s, i) => (s.status === "rejected" ? [`#${i}: ${(s.reason as { _tag?: string })._tag} ${(s.reason as Error).message}`] : []))
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
    const claimed = events.filter((e) => e.type === "ContainerClaimed").length
    if (poolOn) expect(claimed, `with a warm pool of ${warmPoolSize}, some executions claim a pooled sandbox`).toBeGreaterThan(0)
    else expect(claimed).toBe(0)
    console.log(
      `${N} executions at concurrency ${CONCURRENCY}: wall ${(wallMs / 1000).toFixed(1)} s, ` +
        `${(N / (wallMs / 1000)).toFixed(1)} executions/s, close ${Math.round(closeMs)} ms, peak in flight ${peak}, ` +
        `start-to-exit p50 ${summary.durationMs.p50} ms / p95 ${summary.durationMs.p95} ms, ${events.length} events` +
        (poolOn ? `, ${claimed} claimed a pooled sandbox (pool of ${warmPoolSize})` : "")
    )
    await removeContainersOf([executor.executorId])
  }, 900_000)
})
