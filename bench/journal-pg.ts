/**
 * pnpm bench:journal-pg — the PostgreSQL journal next to the SQLite one, in the same run, with
 * the same event mix (executions' lifecycles: ExecutionRequested, ContainerCreated,
 * ContainerStarted, ContainerExited, ContainerDestroyed, one stream per execution):
 *
 * - append throughput, one event per `append` (for a few seconds), and `appendBatch` of 1,000
 *   events (200 executions) while loading the replay's events;
 * - replay (`read`) of 1M events;
 * - follow latency across two processes: a writer process appends one event every 5 ms, this
 *   process follows; latency = delivery here minus the writer's `append` call (one clock: the
 *   same machine's), p50/p99.
 *
 * PostgreSQL is a throwaway local cluster (test/support/postgres.ts, loopback TCP) with fsync on,
 * so a commit is durable when append returns, as with SQLite's default synchronous=FULL.
 *
 *   HERMES_BENCH_EVENTS (1000000)  events loaded and replayed
 *   HERMES_BENCH_SINGLE_MS (3000)   how long the single-append phase runs per journal
 *   HERMES_BENCH_FOLLOW (400)       appends timed in the follow phase
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { performance } from "node:perf_hooks"
import { createInterface } from "node:readline"
import type { JournalEvent } from "../packages/events/src/Event.js"
import type { BatchAppendInput } from "../packages/events/src/Journal.js"
import { type JournalClient, openJournal } from "../packages/events/src/Rx.js"
import { isPostgresUrl } from "../packages/events/src/PostgresJournal.js"
import { createDatabase, startCluster } from "../test/support/postgres.js"
import { percentile } from "./stats.js"

const self = fileURLToPath(import.meta.url)
const now = () => performance.timeOrigin + performance.now()
const open = (location: string): Promise<JournalClient> =>
  isPostgresUrl(location) ? openJournal({ url: location }) : openJournal({ path: location })

const container = (n: number) => ({ containerName: `hermes-sandbox-${n}`, containerId: `c${n}`.padEnd(64, "0") })
/** Event k (0–4) of execution n's lifecycle. */
const lifecycleEvent = (n: number, k: number): JournalEvent => {
  switch (k) {
    case 0:
      return {
        type: "ExecutionRequested",
        data: {
          language: "python",
          image: "hermes-sandbox/python:latest",
          codeBytes: 120 + (n % 50),
          codeSha256: "ab".repeat(32),
          stdinBytes: 0,
          fileCount: 0,
          timeoutMs: 30_000,
          limits: { memoryBytes: 268_435_456, nanoCpus: 1_000_000_000, pidsLimit: 64, outputLimitBytes: 1_048_576 },
          network: false,
          runtime: "docker"
        }
      }
    case 1:
      return { type: "ContainerCreated", data: { ...container(n), imageId: `sha256:${"cd".repeat(32)}` } }
    case 2:
      return { type: "ContainerStarted", data: { containerId: container(n).containerId } }
    case 3:
      return { type: "ContainerExited", data: { exitCode: n % 3, oomKilled: false, durationMs: 80 + (n % 400) } }
    default:
      return { type: "ContainerDestroyed", data: { ...container(n), reason: "completed" } }
  }
}
const streamOf = (n: number) => `0190${String(n).padStart(12, "0")}-bench`

// --- the follow phase's writer process ------------------------------------------------------

