import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { expect } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Event from "../src/Event.js"
import type { EventEnvelope, JournalEvent } from "../src/Event.js"
import type { Journal, JournalDiagnostics } from "../src/Journal.js"
import * as MemoryJournal from "../src/MemoryJournal.js"
import type { JournalError } from "../src/JournalError.js"
import { checkLifecycle } from "../src/Projection.js"
import * as PostgresJournal from "../src/PostgresJournal.js"
import * as SqliteJournal from "../src/SqliteJournal.js"
import { fixtureCommand } from "../../../test/support/nodeFixture.js"
import { createDatabase } from "../../../test/support/postgres.js"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
export const writerFixture = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/writer.ts")

let tempDir: string | undefined
/** A fresh file path in a per-process temporary directory (removed at exit). */
export const tempJournalPath = (name = "journal"): string => {
  if (tempDir === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-events-"))
    tempDir = dir
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }))
  }
  return path.join(tempDir, `${name}-${Math.random().toString(36).slice(2)}.sqlite`)
}

let fileDatabase: string | undefined
/**
 * This test file's database on the run's PostgreSQL cluster (test/postgres-global-setup.ts),
 * created on first use: each file has its own, so files run in parallel.
 */
export const testDatabaseUrl = (): string => {
  fileDatabase ??= createDatabase(`events_${path.basename(expect.getState().testPath ?? "test", ".test.ts")}`)
  return fileDatabase
}

/** A fresh, empty PostgreSQL journal location: a new schema in this file's database. */
export const freshPostgresSchema = (): string => `j_${Math.random().toString(36).slice(2, 12)}`

export interface Implementation {
  readonly name: string
  /** A fresh, empty journal each time it is built. */
  readonly layer: (options?: {
    readonly pageSize?: number
  }) => Layer.Layer<Journal | JournalDiagnostics, JournalError | SqliteJournal.SqliteAddonMissing>
}

/** The journals that need nothing but this process: the unit tier runs their suites. */
export const localImplementations: ReadonlyArray<Implementation> = [
  { name: "memory", layer: (options = {}) => MemoryJournal.layer(options) },
  {
    name: "sqlite",
    layer: (options = {}) => Layer.suspend(() => SqliteJournal.layer({ path: tempJournalPath(), ...options }))
  }
]

/** PostgreSQL, on the run's throwaway cluster: the journal tier (`*.pg.test.ts`) runs its suites. */
export const postgresImplementation: Implementation = {
  name: "postgres",
  layer: (options = {}) =>
    Layer.suspend(() => PostgresJournal.layer({ url: testDatabaseUrl(), schema: freshPostgresSchema(), ...options }))
}

export const stats = (i: number, queued = 0): JournalEvent => Event.make("ExecutorStats", { inFlight: i, queued })

export const started = (containerId: string): JournalEvent => Event.make("ContainerStarted", { containerId })

export const sequences = (envelopes: Iterable<EventEnvelope>): Array<number> => Array.from(envelopes, (e) => e.sequence)

export const range = (from: number, to: number): Array<number> =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i)

/** Waits (yielding, never sleeping on the test clock) until `check` holds. */
export const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, what: string, attempts = 5_000) =>
  Effect.gen(function* () {
    for (let i = 0; i < attempts; i++) {
      if (yield* check) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1)))
    }
    return yield* Effect.dieMessage(`timed out waiting for ${what}`)
  })

// --- child processes ---------------------------------------------------------------------

export interface Child {
  readonly process: ChildProcessWithoutNullStreams
  readonly lines: Array<string>
  readonly ready: Promise<void>
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>
  /** Resolves once `predicate` matches a line (checked on every new line). */
  readonly waitFor: (predicate: (lines: ReadonlyArray<string>) => boolean) => Promise<void>
  readonly go: () => void
}

export const spawnWriter = (args: ReadonlyArray<string>): Child => {
  const [command, ...prefix] = fixtureCommand(writerFixture)
  const child = spawn(command!, [...prefix, ...args], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  const waiters: Array<{ predicate: (lines: ReadonlyArray<string>) => boolean; resolve: () => void }> = []
  let stderr = ""
  let buffer = ""
  const check = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.predicate(lines)) waiters.splice(i, 1)[0]!.resolve()
    }
  }
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk
    const parts = buffer.split("\n")
    buffer = parts.pop()!
    lines.push(...parts)
    check()
  })
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once("close", (code, signal) => {
      if (buffer !== "") lines.push(buffer)
      check()
      resolve({ code, signal, stderr })
    })
  )
  const waitFor = (predicate: (lines: ReadonlyArray<string>) => boolean) =>
    new Promise<void>((resolve, reject) => {
      if (predicate(lines)) return resolve()
      waiters.push({ predicate, resolve })
      void exit.then(({ code, signal, stderr }) => {
        if (!predicate(lines)) reject(new Error(`writer exited (${code ?? signal}) before expected output:\n${stderr}`))
      })
    })
  return {
    process: child,
    lines,
    ready: waitFor((ls) => ls.includes("ready")),
    exit,
    waitFor,
    go: () => child.stdin.write("go\n")
  }
}

/**
 * Checks a `fixtures/writer.ts` stream: versions 1..n, its appends in order, each one whole
 * (atomic). Returns the number of appends found.
 */
export const checkWriterStream = (events: ReadonlyArray<EventEnvelope>): number => {
  expect(events.map((e) => e.version)).toEqual(range(1, events.length))
  expect(checkLifecycle(events)).toEqual([])
  let expectedAppend = 0
  let i = 0
  while (i < events.length) {
    const head = events[i]!
    if (head.type !== "ExecutorStats") throw new Error(`unexpected ${head.type}`)
    expect(head.data.inFlight).toBe(expectedAppend)
    const k = head.data.queued
    const group = events.slice(i, i + k)
    // Atomicity: all k events of the append are there, consecutively in the stream.
    expect(group.map((e) => (e.type === "ExecutorStats" ? [e.data.inFlight, e.data.queued] : []))).toEqual(
      range(1, k).map(() => [expectedAppend, k])
    )
    i += k
    expectedAppend++
  }
  return expectedAppend
}
