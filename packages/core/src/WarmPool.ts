/**
 * The warm pool: sandboxes created and started ahead of demand, each with its
 * runner already waiting on stdin for exactly one program. An execution claims
 * one instead of creating (the per-execution flow is otherwise unchanged);
 * the container is still used once and destroyed, and a replacement is made in
 * the background. Isolation is the same as the cold path: same spec, same
 * hardening, same labels, watchdog and sweep coverage.
 *
 * The journal records it honestly: the pooled container's ContainerCreated and
 * ContainerStarted go to its own stream (the pool stream id) before any request
 * exists; the claiming execution records ContainerClaimed, linking the two.
 * Unclaimed containers are destroyed when idle longer than the TTL
 * (pool-recycled), when their runner dies, and when the pool drains on close
 * (pool-drained).
 */
import { Clock, Effect, Exit, Fiber, FiberSet, Option, Queue, Ref, Schema, type Scope } from "effect"
import { v7 as uuidv7 } from "uuid"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import * as Removals from "./kernel/Removals.js"
import * as Sandbox from "./kernel/Sandbox.js"
import { ContainerNamePrefix } from "./Labels.js"
import type { Language } from "./Language.js"
import { type OutputReceiver, type SandboxRef, SandboxRuntime, type SandboxSpec } from "./SandboxRuntime.js"
import * as Schemas from "./Schemas.js"

/** How long an unclaimed sandbox waits before it is replaced, unless `idleTtlMs` says otherwise: 5 min. */
export const DEFAULT_IDLE_TTL_MS = 300_000

/** The pool's options as users write them (an executor's `warmPool`). */
export const WarmPoolOptionsSchema = Schema.Struct({
  /** Ready sandboxes kept per language. */
  size: Schemas.PositiveInt(256),
  /** Unclaimed sandboxes older than this are replaced. Default 300 000 (5 min). */
  idleTtlMs: Schema.optional(Schemas.PositiveInt()),
  /** Languages to keep warm. Default: all three. */
  languages: Schema.optional(Schema.Array(Schemas.LanguageLiteral)),
  /**
   * Modules each warm sandbox's interpreter imports before it is claimed: `{ python: ["pandas",
   * "matplotlib.pyplot"] }`. A claim then finds them loaded (`import pandas` ~1 s). Their memory
   * counts against each run's limit; the sandbox stays single-use. A module that fails to import is
   * ignored there: the program's own import raises the real error.
   */
  preload: Schema.optional(Schema.Struct({ python: Schema.optional(Schemas.PythonModules) }))
}).annotations({ message: () => "an object { size, languages?, idleTtlMs?, preload? }" })

export interface WarmPoolOptions extends Schemas.Input<typeof WarmPoolOptionsSchema> {}

/** How long an unclaimed sandbox of this pool waits before it is replaced (and so may live, unclaimed). */
export const idleTtlMs = (options: WarmPoolOptions): number => options.idleTtlMs ?? DEFAULT_IDLE_TTL_MS

/** A started sandbox whose supervisor waits for its one program. */
export type WarmSandbox = Sandbox.WarmSandbox

export interface WarmPool {
  /** A ready sandbox for this language, if one is waiting; never waits for one to be made. */
  readonly claim: (language: Language) => Effect.Effect<Option.Option<WarmSandbox>>
  readonly ready: Effect.Effect<Readonly<Record<string, number>>>
}

interface Entry extends WarmSandbox {
  readonly readyAt: number
}

export interface WarmPoolDeps {
  readonly options: WarmPoolOptions
  readonly specFor: (language: Language, poolStreamId: string, containerName: string) => SandboxSpec
  readonly append: (streamId: string, event: JournalEvent) => Effect.Effect<unknown, JournalError>
}

const discard = () => {}

