/** How much of what was appended a facade journal keeps: its last sequence and the events it still reads back. */
import { Chunk, Effect, Layer, Stream } from "effect"
import { Event, Journal } from "@hermes-sandbox/events"

const fill = (journal: Journal.Journal["Type"], n: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) =>
      journal.append({
        streamId: `e${i % 500}`,
        executorId: "x",
        events: [Event.make("ContainerStarted", { containerId: `c${i}` })]
      }),
    { discard: true }
  )

export const retained = (layer: Layer.Layer<Journal.Journal, unknown>, appends: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const ctx = yield* Layer.build(layer)
      const journal = ctx.unsafeMap.get(Journal.Journal.key) as Journal.Journal["Type"]
      yield* fill(journal, appends)
      return { last: yield* journal.lastSequence, kept: Chunk.size(yield* Stream.runCollect(journal.read())) }
    })
  )
