/**
 * A caller's tags (the MCP server's session id and tool, for one) are recorded in the journal:
 * in each run's ExecutionRequested, in a session's SessionOpened and in each of its calls.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Stream } from "effect"
import { Executor, Session } from "@hermes-sandbox/core"
import { FakeRuntime } from "@hermes-sandbox/core/testing"
import { Journal, MemoryJournal } from "@hermes-sandbox/events"

const layer = Layer.mergeAll(
  Executor.layer({ awaitRemoval: true, sweepOnStart: false }),
  Session.layer({ sweepOnStart: false, reapOnStart: false })
).pipe(Layer.provideMerge(Layer.merge(FakeRuntime.layer(), MemoryJournal.layer())))

const streamEvents = (streamId: string) =>
  Effect.flatMap(Journal.Journal, (j) => Stream.runCollect(j.read({ streamId }))).pipe(
    Effect.map(Chunk.toReadonlyArray)
  )

describe("tags", () => {
  it.effect("an execution's tags are in its ExecutionRequested; none means no field", () =>
    Effect.gen(function* () {
      const executor = yield* Executor.Executor
      const tagged = yield* executor.executeCode(
        { language: "python", code: "print(1)" },
        { tags: { "mcp.session": "s-1", "mcp.tool": "execute_code" } }
      )
      const plain = yield* executor.executeCode({ language: "python", code: "print(1)" })
      const [requested] = yield* streamEvents(tagged.executionId)
      expect(requested?.type).toBe("ExecutionRequested")
      expect(requested?.data).toMatchObject({ tags: { "mcp.session": "s-1", "mcp.tool": "execute_code" } })
      const [plainRequested] = yield* streamEvents(plain.executionId)
      expect(plainRequested?.data).not.toHaveProperty("tags")
    }).pipe(Effect.provide(layer))
  )

  it.effect("a session's tags are in SessionOpened and in every call, merged with the call's own", () =>
    Effect.gen(function* () {
      const sessions = yield* Session.Sessions
      const session = yield* sessions.open({ tags: { "mcp.session": "s-2" } })
      const call = yield* session.run("echo hi", { tags: { "mcp.tool": "terminal" } })
      const [opened] = yield* streamEvents(session.sessionId)
      expect(opened).toMatchObject({ type: "SessionOpened", data: { tags: { "mcp.session": "s-2" } } })
      const [requested] = yield* streamEvents(call.executionId)
      expect(requested).toMatchObject({
        type: "ExecutionRequested",
        data: { sessionId: session.sessionId, tags: { "mcp.session": "s-2", "mcp.tool": "terminal" } }
      })
      yield* session.close
    }).pipe(Effect.provide(layer))
  )

  it.effect("tags that are not a string record are refused before a sandbox exists", () =>
    Effect.gen(function* () {
      const sessions = yield* Session.Sessions
      const error = yield* Effect.flip(sessions.open({ tags: { n: 1 } } as unknown as Session.SessionOptions))
      expect(error._tag).toBe("InvalidRequest")
    }).pipe(Effect.provide(layer))
  )
})
