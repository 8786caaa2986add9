/** Markdown rendering of a run, and the BENCHMARKS.md section it owns. */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { median, type Summary, summarize } from "./stats.js"
import { VariantLabels, type VariantName } from "./variants.js"

export interface CpuPerExec {
  readonly clientSec: number
  readonly daemonsSec: number
  readonly shimsSec: number
  readonly executions: number
  readonly foreignShimsSec: number
  /** Kernel threads + softirq, host-wide (absent in runs before it was measured). */
  readonly kernelSec?: number
  readonly foreignCreates: number
}

export interface LevelResult {
  readonly concurrency: number
  readonly executions: number
  readonly failures: number
  readonly elapsedMs: number
  /** Until the last result and the variant's steady state (containers removed / pool refilled). */
  readonly settledMs: number
  readonly latency: Summary
  readonly cpu: CpuPerExec
  readonly counters: Record<string, number>
}

export interface BurstResult {
  readonly elapsedMs: ReadonlyArray<number>
  readonly latencies: ReadonlyArray<number>
  readonly failures: number
  readonly counters: Record<string, number>
}

export interface VariantResult {
  readonly name: VariantName
  readonly status: "ok" | "unavailable" | "failed"
  readonly reason?: string
  readonly info?: Record<string, unknown>
  readonly latencies: ReadonlyArray<number>
  readonly resultLatencies: ReadonlyArray<number>
  readonly latencyFailures: ReadonlyArray<string>
  readonly latencyCounters: Record<string, number>
  readonly levels: ReadonlyArray<LevelResult>
  readonly burst?: BurstResult
  readonly maxRssKb?: number
  readonly helperRssKb?: number | null
}

export interface RunResults {
  readonly runId: string
  readonly date: string
  readonly command: string
  readonly options: Record<string, unknown>
  readonly machine: Record<string, string | number>
  readonly contention: {
    /** Load average just before the run (afterwards it mostly shows the run itself). */
    readonly loadStart: ReadonlyArray<number>
    readonly foreignCreates: number
    readonly foreignShimsSec: number
    /** CPU-seconds the whole host was busy during the run, what this run accounts for, and the rest. */
    readonly hostBusySec: number
    readonly runSec: number
    readonly otherSec: number
    /** cores × wall-clock seconds of the run. */
    readonly capacitySec: number
  }
  readonly hardeningCheck: ReadonlyArray<string>
  readonly dockerRunCommand: string
  readonly variants: ReadonlyArray<VariantResult>
  readonly durationSec: number
  readonly cpuPollMs: number
  /** How engine CPU was measured (engine.ts): "cgroup" (exact) or "poll". */
  readonly cpuMethod?: "cgroup" | "poll"
  readonly cpuMethodNote?: string
  /** Peak RSS of a driver that loads no variant (node + tsx). */
  readonly floorRssKb: number
  readonly leftBehind: number
}

const ms = (v: number) => (Number.isNaN(v) ? "–" : v >= 100 ? `${Math.round(v)} ms` : `${v.toFixed(1)} ms`)
const ratio = (v: number, base: number | undefined) =>
  base === undefined || Number.isNaN(v) || Number.isNaN(base) || base === 0 ? "" : ` (${(v / base).toFixed(2)}×)`
const rate = (v: number) => (Number.isNaN(v) ? "–" : `${v >= 10 ? v.toFixed(1) : v.toFixed(2)}/s`)
const mb = (kb: number | undefined | null) => (kb === undefined || kb === null ? "–" : `${(kb / 1024).toFixed(0)} MB`)

export const cpuTotals = (v: VariantResult): CpuPerExec | undefined => {
  if (v.levels.length === 0) return undefined
  const sum = (f: (c: CpuPerExec) => number) => v.levels.reduce((a, l) => a + f(l.cpu), 0)
  return {
    clientSec: sum((c) => c.clientSec),
    daemonsSec: sum((c) => c.daemonsSec),
    shimsSec: sum((c) => c.shimsSec),
    executions: sum((c) => c.executions),
    foreignShimsSec: sum((c) => c.foreignShimsSec),
    kernelSec: sum((c) => c.kernelSec ?? 0),
    foreignCreates: sum((c) => c.foreignCreates)
  }
}

