/**
 * What the behaviour contracts check through the ports alone (SandboxRuntime, Journal), so the
 * same check holds on the fake and on the engine.
 */
import { Effect, Stream } from "effect"
import type { SandboxRuntime } from "@hermes-sandbox/core"
import type { EventEnvelope, Journal } from "@hermes-sandbox/events"

/** The sandbox of this name no longer exists (the runtime answers not-found). */
export const gone = (runtime: SandboxRuntime["Type"], name: string) =>
  runtime.inspect({ id: name, name }).pipe(
    Effect.as(false),
    Effect.catchIf(
      (e) => e._tag === "ContainerFailed" && e.reason === "not-found",
      () => Effect.succeed(true)
    )
  )

export const eventsOf = (journal: Journal.Journal["Type"], streamId?: string) =>
  journal.read(streamId === undefined ? undefined : { streamId }).pipe(
    Stream.runCollect,
    Effect.map((c): Array<EventEnvelope> => [...c])
  )

export const typesOf = (journal: Journal.Journal["Type"], streamId: string) =>
  Effect.map(eventsOf(journal, streamId), (es) => es.map((e) => e.type))
