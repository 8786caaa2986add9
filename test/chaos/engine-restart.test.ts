/**
 * The engine dies, restarts or freezes while executions run. On a PRIVATE dockerd (own data
 * root, exec root, socket; no bridge, no iptables), never the shared one. Each execution must
 * end with a typed infrastructure error within a bound (never a hang, never a fake success:
 * the programs sleep for 10 minutes, so any result is fake), and once the engine answers again
 * its container is removed and its lifecycle closed. With HERMES_SANDBOX_TEST_WARM_POOL=N
 * (the heavy-pool project) each executor also keeps a warm pool, which must ride out the same faults.
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import type { ExecutionResult } from "@hermes-sandbox/core"
import { type SandboxExecutor, Watchdog } from "@hermes-sandbox/docker"
import { poolOn, warmPoolSize } from "../support/executor.js"
import { executionMilestones } from "./executionMilestones.js"
import { bounded, useEngine } from "./engineSuite.js"
import { PrivateEngine } from "./privateEngine.js"
import { journalProblems, readJournal, sleep, stillRunning, tempDir, track, typesOf, waitFor } from "./support.js"

const LONG = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"
const INFRA = ["DockerUnavailable", "ContainerFailed"]

type Outcome =
  | { readonly ok: true; readonly result: ExecutionResult; readonly ms: number }
  | { readonly ok: false; readonly tag: string; readonly message: string; readonly ms: number }

const settle = (p: Promise<ExecutionResult>, t0: () => number): Promise<Outcome> =>
  p.then(
    (result) => ({ ok: true as const, result, ms: Date.now() - t0() }),
    (e: { _tag?: string; message?: string }) => ({
      ok: false as const,
      tag: e._tag ?? "untyped",
      message: e.message ?? String(e),
      ms: Date.now() - t0()
    })
  )

describe("engine restart / crash / freeze during executions (private dockerd)", () => {
  const engine = new PrivateEngine()
  const { open: openExecutor } = useEngine(engine)

  const open = (journal: string, extra: { callTimeoutMs?: number } = {}) =>
    openExecutor({
      journal: { path: journal },
      timeoutMs: 120_000,
      maxConcurrency: 8,
      // Only python's image is on the private engine.
      ...(poolOn ? { warmPool: { size: warmPoolSize, languages: ["python" as const] } } : {}),
      ...extra
    })

  /** Counts executions whose sandbox runs: started, or a warm one claimed. */
  const countRunning = (executor: SandboxExecutor) => {
    const counter = { started: 0, unsubscribe: () => {} }
    const sub = executor.events$.subscribe(executionMilestones({ started: () => counter.started++ }))
    counter.unsubscribe = () => sub.unsubscribe()
    return counter
  }

  /** Start `n` long executions and wait until all are running. */
  const startLong = async (executor: SandboxExecutor, n: number, t0: () => number) => {
    const running = countRunning(executor)
    const outcomes = Array.from({ length: n }, () =>
      settle(executor.executeCode({ language: "python", code: LONG }), t0)
    )
    expect(await waitFor(() => running.started >= n, 60_000)).toBe(true)
    running.unsubscribe()
    return outcomes
  }

  const expectCleanAfterwards = async (executor: SandboxExecutor, journal: string) => {
    // Removed by the executor's removal retry once the engine answers again (a warm pool's
    // replacements, running and waiting, are all that may remain while the executor is open).
    const onlyWarm = (list: Array<{ State: string; Labels: Record<string, string> }>) =>
      list.every((c) => poolOn && c.Labels["org.hermes-sandbox.pool"] === "true" && c.State === "running")
    const clean = await waitFor(async () => onlyWarm(await engine.client.listContainers({ all: true })), 60_000, 250)
    if (!clean) {
      // What each leftover went through, by the journal (it names the container in its events' data).
      const events = await readJournal(journal)
      const left = (await engine.client.listContainers({ all: true })).map((c) => {
        const name = c.Names[0]?.replace(/^\//, "") ?? c.Id
        const history = events
          .filter((e) => JSON.stringify(e.data).includes(name))
          .map(
            (e) =>
              `${e.type}${e.type === "ContainerDestroyed" || e.type === "ExecutionFailed" ? `(${JSON.stringify(e.data).slice(0, 160)})` : ""}`
          )
        return `${name} ${c.State} ${c.Status}${c.Labels["org.hermes-sandbox.pool"] === "true" ? " (pool)" : ""}: ${history.join(" > ") || "not in the journal"}`
      })
      expect.fail(`left on the engine after 60 s: ${left.join(" | ")}`)
    }
    // The restarted engine serves new executions.
    const r = await executor.executeCode({ language: "python", code: "print('alive')" })
    expect(r.stdout).toBe("alive\n")
    const watchdog = track(Watchdog.find(executor.executorId)?.pid)
    expect(watchdog, "the executor's watchdog is running").toBeDefined()
    await executor.close()
    expect(await engine.client.listContainers({ all: true })).toEqual([])
    // Told "close", the watchdog makes one pass and exits.
    expect(
      await waitFor(() => !stillRunning(watchdog!), 5_000),
      `watchdog ${watchdog!.pid} still running after a clean close`
    ).toBe(true)
    const events = await readJournal(journal)
    expect(journalProblems(events)).toEqual([])
    return events
  }

  it("kill -9 of dockerd mid-execution, back after 3 s: typed errors within seconds, containers removed, lifecycles closed", async () => {
    const journal = join(tempDir("engine-kill"), "journal.sqlite")
    const executor = await open(journal)
    let t0 = Date.now()
    const outcomes = await startLong(executor, 3, () => t0)
    t0 = Date.now()
    await engine.stop("SIGKILL")
    await sleep(3_000)
    await engine.start()
    const settled = await bounded(Promise.all(outcomes), 90_000, "executions")
    console.log(
      `after kill -9 of dockerd: ${settled.map((o) => (o.ok ? "RESULT" : `${o.tag} after ${o.ms} ms`)).join(", ")}`
    )
    for (const o of settled) {
      expect(o.ok, o.ok ? `fake success: ${JSON.stringify(o.result)}` : "").toBe(false)
      if (!o.ok) expect(INFRA).toContain(o.tag)
      expect(o.ms).toBeLessThan(65_000)
    }
    const events = await expectCleanAfterwards(executor, journal)
    const failed = events.filter((e) => e.type === "ExecutionFailed")
    expect(failed.length).toBeGreaterThanOrEqual(3)
    for (const f of failed.slice(0, 3)) expect(typesOf(events, f.streamId).at(-1)).toBe("ContainerDestroyed")
  }, 240_000)

  it("a graceful restart (SIGTERM, which stops the containers, then start): the engine's kill is not mistaken for the program's exit", async () => {
    const journal = join(tempDir("engine-restart"), "journal.sqlite")
    const executor = await open(journal)
    let t0 = Date.now()
    const outcomes = await startLong(executor, 3, () => t0)
    t0 = Date.now()
    await engine.stop("SIGTERM")
    await engine.start()
    const settled = await bounded(Promise.all(outcomes), 90_000, "executions")
    console.log(
      `after a restart of dockerd: ${settled.map((o) => (o.ok ? `RESULT exit ${o.result.exitCode}` : `${o.tag} after ${o.ms} ms: ${o.message.slice(0, 120)}`)).join(" | ")}`
    )
    for (const o of settled) {
      expect(
        o.ok,
        o.ok ? `fake success: exit ${o.result.exitCode}, stdout ${JSON.stringify(o.result.stdout)}` : ""
      ).toBe(false)
      if (!o.ok) expect(INFRA).toContain(o.tag)
      expect(o.ms).toBeLessThan(65_000)
    }
    await expectCleanAfterwards(executor, journal)
  }, 240_000)

  it("kill -9 of dockerd while executions are being created and started: every execution settles, correct results or typed errors, nothing leaks", async () => {
    const journal = join(tempDir("engine-churn"), "journal.sqlite")
    const executor = await open(journal)
    const t0 = Date.now()
    const outcomes = Array.from({ length: 32 }, (_, i) =>
      settle(executor.executeCode({ language: "python", code: `print(${i})` }), () => t0)
    )
    // Somewhere in the middle of creates, starts and removals.
    await sleep(400 + Math.floor(Math.random() * 800))
    await engine.stop("SIGKILL")
    await sleep(2_000)
    await engine.start()
    const settled = await bounded(Promise.all(outcomes), 120_000, "executions")
    let ok = 0
    settled.forEach((o, i) => {
      if (o.ok) {
        ok++
        expect(o.result.exitCode).toBe(0)
        expect(o.result.stdout).toBe(`${i}\n`)
      } else {
        expect(INFRA).toContain(o.tag)
      }
    })
    console.log(`kill -9 amid 32 short executions: ${ok} results, ${32 - ok} typed errors`)
    await expectCleanAfterwards(executor, journal)
  }, 240_000)

  it("a frozen engine (SIGSTOP) past the deadline: the executions end within a bound, the containers go once it thaws", async () => {
    const journal = join(tempDir("engine-freeze"), "journal.sqlite")
    const executor = await open(journal, { callTimeoutMs: 5_000 })
    let t0 = Date.now()
    const running = countRunning(executor)
    const outcomes = Array.from({ length: 2 }, () =>
      settle(executor.executeCode({ language: "python", code: LONG, timeoutMs: 3_000 }), () => t0)
    )
    expect(await waitFor(() => running.started >= 2, 60_000)).toBe(true)
    running.unsubscribe()
    t0 = Date.now()
    process.kill(engine.pid!, "SIGSTOP")
    try {
      await sleep(12_000)
    } finally {
      process.kill(engine.pid!, "SIGCONT")
    }
    const settled = await bounded(Promise.all(outcomes), 90_000, "executions")
    console.log(
      `engine frozen 12 s: ${settled.map((o) => (o.ok ? `RESULT timedOut=${o.result.timedOut}` : `${o.tag} after ${o.ms} ms`)).join(", ")}`
    )
    for (const o of settled) {
      // The kill cannot reach a frozen engine: a typed error, not a timeout result we could not enforce.
      expect(o.ok, o.ok ? `result although the engine was frozen: ${JSON.stringify(o.result)}` : "").toBe(false)
      if (!o.ok) expect(INFRA).toContain(o.tag)
    }
    await expectCleanAfterwards(executor, journal)
  }, 240_000)
})
