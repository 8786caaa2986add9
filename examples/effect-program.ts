/**
 * The same, as an Effect program: the Executor service (packages/core)
 * provided by the Docker layer (packages/docker) and a journal.
 *
 *   npx tsx examples/effect-program.ts
 */
import { Effect, Layer } from "effect"
import { Executor } from "@hermes-sandbox/core"
import { DockerExecutor } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"

const program = Effect.gen(function* () {
  const executor = yield* Executor.Executor
  const result = yield* executor.executeCode({ language: "python", code: "print(6*7)" })
  yield* Effect.log(`stdout=${JSON.stringify(result.stdout)} exit=${result.exitCode} container=${result.containerName}`)
  // Typed errors: handle exactly what you expect.
  const missing = yield* executor
    .executeCode({ language: "python", code: "print(1)", image: "no/such-image:0" })
    .pipe(Effect.catchTag("ImageNotFound", (e) => Effect.succeed(`ImageNotFound: get it with ${e.buildCommand}`)))
  yield* Effect.log(String(missing))
  return result.stdout
})

const layer = DockerExecutor.layer({ timeoutMs: 10_000 }).pipe(Layer.provide(MemoryJournal.layer()))

const stdout = await Effect.runPromise(program.pipe(Effect.provide(layer)))
console.log(stdout.trim())