export const make = (deps: WarmPoolDeps): Effect.Effect<WarmPool, never, SandboxRuntime | Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* SandboxRuntime
    const languages = deps.options.languages ?? (["python", "javascript", "bash"] as const)
    const idleTtl = idleTtlMs(deps.options)
    // Made first, so its stragglers get their last attempt after the drain below (kernel/Removals.ts).
    const removals = yield* Removals.make({
      runtime,
      append: (streamId, event) => deps.append(streamId, event),
      logPrefix: "warm pool: "
    })
    const ready = new Map<Language, Array<Entry>>(languages.map((l) => [l, []]))
    // Every made, unclaimed sandbox, registered in the same uninterruptible step that made it,
    // so a drain that interrupts the refill loop mid-way still finds (and removes) all of them.
    const unclaimed = new Set<Entry>()
    const making = new Map<Language, number>(languages.map((l) => [l, 0]))
    const wake = yield* Queue.sliding<void>(1)
    const draining = yield* Ref.make(false)
    const background = yield* FiberSet.make()

    type PoolDestroyReason = "pool-recycled" | "pool-drained"
    const destroy = (
      entry: { readonly poolStreamId: string; readonly container: SandboxRef },
      reason: PoolDestroyReason
    ) => removals.destroy(entry.poolStreamId, entry.container, reason).pipe(Effect.uninterruptible)

    const takeOut = (language: Language, entry: Entry): boolean => {
      if (!unclaimed.delete(entry)) return false
      const list = ready.get(language) ?? []
      const i = list.indexOf(entry)
      if (i >= 0) list.splice(i, 1)
      return true
    }

    const kernel = { runtime, append: deps.append }
    const produce = (language: Language) =>
      Effect.gen(function* () {
        const poolStreamId = uuidv7()
        const containerName = `${ContainerNamePrefix}${poolStreamId}`
        // Owned by this step: whatever fails after the create (its record included) destroys it.
        let created: SandboxRef | undefined
        const own = (c: SandboxRef) => Effect.sync(() => void (created = c))
        const made = Effect.gen(function* () {
          const container = yield* Sandbox.create(kernel, {
            streamId: poolStreamId,
            spec: deps.specFor(language, poolStreamId, containerName),
            own,
            pooled: true,
            // Recycled once it waited idleTtl unclaimed (counted from its readiness: at the earliest then).
            deadline: (yield* Clock.currentTimeMillis) + idleTtl,
            // No answer (the engine died or froze) does not mean no container: it may exist, or land later.
            unanswered: (name) => FiberSet.run(background, removals.removeUnanswered(name)).pipe(Effect.asVoid)
          })
          let target: OutputReceiver = { stdout: discard, stderr: discard }
          const started = yield* Sandbox.start(kernel, poolStreamId, container, {
            stdout: (b) => target.stdout(b),
            stderr: (b) => target.stderr(b)
          })
          const entry: Entry = {
            ...started,
            poolStreamId,
            readyAt: yield* Clock.currentTimeMillis,
            bind: (receiver) => {
              target = receiver
            }
          }
          unclaimed.add(entry)
          return entry
        })
        return yield* made.pipe(
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) || created === undefined
              ? Effect.void
              : destroy({ poolStreamId, container: created }, "pool-recycled")
          )
        )
      }).pipe(Effect.uninterruptible)

    /** Keep each language's pool full; back off while the engine fails. */
    const refill = Effect.gen(function* () {
      let failures = 0
      while (!(yield* Ref.get(draining))) {
        const now = yield* Clock.currentTimeMillis
        for (const language of languages) {
          // Recycle the idle ones first, so the pool never serves a stale sandbox.
          for (const entry of [...(ready.get(language) ?? [])]) {
            if (now - entry.readyAt > idleTtl && takeOut(language, entry))
              yield* FiberSet.run(background, destroy(entry, "pool-recycled"))
          }
          const missing = deps.options.size - (ready.get(language)?.length ?? 0) - (making.get(language) ?? 0)
          if (missing <= 0) continue
          making.set(language, (making.get(language) ?? 0) + missing)
          const made = yield* Effect.forEach(Array.from({ length: missing }), () => Effect.exit(produce(language)), {
            concurrency: 4
          })
          making.set(language, (making.get(language) ?? 0) - missing)
          for (const exit of made) {
            if (Exit.isFailure(exit)) {
              failures++
              continue
            }
            failures = 0
            const entry = exit.value
            if (yield* Ref.get(draining)) {
              if (takeOut(language, entry)) yield* destroy(entry, "pool-drained")
              continue
            }
            ready.get(language)?.push(entry)
            // A runner that dies before its claim leaves the pool. (Its streams end when it exits;
            // awaiting `exit` would also ask the engine why, for every pooled sandbox.)
            yield* FiberSet.run(
              background,
              entry.io.closed.pipe(
                Effect.zipRight(
                  Effect.suspend(() => (takeOut(language, entry) ? destroy(entry, "pool-recycled") : Effect.void))
                )
              )
            )
          }
        }
        const backoff = failures === 0 ? 1_000 : Math.min(100 * 2 ** Math.min(failures, 6), 5_000)
        yield* Queue.take(wake).pipe(Effect.timeout(backoff), Effect.ignore)
      }
    })

    const refillFiber = yield* Effect.forkScoped(refill)
    // Drain on close: stop refilling, then destroy every unclaimed sandbox.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Ref.set(draining, true)
        yield* Fiber.interrupt(refillFiber)
        const all = [...unclaimed]
        unclaimed.clear()
        yield* Effect.forEach(all, (entry) => destroy(entry, "pool-drained"), { concurrency: 8, discard: true })
      })
    )

    return {
      claim: (language) =>
        Effect.sync(() => {
          const entry = ready.get(language)?.shift()
          if (entry === undefined) return Option.none()
          unclaimed.delete(entry)
          return Option.some<WarmSandbox>(entry)
        }).pipe(Effect.tap(() => Queue.offer(wake, undefined))),
      ready: Effect.sync(() => Object.fromEntries([...ready.entries()].map(([l, list]) => [l, list.length])))
    }
  })
