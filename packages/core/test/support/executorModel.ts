/**
 * A model of the executor for model-based testing (fast-check `fc.commands`), shared by the
 * run against the fake runtime (packages/core/test/model.test.ts) and the shorter run
 * against the real engine (test/chaos/model.docker.test.ts).
 *
 * Commands: execute a program, abort a running execution (interrupt its fiber), let time pass,
 * close the executor, and (fake only) runtime faults: create fails, start fails, the engine
 * freezes and comes back, the engine crashes (running containers killed, waits broken).
 *
 * Invariants, checked after every command and at the end of each run:
 * - never more containers running than `maxConcurrency`, and never more alive in any state,
 *   unless the engine stayed down longer than a caller waits for a removal (kernel/Removals.ts:
 *   the slot is then released and the removal retried in the background);
 * - once closed, no container is left and every execution's fiber has ended;
 * - every lifecycle in the journal is closed and has no violation (`checkLifecycle`);
 * - every result agrees with its events (exit code / OOM ↔ ContainerExited, timedOut ↔
 *   ExecutionTimedOut), every typed failure with an ExecutionFailed of the same tag;
 * - no fake success: a result is always the program's own outcome (its exit code and output,
 *   or a timeout when it runs past its deadline); a fault may only turn it into a typed error,
 *   or, if the engine froze while it ran, into a timeout.
 */
import { Cause, Effect, Exit, Fiber, Option, Runtime, Stream } from "effect"
import fc from "fast-check"
import type { ExecuteError, ExecuteRequest, ExecutionResult } from "@hermes-sandbox/core"
import type { ExecutorStats } from "@hermes-sandbox/core/Executor"
import { checkLifecycle, isClosed, project } from "@hermes-sandbox/events/Projection"
import { type EventEnvelope, type JournalService } from "@hermes-sandbox/events"

/** What a generated program does, independent of how a runtime expresses it. */
export type ProgramSpec =
  | { readonly kind: "exit"; readonly exitCode: number; readonly sleepMs: number; readonly stdout: string }
  | { readonly kind: "hang"; readonly stdout: string }
  | { readonly kind: "oom" }

export type FaultName = "createFails" | "startFails" | "engineDown"

/** What the model needs from the system under test. */
export interface ModelSystem {
  readonly runtime: Runtime.Runtime<never>
  readonly maxConcurrency: number
  readonly executeCode: (request: ExecuteRequest) => Effect.Effect<ExecutionResult, ExecuteError>
  readonly stats: Effect.Effect<ExecutorStats>
  readonly journal: JournalService
  /** Names of this executor's containers that exist now. */
  readonly alive: Effect.Effect<ReadonlyArray<string>>
  /** Let time pass (TestClock for the fake, real time for the engine). */
  readonly advance: (ms: number) => Effect.Effect<void>
  /** Let every runnable fiber run, without moving the clock. */
  readonly settle: () => Promise<void>
  /** Closes the executor; must also bring a downed engine back within its removal budget. */
  readonly close: Effect.Effect<void>
  readonly request: (program: ProgramSpec, timeoutMs: number) => ExecuteRequest
  /** Fault injection; absent on the real engine. */
  readonly faults?: {
    readonly set: (fault: FaultName, on: boolean) => Effect.Effect<void>
    readonly crash: Effect.Effect<void>
    readonly clear: Effect.Effect<void>
  }
}

export interface Model {
  started: number
  closed: boolean
  /** Incremented by every fault command: an execution that saw none is held to the strict outcome. */
  faultEpoch: number
  faultActive: boolean
  engineFroze: number
}

interface RunRecord {
  readonly index: number
  readonly program: ProgramSpec
  readonly timeoutMs: number
  readonly fiber: Fiber.RuntimeFiber<ExecutionResult, ExecuteError>
  readonly epochAtStart: number
  readonly faultAtStart: boolean
  readonly frozeAtStart: number
  aborted: boolean
  /** Fault epoch and engine freezes when the fiber was first seen done. */
  epochAtEnd?: number
  frozeAtEnd?: number
}

export interface Real {
  readonly system: ModelSystem
  readonly runs: Array<RunRecord>
  /** Fault state as the real side saw it (the model's copy is updated by the same commands). */
  faultEpoch: number
  engineFroze: number
  closed: boolean
  readonly log: Array<string>
  /** The engine is down now (crashed, or the engineDown fault), and for how long of this outage time has passed. */
  engineDown: boolean
  downForMs: number
  /** Some outage outlasted REMOVAL_WAIT_MS: a container may outlive its slot until the background retry. */
  removalsMayLag: boolean
}

/** How long an execution waits for its sandbox's removal before handing it to the background (kernel/Removals.ts). */
const REMOVAL_WAIT_MS = 60_000

