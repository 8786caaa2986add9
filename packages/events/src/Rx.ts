/**
 * The RxJS edge, for callers that do not use Effect: Observables over journal streams and
 * a Promise-based client.
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
// The class alone (rxjs's own module, the one its index re-exports, so operators from "rxjs" apply):
// the index loads all ~220 of rxjs's modules, ~100 ms of every import of this package.
import { Observable } from "rxjs/internal/Observable"
import type { EventEnvelope } from "./Event.js"
import {
  type AppendInput,
  type BatchAppendInput,
  type FollowOptions,
  Journal,
  JournalDiagnostics,
  type JournalStats,
  type ReplayOptions
} from "./Journal.js"
import type { JournalError } from "./JournalError.js"
import * as MemoryJournal from "./MemoryJournal.js"
import * as PostgresJournal from "./PostgresJournal.js"
import * as SqliteJournal from "./SqliteJournal.js"

type AnyRuntime<R> = Runtime.Runtime<R> | ManagedRuntime.ManagedRuntime<R, unknown>

/**
 * An Observable that runs `stream` on each subscription and interrupts it (running its
 * finalizers: statements, timers, subscriptions) on unsubscribe. The stream's typed failure
 * is delivered as the Observable's error; completion and interruption from inside (e.g. the
 * journal was closed) complete the Observable.
 *
 * The stream starts synchronously inside `subscribe`, up to its first asynchronous step
 * (so a `live` subscription is in place when `subscribe` returns).
 *
 * @category conversions
 */
export const toObservable: {
  <A, E>(stream: Stream.Stream<A, E>): Observable<A>
  <A, E, R>(stream: Stream.Stream<A, E, R>, runtime: AnyRuntime<R>): Observable<A>
} = <A, E, R>(stream: Stream.Stream<A, E, R>, runtime?: AnyRuntime<R>): Observable<A> =>
  observable(stream, runtime, undefined)

interface FiberHooks {
  readonly started: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => void
  readonly ended: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => void
}

const observable = <A, E, R>(
  stream: Stream.Stream<A, E, R>,
  runtime: AnyRuntime<R> | undefined,
  hooks: FiberHooks | undefined
): Observable<A> =>
  new Observable<A>((subscriber) => {
    const fiber = forkWith(runtime)(
      // Pulling by hand (rather than Stream.runForEach) runs the stream's set-up, e.g. a
      // PubSub subscription, synchronously inside subscribe(): a caller that subscribes to
      // live$ and then appends sees its own append.
      Effect.scoped(
        Effect.gen(function* () {
          const pull = yield* Stream.toPull(stream)
          while (!subscriber.closed) {
            const chunk = yield* Effect.catchAll(
              pull,
              (e): Effect.Effect<Chunk.Chunk<A> | undefined, E> =>
                Option.isNone(e) ? Effect.succeed(undefined) : Effect.fail(e.value)
            )
            if (chunk === undefined) return
            for (const a of chunk) {
              if (subscriber.closed) return
              subscriber.next(a)
            }
          }
        })
      )
    )
    hooks?.started(fiber)
    fiber.addObserver((exit) => {
      hooks?.ended(fiber)
      if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) subscriber.complete()
      else subscriber.error(Cause.squash(exit.cause))
    })
    return () => {
      // Asynchronous: the stream's finalizers run right after, on the fiber.
      fiber.unsafeInterruptAsFork(FiberId.none)
    }
  })

const forkWith =
  <R>(runtime: AnyRuntime<R> | undefined) =>
  <A, E>(effect: Effect.Effect<A, E, R>): Fiber.RuntimeFiber<A, unknown> => {
    if (runtime === undefined) return Effect.runFork(effect as Effect.Effect<A, E>)
    if (ManagedRuntime.isManagedRuntime(runtime)) {
      return (runtime as ManagedRuntime.ManagedRuntime<R, unknown>).runFork(effect)
    }
    return Runtime.runFork(runtime as Runtime.Runtime<R>)(effect)
  }

/**
 * A Promise/RxJS view of a journal.
 *
 * @category models
 */
