/**
 * The parts of a journal that do not depend on storage: validation, publishing after
 * commit, replay paging, follow (replay → live without gap or duplicate), diagnostics and
 * orderly shutdown. A backend only numbers, stores and pages events.
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { EventEnvelope, EventType } from "../Event.js"
import type { FollowOptions, JournalService, JournalStats, ReplayOptions } from "../Journal.js"
import { JournalError, type VersionConflict } from "../JournalError.js"
import { type PreparedAppend, prepare } from "./envelope.js"

export interface PageQuery {
  /** Exclusive lower bound. */
  readonly after: number
  /** Inclusive upper bound. */
  readonly to: number | undefined
  readonly streamId: string | undefined
  readonly types: ReadonlyArray<EventType> | undefined
  readonly limit: number
}

export interface Page {
  readonly rows: ReadonlyArray<EventEnvelope>
  /**
   * Highest sequence the query is known to have covered: no matching row exists in
   * `(after, scannedTo]` besides `rows`. Lets a filtered follower skip the non-matching
   * tail instead of rescanning it on every poll. Must be >= the last row's sequence.
   */
  readonly scannedTo: number
}

export interface Backend {
  /**
   * Numbers and stores the events in one atomic step (sequence = last + 1 computed inside
   * it, so sequences are gap-free and visible in order) and returns the envelopes.
   * (Synchronous backends return an `Either`, which is an `Effect`.)
   */
  readonly commit: (
    appends: ReadonlyArray<PreparedAppend>,
    timestamp: number
  ) => Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError | VersionConflict>
  /** One page of a consistent snapshot, ascending by sequence. */
  readonly readPage: (query: PageQuery) => Effect.Effect<Page, JournalError>
  readonly lastSequence: () => Effect.Effect<number, JournalError>
  readonly streamVersion: (streamId: string) => Effect.Effect<number, JournalError>
  /** A durable backend's stored sweep mark (JournalService.sweepMark). */
  readonly sweepMark?: {
    readonly get: () => Effect.Effect<number | undefined, JournalError>
    readonly set: (sequence: number) => Effect.Effect<void, JournalError>
  }
  readonly close: () => void
  readonly pageSize: number
  /** JournalService.sharedAcrossHosts. */
  readonly sharedAcrossHosts?: true
  /**
   * How often followers look for events written by others (other processes). `undefined`
   * when nobody else can write, or when `watchCommits` tells of every such commit: followers
   * then sleep until a commit wakes them (a backend that pushes may still set a slow interval
   * as a safety net).
   */
  readonly pollInterval: Duration.DurationInput | undefined
  /**
   * For stores that push other writers' commits (PostgreSQL's LISTEN/NOTIFY): calls `wake`
   * after each commit made elsewhere, and each time its channel (re)connects (whatever was
   * sent while it was down is lost, so followers must look again). Never ends; the core forks
   * it on the first `follow` and interrupts it when the journal closes.
   */
  readonly watchCommits?: (wake: () => void) => Effect.Effect<never>
}

export interface Core {
  readonly journal: JournalService
  readonly diagnostics: { readonly stats: Effect.Effect<JournalStats> }
}

const closedError = () => new JournalError({ message: "the journal is closed" })