/** Let time pass, counting it against the current outage. */
const advance = async (real: Real, ms: number) => {
  await run(real, real.system.advance(ms))
  if (!real.engineDown) return
  real.downForMs += ms
  if (real.downForMs >= REMOVAL_WAIT_MS) real.removalsMayLag = true
}

const setEngineDown = (real: Real, down: boolean) => {
  if (down && !real.engineDown) real.downForMs = 0
  real.engineDown = down
}

const run = <A, E>(real: Real, effect: Effect.Effect<A, E>) => Runtime.runPromise(real.system.runtime)(effect)

/** Record which fibers have ended since the last look, and check the live invariants. */
const observe = async (real: Real) => {
  await real.system.settle()
  for (const r of real.runs) {
    if (r.epochAtEnd === undefined && r.fiber.unsafePoll() !== null) {
      r.epochAtEnd = real.faultEpoch
      r.frozeAtEnd = real.engineFroze
    }
  }
  const alive = await run(real, real.system.alive)
  const running = alive.filter((a) => a.endsWith("(running)"))
  if (
    running.length > real.system.maxConcurrency ||
    (!real.removalsMayLag && alive.length > real.system.maxConcurrency)
  ) {
    throw new Error(
      `${alive.length} containers alive (${running.length} running) with maxConcurrency ${real.system.maxConcurrency}: ${alive.join(", ")}`
    )
  }
  const stats = await run(real, real.system.stats)
  if (stats.inFlight > real.system.maxConcurrency || stats.inFlight < 0 || stats.queued < 0) {
    throw new Error(`impossible stats ${JSON.stringify(stats)}`)
  }
}

export class ExecuteCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly program: ProgramSpec,
    readonly timeoutMs: number
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const fiber = Runtime.runFork(real.system.runtime)(
      real.system.executeCode(real.system.request(this.program, this.timeoutMs))
    )
    real.runs.push({
      index: model.started,
      program: this.program,
      timeoutMs: this.timeoutMs,
      fiber,
      epochAtStart: real.faultEpoch,
      faultAtStart: model.faultActive,
      frozeAtStart: real.engineFroze,
      aborted: false
    })
    model.started++
    await observe(real)
  }
  toString = () => `execute(${JSON.stringify(this.program)}, ${this.timeoutMs}ms)`
}

export class AbortCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.started > 0
  async run(_model: Model, real: Real) {
    const target = real.runs[this.pick % real.runs.length]!
    if (target.fiber.unsafePoll() === null) target.aborted = true
    // Interrupting returns once the execution's cleanup ran (its container removed, or given up on).
    const interrupted = Runtime.runFork(real.system.runtime)(Fiber.interrupt(target.fiber))
    // With the TestClock, the cleanup may wait on retries: let time pass until it is done.
    for (let i = 0; i < 200 && interrupted.unsafePoll() === null; i++) {
      await real.system.settle()
      if (interrupted.unsafePoll() === null) await advance(real, 500)
    }
    if (interrupted.unsafePoll() === null) throw new Error(`aborting execution #${target.index} did not finish`)
    await observe(real)
  }
  toString = () => `abort(#${this.pick})`
}

export class AdvanceCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true
  async run(_model: Model, real: Real) {
    await advance(real, this.ms)
    await observe(real)
  }
  toString = () => `advance(${this.ms}ms)`
}

export class FaultCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly fault: FaultName | "crash" | "clear",
    readonly on: boolean
  ) {}
  check = (model: Readonly<Model>) => !model.closed
  async run(model: Model, real: Real) {
    const faults = real.system.faults!
    model.faultEpoch++
    real.faultEpoch++
    if (this.fault === "crash") {
      await run(real, faults.crash)
      setEngineDown(real, true)
      model.faultActive = true
      model.engineFroze++
      real.engineFroze++
    } else if (this.fault === "clear") {
      await run(real, faults.clear)
      setEngineDown(real, false)
      model.faultActive = false
    } else {
      await run(real, faults.set(this.fault, this.on))
      if (this.fault === "engineDown") setEngineDown(real, this.on)
      if (this.on) model.faultActive = true
      if (this.fault === "engineDown" && this.on) {
        model.engineFroze++
        real.engineFroze++
      }
    }
    await observe(real)
  }
  toString = () => (this.fault === "crash" || this.fault === "clear" ? this.fault : `${this.fault}=${this.on}`)
}

export class CloseCommand implements fc.AsyncCommand<Model, Real> {
  check = (model: Readonly<Model>) => !model.closed
  async run(model: Model, real: Real) {
    model.closed = true
    model.faultActive = false
    await closeReal(real)
    await observe(real)
  }
  toString = () => "close"
}

