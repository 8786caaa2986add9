/**
 * The session pool: sessions opened ahead of demand, each with its Python kernel started, so that a
 * caller's `open` and first cell skip the sandbox's create and start and the kernel's start
 * (IPython's import). The one-shot warm pool (WarmPool.ts) does this for single executions; a
 * pooled session is a whole session, opened by the same path as any other (session/handle.ts), and
 * handed over once: never shared, never returned to the pool.
 *
 * Which `open` it serves: one whose options resolve to the pool's session (plan.ts), the kernel's
 * `eager` and the tags aside — same image and image id, limits, mounts, environment, kernel
 * options. Any other opens cold, as without a pool. The tags are the caller's from the claim on
 * (they are the journal's labels, not the sandbox's: `SessionClaimed` and every later call carry
 * them); nothing else is adapted.
 *
 * The journal says what happened: the pooled session's stream holds SessionOpened, its container's
 * events and KernelStarted when it was made, then SessionClaimed (how long it waited) when a caller
 * took it. Its maximum lifetime counts from its open; its idle time from the claim. Unclaimed ones
 * older than `idleTtlMs` are closed ("pool-recycled") and replaced; the service's close ends them
 * with every other session.
 */
import { Clock, Effect, Exit, Option, Queue, Redacted, Schema } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import * as Schemas from "../Schemas.js"
import type { MadeHandle } from "./handle.js"
import { type SessionOptions, SessionOptionsSchema, type SessionPlan } from "./plan.js"

/** How long an unclaimed session waits before it is replaced, unless `idleTtlMs` says otherwise: 5 min. */
export const DEFAULT_POOL_IDLE_TTL_MS = 300_000

/** The pool's options as users write them (the sessions service's `pool`). */
export const SessionPoolOptionsSchema = Schema.Struct({
  /** Sessions kept open and ready. */
  size: Schemas.PositiveInt(32),
  /** Unclaimed sessions older than this are closed and replaced. Default 300 000 (5 min). */
  idleTtlMs: Schema.optional(Schemas.PositiveInt()),
  /** Start each one's Python kernel (with `session.kernel`'s options) before it is claimed. Default true. */
  kernel: Schema.optional(Schemas.Flag),
  /** The options its sessions are opened with; an `open` with options that resolve the same claims one. Default {}. */
  session: Schema.optional(SessionOptionsSchema)
}).annotations({ message: () => "an object { size, idleTtlMs?, kernel?, session? }" })

export interface SessionPoolOptions extends Omit<Schemas.Input<typeof SessionPoolOptionsSchema>, "session"> {
  readonly session?: SessionOptions
}

/**
 * What makes two opens the same session: the plan, but for the kernel's `eager` (the pool starts
 * its kernels either way) and the tags (set at the claim). Secrets are compared by value, in memory only.
 */
export const planKey = (plan: SessionPlan): string =>
  JSON.stringify({ ...plan, tags: undefined }, (key, value) =>
    key === "eager" ? undefined : Redacted.isRedacted(value) ? { redacted: Redacted.value(value) } : value
  )

export interface SessionPool {
  /** A ready session for this plan and fingerprint (image id included), if one waits; never waits for one. */
  readonly claim: (plan: SessionPlan, fingerprint: string) => Effect.Effect<Option.Option<MadeHandle>>
  /** Sessions waiting, ready (their kernel started, when the pool starts kernels). */
  readonly ready: Effect.Effect<number>
}

interface Entry {
  readonly made: MadeHandle
  readonly fingerprint: string
  readonly readyAt: number
}

export interface SessionPoolDeps {
  readonly size: number
  readonly idleTtlMs: number
  /** The pool's plan (planKey's input); opens that resolve to another never claim. */
  readonly plan: SessionPlan
  /** Open one session of the pool's plan, its kernel starting when the pool starts kernels. */
  readonly open: Effect.Effect<{ readonly made: MadeHandle; readonly fingerprint: string }, unknown>
  readonly append: (streamId: string, event: JournalEvent) => Effect.Effect<void, JournalError>
  /** Fibers that end with the service (the refill loop, retirements). */
  readonly run: (effect: Effect.Effect<void>) => Effect.Effect<void>
}

export const make = (deps: SessionPoolDeps): Effect.Effect<SessionPool> =>
  Effect.gen(function* () {
    const key = planKey(deps.plan)
    const ready: Array<Entry> = []
    const wake = yield* Queue.sliding<void>(1)
    const retire = (entry: Entry, reason: string) => deps.run(entry.made.retire(reason))

    /** Keep it full, one open at a time (a 2-core host's engine is busy enough); back off while opens fail. */
    const refill = Effect.gen(function* () {
      let failures = 0
      while (true) {
        const now = yield* Clock.currentTimeMillis
        for (const entry of [...ready]) {
          const open = (yield* entry.made.session.status).open
          if (open && now - entry.readyAt <= deps.idleTtlMs) continue
          const i = ready.indexOf(entry)
          // Claimed meanwhile: the caller's now.
          if (i < 0) continue
          ready.splice(i, 1)
          if (open) yield* retire(entry, "pool-recycled")
        }
        if (ready.length < deps.size) {
          const opened = yield* Effect.exit(deps.open)
          if (Exit.isSuccess(opened)) {
            failures = 0
            yield* opened.value.made.kernelSettled
            ready.push({ ...opened.value, readyAt: yield* Clock.currentTimeMillis })
            continue
          }
          failures++
          yield* Effect.logWarning(`session pool: a session could not be opened (${failures} in a row)`, opened.cause)
        }
        const wait =
          failures === 0 ? Math.min(deps.idleTtlMs, 30_000) : Math.min(500 * 2 ** Math.min(failures, 6), 30_000)
        yield* Queue.take(wake).pipe(Effect.timeout(wait), Effect.ignore)
      }
    })
    yield* deps.run(Effect.interruptible(refill))

    const claim = (plan: SessionPlan, fingerprint: string) =>
      Effect.gen(function* () {
        if (planKey(plan) !== key) return Option.none()
        const now = yield* Clock.currentTimeMillis
        while (ready.length > 0) {
          const entry = ready.shift()!
          if (entry.fingerprint !== fingerprint || now - entry.readyAt > deps.idleTtlMs) {
            // Its image moved on, or it waited too long: not served.
            yield* retire(entry, "pool-recycled")
            continue
          }
          if (!(yield* entry.made.session.status).open) continue
          yield* entry.made.claimed(plan.tags)
          yield* Queue.offer(wake, undefined)
          const sessionId = entry.made.session.sessionId
          const data = {
            sessionId,
            waitedMs: now - entry.readyAt,
            ...(plan.tags === undefined ? {} : { tags: plan.tags })
          }
          yield* deps
            .append(sessionId, { type: "SessionClaimed", data })
            .pipe(
              Effect.catchAllCause((cause) => Effect.logWarning("session pool: SessionClaimed not recorded", cause))
            )
          return Option.some(entry.made)
        }
        yield* Queue.offer(wake, undefined)
        return Option.none()
      })

    return { claim, ready: Effect.sync(() => ready.length) }
  })
