/**
 * @hermes-sandbox/docker/testing — for the tests of code that uses the Promise facade:
 *
 *   await using executor = await createFakeExecutor({ program: () => ({ stdout: "42\n" }) })
 *   const r = await executor.executeCode({ language: "python", code: "print(6*7)" })  // r.stdout === "42\n"
 *
 * createFakeExecutor is createExecutor's facade (the same module builds both, see
 * internal/executorFacade.ts) over core's in-memory FakeRuntime and a memory journal: the same
 * results, typed errors, AbortSignal, events$, stats and close, in about a millisecond a call and
 * with no engine. Programs are scripted, not run: what a program does is a `#!fake {json}` first
 * line of its code (`fakeProgram({ stdout, exitCode, hang, ... })`) or what the `program` option
 * returns for a request. Faults (engine down or crashed, create and start failures, missing
 * images) are injected through the returned executor and come out as the real facade's typed errors.
 *
 * The fast-check arbitraries of valid input (core) and of journal histories and lifecycles
 * (events) are re-exported here, so one import serves a property test of your own service.
 */
import { Context, Effect, Layer, Ref } from "effect"
import * as fc from "effect/FastCheck"
import { type ExecuteRequest, Executor, type ExecutorOptions, Tracing } from "@hermes-sandbox/core"
import {
  type FakeFaults,
  type FakeProgram,
  fakeProgram,
  FakeRuntime,
  FakeRuntimeControl
} from "@hermes-sandbox/core/testing"
import type { SandboxExecutor } from "./createExecutor.js"
import { openExecutorFacade } from "./internal/executorFacade.js"
import { type FacadeJournal, facadeJournalLayer } from "./internal/facadeJournal.js"

export { type FakeFaults, type FakeProgram, fakeProgram } from "@hermes-sandbox/core/testing"
// The known_hosts matcher an ssh:// endpoint checks host keys with (internal/, which the package does not
// export): the remote suites test it against a real sshd.
export * as KnownHosts from "./internal/knownHosts.js"
// Core's arbitraries: input that its schemas accept (requests, options, sizes), as users write it.
// arbExecuteRequest: requests executeCode accepts, typed ExecuteRequest (an absent field left out,
// not `undefined`).
export {
  arbBytes,
  arbExecuteRequest,
  arbExecutorOptions,
  arbMemory,
  arbSandboxDefaults,
  arbSize
} from "@hermes-sandbox/core/testing"
// Events' arbitraries: valid journal histories and lifecycles, and the helpers around them. Not its
// arbExecuteRequest (snippets with a narrower request type, for the journal's own tests): core's above is
// the one executeCode validates.
export {
  arbContainerId,
  arbContainerName,
  arbEvent,
  arbEventOf,
  arbExecutionId,
  arbJournalHistory,
  arbLanguage,
  arbLifecycle,
  type Lifecycle,
  type LifecyclePath,
  lifecyclePaths,
  testMetadata,
  toEnvelopes
} from "@hermes-sandbox/events/testing"

export interface CreateFakeExecutorOptions extends ExecutorOptions {
  /**
   * The program a request runs, in place of its code's own `#!fake` line (return undefined to keep
   * it; no such line is a program that prints nothing and exits 0). Called for every request,
   * before it is validated; the journal's ExecutionRequested counts the scripted line in the code.
   */
  readonly program?: (request: ExecuteRequest) => FakeProgram | undefined
  /** Faults in effect from the start (see `setFaults`). */
  readonly faults?: FakeFaults
  /** Where lifecycle events are recorded, as with createExecutor. Default "memory". */
  readonly journal?: FacadeJournal
}

export interface FakeSandboxExecutor extends SandboxExecutor {
  /**
   * Replace the injected faults (`{}` clears them): `engineDown` (every engine call fails with
   * DockerUnavailable, running programs freeze), `createFails` and `startFails` (ContainerFailed),
   * `missingImages` (ImageNotFound), `startAnswerDelayMs` (a slow engine). Clear `engineDown` before
   * close: like the real facade, close waits (up to a minute) for the engine to confirm each removal.
   */
  setFaults(faults: FakeFaults): Promise<void>
  /** The engine dies and stays down until `setFaults({})`: running programs are killed, their executions fail with DockerUnavailable. */
  crashEngine(): Promise<void>
  /** Sandboxes that exist now (also after close: empty when nothing was left behind). */
  alive(): Promise<ReadonlyArray<{ readonly name: string; readonly status: string }>>
  /** How many sandboxes were ever created. */
  createdCount(): Promise<number>
}

/** The Executor with every request's code led by the line of the program `script` gives it. */
const scripted =
  (script: NonNullable<CreateFakeExecutorOptions["program"]>) =>
  (executor: Context.Tag.Service<typeof Executor.Executor>): Context.Tag.Service<typeof Executor.Executor> => ({
    ...executor,
    executeCode: (request, options) =>
      Effect.suspend(() => {
        const program = script(request)
        return executor.executeCode(
          program === undefined ? request : { ...request, code: `${fakeProgram(program)}${request.code}` },
          options
        )
      })
  })

/** A SandboxExecutor over the fake runtime: createExecutor's facade, with scripted programs and injectable faults. */
export const createFakeExecutor = async (options: CreateFakeExecutorOptions = {}): Promise<FakeSandboxExecutor> => {
  const { program, faults, journal, ...executorOptions } = options
  const base = Executor.layer(executorOptions).pipe(
    Layer.provideMerge(FakeRuntime.layer(faults)),
    Layer.provideMerge(facadeJournalLayer(journal)),
    // OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set, as createExecutor's (core's Tracing.ts).
    Layer.provideMerge(Tracing.layer())
  )
  const layer =
    program === undefined
      ? base
      : Layer.map(base, (ctx) =>
          Context.add(ctx, Executor.Executor, scripted(program)(Context.get(ctx, Executor.Executor)))
        )
  const { executor, runtime } = await openExecutorFacade(layer)
  // The control's effects need nothing of the runtime, so they still answer once it is disposed.
  const control = await runtime.runPromise(FakeRuntimeControl)
  return {
    ...executor,
    setFaults: (f) => Effect.runPromise(Ref.set(control.faults, f)),
    crashEngine: () => Effect.runPromise(control.crashEngine),
    alive: () => Effect.runPromise(control.alive),
    createdCount: () => Effect.runPromise(control.createdCount)
  }
}

/**
 * Programs that end by themselves (no `hang`, no `sleepMs`): what they print and how they exit,
 * sometimes killed for memory or echoing their stdin. With `createFakeExecutor({ program })`, the
 * result must mirror the program (see docs/testing.md).
 */
export const arbFakeProgram: fc.Arbitrary<FakeProgram> = fc.record(
  {
    stdout: fc.string({ maxLength: 200 }),
    stderr: fc.string({ maxLength: 200 }),
    exitCode: fc.oneof(fc.constantFrom(0, 1, 2), fc.integer({ min: 0, max: 255 })),
    oom: fc.boolean(),
    echoStdin: fc.boolean()
  },
  { requiredKeys: [] }
)
