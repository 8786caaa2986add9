/**
 * pnpm bench:collect — what `collect` costs (issue 17).
 *
 * Latency, one executor, the variants interleaved in shuffled rounds within one run:
 *   - print(1) without collect (the baseline);
 *   - the program writes 10 files of 100 KB, no collect (the writing alone);
 *   - the same program, collecting the 10 files (1 MB back to the host).
 * "Collection adds" = the third minus the second at p50 (and minus the first, as the issue words it).
 *
 * Memory: in a child process each (so peak RSS is that run's alone), a program that tries to
 * return 1 GiB (forty sparse files of 25 MiB in a /workspace big enough for them), collected with
 * maxTotalBytes 32 MiB (the default) and 128 MiB; the growth of peak RSS over the same process's
 * peak after a print(1) run. The host holds at most the cap, whatever the program offers.
 *
 *   npx tsx bench/collect.ts [--rounds N]
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { createExecutor } from "@hermes-sandbox/docker"

const MiB = 1024 * 1024
const args = process.argv.slice(2)
const flag = (name: string) => {
  const i = args.indexOf(name)
  return i < 0 ? undefined : args[i + 1]
}

const WRITE_TEN = "import os\nfor i in range(10):\n    open(f'f{i}.bin', 'wb').write(os.urandom(100_000))\n"

const rssChild = async (maxTotalBytes: number) => {
  const executor = await createExecutor({
    timeoutMs: 120_000,
    memory: "2g",
    workspaceSize: "1100m",
    awaitRemoval: true
  })
  try {
    await executor.executeCode({ language: "python", code: "print(1)" })
    const before = process.resourceUsage().maxRSS
    const r = await executor.executeCode({
      language: "python",
      // Sparse: 1 GiB of file sizes without 1 GiB of tmpfs pages (the supervisor still reads every byte it sends).
      code: "for i in range(40):\n    f = open(f'big{i:02}.bin', 'wb'); f.truncate(25 << 20); f.close()\n",
      collect: ["*.bin"],
      collectLimits: { maxFileBytes: 1024 * MiB, maxTotalBytes }
    })
    const after = process.resourceUsage().maxRSS
    const received = (r.files ?? []).reduce((n, f) => n + f.size, 0)
    console.log(
      JSON.stringify({
        maxTotalBytes,
        offeredBytes: 40 * 25 * MiB,
        receivedBytes: received,
        skipped: r.skippedFiles?.length ?? 0,
        beforeKb: before,
        afterKb: after,
        growthMiB: (after - before) / 1024
      })
    )
  } finally {
    await executor.close()
  }
}

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

const main = async () => {
  const rounds = Number(flag("--rounds") ?? "40")
  const executor = await createExecutor({ timeoutMs: 30_000, awaitRemoval: false })
  const variants = {
    "print(1), no collect (baseline)": { language: "python", code: "print(1)" },
    "write 10 x 100 KB, no collect": { language: "python", code: WRITE_TEN },
    "write 10 x 100 KB, collect them": { language: "python", code: WRITE_TEN, collect: ["*.bin"] }
  } as const
  const names = Object.keys(variants) as Array<keyof typeof variants>
  const times = new Map<string, Array<number>>(names.map((n) => [n, []]))
  try {
    for (let warm = 0; warm < 3; warm++) for (const n of names) await executor.executeCode(variants[n])
    for (let round = 0; round < rounds; round++) {
      for (const n of [...names].sort(() => Math.random() - 0.5)) {
        const t0 = performance.now()
        const r = await executor.executeCode(variants[n])
        times.get(n)!.push(performance.now() - t0)
        if (r.exitCode !== 0) throw new Error(`${n}: exit ${r.exitCode}: ${r.stderr}`)
        if ("collect" in variants[n] && r.files?.length !== 10) throw new Error(`${n}: ${r.files?.length} files`)
      }
    }
  } finally {
    await executor.close()
  }
  const p50 = (n: string) => percentile(times.get(n)!, 50)
  console.log(
    `npx tsx bench/collect.ts --rounds ${rounds}, ${new Date().toISOString()}, load ${execFileSync("cat", ["/proc/loadavg"]).toString().trim()}\n`
  )
  console.log("| variant | p50 ms | p95 ms | ratio to print(1) p50 |")
  console.log("| --- | --- | --- | --- |")
  for (const n of names)
    console.log(
      `| ${n} | ${p50(n).toFixed(1)} | ${percentile(times.get(n)!, 95).toFixed(1)} | ${(p50(n) / p50(names[0]!)).toFixed(2)}× |`
    )
  console.log(
    `\ncollection adds at p50: ${(p50(names[2]!) - p50(names[1]!)).toFixed(1)} ms over writing the same files without collect; ` +
      `${(p50(names[2]!) - p50(names[0]!)).toFixed(1)} ms over print(1) (writing included)`
  )

  console.log("\nPeak RSS of a client whose program offers 1 GiB of files (child process each):\n")
  console.log("| maxTotalBytes | offered | received | peak RSS growth (MiB) |")
  console.log("| --- | --- | --- | --- |")
  for (const cap of [32 * MiB, 128 * MiB]) {
    const out = execFileSync(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), "--rss-child", String(cap)],
      { encoding: "utf8" }
    )
    const m = JSON.parse(out.trim().split("\n").at(-1)!) as {
      receivedBytes: number
      growthMiB: number
      offeredBytes: number
    }
    console.log(
      `| ${cap / MiB} MiB | ${m.offeredBytes / MiB} MiB | ${(m.receivedBytes / MiB).toFixed(0)} MiB | ${m.growthMiB.toFixed(1)} |`
    )
  }
}

const child = flag("--rss-child")
await (child !== undefined ? rssChild(Number(child)) : main())
