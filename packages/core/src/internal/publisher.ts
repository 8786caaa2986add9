/**
 * Publication after commit, shared by the Executor and Sessions: events go to
 * the journal first and only the committed envelopes reach listeners, which
 * are registered synchronously (so nothing appended after `unsafeSubscribe`
 * returns can be missed). A listener that throws is dropped, never the append.
 */
import { Effect, Stream } from "effect"
import type { EventEnvelope, Journal, JournalEvent } from "@hermes-sandbox/events"
import type { SandboxMetrics } from "../Metrics.js"

export interface Publisher {
  /** Append to one stream and publish what was committed. */
  readonly append: (
    streamId: string,
    ...events: ReadonlyArray<JournalEvent>
  ) => Effect.Effect<ReadonlyArray<EventEnvelope>, Journal.JournalError>
  readonly unsafeSubscribe: (listener: (event: EventEnvelope) => void) => () => void
  readonly events: Stream.Stream<EventEnvelope>
}

/** With `metrics`, each append is timed and each committed event observed (Metrics.ts), before the listeners. */
export const makePublisher = (
  journal: Journal.Journal["Type"],
  executorId: string,
  metrics?: SandboxMetrics
): Publisher => {
  const listeners = new Set<(event: EventEnvelope) => void>()
  const publish = (committed: ReadonlyArray<EventEnvelope>) =>
    Effect.sync(() => {
      for (const event of committed) {
        metrics?.observe(event)
        for (const listener of listeners) {
          try {
            listener(event)
          } catch {
            listeners.delete(listener)
          }
        }
      }
    })
  const unsafeSubscribe = (listener: (event: EventEnvelope) => void) => {
    listeners.add(listener)
    return () => {
      listeners.delete(listener)
    }
  }
  return {
    // No expected version is given, so a VersionConflict cannot happen: it would be a defect.
    append: (streamId, ...events) => {
      const appended = journal.append({ streamId, events, executorId })
      return (
        metrics === undefined
          ? appended
          : Effect.suspend(() => {
              const started = performance.now()
              return Effect.ensuring(
                appended,
                Effect.sync(() => metrics.appended((performance.now() - started) / 1000))
              )
            })
      ).pipe(Effect.catchTag("VersionConflict", Effect.die), Effect.tap(publish))
    },
    unsafeSubscribe,
    events: Stream.asyncPush<EventEnvelope>((emit) =>
      Effect.acquireRelease(
        Effect.sync(() => unsafeSubscribe((e) => emit.single(e))),
        (unsubscribe) => Effect.sync(unsubscribe)
      )
    )
  }
}
