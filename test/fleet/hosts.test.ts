/**
 * Two executors as two hosts, and a third: separate Node processes with distinct host ids
 * (HERMES_SANDBOX_HOST_ID), one engine, one journal (a SQLite file all three open, and the same
 * on PostgreSQL when HERMES_SANDBOX_TEST_PG_URL is set). Each runs long executions and a
 * session; A also a warm pool. For several lease periods nobody touches anybody's containers —
 * a live owner on another host is never mistaken for a dead one, though its session's deadline
 * is days away. Then host A is lost: its process AND its watchdog SIGKILLed. Once A's lease has
 * expired, the periodic sweeps of B and C (racing) remove every container of A and close each
 * of its lifecycles exactly once (orphan-reaped), while B's and C's own containers keep
 * running. A clean close of B and C then leaves nothing and records ExecutorClosed.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { afterAll, describe, expect, it } from "vitest"
import { Effect, Stream } from "effect"
import { type EventEnvelope, Journal, JournalLocation, Projection } from "@hermes-sandbox/events"
import {
  containersOf,
  docker,
  ExecutorLabel,
  Leftovers,
  removeContainersOf,
  root,
  sleep,
  stillRunning,
  tempDir,
  track,
  waitFor
} from "../chaos/support.js"
import { fixtureCommand } from "../support/nodeFixture.js"
import { createDatabase, PG_URL_ENV } from "../support/postgres.js"

const LEASE_MS = 3_000
const CLOCK_SKEW_MS = 1_000
const SWEEP_MS = 1_000
/** After A's loss: lease + skew + a sweep + the removals, with room for a loaded machine. */
const REAP_BOUND_MS = 30_000

type Message =
  | { type: "ready"; pid: number; executorId: string; watchdogPid: number | null; host: string }
  | { type: "started"; streamId: string }
  | { type: "session"; containerName: string }
  | { type: "warm" }
  | { type: "result"; executionId: string; exitCode: number }
  | { type: "error"; tag: string }
  | { type: "closed" }

interface Host {
  readonly child: ChildProcess
  readonly messages: Array<Message>
  readonly next: <T extends Message["type"]>(
    type: T,
    count?: number,
    timeoutMs?: number
  ) => Promise<Array<Extract<Message, { type: T }>>>
  readonly exited: Promise<number | null>
}

const spawnHost = (hostId: string, config: Record<string, unknown>): Host => {
  const [node, ...args] = fixtureCommand(join(root, "test/fleet/fixtures/host.ts"))
  const child = spawn(node!, [...args, JSON.stringify(config)], {
    cwd: root,
    env: { ...process.env, HERMES_SANDBOX_HOST_ID: hostId },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const messages: Array<Message> = []
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  createInterface({ input: child.stdout! }).on("line", (line) => {
    try {
      messages.push(JSON.parse(line) as Message)
    } catch {
      // not one of ours
    }
  })
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const next = async <T extends Message["type"]>(type: T, count = 1, timeoutMs = 90_000) => {
    const of = () => messages.filter((m): m is Extract<Message, { type: T }> => m.type === type)
    const ok = await waitFor(() => of().length >= count || child.exitCode !== null, timeoutMs, 25)
    if (!ok || of().length < count)
      throw new Error(`host ${hostId}: ${of().length} of ${count} "${type}"; stderr:\n${stderr}`)
    return of()
  }
  return { child, messages, next, exited }
}

const readAll = (location: string): Promise<Array<EventEnvelope>> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(Journal.Journal, (journal) => journal.read().pipe(Stream.runCollect)).pipe(
        Effect.provide(JournalLocation.layer(location))
      )
    ).pipe(Effect.map((chunk) => [...chunk]))
  )

const byStream = (events: ReadonlyArray<EventEnvelope>) => {
  const streams = new Map<string, Array<EventEnvelope>>()
  for (const e of events) streams.set(e.streamId, [...(streams.get(e.streamId) ?? []), e])
  return streams
}

/** When the engine removed each container of `executorId` since `sinceMs` (its event log, ms). */
const destroyTimes = async (executorId: string, sinceMs: number): Promise<Map<string, number>> => {
  const raw = (await docker.getEvents({
    since: Math.floor(sinceMs / 1000) - 1,
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: { type: ["container"], event: ["destroy"], label: [`${ExecutorLabel}=${executorId}`] }
  })) as unknown as NodeJS.ReadableStream
  let text = ""
  for await (const chunk of raw) text += String(chunk)
  const times = new Map<string, number>()
  for (const line of text.split("\n").filter((l) => l.trim() !== "")) {
    const e = JSON.parse(line) as { timeNano: number; Actor: { Attributes: Record<string, string> } }
    times.set(e.Actor.Attributes["name"] ?? "", Math.floor(e.timeNano / 1e6))
  }
  return times
}

const running = async (executorId: string) =>
  (await containersOf([executorId]))
    .filter((c) => c.state === "running")
    .map((c) => c.name)
    .sort()