const level = (v: VariantResult, c: number) => v.levels.find((l) => l.concurrency === c)

export const renderSection = (r: RunResults): string => {
  const ok = r.variants.filter((v) => v.status === "ok" && v.latencies.length > 0)
  const base = ok.find((v) => v.name === "docker-run")
  const baseLat = base ? summarize(base.latencies) : undefined
  const baseCpu = base ? cpuTotals(base) : undefined
  const cores = Number(r.machine.cores)
  const levels = [...new Set(r.variants.flatMap((v) => v.levels.map((l) => l.concurrency)))].sort((a, b) => a - b)
  const lines: Array<string> = []
  const p = (s = "") => lines.push(s)

  p(`Run \`${r.runId}\`, ${r.date}, ${Math.round(r.durationSec)} s. Command: \`${r.command}\`.`)
  p()
  p(
    `Machine: ${r.machine.cores} cores (${r.machine.cpuModel}), ${r.machine.memory}, kernel ${r.machine.kernel}, ${r.machine.os}; ` +
      `Docker Engine ${r.machine.engineVersion} (API ${r.machine.apiVersion}), ${r.machine.storageDriver}, cgroup v${r.machine.cgroupVersion}, runtime ${r.machine.runtime}; Node ${r.machine.node}.`
  )
  p()
  const c = r.contention
  const otherShare = c.otherSec / c.capacitySec
  p(
    `**Contention:** other engineers share this machine. Load average just before the run: ${c.loadStart.map((l) => l.toFixed(2)).join(" / ")} (1/5/15 min). ` +
      `During the run the host's ${cores} cores were busy for ${c.hostBusySec.toFixed(0)} CPU-s out of ${c.capacitySec.toFixed(0)}; this run accounts for ${c.runSec.toFixed(0)} (its processes, the engine's, its containers'), ` +
      `the rest, ~${c.otherSec.toFixed(0)} CPU-s (**${(otherShare * 100).toFixed(0)}% of the host's capacity**), is other people's work (an upper bound: kernel threads' work for this run's containers counts there too), including ${c.foreignCreates} containers they created on the same engine. ` +
      (otherShare > 0.05
        ? "Absolute figures are therefore pessimistic and noisier than on a quiet machine; the alternation spreads that drift over every variant alike, so the ratios are the figures to read."
        : "The machine was essentially quiet.")
  )
  p()
  const unavailable = r.variants.filter((v) => v.status !== "ok")
  for (const v of unavailable)
    p(
      `- ${VariantLabels[v.name]}: ${v.status === "unavailable" ? "not available" : "failed"} (${v.reason ?? ""}); skipped.`
    )
  if (unavailable.length > 0) p()

  p(
    `#### Latency of one \`print(1)\`, sequential (variants alternating in a shuffled order each round, ${base?.latencies.length ?? "?"} rounds)`
  )
  p()
  p(`Ratios are to \`docker run --rm\`; lower is better.`)
  p()
  p(`| variant | p50 | p95 | p99 | mean | failed |`)
  p(`|---|---:|---:|---:|---:|---:|`)
  for (const v of ok) {
    const s = summarize(v.latencies)
    p(
      `| ${VariantLabels[v.name]} | ${ms(s.p50)}${ratio(s.p50, baseLat?.p50)} | ${ms(s.p95)}${ratio(s.p95, baseLat?.p95)} | ${ms(s.p99)}${ratio(s.p99, baseLat?.p99)} | ${ms(s.mean)}${ratio(s.mean, baseLat?.mean)} | ${v.latencyFailures.length}/${v.latencies.length} |`
    )
  }
  p()
  const sdk = ok.find((v) => v.name === "sdk-cold")
  if (sdk && baseLat) {
    const r50 = summarize(sdk.latencies).p50 / baseLat.p50
    p(
      `SDK cold path p50 = **${r50.toFixed(2)}×** \`docker run\` (target ≤ 0.75×: ${r50 <= 0.75 ? "**met**" : "**not met**"}).`
    )
    p()
  }
  const raw = ok.find((v) => v.name === "dockerode")
  const tcv = ok.find((v) => v.name === "testcontainers")
  const notes: Array<string> = []
  if (raw)
    notes.push(
      `raw dockerode until the result was in hand (before its inline remove): p50 ${ms(summarize(raw.resultLatencies).p50)}`
    )
  if (tcv)
    notes.push(
      `testcontainers until the logs were read (before stop+remove): p50 ${ms(summarize(tcv.resultLatencies).p50)}`
    )
  const pool = ok.find((v) => v.name === "sdk-pool")
  if (pool)
    notes.push(
      `warm pool: ${pool.latencyCounters.claimed ?? 0} of ${pool.latencies.length} sequential executions claimed a pooled sandbox`
    )
  if (notes.length > 0) p(`Also measured: ${notes.join("; ")}.`)
  p()

  p(`#### Throughput (executions/s; ${r.options.count} executions per level, higher is better)`)
  p()
  p(
    `"until results" = first start to last result returned. "sustained" = until the last result AND the variant is back to its steady state (every container removed, warm pool refilled), which charges background removal and refill to the batch.`
  )
  p()
  p(`| variant | ${levels.map((c) => `c=${c}`).join(" | ")} | c=8 sustained |`)
  p(`|---|${levels.map(() => "---:").join("|")}|---:|`)
  for (const v of ok) {
    const cells = levels.map((c) => {
      const l = level(v, c)
      const b = base ? level(base, c) : undefined
      if (!l) return "–"
      const t = (l.executions / l.elapsedMs) * 1000
      const tb = b ? (b.executions / b.elapsedMs) * 1000 : undefined
      return `${rate(t)}${ratio(t, tb)}${l.failures > 0 ? ` ⚠ ${l.failures} failed` : ""}`
    })
    const l8 = level(v, 8)
    const b8 = base ? level(base, 8) : undefined
    const s8 = l8 ? (l8.executions / l8.settledMs) * 1000 : Number.NaN
    const sb8 = b8 ? (b8.executions / b8.settledMs) * 1000 : undefined
    p(`| ${VariantLabels[v.name]} | ${cells.join(" | ")} | ${rate(s8)}${ratio(s8, sb8)} |`)
  }
  p()
  if (ok.some((v) => v.name === "sdk-cold" || v.name === "sdk-pool")) {
    p(
      `The SDK ran with its defaults: at most 8 executions in flight (\`maxConcurrency\`), the rest queue, so c=16 is served 8 at a time.`
    )
    p()
  }

  const cgroup = r.cpuMethod === "cgroup"
  const enginePart = cgroup ? "engine processes" : "daemons"
  const sandboxPart = cgroup ? "sandbox processes" : "shim+runc+sandbox"
  p(`#### CPU per execution and client memory (all throughput batches of the variant together)`)
  p()
  p(`Engine CPU measured by ${r.cpuMethodNote ?? `polling /proc every ${r.cpuPollMs} ms`}.`)
  p()
  p(
    cgroup
      ? `client = the variant's own process (\`process.cpuUsage()\`) + the children it reaped (docker CLI processes); engine processes = dockerd, containerd, every containerd-shim and runc invocation (the cpuacct group they were moved into, which every process they start is born in); sandbox processes = the containers' own cgroups (the supervisor, python); kernel = kernel threads (network-namespace and cgroup teardown, RCU...) + softirq, read host-wide, so on a shared host it includes some of other people's work. `
      : `client = the variant's own process (\`process.cpuUsage()\`) + the children it reaped (docker CLI processes); daemons = dockerd + containerd; shim+runc+sandbox = the container's containerd-shim, the runc invocations and the sandbox's own processes (python), which the shim reaps; kernel = kernel threads + softirq, host-wide. `
  )
  p(
    `Peak RSS is the client process's, and in parentheses what it adds to a process that loads no variant (node + tsx, which runs the drivers: ${mb(r.floorRssKb)}; tsx also adds memory to every module it loads, so the SDK rows overstate what the SDK takes in a plain-Node process loading its compiled build, \`pnpm build\`'s dist/); for the CLI variants add one docker CLI process (its peak RSS shown) per concurrent execution.`
  )
  p()
  p(`| variant | client CPU | ${enginePart} | ${sandboxPart} | engine total | kernel | host total | client peak RSS |`)
  p(`|---|---:|---:|---:|---:|---:|---:|---:|`)
  const per = (x: number, n: number) => (x / n) * 1000
  const bc = baseCpu
  for (const v of ok) {
    const c = cpuTotals(v)
    if (!c || c.executions === 0) continue
    const n = c.executions
    const k = c.kernelSec ?? 0
    const bk = bc?.kernelSec ?? 0
    const cells = [
      [per(c.clientSec, n), bc ? per(bc.clientSec, bc.executions) : undefined],
      [per(c.daemonsSec, n), bc ? per(bc.daemonsSec, bc.executions) : undefined],
      [per(c.shimsSec, n), bc ? per(bc.shimsSec, bc.executions) : undefined],
      [per(c.daemonsSec + c.shimsSec, n), bc ? per(bc.daemonsSec + bc.shimsSec, bc.executions) : undefined],
      [per(k, n), bc ? per(bk, bc.executions) : undefined],
      [
        per(c.clientSec + c.daemonsSec + c.shimsSec + k, n),
        bc ? per(bc.clientSec + bc.daemonsSec + bc.shimsSec + bk, bc.executions) : undefined
      ]
    ].map(([x, b]) => `${ms(x!)}${ratio(x!, b)}`)
    const above = v.maxRssKb === undefined ? "" : ` (+${mb(Math.max(0, v.maxRssKb - r.floorRssKb))})`
    const rss = v.helperRssKb
      ? `${mb(v.maxRssKb)}${above} + ${mb(v.helperRssKb)} per docker CLI`
      : `${mb(v.maxRssKb)}${above}`
    p(`| ${VariantLabels[v.name]} | ${cells.join(" | ")} | ${rss} |`)
  }
  p()

  p(`#### Sustained throughput at c=8 against the engine's ceiling`)
  p()
  p(
    `Measured in the c=8 batch itself: ceiling = ${cores} cores / the engine's CPU-seconds per container in that batch (${enginePart} + ${sandboxPart}); "+ kernel" also charges the kernel's own work for the containers (host-wide, see above); the host ceiling also charges the client's CPU, i.e. what the host could do if it did nothing else. "Bound with this client" = engine CPU / everything an execution costs the host (client + engine + kernel): the share of the engine ceiling this variant would reach with the host 100% busy — the most any amount of concurrency can give it while its client runs on the same cores. Sustained = until the last result and the variant back to its steady state (containers removed, pool refilled).`
  )
  p()
  p(
    `| variant | engine CPU per execution | engine ceiling | c=8 sustained | **of engine ceiling** | of ceiling + kernel | of host ceiling | bound with this client |`
  )
  p(`|---|---:|---:|---:|---:|---:|---:|---:|`)
  for (const v of ok) {
    const l8 = level(v, 8)
    if (!l8 || l8.cpu.executions === 0) continue
    const c = l8.cpu
    const engine = (c.daemonsSec + c.shimsSec) / c.executions
    const kernel = (c.kernelSec ?? 0) / c.executions
    const host = (c.clientSec + c.daemonsSec + c.shimsSec + (c.kernelSec ?? 0)) / c.executions
    const s8 = (l8.executions / l8.settledMs) * 1000
    const of = (perExec: number) => `${(((s8 * perExec) / cores) * 100).toFixed(0)}%`
    // At 100% of the host, sustained = cores / host CPU per execution, so the share of the engine
    // ceiling cannot exceed engine / host: what this variant's client and the kernel leave the engine.
    p(
      `| ${VariantLabels[v.name]} | ${ms(engine * 1000)} | ${rate(cores / engine)} | ${rate(s8)} | **${of(engine)}** | ${of(engine + kernel)} | ${of(host)} | ${((engine / host) * 100).toFixed(0)}% |`
    )
  }
  p()

  const bursty = ok.filter((v) => v.burst !== undefined)
  if (bursty.length > 0) {
    const n = r.options.burst
    p(
      `#### Burst: ${n} requests arriving at once (median of ${bursty[0]!.burst!.elapsedMs.length} bursts${pool ? `; the warm pool holds ${n}` : ""})`
    )
    p()
    p(`| variant | all ${n} done | executions/s | p50 latency | max latency |`)
    p(`|---|---:|---:|---:|---:|`)
    const bb = base?.burst
    for (const v of bursty) {
      const b = v.burst!
      const e = median(b.elapsedMs)
      const s = summarize(b.latencies)
      const bs = bb ? summarize(bb.latencies) : undefined
      const be = bb ? median(bb.elapsedMs) : undefined
      p(
        `| ${VariantLabels[v.name]} | ${ms(e)}${ratio(e, be)} | ${rate((Number(n) / e) * 1000)}${ratio(1 / e, be === undefined ? undefined : 1 / be)} | ${ms(s.p50)}${ratio(s.p50, bs?.p50)} | ${ms(s.max)}${ratio(s.max, bs?.max)} |${b.failures > 0 ? ` ⚠ ${b.failures} failed` : ""}`
      )
    }
    if (pool?.burst)
      p(
        `\nWarm pool during the bursts: ${pool.burst.counters.claimed ?? 0} of ${pool.burst.latencies.length} executions claimed a pooled sandbox.`
      )
    p()
  }

  p(`#### Reading the figures`)
  p()
  p(
    `- Where the SDK's cold path gains on \`docker run\`: no CLI process per execution (a Go binary that starts, talks to the engine and keeps the attach open: ~20 ms of CPU each, see the client column, and the CLI's requests cost the daemons about twice what the API clients' do); it returns as soon as the supervisor's keyed end-of-run frame arrives instead of waiting for the engine to report the exit (the engine deletes the task and releases the container's streams before a wait returns, ~20–30 ms here); and the removal is off the caller's path. The raw dockerode flow makes the same Engine API calls as the SDK but waits for the engine's exit report, and removes inline.`
  )
  p(
    `- The warm pool takes create and start (~60–80 ms of engine work) off the request path: a claim only writes the program to a runner that is already waiting. It does not make the engine faster: every execution still costs one container, so under sustained load the pool drains and the throughput meets the engine's ceiling like the cold path does; what it absorbs is a burst up to its size.`
  )
  {
    // Why no variant reaches its engine ceiling: on this host the client runs on the same cores.
    const perVariant = ok.flatMap((v) => {
      const l8 = level(v, 8)
      if (!l8 || l8.cpu.executions === 0) return []
      const c = l8.cpu
      const n = c.executions
      return [
        {
          name: v.name,
          client: c.clientSec / n,
          engine: (c.daemonsSec + c.shimsSec) / n,
          kernel: (c.kernelSec ?? 0) / n
        }
      ]
    })
    if (perVariant.length > 0) {
      const shares = perVariant.map(
        (x) => `${VariantLabels[x.name]} ${((x.client / (x.client + x.engine + x.kernel)) * 100).toFixed(0)}%`
      )
      // The client CPU at which the bound reaches 90%: engine / (engine + client + kernel) = 0.9.
      const budgets = perVariant.map(
        (x) =>
          `${VariantLabels[x.name]} ${ms(Math.max(0, x.engine / 0.9 - x.engine - x.kernel) * 1000)} (it spends ${ms(x.client * 1000)})`
      )
      p(
        `- The engine ceiling assumes a client that costs nothing. Here the client shares the host's ${cores} cores with the engine, so its CPU comes out of the engine's share, and so does the kernel's own work for the containers; at c=8 the host is saturated (see the host-ceiling column), and no concurrency can take a variant past its "bound with this client". Client CPU as a share of everything an execution cost the host at c=8: ${shares.join(", ")}. For the bound to reach 90% of the engine ceiling, a variant's client may spend at most engine / 0.9 − engine − kernel per execution: ${budgets.join("; ")}. Only a client about as lean as the hand-written dockerode loop (five Engine API calls, nothing else) fits; the SDK's supervision (fibers, deadlines, output capture, the journal and its events) costs a few ms more per execution. \`pnpm bench:overhead\` measures that share without an engine (see its section below).`
      )
      // Layer by layer, at the same concurrency: the same five Engine API calls by hand, through the
      // SDK's runtime port alone, and through the whole executor.
      const at = (name: VariantName) => perVariant.find((x) => x.name === name)
      const [rawCpu, portCpu, sdkCpu] = [at("dockerode"), at("sdk-runtime"), at("sdk-cold")]
      if (rawCpu && portCpu && sdkCpu) {
        const bound = (x: { client: number; engine: number; kernel: number }) =>
          `${((x.engine / (x.engine + x.client + x.kernel)) * 100).toFixed(0)}%`
        p(
          `- Where the SDK's client CPU goes, layer by layer at c=8: the five Engine API calls written by hand ${ms(rawCpu.client * 1000)} per execution (bound ${bound(rawCpu)}); the same calls through the SDK's runtime port alone ${ms(portCpu.client * 1000)} (bound ${bound(portCpu)}), the port adding a deadline and abort per call and the engine-event witness that tells an outside kill from the program's own exit; the whole executor ${ms(sdkCpu.client * 1000)} (bound ${bound(sdkCpu)}), adding supervision (fibers, the request deadline, background removal), output capture, the supervisor's end-of-run report and the journal with its live events. The runtime-port row is a decomposition, not a way to run programs: it has none of the executor's guarantees.`
        )
      }
    }
  }
  p(
    `- \`docker exec\` is fast because it creates no container, and for the same reason gives no isolation between executions (files, processes and memory left by one are seen by the next).`
  )
  p(
    `- testcontainers runs \`python3 -c\` with the json-file log driver (it can neither write stdin nor read output without logs), so it skips the runner's protocol work; compare it with the \`python3 -c\` reference row for \`docker run\`.`
  )
  p(
    cgroup
      ? `- Engine CPU is measured per variant over its own throughput batches only; the engine processes' share includes whatever other users of the same engine asked of it meanwhile (containers they created are counted above; those alive through a batch are taken out of the sandbox column).`
      : `- Engine CPU is measured per variant over its own throughput batches only; the daemons' share includes whatever other users of the same engine asked of it meanwhile (counted above), and the shim column misses what a shim spends in its last ${r.cpuPollMs} ms (the cgroup method does not).`
  )
  p()
  p(`![Latency distributions](bench/results/latency.svg)`)
  p()
  p(
    `Hardening check before the run (a \`docker create\` with the derived flags vs an Engine API create with the SDK's options, both inspected): ${r.hardeningCheck.length === 0 ? "identical HostConfig and Config fields." : `DIFFERENCES: ${r.hardeningCheck.join("; ")}`}`
  )
  p()
  p(`<details><summary>The baseline command (derived from ContainerSpec.toCreateOptions)</summary>`)
  p()
  p("```sh")
  p(r.dockerRunCommand)
  p("```")
  p()
  p(`</details>`)
  p()
  p(
    `Raw data: [bench/results/run.json](bench/results/run.json). Engine CPU poll interval: ${r.cpuPollMs} ms. Containers left behind after the run: ${r.leftBehind}.`
  )
  return lines.join("\n")
}

