/**
 * pnpm bench:kubernetes — the Kubernetes runtime against Docker on this machine, side by side in one
 * run (issue 30): a cold python `print(1)` (a fresh sandbox each run, no pool) and a warm-pool claim
 * (a pool of 1, each run once the pool has its sandbox ready), on the local one-node cluster
 * (scripts/kubernetes-local.sh) and on the machine's Docker engine; and the cluster's bring-up and
 * tear-down, when this starts it (a cluster already up is used as it is and left up).
 *
 * Same image, limits (1 CPU, 512 MiB) and executor options everywhere; N rounds, each round one run
 * per variant in a shuffled order (drift falls on all alike), after 2 warm-up runs each. The ratios
 * are to Docker's cold p50 measured in the same run. Prints a markdown table for BENCHMARKS.md.
 *
 *   HERMES_BENCH_K8S_RUNS=30 pnpm bench:kubernetes
 */
import { execFileSync, spawnSync } from "node:child_process"
import { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "@hermes-sandbox/docker"
import { percentile, rng, shuffle } from "./stats.js"

const N = Number(process.env.HERMES_BENCH_K8S_RUNS ?? 30)
const script = new URL("../scripts/kubernetes-local.sh", import.meta.url).pathname
const common: CreateExecutorOptions = {
  journal: "memory",
  timeoutMs: 60_000,
  maxConcurrency: 1,
  sweepOnStart: false,
  cpus: 1,
  memory: "512m"
}

const seconds = (f: () => void): number => {
  const t0 = performance.now()
  f()
  return (performance.now() - t0) / 1000
}

let startedHere = false
let upSeconds: number | undefined
let kubeconfig = spawnSync("bash", [script, "status"], { encoding: "utf8" }).stdout.trim().split("\n").pop() ?? ""
if (kubeconfig === "" || !kubeconfig.endsWith(".kubeconfig")) {
  upSeconds = seconds(() => {
    kubeconfig = execFileSync("bash", [script, "up"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, HERMES_K8S_IMAGES: "hermes-sandbox/python" }
    })
      .trim()
      .split("\n")
      .pop()!
  })
  startedHere = true
}

const kubernetes = {
  kubernetes: {
    kubeconfig,
    namespace: "default",
    imagePullPolicy: "Never" as const,
    allowDegraded: ["pids-limit", "ulimits", "tmpfs-options", "masked-paths", "network-none", "logging-off"] as const
  }
}
const pool = { warmPool: { size: 1, languages: ["python" as const] } }

interface Variant {
  readonly name: string
  readonly executor: SandboxExecutor
  readonly pooled: boolean
  readonly times: Array<number>
}
const variants: Array<Variant> = []
let downSeconds: number | undefined
try {
  const make = async (name: string, options: CreateExecutorOptions, pooled: boolean) =>
    variants.push({ name, executor: await createExecutor({ ...common, ...options }), pooled, times: [] })
  await make("Docker, cold", {}, false)
  await make("Kubernetes, cold", { runtime: kubernetes }, false)
  await make("Docker, warm-pool claim", pool, true)
  await make("Kubernetes, warm-pool claim", { runtime: kubernetes, ...pool }, true)

  const once = async (v: Variant) => {
    if (v.pooled)
      while (((await v.executor.stats()).warm["python"] ?? 0) < 1) await new Promise((r) => setTimeout(r, 10))
    const t0 = performance.now()
    const r = await v.executor.executeCode({ language: "python", code: "print(1)" })
    if (r.stdout !== "1\n") throw new Error(`${v.name}: unexpected output ${JSON.stringify(r)}`)
    return performance.now() - t0
  }
  for (const v of variants) for (let i = 0; i < 2; i++) await once(v)
  const random = rng(30)
  for (let round = 0; round < N; round++) for (const v of shuffle(variants, random)) v.times.push(await once(v))
} finally {
  for (const v of variants) await v.executor.close().catch(() => undefined)
  if (startedHere) downSeconds = seconds(() => execFileSync("bash", [script, "down"], { stdio: "ignore" }))
}

const base = percentile(variants[0]!.times, 50)
console.log(
  `pnpm bench:kubernetes, ${new Date().toISOString()}, ${N} rounds, python print(1), 1 CPU, 512 MiB, maxConcurrency 1; Kubernetes v1.20.2 one node (containerd 1.6, runc) on 127.0.0.1, Docker 20.10 (runc), same machine\n`
)
console.log("| variant | runs | p50 (ms) | p95 (ms) | min | max | p50 / Docker cold p50 |")
console.log("| --- | --- | --- | --- | --- | --- | --- |")
for (const v of variants) {
  const p50 = percentile(v.times, 50)
  console.log(
    `| ${v.name} | ${v.times.length} | ${p50.toFixed(0)} | ${percentile(v.times, 95).toFixed(0)} | ${Math.min(...v.times).toFixed(0)} | ${Math.max(...v.times).toFixed(0)} | ${(p50 / base).toFixed(2)} |`
  )
}
if (upSeconds !== undefined)
  console.log(`\ncluster bring-up (scripts/kubernetes-local.sh up, 1 image): ${upSeconds.toFixed(1)} s`)
if (downSeconds !== undefined) console.log(`cluster tear-down (down): ${downSeconds.toFixed(1)} s`)
