/**
 * What an owner of containers (the executor, the sessions service) does toward the other
 * processes that share its engine and journal, from its start to its close: hold its ownership
 * lease (OwnerLease.ts), sweep the orphans of gone owners at start, and again periodically
 * (Sweep.ts): by default every lease period on a journal shared across hosts, where a whole host
 * can die with its watchdog and only another host's sweep is left to remove what it ran. Acquired first in the owner's scope, so the lease is released last,
 * after the owner's own finalizers removed its containers.
 */
import { Effect, type Scope } from "effect"
import { Journal } from "@hermes-sandbox/events"
import type { SandboxDefaults } from "../ExecutorConfig.js"
import * as OwnerLease from "../OwnerLease.js"
import type { SandboxRuntime } from "../SandboxRuntime.js"
import { periodically, sweep, type SweepReport } from "../Sweep.js"

export const start = (
  executorId: string,
  options: Pick<SandboxDefaults, "ownerLease" | "sweepOnStart" | "sweepIntervalMs">,
  /** How the owner is named in its log lines ("", "session "). */
  who: string,
  /** Told each sweep's report. */
  onReport?: (report: SweepReport) => void
): Effect.Effect<void, never, SandboxRuntime | Journal.Journal | Scope.Scope> =>
  Effect.gen(function* () {
    const journal = yield* Journal.Journal
    const lease = options.ownerLease
    if (OwnerLease.enabledFor(journal, lease)) yield* OwnerLease.hold(executorId, lease)
    // sweepOnStart: false means another service of this process sweeps (DockerExecutor.layerWithSessions), so it never sweeps.
    if (options.sweepOnStart === false) return
    const { clockSkewMs, leaseMs } = OwnerLease.resolve(lease === false ? {} : lease)
    const intervalMs =
      options.sweepIntervalMs === false
        ? undefined
        : (options.sweepIntervalMs ?? (journal.sharedAcrossHosts === true ? leaseMs : undefined))
    const leases = OwnerLease.makeBook(journal)
    // Orphans of gone owners are removed and their lifecycles closed before we add our own.
    yield* sweep({ executorId, clockSkewMs, leases, ...(onReport === undefined ? {} : { onReport }) }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning(`${who}startup sweep failed; continuing`, cause))
    )
    if (intervalMs !== undefined)
      yield* periodically({
        executorId,
        clockSkewMs,
        leases,
        intervalMs,
        ...(onReport === undefined ? {} : { onReport })
      })
  })
