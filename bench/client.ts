/**
 * `pnpm bench:client`: the client's own cost (issue 27), side by side in one run, as whole processes.
 *
 * 1. Import: `node` importing each package's built entry (`--conditions=hermes-sandbox-dist`: its
 *    bundle/, what an installed package runs; a baseline before the bundles: its dist/) against
 *    `require("dockerode")` and an empty `node -e 0`.
 * 2. CLI: the installed CLI (packages/cli/bundle/hermes-sandbox.cjs, the package's bin, code cache
 *    warmed first) running `run -e 'print(1)'` and `--version`, against `docker run --rm` of the same
 *    hardened `python3 -c 'print(1)'` container (the flags bench/run.ts derives from the SDK's options);
 *    `run` both directly (--no-daemon) and through a daemon this bench starts (`hermes-sandbox daemon
 *    start`, python pool of 2, the default journal as the direct run's) in a runtime directory of its
 *    own (XDG_RUNTIME_DIR), stopped at the end.
 * 3. Per execution: client CPU and c=8 throughput from `pnpm bench` (bench/run.ts, its own measurement,
 *    run as a child with --json) for the SDK (cold), raw dockerode and testcontainers-node.
 *
 * Sections 1 and 2 interleave their commands (A B C … A B C …, N rounds after one unmeasured warm-up
 * each) and take medians of wall time and CPU (user+sys of the process and the children it reaped, by
 * /usr/bin/time). Needs `pnpm build` and a running engine with the images.
 *
 *   pnpm bench:client [-- --runs 10] [--no-exec] [--count 48] [--only import,cli,exec] [--baseline DIR] [--otlp]
 *
 * --baseline DIR adds the same import and CLI rows for another built checkout (e.g. a worktree of
 * the commit before a change, built), interleaved with this one's: a before/after in one run, and
 * the two CLI bundles' sizes.
 * --otlp adds the CLI's `run` and `--version` with OTEL_EXPORTER_OTLP_ENDPOINT set (traces on: the
 * OpenTelemetry part of the bundle evaluated, the spans exported at the end) to a loopback receiver
 * in this process (its CPU is not the command's).
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { BenchLabel, benchSpec, cliFlags, createOptionsFor, PROGRAM, PYTHON_IMAGE } from "./hardening.js"
import type { RunResults } from "./report.js"
import { median } from "./stats.js"

const argv = process.argv.slice(2)
if (argv[0] === "--") argv.shift()
const { values: opts } = parseArgs({
  args: argv,
  options: {
    runs: { type: "string", default: "10" },
    count: { type: "string", default: "48" },
    only: { type: "string", default: "import,cli,exec" },
    "no-exec": { type: "boolean", default: false },
    baseline: { type: "string" },
    otlp: { type: "boolean", default: false }
  }
})
const runs = Number(opts.runs)
const sections = new Set(opts.only.split(","))
if (opts["no-exec"]) sections.delete("exec")

const root = fileURLToPath(new URL("..", import.meta.url))
const node = process.execPath
const log = (s: string) => process.stderr.write(`${s}\n`)

interface Command {
  readonly label: string
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  /** Variables added to the environment. */
  readonly env?: Readonly<Record<string, string>>
  /** What the process must print on stdout (checked on every run). */
  readonly expect?: RegExp
}

interface Sample {
  readonly wallSec: number
  readonly cpuSec: number
}

/** One whole process under /usr/bin/time: wall and user+sys CPU (its own and its reaped children's). */
const once = (c: Command): Promise<Sample> =>
  new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/time", ["-f", "@@time %e %U %S", ...c.argv], {
      cwd: c.cwd,
      ...(c.env === undefined ? {} : { env: { ...process.env, ...c.env } }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("error", reject)
    child.on("close", (code) => {
      const m = /@@time (\S+) (\S+) (\S+)\s*$/.exec(stderr)
      if (code !== 0 || m === null || (c.expect !== undefined && !c.expect.test(stdout)))
        reject(
          new Error(`${c.label}: exit ${code}, stdout ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr)}`)
        )
      else resolve({ wallSec: Number(m[1]), cpuSec: Number(m[2]) + Number(m[3]) })
    })
  })

