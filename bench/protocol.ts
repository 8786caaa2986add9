/** Messages between bench/run.ts and its per-variant driver processes. */
import type { VariantContext } from "./variants.js"

export interface ClientCpu {
  /** process.cpuUsage() user + system, seconds. */
  readonly ownSec: number
  /** CPU of reaped children (docker CLI processes), seconds. */
  readonly childrenSec: number
  readonly maxRssKb: number
}

export interface BatchResult {
  /** From the first start to the last result returned. */
  readonly elapsedMs: number
  /** Per execution, until the call returned (removal included where the variant removes inline). */
  readonly latencies: ReadonlyArray<number>
  /** Per execution, until the result was in hand (differs only where removal follows inline). */
  readonly resultLatencies: ReadonlyArray<number>
  readonly failures: ReadonlyArray<string>
}

export type ToDriver =
  | { readonly type: "init"; readonly variant: string; readonly ctx: VariantContext }
  | { readonly type: "batch"; readonly id: number; readonly total: number; readonly concurrency: number }
  | { readonly type: "cpu"; readonly id: number }
  | { readonly type: "probe"; readonly id: number }
  | { readonly type: "close" }

export type FromDriver =
  | { readonly type: "ready"; readonly info: Record<string, unknown> }
  | { readonly type: "unavailable"; readonly reason: string }
  | { readonly type: "failed"; readonly reason: string }
  | { readonly type: "batch"; readonly id: number; readonly result: BatchResult }
  | { readonly type: "cpu"; readonly id: number; readonly cpu: ClientCpu; readonly counters: Record<string, number> }
  | { readonly type: "probe"; readonly id: number; readonly helperRssKb: number | null }
  | { readonly type: "closed" }