const closeReal = async (real: Real) => {
  if (real.closed) return
  real.closed = true
  if (real.system.faults) {
    await run(real, real.system.faults.clear)
    setEngineDown(real, false)
    real.faultEpoch++
  }
  const closing = Runtime.runFork(real.system.runtime)(real.system.close)
  for (let i = 0; i < 400 && closing.unsafePoll() === null; i++) {
    await real.system.settle()
    if (closing.unsafePoll() === null) await advance(real, 500)
  }
  const exit = closing.unsafePoll()
  if (exit === null) throw new Error("close did not finish")
  if (Exit.isFailure(exit)) throw new Error(`close failed: ${String(exit.cause)}`)
}

export interface Arbitraries {
  readonly program: fc.Arbitrary<ProgramSpec>
  readonly timeoutMs: fc.Arbitrary<number>
  readonly advanceMs: fc.Arbitrary<number>
  readonly faults: boolean
}

export const commands = (arbs: Arbitraries, maxCommands: number) => {
  const all: Array<fc.Arbitrary<fc.AsyncCommand<Model, Real>>> = [
    fc.tuple(arbs.program, arbs.timeoutMs).map(([p, t]) => new ExecuteCommand(p, t)),
    fc.tuple(arbs.program, arbs.timeoutMs).map(([p, t]) => new ExecuteCommand(p, t)),
    fc.nat(50).map((n) => new AbortCommand(n)),
    arbs.advanceMs.map((ms) => new AdvanceCommand(ms)),
    arbs.advanceMs.map((ms) => new AdvanceCommand(ms)),
    fc.constant(new CloseCommand()),
    ...(arbs.faults
      ? [
          fc
            .tuple(fc.constantFrom<FaultName>("createFails", "startFails", "engineDown"), fc.boolean())
            .map(([f, on]) => new FaultCommand(f, on)),
          fc.constant(new FaultCommand("crash", true)),
          fc.constant(new FaultCommand("clear", false))
        ]
      : [])
  ]
  return fc.commands(all, { maxCommands })
}

export const initialModel = (): Model => ({
  started: 0,
  closed: false,
  faultEpoch: 0,
  faultActive: false,
  engineFroze: 0
})
export const initialReal = (system: ModelSystem): Real => ({
  system,
  runs: [],
  faultEpoch: 0,
  engineFroze: 0,
  closed: false,
  log: [],
  engineDown: false,
  downForMs: 0,
  removalsMayLag: false
})

/** The program's own outcome, as a result would report it. */
export const expectedOutcome = (program: ProgramSpec, timeoutMs: number) => {
  switch (program.kind) {
    case "hang":
      return { timedOut: true, exitCode: 137, oomKilled: false, stdout: program.stdout }
    case "oom":
      return { timedOut: false, exitCode: 137, oomKilled: true, stdout: "" }
    case "exit":
      return program.sleepMs >= timeoutMs
        ? { timedOut: true, exitCode: 137, oomKilled: false, stdout: program.stdout }
        : { timedOut: false, exitCode: program.exitCode, oomKilled: false, stdout: program.stdout }
  }
}