if (process.argv[2] === "writer") {
  const [, , , location, countArg] = process.argv
  const journal = await open(location!)
  process.stdout.write("ready\n")
  await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once("line", () => resolve()))
  for (let i = 0; i < Number(countArg); i++) {
    const started = now()
    const [envelope] = await journal.append({
      streamId: streamOf(i),
      executorId: "bench-writer",
      events: [lifecycleEvent(i, 0)]
    })
    process.stdout.write(`${envelope!.sequence} ${started}\n`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await journal.close()
  process.stdout.write("done\n")
  process.exit(0)
}

// --- phases -----------------------------------------------------------------------------------

const EVENTS = Number(process.env["HERMES_BENCH_EVENTS"] ?? 1_000_000)
const SINGLE_MS = Number(process.env["HERMES_BENCH_SINGLE_MS"] ?? 3_000)
const FOLLOW = Number(process.env["HERMES_BENCH_FOLLOW"] ?? 400)
const BATCH_EXECUTIONS = 200

interface Figures {
  single: number
  batched: number
  replay: number
  replaySeconds: number
  followP50: number
  followP99: number
}

const singleAppends = async (journal: JournalClient): Promise<number> => {
  const until = now() + SINGLE_MS
  const started = now()
  let n = 0
  while (now() < until) {
    await journal.append({
      streamId: streamOf(1_000_000_000 + Math.floor(n / 5)),
      executorId: "bench",
      events: [lifecycleEvent(n, n % 5)]
    })
    n++
  }
  return n / ((now() - started) / 1000)
}

const load = async (journal: JournalClient): Promise<number> => {
  const started = now()
  let loaded = 0
  for (let execution = 0; loaded < EVENTS; execution += BATCH_EXECUTIONS) {
    const batch: Array<BatchAppendInput> = []
    for (let n = execution; n < execution + BATCH_EXECUTIONS && loaded + batch.length * 5 < EVENTS; n++) {
      batch.push({
        streamId: streamOf(n),
        executorId: "bench",
        events: [0, 1, 2, 3, 4].map((k) => lifecycleEvent(n, k))
      })
    }
    loaded += (await journal.appendBatch(batch)).length
  }
  return loaded / ((now() - started) / 1000)
}

const replay = async (journal: JournalClient): Promise<{ rate: number; seconds: number; events: number }> => {
  const started = now()
  let events = 0
  await new Promise<void>((resolve, reject) => {
    journal.replay().subscribe({ next: () => void events++, error: reject, complete: resolve })
  })
  const seconds = (now() - started) / 1000
  return { rate: events / seconds, seconds, events }
}

const followLatency = async (location: string): Promise<{ p50: number; p99: number }> => {
  const follower = await open(location)
  const from = (await follower.lastSequence()) + 1
  const delivered = new Map<number, number>()
  const subscription = follower.follow({ fromSequence: from }).subscribe((e) => delivered.set(e.sequence, now()))
  const child = spawn(process.execPath, ["--import", "tsx", self, "writer", location, String(FOLLOW)], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  const appended = new Map<number, number>()
  const lines = createInterface({ input: child.stdout })
  const ready = new Promise<void>((resolve) => lines.on("line", (line) => (line === "ready" ? resolve() : undefined)))
  lines.on("line", (line) => {
    const [sequence, started] = line.split(" ")
    if (started !== undefined) appended.set(Number(sequence), Number(started))
  })
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
  await ready
  // Give the follower's LISTEN connection (PostgreSQL) time to be in place before timing.
  await new Promise((resolve) => setTimeout(resolve, 300))
  child.stdin.write("go\n")
  await exited
  const deadline = Date.now() + 5_000
  while (delivered.size < appended.size && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 10))
  subscription.unsubscribe()
  await follower.close()
  const latencies = [...appended].map(([sequence, started]) => {
    const at = delivered.get(sequence)
    if (at === undefined) throw new Error(`event ${sequence} was never delivered to the follower`)
    return at - started
  })
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

const measure = async (name: string, location: () => string): Promise<Figures> => {
  process.stderr.write(`${name}: single appends...\n`)
  const main = location()
  const journal = await open(main)
  try {
    const single = await singleAppends(journal)
    process.stderr.write(
      `${name}: loading ${EVENTS.toLocaleString("en-US")} events in batches of ${BATCH_EXECUTIONS * 5}...\n`
    )
    const batched = await load(journal)
    process.stderr.write(`${name}: replay...\n`)
    const replayed = await replay(journal)
    process.stderr.write(`${name}: follow latency across processes...\n`)
    const follow = await followLatency(location())
    return {
      single,
      batched,
      replay: replayed.rate,
      replaySeconds: replayed.seconds,
      followP50: follow.p50,
      followP99: follow.p99
    }
  } finally {
    await journal.close()
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-bench-journal-pg-"))
const cluster = await startCluster({ fsync: true })
process.once("exit", cluster.kill)
try {
  let files = 0
  const sqlite = await measure("SQLite", () => path.join(dir, `journal-${files++}.sqlite`))
  // A database of its own per journal, as each SQLite journal has its file.
  const postgres = await measure("PostgreSQL", () => createDatabase("bench", cluster.url))
  const f = (n: number, digits = 0) =>
    n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
  const rows = [
    ["append, 1 event per append (events/s)", f(sqlite.single), f(postgres.single)],
    [`appendBatch, ${BATCH_EXECUTIONS * 5} events per batch (events/s)`, f(sqlite.batched), f(postgres.batched)],
    [
      `replay of ${f(EVENTS)} events (events/s)`,
      `${f(sqlite.replay)} (${f(sqlite.replaySeconds, 1)} s)`,
      `${f(postgres.replay)} (${f(postgres.replaySeconds, 1)} s)`
    ],
    [
      `follow latency across processes, p50 / p99 (ms; ${FOLLOW} appends 5 ms apart)`,
      `${f(sqlite.followP50, 2)} / ${f(sqlite.followP99, 2)}`,
      `${f(postgres.followP50, 2)} / ${f(postgres.followP99, 2)}`
    ]
  ]
  process.stdout.write(
    `\n${os.cpus().length} × ${os.cpus()[0]?.model ?? "CPU"}, Node ${process.version}; SQLite synchronous=FULL (WAL), PostgreSQL ${fs
      .readFileSync(path.join(cluster.dir, "data", "PG_VERSION"), "utf8")
      .trim()} on loopback with fsync=on, synchronous_commit=on\n\n`
  )
  process.stdout.write("| | SQLite | PostgreSQL |\n| --- | ---: | ---: |\n")
  for (const row of rows) process.stdout.write(`| ${row.join(" | ")} |\n`)
} finally {
  await cluster.stop()
  fs.rmSync(dir, { recursive: true, force: true })
}