const journals: Array<{ name: string; location: () => string }> = [
  { name: "SQLite", location: () => join(tempDir("fleet"), "journal.sqlite") }
]
if ((process.env[PG_URL_ENV] ?? "") !== "")
  journals.push({ name: "PostgreSQL", location: () => createDatabase("fleet", process.env[PG_URL_ENV]) })

describe.each(journals)("two hosts and a third on one engine and one $name journal", ({ location: makeLocation }) => {
  const leftovers = new Leftovers()
  const executorIds: Array<string> = []
  afterAll(async () => {
    leftovers.killAll()
    await removeContainersOf(executorIds)
  })

  it("host A lost (process and watchdog SIGKILLed): B's and C's periodic sweeps remove all of A's containers after its lease expired and close their lifecycles once; B's and C's are never touched", async () => {
    const journal = makeLocation()
    const tag = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`
    const ids = { a: `fleet-a-${tag}`, b: `fleet-b-${tag}`, c: `fleet-c-${tag}` }
    executorIds.push(ids.a, ids.b, ids.c)
    const common = { journal, leaseMs: LEASE_MS, clockSkewMs: CLOCK_SKEW_MS }
    // A does not sweep; B and C sweep every second, so they race for A's orphans.
    const a = spawnHost(`host-a-${tag}`, { ...common, executorId: ids.a, executions: 2, session: true, warmPool: 1 })
    const b = spawnHost(`host-b-${tag}`, {
      ...common,
      executorId: ids.b,
      executions: 2,
      session: true,
      sweepIntervalMs: SWEEP_MS
    })
    const c = spawnHost(`host-c-${tag}`, {
      ...common,
      executorId: ids.c,
      executions: 1,
      session: true,
      sweepIntervalMs: SWEEP_MS
    })
    try {
      const ready = await Promise.all([a, b, c].map(async (h) => (await h.next("ready"))[0]!))
      for (const r of ready) leftovers.add(r.pid, r.watchdogPid)
      const [readyA] = ready
      expect(readyA!.watchdogPid, "host A reports its watchdog's pid").toBeGreaterThan(0)
      expect(new Set(ready.map((r) => r.host)).size).toBe(3)
      await Promise.all([
        a.next("started", 2),
        b.next("started", 2),
        c.next("started", 1),
        a.next("session"),
        b.next("session"),
        c.next("session")
      ])
      // A's warm pool refills after each claim: wait until it has one ready again.
      await waitFor(async () => (await running(ids.a)).length >= 4, 60_000, 100)
      const before = { a: await running(ids.a), b: await running(ids.b), c: await running(ids.c) }
      // 2 executions + the session + a pooled sandbox; 2 + 1; 1 + 1.
      expect(before.a.length).toBeGreaterThanOrEqual(4)
      expect(before.b).toHaveLength(3)
      expect(before.c).toHaveLength(2)

      // Several lease periods with every owner alive and renewing: B's and C's sweeps (each sees the
      // others as another host, their deadlines far away) remove nothing.
      await sleep(4 * LEASE_MS)
      expect(await running(ids.a)).toEqual(before.a)
      expect(await running(ids.b)).toEqual(before.b)
      expect(await running(ids.c)).toEqual(before.c)

      // Host A is lost: its process and its watchdog die at once (nothing of A can clean up).
      const watchdogA = track(readyA!.watchdogPid)!
      process.kill(readyA!.watchdogPid!, "SIGKILL")
      a.child.kill("SIGKILL")
      await a.exited
      expect(
        await waitFor(() => !stillRunning(watchdogA), 5_000, 20),
        "host A's watchdog is dead within 5 s of its SIGKILL"
      ).toBe(true)
      const killedAt = performance.now()
      const killedAtWall = Date.now()
      const orphans = (await containersOf([ids.a])).map((x) => x.name)
      expect(orphans.length).toBeGreaterThanOrEqual(4)

      // Not before its lease has expired past the skew: from A's last renewal as the journal has it
      // (on a starved machine a renewal may come later than its period; sweeps go by the journal too).
      const lastRenewal = Math.max(
        ...(await readAll(journal)).flatMap((e) =>
          e.type === "ExecutorLease" && e.streamId === ids.a ? [e.timestamp] : []
        )
      )
      const gone = await waitFor(async () => (await containersOf([ids.a])).length === 0, REAP_BOUND_MS, 100)
      const latency = performance.now() - killedAt
      expect(
        gone,
        `A's containers still there ${Math.round(latency)} ms after the loss: ${JSON.stringify(await containersOf([ids.a]).then((l) => l.map((x) => x.name)))}`
      ).toBe(true)
      // Not before its lease expired past the skew, by the engine's own record of each removal:
      // a sweeper decides only once now > last renewal + lease + skew, then removes. (Counting A's
      // containers just before that moment raced the sweepers on a loaded machine: the test's own
      // timer and listing ran late by more than any margin.)
      const leaseEnd = lastRenewal + LEASE_MS + CLOCK_SKEW_MS
      const destroyedAt = await destroyTimes(ids.a, killedAtWall)
      for (const name of orphans)
        expect(
          destroyedAt.get(name),
          `${name} removed (engine time) after A's lease ended at ${leaseEnd} (last renewal ${lastRenewal}, journal time)`
        ).toBeGreaterThan(leaseEnd)
      console.log(
        `fleet: host A's ${orphans.length} containers removed ${Math.round(latency)} ms after its loss (lease ${LEASE_MS} ms, skew ${CLOCK_SKEW_MS} ms, sweep every ${SWEEP_MS} ms)`
      )

      // B's and C's containers are untouched, their executions still running.
      expect(await running(ids.b)).toEqual(before.b)
      expect(await running(ids.c)).toEqual(before.c)
      expect(b.messages.filter((m) => m.type === "result" || m.type === "error")).toEqual([])
      expect(c.messages.filter((m) => m.type === "result" || m.type === "error")).toEqual([])

      // The journal: every lifecycle of A closed exactly once (one ContainerDestroyed, orphan-reaped), no violation.
      await sleep(2 * SWEEP_MS)
      const events = await readAll(journal)
      const streams = byStream(events)
      const states = Projection.project(events)
      const ofA = [...streams].filter(([id, list]) => id !== ids.a && list[0]!.metadata.executorId === ids.a)
      expect(ofA.length).toBeGreaterThanOrEqual(orphans.length)
      for (const [id, list] of ofA) {
        expect(Projection.checkLifecycle(list), id).toEqual([])
        const state = states.get(id)
        if (state === undefined) continue // a session stream's own events only (SessionOpened)
        expect(Projection.isClosed(state), `${id}: ${list.map((e) => e.type).join(", ")}`).toBe(true)
        const destroyed = list.filter((e) => e.type === "ContainerDestroyed")
        expect(destroyed.length, id).toBeLessThanOrEqual(1)
      }
      const reapedNames = new Set(
        events.flatMap((e) =>
          e.type === "ContainerDestroyed" && e.data.reason === "orphan-reaped" ? [e.data.containerName] : []
        )
      )
      for (const name of orphans) expect(reapedNames.has(name), `${name} recorded orphan-reaped`).toBe(true)
      // A's session stream is closed too (SessionClosed), B's and C's are open.
      const sessionClosed = (executorId: string) =>
        events
          .filter((e) => e.type === "SessionOpened" && e.metadata.executorId === executorId)
          .every((o) => (streams.get(o.streamId) ?? []).some((e) => e.type === "SessionClosed"))
      const sessionsOf = (executorId: string) =>
        events
          .filter((e) => e.type === "SessionOpened" && e.metadata.executorId === executorId)
          .map((o) => (streams.get(o.streamId) ?? []).map((e) => `${e.type}@${e.metadata.executorId}`))
      const sessionOpen = (executorId: string) =>
        events
          .filter((e) => e.type === "SessionOpened" && e.metadata.executorId === executorId)
          .every(
            (o) =>
              !(streams.get(o.streamId) ?? []).some(
                (e) => e.type === "SessionClosed" || e.type === "ContainerDestroyed"
              )
          )
      expect(
        sessionClosed(ids.a),
        `A's session streams end with SessionClosed: ${JSON.stringify(sessionsOf(ids.a))}`
      ).toBe(true)
      expect(
        sessionOpen(ids.b) && sessionOpen(ids.c),
        `B's and C's sessions stay open: ${JSON.stringify([...sessionsOf(ids.b), ...sessionsOf(ids.c)])}`
      ).toBe(true)
      // A's lease stream ends with renewals and no close (it was killed); B's and C's renew.
      const leaseTypes = (id: string) => (streams.get(id) ?? []).map((e) => e.type)
      expect(
        leaseTypes(ids.a).every((t) => t === "ExecutorLease"),
        `A's executor stream: ${leaseTypes(ids.a).join(", ")}`
      ).toBe(true)
      // Each host's events carry its own host id (HostIdentity), as its containers' owner labels do.
      expect(new Set((streams.get(ids.a) ?? []).map((e) => e.metadata.host))).toEqual(new Set([readyA!.host]))
      expect(leaseTypes(ids.b).filter((t) => t === "ExecutorLease").length).toBeGreaterThan(10)

      // B and C close cleanly: they remove their own containers and record the close.
      b.child.kill("SIGTERM")
      c.child.kill("SIGTERM")
      await Promise.all([b.next("closed", 1, 60_000), c.next("closed", 1, 60_000)])
      expect(await containersOf([ids.b, ids.c])).toEqual([])
      const after = byStream(await readAll(journal))
      expect(after.get(ids.b)!.at(-1)!.type).toBe("ExecutorClosed")
      expect(after.get(ids.c)!.at(-1)!.type).toBe("ExecutorClosed")
    } finally {
      for (const h of [a, b, c]) if (h.child.exitCode === null) h.child.kill("SIGKILL")
      await removeContainersOf([ids.a, ids.b, ids.c])
      if (!journal.startsWith("postgres")) rmSync(join(journal, ".."), { recursive: true, force: true })
    }
  }, 300_000)
})
