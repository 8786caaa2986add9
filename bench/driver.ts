/**
 * One benchmark variant in its own process, commanded by bench/run.ts over IPC.
 * Its own CPU (plus that of the children it reaps, e.g. docker CLI processes)
 * and its peak RSS are therefore the variant's client cost and nothing else.
 */
import { readFileSync } from "node:fs"
import { Label } from "@hermes-sandbox/core/Labels"
import { BenchLabel } from "./benchLabel.js"
import { makeVariant, Unavailable, type Variant, type VariantContext, type VariantName } from "./variants.js"
import type { BatchResult, ClientCpu, ToDriver, FromDriver } from "./protocol.js"

const send = (m: FromDriver) => process.send?.(m)

/** The process's own CPU and that of its reaped children (fields 16-17 of /proc/self/stat, in clock ticks). */
export const clientCpu = (): ClientCpu => {
  const u = process.cpuUsage()
  const stat = readFileSync("/proc/self/stat", "utf8")
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const ticks = Number(f[13]) + Number(f[14])
  return { ownSec: (u.user + u.system) / 1e6, childrenSec: ticks / 100, maxRssKb: process.resourceUsage().maxRSS }
}

let variant: Variant | undefined
let context: VariantContext | undefined
let closing: Promise<void> | undefined
const inFlight = new Set<Promise<unknown>>()

/** Remove whatever of this variant is still there (an execution cut short, a container created as we stopped). */
const sweepOwn = async () => {
  if (context === undefined) return
  const { default: Dockerode } = await import("dockerode")
  const docker = new Dockerode()
  const labels = [`${BenchLabel.run}=${context.runId}`, `${Label.executor}=${context.executorId}`]
  for (const label of labels) {
    const found = await docker.listContainers({ all: true, filters: { label: [label] } }).catch(() => [])
    await Promise.all(
      found.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {})
      )
    )
  }
}

const close = () =>
  (closing ??= (async () => {
    // Let executions in progress finish (each removes its own container), within bounds.
    await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, 15_000))])
    try {
      await variant?.close()
    } catch (e) {
      process.stderr.write(`driver: close failed: ${String(e)}\n`)
    }
    await sweepOwn().catch((e) => process.stderr.write(`driver: sweep failed: ${String(e)}\n`))
  })())

const runBatch = async (total: number, concurrency: number): Promise<BatchResult> => {
  const latencies: Array<number> = []
  const resultLatencies: Array<number> = []
  const failures: Array<string> = []
  let next = 0
  const t0 = performance.now()
  const worker = async (slot: number) => {
    while (next < total && closing === undefined) {
      next++
      const s = performance.now()
      try {
        const running = variant!.execute(slot)
        inFlight.add(running)
        void running.finally(() => inFlight.delete(running)).catch(() => {})
        const o = await running
        const e = performance.now()
        latencies.push(e - s)
        resultLatencies.push((o.resultAtMs ?? e) - s)
        if (!o.ok) failures.push(o.detail ?? "wrong result")
      } catch (err) {
        latencies.push(performance.now() - s)
        failures.push(err instanceof Error ? err.message : String(err))
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, (_, i) => worker(i)))
  return { elapsedMs: performance.now() - t0, latencies, resultLatencies, failures }
}

process.on("message", async (raw) => {
  const m = raw as ToDriver
  try {
    switch (m.type) {
      case "init": {
        try {
          // "floor": loads nothing, so its RSS is what node + tsx cost before any variant's libraries.
          context = m.ctx
          variant =
            m.variant === "floor"
              ? { init: async () => ({}), execute: async () => ({ ok: true }), close: async () => {} }
              : await makeVariant(m.variant as VariantName, m.ctx)
          const info = await variant.init()
          send({ type: "ready", info })
        } catch (e) {
          send({
            type: e instanceof Unavailable ? "unavailable" : "failed",
            reason: e instanceof Error ? e.message : String(e)
          })
        }
        break
      }
      case "batch":
        send({ type: "batch", id: m.id, result: await runBatch(m.total, m.concurrency) })
        break
      case "cpu":
        send({ type: "cpu", id: m.id, cpu: clientCpu(), counters: variant?.counters?.() ?? {} })
        break
      case "probe":
        send({ type: "probe", id: m.id, helperRssKb: variant?.probeHelperRss ? await variant.probeHelperRss() : null })
        break
      case "close":
        await close()
        send({ type: "closed" })
        process.disconnect?.()
        break
    }
  } catch (e) {
    send({ type: "failed", reason: e instanceof Error ? (e.stack ?? e.message) : String(e) })
  }
})

// Ctrl-C reaches the whole process group: the parent orchestrates the cleanup, so ignore it here.
process.on("SIGINT", () => {})
process.on("SIGTERM", () => void close().then(() => process.exit(143)))
// The parent died without saying goodbye: clean up what this variant created, then go.
process.on("disconnect", () => void close().then(() => process.exit(0)))