export const make = (backend: Backend): Effect.Effect<Core, never, Scope.Scope> =>
  Effect.gen(function* () {
    let closed = false
    let activeReaders = 0
    let activeFollowers = 0
    let liveSubscribers = 0
    let followerPolls = 0
    let watching = false
    const scope = yield* Effect.scope
    const closedSignal = yield* Deferred.make<void>()
    const pubsub = yield* PubSub.unbounded<EventEnvelope>()
    // Followers do not consume `live` (an unbounded buffer would grow while they replay a
    // long history); each holds a 1-slot sliding "something was committed" signal instead.
    const wakers = new Set<Queue.Queue<void>>()

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        closed = true
        yield* Deferred.succeed(closedSignal, undefined)
        yield* PubSub.shutdown(pubsub)
        for (const waker of wakers) yield* Queue.shutdown(waker)
        wakers.clear()
        backend.close()
      })
    )

    const wakeFollowers = () => {
      for (const waker of wakers) waker.unsafeOffer(undefined)
    }

    const guarded = <A, E>(f: () => Effect.Effect<A, E>): Effect.Effect<A, E | JournalError> =>
      Effect.suspend((): Effect.Effect<A, E | JournalError> => (closed ? Effect.fail(closedError()) : f()))

    const commit = (
      inputs: Parameters<typeof prepare>[0]
    ): Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError | VersionConflict> =>
      // Uninterruptible: once the backend has committed, the events must also be published,
      // or `live` subscribers would silently miss them.
      Effect.uninterruptible(
        Effect.gen(function* () {
          const prepared = yield* prepare(inputs)
          const timestamp = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const envelopes = yield* guarded(() => backend.commit(prepared, timestamp))
          if (envelopes.length > 0) {
            yield* PubSub.publishAll(pubsub, envelopes)
            wakeFollowers()
          }
          return envelopes
        })
      )

    const tracked = <A, E, R>(
      stream: Stream.Stream<A, E, R>,
      onStart: () => void,
      onStop: () => void
    ): Stream.Stream<A, E | JournalError, R> =>
      Stream.unwrapScoped(
        Effect.suspend(() => (closed ? Effect.fail(closedError()) : Effect.void)).pipe(
          Effect.zipRight(Effect.acquireRelease(Effect.sync(onStart), () => Effect.sync(onStop))),
          Effect.as(stream)
        )
      )

    const read = (options: ReplayOptions = {}): Stream.Stream<EventEnvelope, JournalError> =>
      tracked(
        Stream.unwrap(
          Effect.gen(function* () {
            // Bound the replay to what is committed now, so it is finite even under load.
            const last = yield* guarded(backend.lastSequence)
            const to = options.toSequence === undefined ? last : Math.min(options.toSequence, last)
            const from = Math.max(1, options.fromSequence ?? 1)
            if (options.types !== undefined && options.types.length === 0) return Stream.empty
            return Stream.paginateChunkEffect(from - 1, (after) =>
              guarded(() =>
                backend.readPage({
                  after,
                  to,
                  streamId: options.streamId,
                  types: options.types,
                  limit: backend.pageSize
                })
              ).pipe(
                Effect.map((page) => {
                  const next = Math.max(page.scannedTo, page.rows.at(-1)?.sequence ?? after)
                  const done = page.rows.length < backend.pageSize || next >= to
                  return [
                    Chunk.unsafeFromArray(page.rows as Array<EventEnvelope>),
                    done ? Option.none() : Option.some(next)
                  ]
                })
              )
            )
          })
        ),
        () => activeReaders++,
        () => activeReaders--
      )

    const wake = Effect.acquireRelease(
      Effect.gen(function* () {
        const waker = yield* Queue.sliding<void>(1)
        wakers.add(waker)
        return waker
      }),
      (waker) =>
        Effect.zipRight(
          Effect.sync(() => wakers.delete(waker)),
          Queue.shutdown(waker)
        )
    )

    const follow = (options: FollowOptions = {}): Stream.Stream<EventEnvelope, JournalError> =>
      tracked(
        Stream.unwrapScoped(
          Effect.gen(function* () {
            // Subscribe to the wake-up signal *before* the first page: a commit that lands
            // between a page read and the wait then still wakes us (no lost wake-up).
            const waker = yield* wake
            if (backend.watchCommits !== undefined && !watching) {
              // Started after this follower's waker exists: the channel's first "(re)connected"
              // wake-up reaches it, so commits made before the channel listened are not missed.
              watching = true
              yield* Effect.forkIn(backend.watchCommits(wakeFollowers), scope)
            }
            const types = options.types
            if (types !== undefined && types.length === 0) {
              return Stream.fromEffect(Deferred.await(closedSignal)).pipe(Stream.drain)
            }
            let cursor = Math.max(1, options.fromSequence ?? 1) - 1
            const waitForCommit =
              backend.pollInterval === undefined
                ? Effect.raceFirst(Queue.take(waker), Deferred.await(closedSignal))
                : Effect.raceFirst(Queue.take(waker), Deferred.await(closedSignal)).pipe(
                    Effect.timeoutOption(backend.pollInterval)
                  )
            const pull: Effect.Effect<Chunk.Chunk<EventEnvelope>, Option.Option<JournalError>> = Effect.gen(
              function* () {
                while (true) {
                  if (closed) return yield* Effect.fail(Option.none())
                  followerPolls++
                  const { rows, scannedTo } = yield* backend
                    .readPage({
                      after: cursor,
                      to: undefined,
                      streamId: options.streamId,
                      types,
                      limit: backend.pageSize
                    })
                    .pipe(Effect.mapError(Option.some))
                  // Resume strictly after what was delivered or proven absent: never twice,
                  // never skipping (sequences become visible in order, see Backend.commit).
                  cursor = Math.max(cursor, scannedTo, rows.at(-1)?.sequence ?? cursor)
                  if (rows.length > 0) return Chunk.unsafeFromArray(rows as Array<EventEnvelope>)
                  yield* waitForCommit.pipe(Effect.catchAllCause(() => Effect.void))
                }
              }
            )
            return Stream.repeatEffectChunkOption(pull)
          })
        ),
        () => activeFollowers++,
        () => activeFollowers--
      )

    const live: Stream.Stream<EventEnvelope> = Stream.unwrapScoped(
      Effect.gen(function* () {
        if (closed) return Stream.empty
        const subscription = yield* PubSub.subscribe(pubsub)
        // Counted only once subscribed, so `liveSubscribers` tells a test when a `live`
        // consumer is guaranteed to see the next commit.
        yield* Effect.acquireRelease(
          Effect.sync(() => liveSubscribers++),
          () => Effect.sync(() => liveSubscribers--)
        )
        return Stream.fromQueue(subscription)
      })
    )

    const journal: JournalService = {
      append: (input) => commit([input]),
      appendBatch: (inputs) => commit(inputs) as Effect.Effect<ReadonlyArray<EventEnvelope>, JournalError>,
      read,
      follow,
      live,
      lastSequence: guarded(backend.lastSequence),
      streamVersion: (streamId) => guarded(() => backend.streamVersion(streamId)),
      ...(backend.sharedAcrossHosts === true ? { sharedAcrossHosts: true as const } : {}),
      ...(backend.sweepMark === undefined
        ? {}
        : {
            sweepMark: {
              get: guarded(backend.sweepMark.get),
              set: (sequence: number) => guarded(() => backend.sweepMark!.set(sequence))
            }
          })
    }

    const diagnostics = {
      stats: Effect.sync(
        (): JournalStats => ({
          activeReaders,
          activeFollowers,
          liveSubscribers,
          followerPolls,
          open: !closed
        })
      )
    }

    return { journal, diagnostics }
  })
