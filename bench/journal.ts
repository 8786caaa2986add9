/**
 * Journal benchmark: durable append throughput and constant-memory replay.
 *
 *   npx tsx bench/journal.ts            # full run (≈1–2 min); writes bench/results/journal.md
 *   REPLAY_EVENTS=200000 npx tsx bench/journal.ts   # smaller replay
 *
 * Replays run in fresh child processes so their RSS is not inflated by the load phase; the
 * baseline is the same child replaying a journal with 0 events.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { JournalEvent } from "../packages/events/src/Event.js"
import { type JournalClient, openJournal } from "../packages/events/src/Rx.js"

const here = path.dirname(fileURLToPath(import.meta.url))

const event = (i: number): JournalEvent => ({
  type: "ContainerExited",
  data: { exitCode: i % 7, oomKilled: false, durationMs: 1234 + (i % 100) }
})

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
const mib = (bytes: number) => `${fmt(bytes / 1024 / 1024, 1)} MiB`

// --- replay child ---------------------------------------------------------------------------

interface ReplayResult {
  readonly events: number
  readonly ms: number
  readonly rssBeforeReplay: number
  readonly rssPeak: number
  readonly heapPeak: number
}

const replayChild = async (file: string, toSequence: number | undefined): Promise<void> => {
  const client = await openJournal({ path: file })
  global.gc?.()
  const rssBeforeReplay = process.memoryUsage().rss
  let rssPeak = rssBeforeReplay
  let heapPeak = process.memoryUsage().heapUsed
  const sample = () => {
    const m = process.memoryUsage()
    rssPeak = Math.max(rssPeak, m.rss)
    heapPeak = Math.max(heapPeak, m.heapUsed)
  }
  const timer = setInterval(sample, 5)
  let events = 0
  let checksum = 0
  const start = performance.now()
  await new Promise<void>((resolve, reject) =>
    client.replay(toSequence === undefined ? {} : { toSequence }).subscribe({
      next: (e) => {
        events++
        checksum += e.sequence
        if (events % 10_000 === 0) sample()
      },
      error: reject,
      complete: resolve
    })
  )
  const ms = performance.now() - start
  sample()
  clearInterval(timer)
  await client.close()
  if (checksum !== (events * (events + 1)) / 2) throw new Error("replay out of order")
  const result: ReplayResult = { events, ms, rssBeforeReplay, rssPeak, heapPeak }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}

const replayInChild = (file: string, toSequence?: number): Promise<ReplayResult> =>
  new Promise((resolve, reject) => {
    const args = ["--import", "tsx", fileURLToPath(import.meta.url), "--replay", file]
    if (toSequence !== undefined) args.push(String(toSequence))
    const child = spawn(process.execPath, args, { cwd: path.resolve(here, ".."), stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d))
    child.on("close", (code) =>
      code === 0
        ? resolve(JSON.parse(out.trim().split("\n").at(-1)!) as ReplayResult)
        : reject(new Error(`replay child exited ${code}`))
    )
  })

// --- main -------------------------------------------------------------------------------------

const timed = async (f: () => Promise<void>) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

const main = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-journal-bench-"))
  const rows: Array<string> = []
  const replayEvents = Number(process.env["REPLAY_EVENTS"] ?? 1_000_000)
  try {
    // 1. One event per transaction, durable (synchronous=FULL) and NORMAL.
    for (const synchronous of ["full", "normal"] as const) {
      const client = await openJournal({ path: path.join(dir, `single-${synchronous}.sqlite`), synchronous })
      const n = synchronous === "full" ? 3_000 : 5_000
      const latencies: Array<number> = []
      const ms = await timed(async () => {
        for (let i = 0; i < n; i++) {
          const t = performance.now()
          await client.append({ streamId: `exec-${i % 50}`, executorId: "bench", events: [event(i)] })
          latencies.push(performance.now() - t)
        }
      })
      latencies.sort((a, b) => a - b)
      rows.push(
        `| append, 1 event/tx, synchronous=${synchronous.toUpperCase()} | ${fmt(n)} tx | ${fmt(n / (ms / 1000))} | ${fmt(n / (ms / 1000))} | p50 ${fmt(percentile(latencies, 50), 2)} ms, p99 ${fmt(percentile(latencies, 99), 2)} ms |`
      )
      await client.close()
    }

    // 2. Batched: 100 events per transaction (one stream via append, ten via appendBatch).
    {
      const client = await openJournal({ path: path.join(dir, "batched.sqlite") })
      const tx = 300
      const ms = await timed(async () => {
        for (let t = 0; t < tx; t++) {
          await client.append({
            streamId: `exec-${t}`,
            executorId: "bench",
            events: Array.from({ length: 100 }, (_, i) => event(i))
          })
        }
      })
      rows.push(
        `| append, 100 events/tx, synchronous=FULL | ${fmt(tx)} tx | ${fmt(tx / (ms / 1000))} | ${fmt((tx * 100) / (ms / 1000))} | |`
      )
      const ms2 = await timed(async () => {
        for (let t = 0; t < tx; t++) {
          await client.appendBatch(
            Array.from({ length: 10 }, (_, s) => ({
              streamId: `batch-${t}-${s}`,
              executorId: "bench",
              events: Array.from({ length: 10 }, (_, i) => event(i))
            }))
          )
        }
      })
      rows.push(
        `| appendBatch, 10 streams × 10 events/tx, synchronous=FULL | ${fmt(tx)} tx | ${fmt(tx / (ms2 / 1000))} | ${fmt((tx * 100) / (ms2 / 1000))} | |`
      )
      await client.close()
    }

    // 3. Replay of `replayEvents` events, in fresh processes.
    const big = path.join(dir, "replay.sqlite")
    const empty = path.join(dir, "empty.sqlite")
    let load: JournalClient | undefined = await openJournal({ path: big, synchronous: "normal" })
    const perTx = 1_000
    const loadMs = await timed(async () => {
      for (let done = 0; done < replayEvents; done += perTx) {
        await load!.appendBatch(
          Array.from({ length: 10 }, (_, s) => ({
            streamId: `exec-${(done / perTx) * 10 + s}`,
            executorId: "bench",
            events: Array.from({ length: Math.min(perTx, replayEvents - done) / 10 }, (_, i) => event(done + i))
          }))
        )
      }
    })
    await load.close()
    load = undefined
    const size = fs.statSync(big).size
    await (await openJournal({ path: empty })).close()

    const baseline = await replayInChild(empty)
    const tenth = await replayInChild(big, Math.floor(replayEvents / 10))
    const full = await replayInChild(big)
    if (full.events !== replayEvents) throw new Error(`replayed ${full.events} of ${replayEvents}`)

    const replayRow = (label: string, r: ReplayResult) =>
      `| ${label} | ${fmt(r.events)} | ${r.events === 0 ? "–" : fmt(r.ms / 1000, 2) + " s"} | ${r.events === 0 ? "–" : fmt(r.events / (r.ms / 1000))} | ${mib(r.rssBeforeReplay)} | ${mib(r.rssPeak)} | ${mib(r.rssPeak - baseline.rssPeak)} | ${mib(r.heapPeak)} |`

    const report = [
      "# Journal benchmark",
      "",
      `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, ${mib(os.totalmem())} RAM, Node ${process.version}, ${os.platform()} ${os.release()}.`,
      `SQLite file in \`${os.tmpdir()}\` (WAL). Appends go through the Promise client (\`openJournal\`), one at a time (each awaited).`,
      "Durable (synchronous=FULL) numbers are bounded by the disk's fsync latency, and on a shared 2-core VM they also move with whatever else runs: compare runs on the same machine only.",
      `Load average at start: ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(", ")}.`,
      `Generated by \`npx tsx bench/journal.ts\` on ${new Date().toISOString().slice(0, 10)}.`,
      "",
      "## Appends",
      "",
      "| workload | size | transactions/s | events/s | latency |",
      "| --- | ---: | ---: | ---: | --- |",
      ...rows,
      "",
      `## Replay of ${fmt(replayEvents)} events`,
      "",
      `Loaded with \`appendBatch\` (1,000 events/tx, synchronous=NORMAL) in ${fmt(loadMs / 1000, 1)} s; file size ${mib(size)}.`,
      "Each replay runs in a fresh process (`client.replay()`, 1,000-row pages); RSS sampled every 5 ms and every 10,000 events.",
      "",
      "| replay | events | wall time | events/s | RSS before replay | peak RSS | peak RSS − baseline peak | peak heap used |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
      replayRow("baseline: empty journal", baseline),
      replayRow(`first ${fmt(tenth.events)}`, tenth),
      replayRow(`all ${fmt(full.events)}`, full),
      "",
      `Peak RSS replaying ${fmt(full.events)} events is within ${mib(Math.abs(full.rssPeak - tenth.rssPeak))} of replaying ${fmt(tenth.events)}: memory does not grow with the journal.`,
      ""
    ].join("\n")
    process.stdout.write(report)
    fs.mkdirSync(path.join(here, "results"), { recursive: true })
    fs.writeFileSync(path.join(here, "results", "journal.md"), report)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const replayIndex = process.argv.indexOf("--replay")
if (replayIndex >= 0) {
  const file = process.argv[replayIndex + 1]!
  const to = process.argv[replayIndex + 2]
  await replayChild(file, to === undefined ? undefined : Number(to))
} else {
  await main()
}
