/** A sessions service over a fresh fake engine and journal, for one case; everything ends with it. */
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import { Session } from "@hermes-sandbox/core"
import type { SessionsOptions } from "@hermes-sandbox/core/Session"
import { FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { type EventEnvelope, Journal, MemoryJournal } from "@hermes-sandbox/events"

export interface FakeSessionsContext {
  readonly sessions: Session.Sessions["Type"]
  /** One stream's events, as the journal holds them. */
  readonly events: (streamId: string) => Effect.Effect<Array<EventEnvelope>>
  readonly control: FakeRuntimeControl["Type"]
  /** Close the service (and the fake engine) before the case ends. */
  readonly close: Effect.Effect<void>
}

export const withFakeSessions = <A, E>(
  f: (ctx: FakeSessionsContext) => Effect.Effect<A, E>,
  options: SessionsOptions = {},
  faults: FakeRuntime.FakeFaults = {}
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const close = Scope.close(scope, Exit.void)
    const base = Layer.merge(FakeRuntime.layer(faults), MemoryJournal.layer())
    const context = yield* Layer.buildWithScope(
      Layer.merge(Session.layer({ sweepOnStart: false, ...options }).pipe(Layer.provide(base)), base),
      scope
    )
    const journal = yield* Effect.provide(Journal.Journal, context)
    const events = (streamId: string) =>
      journal.read({ streamId }).pipe(
        Stream.runCollect,
        Effect.map((c) => [...c]),
        Effect.orDie
      )
    return yield* f({
      sessions: yield* Effect.provide(Session.Sessions, context),
      events,
      control: yield* Effect.provide(FakeRuntimeControl, context),
      close
    }).pipe(Effect.ensuring(close))
  })
