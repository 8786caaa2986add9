/**
 * The dashboard's page load on a large journal against a small one, in the same run: each journal
 * (SQLite) is written through the journal's own `appendBatch` (executions' lifecycles: a request,
 * a create or a warm claim, a start, an exit or a timeout, the removal, the completion), then
 * `hermes-sandbox dashboard` (the built bin) serves it and Debian's chromium (playwright-core) loads
 * the page with the token until the summary and the first page of recent executions are rendered.
 *
 *   pnpm build && pnpm bench:dashboard -- [--events 1000000] [--small 1000] [--loads 5]
 *
 * Reported per journal: the time from the dashboard's start until it has folded every event
 * (`position` = the last sequence), its RSS then, the page's load to first render (median of
 * `--loads` fresh pages, each a new browser context), and GET /api/overview (median of 20).
 * The journals are kept in /tmp/hermes-bench-dashboard/ (reused when their size matches).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"
import type { BatchAppendInput } from "../packages/events/src/Journal.js"
import type { JournalEvent } from "../packages/events/src/Event.js"
import { openJournal } from "../packages/events/src/Rx.js"
import { launchChromium, startDashboard } from "../test/support/dashboard.js"
import { median } from "./stats.js"

// \`pnpm bench:dashboard -- --events N\`: pnpm passes the "--" on.
const argv = process.argv.slice(2)
if (argv[0] === "--") argv.shift()
const { values } = parseArgs({
  args: argv,
  options: {
    events: { type: "string", default: "1000000" },
    small: { type: "string", default: "1000" },
    loads: { type: "string", default: "5" }
  }
})
const root = new URL("..", import.meta.url).pathname
const bin = [process.execPath, path.join(root, "packages/cli/bundle/hermes-sandbox.cjs")]
const dir = "/tmp/hermes-bench-dashboard"
const TOKEN = "bench-dashboard-token-0123456789abcdef"

const limits = { memoryBytes: 536870912, nanoCpus: 1e9, pidsLimit: 256, outputLimitBytes: 1048576 }
/** One execution's events: 6 (cold) or 5 (a warm claim). */
const lifecycle = (i: number): ReadonlyArray<JournalEvent> => {
  const name = `hermes-sandbox-bench-${i}`
  const claimed = i % 3 === 0
  const timedOut = i % 50 === 7
  return [
    {
      type: "ExecutionRequested",
      data: {
        language: i % 2 === 0 ? "python" : "javascript",
        image: "hermes-sandbox/python:latest",
        codeBytes: 20,
        codeSha256: "0".repeat(64),
        stdinBytes: 0,
        fileCount: 0,
        timeoutMs: 30_000,
        limits,
        network: false,
        runtime: "runc"
      }
    },
    claimed
      ? { type: "ContainerClaimed", data: { containerName: name, containerId: `c${i}`, poolStreamId: `pool-${i}` } }
      : { type: "ContainerCreated", data: { containerName: name, containerId: `c${i}`, imageId: "sha256:1" } },
    ...(claimed ? [] : [{ type: "ContainerStarted", data: { containerId: `c${i}` } } as const]),
    timedOut
      ? { type: "ExecutionTimedOut", data: { timeoutMs: 30_000, durationMs: 30_000 } }
      : { type: "ContainerExited", data: { exitCode: i % 10 === 3 ? 1 : 0, oomKilled: false, durationMs: 40 } },
    {
      type: "ContainerDestroyed",
      data: { containerName: name, containerId: `c${i}`, reason: timedOut ? "timeout" : "completed" }
    },
    {
      type: "ExecutionCompleted",
      data: {
        exitCode: timedOut ? null : 0,
        timedOut,
        oomKilled: false,
        stdoutBytes: 2,
        stderrBytes: 0,
        stdoutTruncated: false,
        stderrTruncated: false,
        durationMs: 40
      }
    }
  ]
}

