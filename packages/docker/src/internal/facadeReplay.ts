/**
 * Past events for the Promise facades, next to their live `events$`: the facade's journal read
 * from the start (or from a sequence, one stream, some types) as an Observable that completes
 * after the last stored event. Works for the in-memory journal too, which nothing else can reach.
 */
import { Effect, type ManagedRuntime, Stream } from "effect"
import type { Observable } from "rxjs"
import { type EventEnvelope, Journal, type ReplayOptions, toObservable } from "@hermes-sandbox/events"

export type FacadeReplay = (options?: ReplayOptions) => Observable<EventEnvelope>

export const facadeReplay = (runtime: ManagedRuntime.ManagedRuntime<Journal.Journal, unknown>): FacadeReplay => (options) =>
  toObservable(Stream.unwrap(Effect.map(Journal.Journal, (journal) => journal.read(options))), runtime)