/**
 * Warm-up once each, then `runs` rounds of every command in turn; medians. A command that fails its
 * warm-up is left out (its row shows –, the reason is logged); a later failure stops the bench.
 */
const interleaved = async (commands: ReadonlyArray<Command>) => {
  const samples = new Map<string, Array<Sample>>()
  for (const c of commands)
    await once(c).then(
      () => samples.set(c.label, []),
      (e: unknown) => log(`left out: ${e instanceof Error ? e.message : String(e)}`)
    )
  const working = commands.filter((c) => samples.has(c.label))
  for (let round = 0; round < runs; round++) {
    process.stderr.write(process.stderr.isTTY ? `\r\x1b[Kround ${round + 1}/${runs}` : "")
    for (const c of working) samples.get(c.label)!.push(await once(c))
  }
  if (process.stderr.isTTY) process.stderr.write("\r\x1b[K")
  const failed = { wallSec: Number.NaN, cpuSec: Number.NaN }
  return new Map(
    commands.map((c) => {
      const s = samples.get(c.label)
      return [
        c.label,
        s === undefined ? failed : { wallSec: median(s.map((x) => x.wallSec)), cpuSec: median(s.map((x) => x.cpuSec)) }
      ] as const
    })
  )
}

const fmt = (x: number, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : "–")
const out: Array<string> = []
const print = (s: string) => {
  out.push(s)
  process.stdout.write(`${s}\n`)
}
const table = (
  rows: ReadonlyArray<{ label: string; wallSec: number; cpuSec: number }>,
  base: { wallSec: number; cpuSec: number },
  baseName: string
) => {
  print(`| command | wall (s) | CPU (s) | wall ÷ ${baseName} | CPU ÷ ${baseName} |`)
  print("| --- | ---: | ---: | ---: | ---: |")
  for (const r of rows)
    print(
      `| ${r.label} | ${fmt(r.wallSec)} | ${fmt(r.cpuSec)} | ${fmt(r.wallSec / base.wallSec)}× | ${fmt(r.cpuSec / base.cpuSec)}× |`
    )
}

const baseline = opts.baseline === undefined ? undefined : resolve(opts.baseline)
const packageDir = (name: string, from = root) => join(from, "packages", name)
const importOf = (pkg: string, from = root): Command => ({
  label: `\`import("@hermes-sandbox/${pkg}")\`${from === root ? "" : " (baseline)"}`,
  // From packages/mcp every workspace package resolves (mcp depends on events, core and docker).
  cwd: packageDir("mcp", from),
  argv: [
    node,
    "--conditions=hermes-sandbox-dist",
    "--input-type=module",
    "-e",
    `await import(${JSON.stringify(pkg === "mcp" ? "@hermes-sandbox/mcp" : `@hermes-sandbox/${pkg}`)})`
  ]
})