/** A journal of at least `events` events (whole lifecycles), reused when one is there. */
const journalOf = async (events: number): Promise<{ file: string; events: number }> => {
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, `journal-${events}.sqlite`)
  const journal = await openJournal({ path: file, synchronous: "normal" })
  try {
    let last = await journal.lastSequence()
    if (last >= events) return { file, events: last }
    const started = performance.now()
    let i = last
    while (last < events) {
      const batch: Array<BatchAppendInput> = []
      let size = 0
      while (size < 6_000 && last + size < events) {
        const lc = lifecycle(i++)
        batch.push({ streamId: `exec-${i}`, executorId: "bench", events: lc })
        size += lc.length
      }
      last = (await journal.appendBatch(batch)).at(-1)!.sequence
    }
    const s = (performance.now() - started) / 1000
    console.error(
      `wrote ${last.toLocaleString("en-US")} events in ${s.toFixed(1)} s (${Math.round(last / s).toLocaleString("en-US")}/s)`
    )
    return { file, events: last }
  } finally {
    await journal.close()
  }
}

const rssMiB = (pid: number) => {
  const m = /VmRSS:\s+([0-9]+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return m === null ? Number.NaN : Number(m[1]) / 1024
}

interface Figures {
  readonly events: number
  readonly caughtUpMs: number
  readonly rssMiB: number
  readonly loadMs: ReadonlyArray<number>
  readonly overviewMs: ReadonlyArray<number>
  readonly overviewBytes: number
}

const measure = async (
  browser: Awaited<ReturnType<typeof launchChromium>>,
  journal: { file: string; events: number },
  loads: number
): Promise<Figures> => {
  const tokenFile = path.join(dir, "token")
  fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 })
  const started = performance.now()
  const dashboard = await startDashboard(journal.file, tokenFile, bin)
  try {
    const headers = { authorization: `Bearer ${TOKEN}` }
    const overview = async () => {
      const t = performance.now()
      const res = await fetch(`${dashboard.url}api/overview`, { headers })
      const text = await res.text()
      return { ms: performance.now() - t, text, position: (JSON.parse(text) as { position: number }).position }
    }
    while ((await overview()).position < journal.events) await new Promise((r) => setTimeout(r, 50))
    const caughtUpMs = performance.now() - started
    const rss = rssMiB(dashboard.pid)
    const loadMs: Array<number> = []
    for (let i = 0; i < loads; i++) {
      const context = await browser.newContext()
      const page = await context.newPage()
      const t = performance.now()
      await page.goto(`${dashboard.url}#token=${TOKEN}`)
      await page.locator("#executions tbody tr.row").first().waitFor()
      await page.locator("#summary dd").first().waitFor()
      loadMs.push(performance.now() - t)
      await context.close()
    }
    const overviewMs: Array<number> = []
    let bytes = 0
    for (let i = 0; i < 20; i++) {
      const o = await overview()
      overviewMs.push(o.ms)
      bytes = o.text.length
    }
    return { events: journal.events, caughtUpMs, rssMiB: rss, loadMs, overviewMs, overviewBytes: bytes }
  } finally {
    await dashboard.stop()
  }
}

const loads = Number(values.loads)
const small = await journalOf(Number(values.small))
const large = await journalOf(Number(values.events))
const browser = await launchChromium()
try {
  const a = await measure(browser, small, loads)
  const b = await measure(browser, large, loads)
  const fmt = (n: number, d = 0) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d })
  const row = (label: string, f: (x: Figures) => number, unit: string, d = 0) =>
    `| ${label} | ${fmt(f(a), d)} ${unit} | ${fmt(f(b), d)} ${unit} | ${fmt(f(b) / f(a), 2)} |`
  console.log(`| | ${fmt(a.events)} events | ${fmt(b.events)} events | ratio |`)
  console.log("| --- | ---: | ---: | ---: |")
  console.log(row("dashboard start → every event folded", (x) => x.caughtUpMs, "ms"))
  console.log(row("its RSS then", (x) => x.rssMiB, "MiB", 1))
  console.log(row(`page load to first render, median of ${loads}`, (x) => median(x.loadMs), "ms"))
  console.log(row("GET /api/overview, median of 20", (x) => median(x.overviewMs), "ms", 1))
  console.log(row("its size", (x) => x.overviewBytes / 1024, "KiB", 1))
} finally {
  await browser.close()
}
