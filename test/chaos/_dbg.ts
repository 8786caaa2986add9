import { Effect, Layer, Stream } from "effect"
import { DockerExecutor, Executor } from "@hermes-sandbox/docker"
import { Journal, checkLifecycle } from "@hermes-sandbox/events"
const prog = Effect.gen(function*() {
  const ex = yield* Executor.Executor
  const j = yield* Journal.Journal
  const rs = yield* Effect.all([
    ex.executeCode({ language: "python", code: "import sys, time\ntime.sleep(0.3)\nsys.stdout.write('x')\nsys.exit(0)\n", timeoutMs: 2500 }),
    ex.executeCode({ language: "python", code: "import sys\nsys.exit(137)\n", timeoutMs: 6000 })
  ], { concurrency: 2 })
  yield* ex.idle
  const evs = [...yield* j.read().pipe(Stream.runCollect)]
  for (const e of evs) console.log(e.sequence, e.executionId.slice(-6), e.version, e.type, JSON.stringify(e.data).slice(0, 100))
  for (const r of rs) console.log(r.executionId.slice(-6), r.exitCode, checkLifecycle(evs.filter((e) => e.executionId === r.executionId)))
})
await Effect.runPromise(prog.pipe(Effect.provide(DockerExecutor.layer({ maxConcurrency: 3 }).pipe(Layer.provideMerge(Journal.layerMemory))), Effect.scoped))