/** Close (if the commands did not), then check every end-of-run invariant. Throws with a description. */
export const finish = async (
  real: Real,
  options: {
    readonly createdCount?: Effect.Effect<number>
    /** Durations are wall-clock (Date.now): meaningful on the real engine, not under the TestClock. */
    readonly checkDurations?: boolean
  } = {}
) => {
  await closeReal(real)
  const problems: Array<string> = []
  for (const r of real.runs) {
    if (r.fiber.unsafePoll() === null) problems.push(`execution #${r.index} still running after close`)
  }
  if (problems.length > 0) throw new Error(problems.join("\n"))
  const alive = await run(real, real.system.alive)
  if (alive.length > 0) problems.push(`containers left after close: ${alive.join(", ")}`)

  const events = [...(await run(real, real.system.journal.read().pipe(Stream.runCollect)))]
  const streams = new Map<string, Array<EventEnvelope>>()
  for (const e of events) {
    const list = streams.get(e.streamId) ?? []
    list.push(e)
    streams.set(e.streamId, list)
  }
  const states = project(events)
  for (const [id, list] of streams) {
    const violations = checkLifecycle(list)
    if (violations.length > 0)
      problems.push(
        `stream ${id}: ${violations.join("; ")} (events: ${list.map((e) => `${e.sequence}:${e.type}`).join(", ")})`
      )
    const state = states.get(id)
    if (state !== undefined && !isClosed(state))
      problems.push(`stream ${id} is not closed: ${list.map((e) => e.type).join(", ")}`)
  }

  const failedByTag = new Map<string, number>()
  let interruptedFibers = 0
  for (const r of real.runs) {
    const exit = r.fiber.unsafePoll()!
    const where = `execution #${r.index} ${JSON.stringify(r.program)} (timeout ${r.timeoutMs} ms)`
    if (Exit.isSuccess(exit)) {
      const result = exit.value
      const list = streams.get(result.executionId) ?? []
      const types = list.map((e) => e.type)
      // The result agrees with its events.
      if (result.timedOut) {
        if (!types.includes("ExecutionTimedOut"))
          problems.push(`${where}: timed out, but its events are ${types.join(", ")}`)
      } else {
        const exited = list.find((e) => e.type === "ContainerExited")
        const data = exited?.data as { exitCode: number; oomKilled: boolean } | undefined
        if (data === undefined || data.exitCode !== result.exitCode || data.oomKilled !== result.oomKilled) {
          problems.push(
            `${where}: result exit ${result.exitCode} oom ${result.oomKilled}, events ${JSON.stringify(data)}`
          )
        }
      }
      if (!types.includes("ContainerDestroyed")) problems.push(`${where}: no ContainerDestroyed (${types.join(", ")})`)
      if (r.aborted) problems.push(`${where}: aborted while running, yet it returned a result`)
      // No fake success: the program's own outcome, or (engine frozen meanwhile) a timeout.
      const expected = expectedOutcome(r.program, r.timeoutMs)
      const froze = (r.frozeAtEnd ?? real.engineFroze) !== r.frozeAtStart
      const faulted = r.faultAtStart || (r.epochAtEnd ?? real.faultEpoch) !== r.epochAtStart
      const same =
        result.timedOut === expected.timedOut &&
        result.oomKilled === expected.oomKilled &&
        (expected.timedOut || result.exitCode === expected.exitCode) &&
        (result.timedOut || result.stdout === expected.stdout)
      if (!same && !(froze && result.timedOut)) {
        problems.push(
          `${where}: got ${JSON.stringify({ exitCode: result.exitCode, timedOut: result.timedOut, oomKilled: result.oomKilled, stdout: result.stdout })}, the program would give ${JSON.stringify(expected)}${faulted ? " (faults happened)" : ""}`
        )
      }
      if (options.checkDurations && result.timedOut && result.durationMs < r.timeoutMs)
        problems.push(`${where}: timed out after ${result.durationMs} ms < ${r.timeoutMs} ms`)
    } else if (Exit.isInterrupted(exit)) {
      interruptedFibers++
    } else {
      const error = Option.getOrUndefined(Cause.failureOption(exit.cause)) as { _tag?: string } | undefined
      const tag = error?._tag ?? "defect"
      if (tag === "defect") problems.push(`${where}: died with a defect: ${String(exit.cause)}`)
      // A fault-free, un-aborted execution has nothing to fail on but a full queue or a closed executor.
      const faulted = r.faultAtStart || (r.epochAtEnd ?? real.faultEpoch) !== r.epochAtStart
      if (!faulted && tag !== "QueueFull" && tag !== "ExecutorClosed")
        problems.push(`${where}: failed with ${tag} although no fault happened`)
      if (tag !== "ExecutorClosed") failedByTag.set(tag, (failedByTag.get(tag) ?? 0) + 1)
    }
  }
  // Every typed failure is recorded once, and only those.
  const recordedFailures = new Map<string, number>()
  let recordedInterruptions = 0
  for (const e of events) {
    if (e.type === "ExecutionFailed")
      recordedFailures.set(e.data.errorTag, (recordedFailures.get(e.data.errorTag) ?? 0) + 1)
    if (e.type === "ExecutionInterrupted") recordedInterruptions++
  }
  // (A caller interrupted while its failed execution was still being cleaned up sees an
  // interruption where the journal recorded the failure: interruptions are the slack.)
  const tags = new Set([...failedByTag.keys(), ...recordedFailures.keys()])
  let slack = interruptedFibers - recordedInterruptions
  if (slack < 0)
    problems.push(`${recordedInterruptions} ExecutionInterrupted recorded for ${interruptedFibers} interrupted fibers`)
  for (const tag of tags) {
    const returned = failedByTag.get(tag) ?? 0
    const recorded = recordedFailures.get(tag) ?? 0
    if (recorded < returned || recorded - returned > slack)
      problems.push(`${returned} ${tag} failures returned, ${recorded} recorded`)
    else slack -= recorded - returned
  }
  if (options.createdCount !== undefined) {
    const created = await run(real, options.createdCount)
    const recordedCreates = events.filter((e) => e.type === "ContainerCreated").length
    if (created !== recordedCreates)
      problems.push(`${created} containers created, ${recordedCreates} ContainerCreated recorded`)
  }
  if (problems.length > 0) throw new Error(problems.join("\n"))
  return { executions: real.runs.length, events: events.length }
}
