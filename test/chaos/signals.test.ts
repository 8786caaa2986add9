/**
 * SIGINT / SIGTERM to `hermes-sandbox run` while the program runs: exit 130 / 143, the
 * container removed, the journal's lifecycle closed (ExecutionInterrupted, ContainerDestroyed).
 * Once signalling the CLI's node process alone (the bin the CLI suites run: support/cli.ts), once
 * signalling the whole process group of `npx tsx …` (what a terminal's Ctrl-C does: npx, tsx and
 * node all get it).
 *
 * Known issue, outside this suite's files: through wrappers the CLI can receive the signal
 * twice (npm forwards it; tsx relays it unless the child reports it within 30 ms), and
 * packages/cli/src/signals.ts takes any second signal as "exit now", skipping the cleanup.
 * The watchdog still removes the container; the lifecycle is then closed by the next sweep.
 * The group tests assert that much and report which path happened.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Sweep } from "@hermes-sandbox/core"
import { DockerExecutor } from "@hermes-sandbox/docker"
import { SqliteJournal } from "@hermes-sandbox/events"
import { cliCommand } from "../support/cli.js"
import { containerExists, journalProblems, readJournal, root, tempDir, typesOf, waitFor } from "./support.js"

const PROGRAM = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"

/**
 * "node": the CLI's own node process, as the CLI suites start it (support/cli.ts: the installed bin
 * in plain Node in the real-engine tiers, tsx on the sources otherwise). "npx": `npx tsx` on the
 * sources, the wrappers a terminal's signal reaches as well.
 */
const runCli = (via: "node" | "npx", journal: string) => {
  const args = ["run", "--timeout", "60s", "--journal", journal, "-"]
  const child =
    via === "node"
      ? spawn(cliCommand[0]!, [...cliCommand.slice(1), ...args], { cwd: root, detached: true })
      : spawn("npx", ["tsx", "packages/cli/src/bin.ts", ...args], { cwd: root, detached: true })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d) => (stdout += d))
  child.stderr.on("data", (d) => (stderr += d))
  child.stdin.end(PROGRAM)
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  return { child, exit, stdout: () => stdout, stderr: () => stderr }
}

/** The journal's single execution once its lifecycle is closed (the CLI may still be finishing). */
const closedExecution = async (journal: string) => {
  let executionId: string | undefined
  const done = await waitFor(
    async () => {
      const events = await readJournal(journal).catch(() => [])
      executionId = events.find((e) => e.type === "ExecutionRequested")?.streamId
      return (
        executionId !== undefined && events.some((e) => e.streamId === executionId && e.type === "ContainerDestroyed")
      )
    },
    20_000,
    100
  )
  const events = await readJournal(journal)
  expect(done, `journal: ${events.map((e) => e.type).join(", ")}`).toBe(true)
  return { events, executionId: executionId! }
}

describe("the CLI on SIGINT / SIGTERM", () => {
  for (const [signal, expected] of [
    ["SIGINT", 130],
    ["SIGTERM", 143]
  ] as const) {
    it(`${signal} to the CLI process: exit ${expected}, container removed, lifecycle closed`, async () => {
      const journal = join(tempDir(`cli-${signal}`), "journal.sqlite")
      const cli = runCli("node", journal)
      expect(await waitFor(() => cli.stdout().includes("up"), 60_000), cli.stderr()).toBe(true)
      const t0 = Date.now()
      cli.child.kill(signal)
      const exit = await cli.exit
      const elapsed = Date.now() - t0
      expect(exit, cli.stderr()).toEqual({ code: expected, signal: null })
      expect(elapsed).toBeLessThan(10_000)
      const { events, executionId } = await closedExecution(journal)
      expect(typesOf(events, executionId)).toEqual([
        "ExecutionRequested",
        "ContainerCreated",
        "ContainerStarted",
        "ExecutionInterrupted",
        "ContainerDestroyed"
      ])
      const created = events.find((e) => e.type === "ContainerCreated")!
      expect(await containerExists((created.data as { containerId: string }).containerId)).toBe(false)
      expect(journalProblems(events)).toEqual([])
      console.log(`${signal}: exit ${exit.code} ${elapsed} ms after the signal`)
    }, 90_000)
  }

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`${signal} to the process group of 'npx tsx …' (a terminal's Ctrl-C / kill of the job): container removed, lifecycle closed (by the CLI, else by the next sweep)`, async () => {
      const journal = join(tempDir(`cli-group-${signal}`), "journal.sqlite")
      const cli = runCli("npx", journal)
      expect(await waitFor(() => cli.stdout().includes("up"), 60_000), cli.stderr()).toBe(true)
      process.kill(-cli.child.pid!, signal)
      const exit = await cli.exit
      // npx re-raises the signal on itself (a shell reports 128+n); the CLI inside exits 128+n.
      expect(exit.code === 128 + (signal === "SIGINT" ? 2 : 15) || exit.signal === signal, JSON.stringify(exit)).toBe(
        true
      )
      // The CLI (or, if it was made to exit at once, its watchdog) removes the container.
      let events = await readJournal(journal)
      const created = await waitFor(
        async () => (events = await readJournal(journal)).some((e) => e.type === "ContainerCreated"),
        10_000
      )
      expect(created).toBe(true)
      const containerId = (events.find((e) => e.type === "ContainerCreated")!.data as { containerId: string })
        .containerId
      expect(await waitFor(async () => !(await containerExists(containerId)), 15_000)).toBe(true)
      const executionId = events.find((e) => e.type === "ExecutionRequested")!.streamId
      const closedByCli = await waitFor(
        async () => typesOf(await readJournal(journal), executionId).includes("ContainerDestroyed"),
        15_000,
        100
      )
      if (!closedByCli) {
        console.warn(
          `${signal} via npx: the CLI exited before recording the removal (signal delivered twice by the wrappers; see signals.ts); the next sweep closes it\n${cli.stderr()}`
        )
        const report = await Effect.runPromise(
          Sweep.sweep({ executorId: `chaos-signals-${process.pid}` }).pipe(
            Effect.provide(DockerExecutor.runtimeLayer()),
            Effect.provide(SqliteJournal.layer({ path: journal }))
          )
        )
        expect(report.closed).toContain(executionId)
      }
      events = await readJournal(journal)
      expect(typesOf(events, executionId).slice(-2)).toEqual(["ExecutionInterrupted", "ContainerDestroyed"])
      expect(journalProblems(events)).toEqual([])
    }, 90_000)
  }
})
