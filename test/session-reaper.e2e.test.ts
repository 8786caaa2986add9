/**
 * The reaper of persistent sandboxes on the real engine: idleness and lifetime are decided from
 * what the HOST knows (the journal's records of handles and calls, the engine's creation time,
 * the deadline label), never from state inside the sandbox — so nothing a program does inside
 * can postpone its removal (hostile review 1, finding 6). Every test removes what it created.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { Effect, Layer } from "effect"
import { MemoryJournal, SqliteJournal } from "@hermes-sandbox/events"
import { Sessions } from "@hermes-sandbox/core/Session"
import { DockerSessions, openPersistent } from "@hermes-sandbox/docker"
import { cli } from "./support/cli.js"
import { containerExists, docker } from "./support/docker.js"

interface Report {
  readonly checked: number
  readonly removed: ReadonlyArray<string>
  readonly decisions?: ReadonlyArray<{ readonly name: string; readonly removed: boolean; readonly reason: string }>
}
const reapCli = async (journalPath: string): Promise<Report> => {
  const r = await cli(["session", "reap", "--json", "--journal", journalPath])
  expect(r.code, r.stderr).toBe(0)
  return JSON.parse(r.stdout) as Report
}

/** The reaper in this process (no CLI start-up time in the timeline), on a given SQLite journal. */
const reapHere = (journalPath: string): Promise<Report> =>
  Effect.runPromise(
    Effect.flatMap(Sessions, (s) => s.reap).pipe(
      Effect.scoped,
      Effect.provide(
        DockerSessions.layer({ watchdog: false, reapOnStart: false, sweepOnStart: false }).pipe(
          Layer.provide(SqliteJournal.layer({ path: journalPath }))
        )
      )
    )
  ) as Promise<Report>

/**
 * Removed by this reap — or already gone when it listed (another reaper on the engine, e.g. a
 * test file running next to this one, got there first). Never looked at and kept.
 */
const expectReaped = async (report: Report, name: string, reason?: string) => {
  const decision = report.decisions?.find((d) => d.name === name)
  if (decision !== undefined)
    expect(decision).toMatchObject({ removed: true, ...(reason === undefined ? {} : { reason }) })
  else expect(report.removed).not.toContain(name)
  expect(await containerExists(name)).toBe(false)
}

const names = new Set<string>()
const removeAll = async () => {
  await Promise.all(
    [...names].map((n) =>
      docker
        .getContainer(n)
        .remove({ force: true })
        .catch(() => {})
    )
  )
  names.clear()
}
afterEach(removeAll)
afterAll(removeAll)
const dir = mkdtempSync(join(tmpdir(), "hs-reaper-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const runId = `${process.pid}-${Date.now().toString(36)}`
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe("the persistent-sandbox reaper decides on the host", () => {
  it("a sandbox that forges its in-sandbox idle state (mtime in 2099, state dir read-only) is removed like an untouched one", async () => {
    // The attack of the review: one call, then detach. The reaper used to read the idle time from
    // inside (`date` minus the state file's mtime): negative, or a failed probe, meant "never".
    const tampered = await openPersistent({ profile: `rt-tamper-${runId}`, lifetimeSeconds: 2 })
    names.add(tampered.containerName)
    const control = await openPersistent({ profile: `rt-control-${runId}`, lifetimeSeconds: 2 })
    names.add(control.containerName)
    const attack = await tampered.run(
      "touch -d 2099-01-01 /tmp/.hermes-session/cwd; chmod 500 /tmp/.hermes-session; stat -c %y /tmp/.hermes-session/cwd"
    )
    expect(attack.stdout).toContain("2099-01-01")
    await control.run("echo used")
    await tampered.close()
    await control.close()
    await sleep(4_000)

    // A fresh journal: this reaper has no record of either sandbox, so it goes by the engine's
    // creation time (host-known) — both were created more than 2 s ago.
    const report = await reapCli(join(dir, `attack-${runId}.sqlite`))
    await expectReaped(report, control.containerName, "idle")
    await expectReaped(report, tampered.containerName, "idle")
  }, 90_000)

  it("a maximum lifetime is recorded as the deadline label; past it the sandbox is removed by the reaper and by the startup sweep, used or not, idle limit or not", async () => {
    const byReaper = await openPersistent({ profile: `rt-max-${runId}`, maxLifetimeMs: 3_000 })
    names.add(byReaper.containerName)
    const labels = (await docker.getContainer(byReaper.containerName).inspect()).Config.Labels ?? {}
    const deadline = Number(labels["org.hermes-sandbox.deadline"])
    expect(labels["org.hermes-sandbox.idle-seconds"]).toBeUndefined()
    expect(deadline * 1000).toBeGreaterThan(Date.now())
    expect(deadline * 1000).toBeLessThanOrEqual(Date.now() + 4_000)
    await byReaper.run("echo busy; touch -d 2099-01-01 /tmp/.hermes-session/cwd")
    await byReaper.close()
    await sleep(Math.max(0, deadline * 1000 - Date.now()) + 1_200)
    await expectReaped(await reapCli(join(dir, `max-${runId}.sqlite`)), byReaper.containerName, "max-lifetime")

    // The startup sweep of any new service removes one too (the deadline label; nothing is asked of the sandbox).
    const bySweep = await openPersistent({ profile: `rt-max-sweep-${runId}`, maxLifetimeMs: 2_000 })
    names.add(bySweep.containerName)
    await bySweep.run("echo busy")
    await bySweep.close()
    await sleep(3_500)
    await Effect.runPromise(
      Effect.flatMap(Sessions, () => Effect.void).pipe(
        Effect.scoped,
        Effect.provide(
          DockerSessions.layer({ watchdog: false, reapOnStart: false }).pipe(Layer.provide(MemoryJournal.layer()))
        )
      )
    )
    expect(await containerExists(bySweep.containerName)).toBe(false)
  }, 90_000)

  it("a sandbox used recently through a shared journal is kept although its container is older than the idle limit; once idle long enough it goes", async () => {
    const journalPath = join(dir, `shared-${runId}.sqlite`)
    const p = await openPersistent({ profile: `rt-legit-${runId}`, lifetimeSeconds: 4, journal: { path: journalPath } })
    names.add(p.containerName)
    await p.close()
    await sleep(2_500)
    // Another process's call, recorded in the shared journal.
    const again = await openPersistent({
      profile: `rt-legit-${runId}`,
      lifetimeSeconds: 4,
      journal: { path: journalPath }
    })
    expect(again.reconnected, "the sandbox was removed before its idle limit").toBe(true)
    await again.run("echo still working")
    await again.close()
    await sleep(2_000) // the container is now > 4 s old, its last use ~2 s ago

    const kept = await reapHere(journalPath)
    expect(kept.removed).not.toContain(p.containerName)
    expect(kept.decisions?.find((d) => d.name === p.containerName)).toMatchObject({ removed: false, reason: "active" })
    expect(await containerExists(p.containerName)).toBe(true)

    await sleep(3_000)
    const gone = await reapHere(journalPath)
    await expectReaped(gone, p.containerName, "idle")
  }, 90_000)
})