export interface JournalClient extends AsyncDisposable {
  /** Finite replay; completes after the last event committed when subscribing. */
  readonly replay: (options?: ReplayOptions) => Observable<EventEnvelope>
  /** Replay, then live events (including other processes' appends). Never completes on its own. */
  readonly follow: (options?: FollowOptions) => Observable<EventEnvelope>
  /** Events appended through this client from subscription on. */
  readonly live$: Observable<EventEnvelope>
  /** Rejects with `JournalError` or `VersionConflict` (the error objects themselves). */
  readonly append: (input: AppendInput) => Promise<ReadonlyArray<EventEnvelope>>
  readonly appendBatch: (input: ReadonlyArray<BatchAppendInput>) => Promise<ReadonlyArray<EventEnvelope>>
  readonly lastSequence: () => Promise<number>
  readonly streamVersion: (streamId: string) => Promise<number>
  /** Open readers/followers/subscriptions: lets callers check they released everything. */
  readonly stats: () => Promise<JournalStats>
  /** Ends every running Observable (they complete), then closes the journal. Idempotent. */
  readonly close: () => Promise<void>
}

/**
 * @category models
 */
export type OpenJournalOptions = SqliteJournal.Options | PostgresJournal.Options | { readonly memory: true }

/**
 * Opens a journal (SQLite by default, at {@link SqliteJournal.defaultJournalPath}; PostgreSQL
 * with `{ url }`) on a `ManagedRuntime` of its layer.
 *
 * ```ts
 * await using journal = await openJournal()
 * journal.follow({ types: ["ContainerExited"] }).subscribe(console.log)
 * ```
 *
 * @category constructors
 */
export const openJournal = async (options: OpenJournalOptions = {}): Promise<JournalClient> => {
  const layer =
    "memory" in options && options.memory
      ? MemoryJournal.layer()
      : "url" in options
        ? PostgresJournal.layer(options)
        : SqliteJournal.layer(options as SqliteJournal.Options)
  const managed = ManagedRuntime.make(layer)
  const runtime = await managed.runtime().catch(async (error: unknown) => {
    await managed.dispose()
    throw unwrap(error)
  })
  const { journal, diagnostics } = Runtime.runSync(runtime)(
    Effect.all({ journal: Journal, diagnostics: JournalDiagnostics })
  )

  // Fibers of running Observables, so close() can end them before the database goes.
  const running = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  let closing: Promise<void> | undefined

  const hooks: FiberHooks = { started: (fiber) => running.add(fiber), ended: (fiber) => running.delete(fiber) }
  const observe = <A>(stream: Stream.Stream<A, JournalError>): Observable<A> =>
    new Observable<A>((subscriber) =>
      closing !== undefined ? subscriber.complete() : observable(stream, runtime, hooks).subscribe(subscriber)
    )

  const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
    closing !== undefined
      ? Promise.reject(new Error("the journal client is closed"))
      : Runtime.runPromiseExit(runtime)(effect).then((exit) => {
          if (Exit.isSuccess(exit)) return exit.value
          throw Cause.squash(exit.cause)
        })

  const close = (): Promise<void> => {
    closing ??= (async () => {
      await Runtime.runPromise(runtime)(Fiber.interruptAll(Array.from(running)))
      await managed.dispose()
    })()
    return closing
  }

  return {
    replay: (options) => observe(journal.read(options)),
    follow: (options) => observe(journal.follow(options)),
    live$: observe(journal.live),
    append: (input) => run(journal.append(input)),
    appendBatch: (input) => run(journal.appendBatch(input)),
    lastSequence: () => run(journal.lastSequence),
    streamVersion: (streamId) => run(journal.streamVersion(streamId)),
    stats: () => run(diagnostics.stats),
    close,
    [Symbol.asyncDispose]: close
  }
}

// ManagedRuntime rejects with a FiberFailure; callers want the JournalError itself.
const unwrap = (error: unknown): unknown => {
  if (Runtime.isFiberFailure(error)) return Cause.squash(error[Runtime.FiberFailureCauseId])
  return error
}