const START = "<!-- bench:run:start -->"
const END = "<!-- bench:run:end -->"

const INTRO = `# Benchmarks

Figures measured on this project's development machines (2 cores, Docker Engine 20.10, runc, cgroup v1).
Each section says how it was produced; re-run it and the section is rewritten in place.
Benchmarks are not part of the tests.

## Journal

The event journal's benchmark is kept with its results in [bench/results/journal.md](bench/results/journal.md).

## Faster than \`docker run\`: the SDK side by side

\`pnpm bench\` ([bench/run.ts](bench/run.ts)) runs \`print(1)\` in Python through six paths (and one reference) in ONE run, alternating between
them (each round of the latency phase, each concurrency level and each burst visits every variant in a shuffled order),
so drift on the machine affects every variant alike:

1. \`docker run --rm -i\` with the SDK's hardening flags — what the Hermes agent shells out to, and the **baseline**
   (every figure also appears as a ratio to it). The flags are derived from \`ContainerSpec.toCreateOptions\`
   (cap-drop ALL, no-new-privileges, the shipped seccomp profile, read-only rootfs, the two tmpfs mounts, user 1001:1001,
   network none, 512m memory = memory-swap, 1 CPU, 256 pids, ulimits, private IPC and cgroup namespace, the
   supervisor as PID 1 (no \`--init\`), log driver none; the exact command is under the results);
   the program goes to the in-container supervisor on stdin (runner protocol 2 in plain mode: the header and the
   code, then the supervisor execs python3 in place, one interpreter start as for the SDK); \`docker run\`
   returns once the container has exited and been removed.
   Reference: the same \`docker run --rm\` running \`python3 -c 'print(1)'\` without the runner.
2. \`docker exec -i\` into one long-lived container with the same flags (Hermes' persistent mode: no isolation
   between calls; each concurrent worker uses its own code directory).
3. Raw dockerode, hand-written: create (the SDK's exact create options), attach (hijacked), arm the exit wait, start,
   write the program (same bytes), wait for the engine's exit report, remove — remove inline, as \`docker run --rm\` does.
4. testcontainers-node 11.14.0: a \`GenericContainer\` per execution with the same HostConfig (set through a subclass,
   since some fields have no builder method), Ryuk disabled, a pull policy that never pulls. Two unavoidable
   differences: testcontainers cannot write to a container's stdin, so the program is \`python3 -c 'print(1)'\`,
   and it reads output through the logs API, so this variant uses the json-file log driver. Its built-in
   \`Wait.forOneShotStartup()\` polls \`inspect\` once a second, which would put ~1 s on every execution; the
   benchmark gives it a wait strategy that uses the engine's own exit wait instead. stop+remove inline.
5. This SDK, cold path: \`createExecutor()\` once, then \`executeCode\` per execution, default options except
   \`sweepOnStart: false\` (the startup sweep is not on the measured path and could remove other engineers' orphans
   on a shared engine). It returns when the supervisor's end-of-run frame arrives (racing the engine's exit report) and
   removes the container in the background, off the caller's path (\`close()\` waits for it).
6. This SDK with the warm pool: \`createExecutor({ warmPool: { size: N, languages: ["python"] } })\`. If the option is
   not accepted, the run prints "warm pool: not available" and skips it. In the sequential phase the pool is full
   before each execution (the runner waits for the refill between executions); the throughput batches charge the
   refill to the batch in the "sustained" column.

Between two measured executions the runner waits (on the engine's event stream, without polling) until the previous
variant's containers are gone, so background removal is never charged to the next variant. Each variant runs in its
own process, so its client CPU and peak RSS are its own. Engine CPU (bench/engine.ts), as root on a cgroup v1 host
with its own cpuacct hierarchy: exact kernel accounting — dockerd, containerd and the shims are moved into a cpuacct
group (accounting only; moved back at the end), so every shim and runc invocation they start is accounted there, and
the sandboxes' own processes in the engine's container cgroups; nothing is sampled, nothing short-lived is missed.
Elsewhere (\`--cpu-method poll\`): dockerd's and containerd's utime+stime (+ reaped children) before and after each
batch, and each container's shim sampled every few milliseconds — what a shim spends in its last interval is missed
(on this machine that method read ~25% less engine CPU than the cgroups). Kernel threads and softirq are read
host-wide and shown on their own. The engine daemons are
shared with anyone else using the engine: the run counts the containers other people created meanwhile.

Options: \`pnpm bench -- --iterations 30 --count 48 --levels 1,4,8,16 --burst 8 --quick --variants docker-run,sdk-cold --no-write\`
(see \`pnpm bench -- --help\`). Ctrl-C stops the run and removes everything it created.

${START}
${END}
`

export const writeBenchmarksMd = (path: string, section: string) => {
  let text = existsSync(path) ? readFileSync(path, "utf8") : INTRO
  if (!text.includes(START) || !text.includes(END))
    text = `${text.trimEnd()}\n\n## Faster than \`docker run\`\n\n${START}\n${END}\n`
  const before = text.slice(0, text.indexOf(START) + START.length)
  const after = text.slice(text.indexOf(END))
  writeFileSync(path, `${before}\n${section}\n${after}`)
}
