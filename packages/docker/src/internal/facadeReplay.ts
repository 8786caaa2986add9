/**
 * Past events for the Promise facades, next to their live `events$`: the facade's journal read
 * from the start (or from a sequence, one stream, some types) as an Observable that completes
 * after the last stored event. Works for the in-memory journal too, which nothing else can reach,
 * while the facade is open.
 */
import { Effect, type ManagedRuntime, Stream } from "effect"
// The class alone, not rxjs's index (events/src/Rx.ts says why).
import { Observable } from "rxjs/internal/Observable"
import { type EventEnvelope, Journal, toObservable } from "@hermes-sandbox/events"
import { type ReplayOptions } from "@hermes-sandbox/events/Journal"

export type FacadeReplay = (options?: ReplayOptions) => Observable<EventEnvelope>

/** `closed()`: the facade was closed (its journal with it: an in-memory one is gone); `refusal` is the error then. */
export const facadeReplay =
  (
    runtime: ManagedRuntime.ManagedRuntime<Journal.Journal, unknown>,
    closed: () => boolean,
    refusal: () => Error
  ): FacadeReplay =>
  (options) =>
    closed()
      ? new Observable((subscriber) => subscriber.error(refusal()))
      : toObservable(Stream.unwrap(Effect.map(Journal.Journal, (journal) => journal.read(options))), runtime)
