/**
 * pnpm bench:bounds — what the worst inputs of hostile review 2 cost the host now (issue 25): peak
 * memory and journal growth of one executor, each case in a child process of its own (so the peak
 * RSS is that case's alone) with a SQLite journal of its own, as a ratio to the same measures for
 * an idle executor's `print(1)` run in the same bench run. The journal's growth is the encoded size
 * of the events the run appended (the file's own size moves with SQLite's WAL checkpoints).
 *
 * Cases, each at the bound that stops it:
 *   - refusals: an Effect Schema tool, the code sends 5,000 excess keys of 86 bytes per call in a
 *     loop (214 MB of journal in 45 s before): ends at 1,000 refusals (tool-calls);
 *   - recorded arguments: recordToolArguments, 1 MiB of arguments per call, maxCalls 1,000: ends at
 *     the journal budget (16 MiB, journal-budget);
 *   - dense arguments in flight: 8 threads each send `{"a":[{},{},…]}` to a tool that waits 4 s,
 *     of 1 MiB (+106 to +207 MiB of host memory before; now refused by the values bound before
 *     parsing) and of 45,000 objects (just within that bound: held and served);
 *   - skipped entries: 16,000 symlinks with 4 KiB paths under collect ["**"] (62 MB of skipped
 *     entries, +156 MiB before);
 *   - an output flood into the deadline (1 MiB kept per stream).
 *
 *   npx tsx bench/bounds.ts
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import type { ExecuteRequest } from "@hermes-sandbox/core"
import { createExecutor } from "@hermes-sandbox/docker"

const MiB = 1024 * 1024
const args = process.argv.slice(2)
const flag = (name: string) => {
  const i = args.indexOf(name)
  return i < 0 ? undefined : args[i + 1]
}

const echo = { parameters: Schema.Struct({ q: Schema.String }), handler: ({ q }: { q: string }) => q }

const CASES: Record<string, () => ExecuteRequest> = {
  idle: () => ({ language: "python", code: "print(1)" }),
  refusals: () => ({
    language: "python",
    code: "from hermes_tools import call_tool, ToolRefused\nargs = {('k%05d' % i) + 'x' * 80: 1 for i in range(5000)}\nargs['q'] = 'a'\nwhile True:\n    try:\n        call_tool('echo', args)\n    except ToolRefused:\n        pass\n",
    tools: { echo },
    timeoutMs: 120_000
  }),
  "recorded arguments": () => ({
    language: "python",
    code: "from hermes_tools import call_tool\npad = 'x' * 1000000\nwhile True:\n    call_tool('echo', {'q': pad})\n",
    tools: { echo },
    toolLimits: { maxCalls: 1000 },
    recordToolArguments: true,
    timeoutMs: 120_000
  }),
  "dense arguments in flight (past the values bound)": () => ({
    language: "python",
    code: "import threading\nfrom hermes_tools import call_tool\ndense = [{}] * 340000\ndef go():\n    call_tool('slow', {'a': dense})\nts = [threading.Thread(target=go) for _ in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint('done')\n",
    tools: {
      slow: {
        parameters: { type: "object" },
        handler: () => new Promise((resolve) => setTimeout(() => resolve("ok"), 4000))
      }
    },
    timeoutMs: 120_000
  }),
  "dense arguments in flight (within the values bound)": () => ({
    language: "python",
    code: "import threading\nfrom hermes_tools import call_tool\ndense = [{}] * 45000\ndef go():\n    call_tool('slow', {'a': dense})\nts = [threading.Thread(target=go) for _ in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint('done')\n",
    tools: {
      slow: {
        parameters: { type: "object" },
        handler: () => new Promise((resolve) => setTimeout(() => resolve("ok"), 4000))
      }
    },
    timeoutMs: 120_000
  }),
  "skipped entries": () => ({
    language: "python",
    code: "import os\nd = '/workspace/' + '/'.join(['d' * 250] * 14)\nos.makedirs(d)\nos.chdir(d)\ntry:\n    for i in range(20000):\n        os.symlink('x', ('%05d' % i) + 'L' * 240)\nexcept OSError:\n    pass\n",
    collect: ["**"],
    timeoutMs: 120_000
  }),
  "output flood into the deadline": () => ({
    language: "python",
    code: "import os\nchunk = b'x' * 65536\nwhile True:\n    os.write(1, chunk)\n    os.write(2, chunk)\n",
    timeoutMs: 10_000
  })
}

/** One case in this process: peak RSS growth over an idle run, journal bytes, how it ended. */
const child = async (name: string) => {
  const dir = mkdtempSync(join(tmpdir(), "bench-bounds-"))
  const path = join(dir, "journal.sqlite")
  const executor = await createExecutor({
    journal: { path },
    timeoutMs: 120_000,
    awaitRemoval: true,
    sweepOnStart: false,
    watchdog: false
  })
  try {
    await executor.executeCode({ language: "python", code: "print(1)" })
    let journalBytes = 0
    const counting = executor.events$.subscribe((e) => (journalBytes += Buffer.byteLength(JSON.stringify(e))))
    const before = process.resourceUsage().maxRSS
    const t0 = performance.now()
    const outcome = await executor.executeCode(CASES[name]!()).then(
      (r) =>
        `exit ${r.exitCode}${r.stdout.includes("ToolRefused") || r.stderr.includes("ToolRefused") ? " (calls refused)" : ""}${r.timedOut ? ", timed out" : ""}${r.stdoutTruncated ? `, stdout cut (${r.stdoutBytes} B written)` : ""}${r.skippedFilesOmitted === undefined ? "" : `, ${r.skippedFiles?.length} skipped listed + ${r.skippedFilesOmitted} counted`}, result ${(JSON.stringify(r).length / 1024).toFixed(0)} KiB`,
      (e: { _tag?: string; reason?: string }) => `${e._tag} (${e.reason})`
    )
    const seconds = (performance.now() - t0) / 1000
    const after = process.resourceUsage().maxRSS
    await executor.close()
    counting.unsubscribe()
    console.log(
      JSON.stringify({
        name,
        peakMiB: after / 1024,
        growthMiB: (after - before) / 1024,
        journalBytes,
        outcome,
        seconds
      })
    )
  } finally {
    await executor.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

const main = () => {
  console.log(
    `npx tsx bench/bounds.ts, ${new Date().toISOString()}, load ${execFileSync("cat", ["/proc/loadavg"]).toString().trim()}\n`
  )
  const rows = Object.keys(CASES).map((name) => {
    const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--case", name], {
      encoding: "utf8",
      maxBuffer: 64 * MiB
    })
    return JSON.parse(out.trim().split("\n").at(-1)!) as {
      name: string
      peakMiB: number
      growthMiB: number
      journalBytes: number
      outcome: string
      seconds: number
    }
  })
  const idle = rows[0]!
  console.log(
    "| case | how it ended | s | peak RSS (MiB) | × idle | growth over the warm-up (MiB) | journal appended | × idle |"
  )
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- |")
  const ratio = (x: number, base: number) => `${(x / base).toFixed(1)}×`
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.outcome} | ${r.seconds.toFixed(1)} | ${r.peakMiB.toFixed(0)} | ${ratio(r.peakMiB, idle.peakMiB)} | ${r.growthMiB.toFixed(1)} | ${(r.journalBytes / 1024).toFixed(0)} KiB | ${ratio(r.journalBytes, idle.journalBytes)} |`
    )
  }
}

const one = flag("--case")
await (one !== undefined ? child(one) : main())
