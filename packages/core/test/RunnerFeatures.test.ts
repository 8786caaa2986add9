/**
 * What an image's supervisor can do (RunnerProtocolTable's features, its label
 * org.hermes-sandbox.runner-features): a request that needs a feature its image lacks is refused
 * before anything is created, with a ContainerFailed (reason "protocol") naming the image, the
 * feature and the command that rebuilds the images; an image without the label (built before it
 * existed) has runner protocol 2's base only. On the fake runtime (its `imageLabels`); the Docker
 * runtime's check is the same functions over the engine's labels (test/execute.e2e.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import {
  commandFeatures,
  missingFeatures,
  missingFeaturesMessage,
  supervisorFeatures
} from "@hermes-sandbox/core/RunnerProtocol"
import { Executor, type ExecutorOptions, Session } from "@hermes-sandbox/core"
import { RUNNER_FEATURES, RUNNER_FEATURES_LABEL, RUNNER_PROTOCOL_LABEL } from "@hermes-sandbox/core/RunnerProtocolTable"
import { type FakeFaults, fakeProgram, FakeRuntime, FakeRuntimeControl } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"

const OLD = "hermes-sandbox-test/before-features:1"
const NO_TOOLS = "hermes-sandbox-test/no-tools:1"
/** An image built before images said what their supervisor can do, and one whose label lacks tools. */
const faults: FakeFaults = {
  imageLabels: {
    [OLD]: { [RUNNER_PROTOCOL_LABEL]: "2" },
    [NO_TOOLS]: { [RUNNER_PROTOCOL_LABEL]: "2", [RUNNER_FEATURES_LABEL]: "collect,fileops" }
  }
}
const REBUILD = "pnpm hermes-sandbox image build"

