/**
 * Faults on a remote engine's path, on loopback:
 * - the TLS engine is killed (SIGKILL of its dockerd) mid-run: the run ends with a typed
 *   infrastructure error within a bound, and once the engine is back its container is removed
 *   and its lifecycle closed in the journal (Removals' retry, over TLS);
 * - the ssh connection is cut mid-run (the sshd processes serving it are SIGKILLed; the engine
 *   itself stays up): a typed error, and the container removed over a new connection;
 * - the owner of a run is SIGKILLed: its watchdog, reaching the engine over the same transport
 *   (TLS with the client certificate; ssh with the key), removes the container.
 */
import { spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { describe, expect, it } from "vitest"
import type { ExecutionResult } from "@hermes-sandbox/core"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"
import { bounded } from "../chaos/engineSuite.js"
import {
  journalProblems,
  readJournal,
  root,
  sleep,
  stillRunning,
  tempDir,
  track,
  typesOf,
  waitFor
} from "../chaos/support.js"
import { fixtureCommand } from "../support/nodeFixture.js"
import { existsOn, TRANSPORTS, useRemote } from "./suite.js"

const LONG = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"
const INFRA = ["DockerUnavailable", "ContainerFailed"]

type Outcome =
  | { readonly ok: true; readonly result: ExecutionResult }
  | { readonly ok: false; readonly tag: string; readonly message: string; readonly ms: number }

/** A long run, resolved once it printed; its outcome (never thrown) and its container. */
const startLong = async (executor: SandboxExecutor) => {
  const containers: Array<string> = []
  const sub = executor.events$.subscribe((e) => {
    if (e.type === "ContainerCreated") containers.push(e.data.containerId)
  })
  let up!: () => void
  const printed = new Promise<void>((r) => (up = r))
  let t0 = 0
  const outcome: Promise<Outcome> = executor
    .executeCode({ language: "python", code: LONG }, { onStdout: () => up() })
    .then(
      (result) => ({ ok: true as const, result }),
      (e: { _tag?: string; message?: string }) => ({
        ok: false as const,
        tag: e._tag ?? "untyped",
        message: e.message ?? String(e),
        ms: Date.now() - t0
      })
    )
  await bounded(printed, 60_000, "the long run's first output")
  sub.unsubscribe()
  expect(containers).toHaveLength(1)
  return { outcome, containerId: containers[0]!, markFault: () => (t0 = Date.now()) }
}

const expectTypedFailure = (o: Outcome, boundMs: number) => {
  expect(o.ok, o.ok ? `fake success: ${JSON.stringify(o.result).slice(0, 300)}` : "").toBe(false)
  if (!o.ok) {
    expect(INFRA, o.message).toContain(o.tag)
    expect(o.ms).toBeLessThan(boundMs)
  }
}

/**
 * A long run over the remote engine, a fault mid-run (`inject` says what it did and how soon the
 * typed error must come): the run fails typed, its container is removed, the executor serves a new
 * run over the transport, and the journal closes the failed lifecycle with ContainerDestroyed. No
 * watchdog: the removal must be the executor's own retry (the watchdog would race it).
 */
const faultMidRun = async (
  remote: ReturnType<typeof useRemote>,
  name: string,
  inject: () => Promise<{ readonly what: string; readonly typedWithinMs: number; readonly removed: string }>
) => {
  const journal = join(tempDir(name), "journal.sqlite")
  const executor = await createExecutor({
    ...remote.options,
    journal: { path: journal },
    watchdog: false,
    sweepOnStart: false,
    timeoutMs: 120_000
  })
  try {
    const run = await startLong(executor)
    run.markFault()
    const fault = await inject()
    const outcome = await bounded(run.outcome, 90_000, "the run")
    console.log(
      `${fault.what}: ${outcome.ok ? "RESULT" : `${outcome.tag} after ${outcome.ms} ms: ${outcome.message.slice(0, 160)}`}`
    )
    expectTypedFailure(outcome, fault.typedWithinMs)
    expect(
      await waitFor(async () => !(await existsOn(remote.engine, run.containerId)), 60_000, 250),
      fault.removed
    ).toBe(true)
    // The engine serves new runs over the transport.
    const r = await executor.executeCode({ language: "python", code: "print('alive')" })
    expect(r.stdout).toBe("alive\n")
  } finally {
    await bounded(executor.close(), 90_000, "close")
  }
  const events = await readJournal(journal)
  expect(journalProblems(events)).toEqual([])
  const failed = events.filter((e) => e.type === "ExecutionFailed")
  expect(failed).toHaveLength(1)
  expect(typesOf(events, failed[0]!.streamId).at(-1)).toBe("ContainerDestroyed")
}

describe("the TLS engine is killed mid-run", () => {
  const remote = useRemote("tls")

  it("kill -9 of dockerd: a typed error; after the restart the container is removed and the lifecycle closed", async () => {
    await faultMidRun(remote, "remote-tls-kill", async () => {
      await remote.tls!.engine.stop("SIGKILL")
      // Back after 3 s, as test/chaos/engine-restart.test.ts does with a local engine.
      await sleep(3_000)
      await remote.tls!.start()
      return {
        what: "TLS engine killed mid-run",
        typedWithinMs: 65_000,
        removed: "removed once the engine answers again"
      }
    })
    expect(await remote.engine.listContainers({ all: true })).toEqual([])
  }, 300_000)
})

describe("the ssh connection is cut mid-run", () => {
  const remote = useRemote("ssh")

  it("the sshd processes serving it are killed: a typed error; the container is removed over a new connection", async () => {
    await faultMidRun(remote, "remote-ssh-cut", async () => {
      const cut = remote.ssh!.cutConnections()
      expect(cut, "connections were open (attach, wait)").toBeGreaterThan(0)
      // At once, as a dropped socket: not at the wait's 30 s call deadline.
      return {
        what: `ssh connections cut mid-run (${cut} processes)`,
        typedWithinMs: 10_000,
        removed: "removed over a new connection"
      }
    })
  }, 300_000)
})

describe.each(TRANSPORTS)("the owner of a run over %s is SIGKILLed", (transport) => {
  const remote = useRemote(transport)

  it("its watchdog removes the container over the same transport", async () => {
    const dir = tempDir(`remote-owner-${transport}`)
    const config = join(dir, "options.json")
    writeFileSync(config, JSON.stringify(remote.options), { mode: 0o600 })
    const [node, ...args] = fixtureCommand(join(root, "test/remote/fixtures/owner.ts"))
    const child = spawn(node!, [...args, config], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let stderr = ""
    child.stderr!.on("data", (d) => (stderr += d))
    const lines: Array<Record<string, unknown>> = []
    createInterface({ input: child.stdout! }).on("line", (l) => lines.push(JSON.parse(l) as Record<string, unknown>))
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    try {
      expect(
        await waitFor(() => lines.some((l) => l.type === "started"), 60_000),
        `the owner started a run; stderr:\n${stderr}`
      ).toBe(true)
      const ready = lines.find((l) => l.type === "ready")!
      const containerId = lines.find((l) => l.type === "started")!.containerId as string
      const watchdog = track(ready.watchdogPid as number)
      expect(watchdog, "the owner's watchdog runs").toBeDefined()
      expect(await existsOn(remote.engine, containerId)).toBe(true)
      const t0 = Date.now()
      child.kill("SIGKILL")
      await exited
      expect(
        await waitFor(async () => !(await existsOn(remote.engine, containerId)), 20_000, 50),
        `the watchdog removed ${containerId}`
      ).toBe(true)
      console.log(`watchdog over ${transport}: container removed ${Date.now() - t0} ms after the owner's SIGKILL`)
      // It keeps looking for a settle window, then exits.
      expect(await waitFor(() => !stillRunning(watchdog!), 30_000, 250), "the watchdog exits").toBe(true)
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
  }, 180_000)
})