const main = async () => {
  log(
    `bench:client: ${cpus().length} cores, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}, ${runs} rounds`
  )
  print(`Command: \`pnpm bench:client${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}\`; ${cpus().length} cores,`)
  print(
    `Node ${process.version}, load at start ${loadavg()[0]!.toFixed(2)}${sections.has("import") || sections.has("cli") ? `; medians of ${runs} interleaved rounds` : ""}.`
  )
  if (baseline !== undefined) print(`Baseline (rows marked so): the build in ${baseline}.`)
  print("")

  if (sections.has("import")) {
    log("[import] ...")
    const dockerode: Command = {
      label: '`require("dockerode")`',
      cwd: packageDir("docker"),
      argv: [node, "-e", 'require("dockerode")']
    }
    const empty: Command = { label: "`node -e 0`", cwd: root, argv: [node, "-e", "0"] }
    const packages = ["events", "core", "docker", "mcp"]
    const commands = [
      empty,
      dockerode,
      ...packages.flatMap((p) => [importOf(p), ...(baseline === undefined ? [] : [importOf(p, baseline)])])
    ]
    const m = await interleaved(commands)
    print("Importing each package's built entry (a whole `node` process):")
    print("")
    table(
      commands.map((c) => ({ label: c.label, ...m.get(c.label)! })),
      m.get(dockerode.label)!,
      "dockerode"
    )
    print("")
  }

  if (sections.has("cli")) {
    log("[cli] ...")
    const bundle = join(packageDir("cli"), "bundle", "hermes-sandbox.cjs")
    const baselineBundle = baseline && join(packageDir("cli", baseline), "bundle", "hermes-sandbox.cjs")
    const labels = { [BenchLabel.run]: "client", [BenchLabel.variant]: "docker-run-c" }
    const { name: _name, ...options } = createOptionsFor(benchSpec("-", labels, ["python3", "-c", PROGRAM], false))
    const dockerRun: Command = {
      label: "`docker run --rm <hardened flags> python3 -c 'print(1)'`",
      cwd: root,
      argv: ["docker", "run", "--rm", ...cliFlags(options), PYTHON_IMAGE, "python3", "-c", PROGRAM],
      expect: /^1\n$/
    }
    const cliRun: Command = {
      label: "`hermes-sandbox run -e 'print(1)'` (direct: --no-daemon)",
      cwd: root,
      argv: [node, bundle, "run", "--no-daemon", "-e", PROGRAM],
      expect: /^1\n$/
    }
    // The daemon, in a runtime directory of the bench's own (nothing else finds it there).
    const daemonEnv = { XDG_RUNTIME_DIR: mkdtempSync(join(tmpdir(), "bench-client-daemon-")) }
    const cliDaemon: Command = {
      label: "`hermes-sandbox run -e 'print(1)'` (daemon)",
      cwd: root,
      env: daemonEnv,
      argv: [node, bundle, "run", "-e", PROGRAM],
      expect: /^1\n$/
    }
    const cliVersion: Command = {
      label: "`hermes-sandbox --version`",
      cwd: root,
      argv: [node, bundle, "--version"]
    }
    const baselineRun: ReadonlyArray<Command> =
      baselineBundle === undefined
        ? []
        : [
            {
              ...cliRun,
              label: "`hermes-sandbox run -e 'print(1)'` (baseline, --no-daemon)",
              argv: [node, baselineBundle, "run", "--no-daemon", "-e", PROGRAM]
            },
            { ...cliVersion, label: "`hermes-sandbox --version` (baseline)", argv: [node, baselineBundle, "--version"] }
          ]
    // --otlp: a receiver that answers every export (and counts them), the traced rows pointed at it.
    let exports = 0
    const receiver = opts.otlp
      ? createServer((req, res) => {
          req.resume()
          req.on("end", () => {
            exports++
            res.writeHead(200).end()
          })
        })
      : undefined
    if (receiver !== undefined) await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r))
    const otel =
      receiver === undefined
        ? undefined
        : { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}` }
    const traced: ReadonlyArray<Command> =
      otel === undefined
        ? []
        : [
            { ...cliRun, label: "`hermes-sandbox run -e 'print(1)'` (--no-daemon, OTLP endpoint set)", env: otel },
            { ...cliVersion, label: "`hermes-sandbox --version` (OTLP endpoint set)", env: otel }
          ]
    // The code cache is written by the first run of the launcher (scripts/launcher.cjs).
    for (const b of [bundle, ...(baselineBundle === undefined ? [] : [baselineBundle])])
      spawnSync(node, [b, "--version"], { stdio: "ignore" })
    const daemon = (...args: Array<string>) =>
      spawnSync(node, [bundle, "daemon", ...args], { env: { ...process.env, ...daemonEnv }, encoding: "utf8" })
    const started = daemon("start", "--pool-size", "2", "--language", "python")
    if (started.status !== 0) throw new Error(`daemon start: ${started.stderr}`)
    try {
      const commands = [dockerRun, cliRun, cliDaemon, ...baselineRun, ...traced, cliVersion]
      const { pid } = JSON.parse(daemon("status", "--json").stdout) as { pid: number }
      // The daemon's own CPU over the rounds (its runs, and its pool's refills), from /proc.
      const daemonCpuSec = () => {
        const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
          .replace(/^.*\) /, "")
          .split(" ")
        return (Number(fields[11]) + Number(fields[12])) / 100
      }
      const cpuBefore = daemonCpuSec()
      const m = await interleaved(commands)
      const daemonCpu = daemonCpuSec() - cpuBefore
      const served = JSON.parse(daemon("status", "--json").stdout) as { served: number; handedBack: number }
      print("The installed CLI (packages/cli/bundle/hermes-sandbox.cjs, code cache warm) against `docker run --rm`:")
      print("")
      table(
        commands.map((c) => ({ label: c.label, ...m.get(c.label)! })),
        m.get(dockerRun.label)!,
        "docker run"
      )
      print("")
      print(
        `(The daemon served ${served.served} runs, handed back ${served.handedBack}; its own CPU over them, pool refills included, ${fmt((daemonCpu / Math.max(served.served, 1)) * 1000, 0)} ms per run, not in its row's CPU.)`
      )
      if (receiver !== undefined)
        print(`(The OTLP receiver took ${exports} exports from the rows with the endpoint set: one per traced run.)`)
      if (baselineBundle !== undefined) {
        const size = (b: string) => statSync(join(b, "..", "cli.cjs")).size
        print(
          `(The CLI's bundle, cli.cjs: ${size(bundle).toLocaleString("en")} bytes; the baseline's ${size(baselineBundle).toLocaleString("en")} bytes.)`
        )
      }
    } finally {
      receiver?.close()
      daemon("stop")
      rmSync(daemonEnv.XDG_RUNTIME_DIR, { recursive: true, force: true })
    }
    print("")
  }

  if (sections.has("exec")) {
    log("[exec] pnpm bench (bench/run.ts) at c=8: sdk-cold, dockerode, testcontainers ...")
    const dir = mkdtempSync(join(tmpdir(), "bench-client-"))
    const json = join(dir, "run.json")
    const args = [
      "--variants",
      "sdk-cold,dockerode,testcontainers",
      "--levels",
      "8",
      "--count",
      String(Number(opts.count)),
      "--iterations",
      "0",
      "--warmup",
      "1",
      "--burst",
      "0",
      "--burst-rounds",
      "0",
      "--no-write",
      "--json",
      json
    ]
    const r = spawnSync(node, ["--import", "tsx", join(root, "bench", "run.ts"), ...args], {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"]
    })
    if (r.status !== 0) throw new Error(`bench/run.ts exited ${r.status}`)
    const run = JSON.parse(readFileSync(json, "utf8")) as RunResults
    rmSync(dir, { recursive: true, force: true })
    const rows = run.variants.map((v) => {
      const l = v.levels.find((x) => x.concurrency === 8)
      return {
        name: v.name,
        cpuMs: l ? (l.cpu.clientSec / l.cpu.executions) * 1000 : Number.NaN,
        perSec: l ? l.executions / (l.elapsedMs / 1000) : Number.NaN,
        settledPerSec: l ? l.executions / (l.settledMs / 1000) : Number.NaN
      }
    })
    const tc = rows.find((x) => x.name === "testcontainers")
    print(
      `Per execution at c=8 (\`pnpm bench -- ${args.filter((a, i) => a !== "--json" && args[i - 1] !== "--json").join(" ")}\`, ${Number(opts.count)} executions each):`
    )
    print("")
    print(
      "| client | client CPU per execution (ms) | ÷ testcontainers | executions/s (results) | executions/s (settled) | settled ÷ testcontainers |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for (const x of rows)
      print(
        `| ${x.name} | ${fmt(x.cpuMs, 1)} | ${fmt(x.cpuMs / (tc?.cpuMs ?? Number.NaN))}× | ${fmt(x.perSec, 1)} | ${fmt(x.settledPerSec, 1)} | ${fmt(x.settledPerSec / (tc?.settledPerSec ?? Number.NaN))}× |`
      )
    print("")
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    log(`bench:client failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`)
    process.exit(1)
  }
)