const withExecutor = <A, E>(
  options: ExecutorOptions,
  f: (ctx: { executor: Executor.Executor["Type"]; control: FakeRuntimeControl["Type"] }) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      Executor.layer({ awaitRemoval: true, ...options }).pipe(
        Layer.provideMerge(FakeRuntime.layer(faults)),
        Layer.provideMerge(MemoryJournal.layer())
      ),
      scope
    )
    const executor = yield* Effect.provide(Executor.Executor, context)
    const control = yield* Effect.provide(FakeRuntimeControl, context)
    return yield* f({ executor, control }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

const addTool = {
  description: "Adds two numbers",
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  handler: ({ a, b }: { a: number; b: number }) => a + b
}

describe("an image's supervisor features", () => {
  it("come from its label; without the label, protocol 2's base only; names the SDK does not know are not features", () => {
    expect([...supervisorFeatures({ [RUNNER_FEATURES_LABEL]: RUNNER_FEATURES.join(",") })]).toEqual([
      ...RUNNER_FEATURES
    ])
    expect([...supervisorFeatures({ [RUNNER_PROTOCOL_LABEL]: "2" })]).toEqual([])
    expect([...supervisorFeatures(undefined)]).toEqual([])
    expect([...supervisorFeatures({ [RUNNER_FEATURES_LABEL]: "tools, teleport,collect" })]).toEqual([
      "collect",
      "tools"
    ])
    expect(missingFeatures({ [RUNNER_FEATURES_LABEL]: "collect" }, ["tools", "collect", "fileops"])).toEqual([
      "fileops",
      "tools"
    ])
    expect(missingFeatures(undefined, undefined)).toEqual([])
    expect(commandFeatures(["/opt/hermes/hermes-run", "--preload", "python"])).toEqual(["preload"])
    expect(commandFeatures(["/opt/hermes/hermes-run"])).toEqual([])
  })

  it("the refusal names the image, each missing feature, what the label says and the command that rebuilds", () => {
    const absent = missingFeaturesMessage("my/img:1", { [RUNNER_PROTOCOL_LABEL]: "2" }, ["collect", "tools"], REBUILD)
    expect(absent).toMatch(
      /^image my\/img:1 has a supervisor without the features this request needs: collect \(.+\), tools \(.+\)\./
    )
    expect(absent).toContain(`has no label ${RUNNER_FEATURES_LABEL}`)
    expect(absent).toContain(`Rebuild the SDK's images: ${REBUILD}`)
    expect(missingFeaturesMessage("my/img:1", { [RUNNER_FEATURES_LABEL]: "collect" }, ["tools"], REBUILD)).toContain(
      `the feature this request needs: tools (tool calls from the sandboxed code (tools)). The image says ${RUNNER_FEATURES_LABEL}="collect"`
    )
  })
})

describe("a request that needs more than its image's supervisor can do (fake runtime)", () => {
  it.effect(
    "one-shot: collect and tools on an image without the label are refused before any container exists; a plain run works",
    () =>
      withExecutor({ images: { python: OLD } }, ({ control, executor }) =>
        Effect.gen(function* () {
          const collect = yield* Effect.flip(
            executor.executeCode({ language: "python", code: fakeProgram({}), collect: ["*.csv"] })
          )
          expect(collect).toMatchObject({ _tag: "ContainerFailed", reason: "protocol", operation: "create" })
          expect(collect.message).toContain(
            `image ${OLD} has a supervisor without the feature this request needs: collect`
          )
          expect(collect.message).toContain(REBUILD)
          const tools = yield* Effect.flip(
            executor.executeCode({ language: "python", code: fakeProgram({}), tools: { add: addTool } })
          )
          expect(tools).toMatchObject({
            _tag: "ContainerFailed",
            reason: "protocol",
            message: expect.stringContaining("without the feature this request needs: tools")
          })
          expect(yield* control.createdCount).toBe(0)
          const plain = yield* executor.executeCode({ language: "python", code: fakeProgram({ stdout: "base\n" }) })
          expect(plain).toMatchObject({ exitCode: 0, stdout: "base\n" })
          expect(yield* control.createdCount).toBe(1)
        })
      )
  )

  it.effect(
    "one-shot: an image whose label lacks tools runs collect and refuses tools, saying what its label says",
    () =>
      withExecutor({ images: { python: NO_TOOLS } }, ({ control, executor }) =>
        Effect.gen(function* () {
          const ok = yield* executor.executeCode({
            language: "python",
            code: fakeProgram({}),
            files: { "a.csv": "x\n" },
            collect: ["*.csv"]
          })
          expect(ok.files?.map((f) => f.path)).toEqual(["a.csv"])
          const tools = yield* Effect.flip(
            executor.executeCode({ language: "python", code: fakeProgram({}), tools: { add: addTool } })
          )
          expect(tools.message).toContain(`The image says ${RUNNER_FEATURES_LABEL}="collect,fileops"`)
          expect(yield* control.createdCount).toBe(1)
        })
      )
  )

  it.live(
    "a warm pool on an image without the label makes no sandbox (any request may claim one); requests run fresh",
    () =>
      withExecutor({ images: { python: OLD }, warmPool: { size: 1, languages: ["python"] } }, ({ control, executor }) =>
        Effect.gen(function* () {
          yield* Effect.sleep("200 millis")
          expect(yield* control.createdCount).toBe(0)
          expect(
            yield* executor.executeCode({ language: "python", code: fakeProgram({ stdout: "fresh\n" }) })
          ).toMatchObject({ stdout: "fresh\n" })
          expect(yield* control.createdCount).toBe(1)
        })
      )
  )

  it.live(
    "a session on an image without the label runs commands; its file operations and tool calls are refused before their exec",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          Session.layer({ sweepOnStart: false }).pipe(
            Layer.provideMerge(FakeRuntime.layer(faults)),
            Layer.provideMerge(MemoryJournal.layer())
          ),
          scope
        )
        const sessions = yield* Effect.provide(Session.Sessions, context)
        const control = yield* Effect.provide(FakeRuntimeControl, context)
        yield* Effect.gen(function* () {
          const s = yield* sessions.open({ image: OLD })
          expect(yield* s.run(fakeProgram({ stdout: "hi\n" }))).toMatchObject({ exitCode: 0, stdout: "hi\n" })
          const write = yield* Effect.flip(s.writeFile("a.txt", "x"))
          expect(write).toMatchObject({ _tag: "ContainerFailed", reason: "protocol", operation: "exec" })
          expect(write.message).toContain(
            `image ${OLD} has a supervisor without the feature this request needs: fileops`
          )
          expect(write.message).toContain(REBUILD)
          const tools = yield* Effect.flip(
            s.runCode({ language: "python", code: fakeProgram({}), tools: { add: addTool } })
          )
          expect(tools).toMatchObject({
            _tag: "ContainerFailed",
            reason: "protocol",
            message: expect.stringContaining("request needs: tools")
          })
          // The session goes on: the refusals ran nothing in it.
          expect(yield* s.run(fakeProgram({ stdout: "still\n" }))).toMatchObject({ exitCode: 0, stdout: "still\n" })
          expect((yield* control.alive).length).toBe(1)
          yield* s.close
        }).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
      })
  )
})
