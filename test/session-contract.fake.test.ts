import { Layer } from "effect"
import { Session } from "@hermes-sandbox/core"
import { type FakeCellStep, fakeCell, fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { testClockTime } from "./support/contractTime.js"
import { CONTRACT_PNG, type CellStep, sessionContract } from "./support/sessionContract.js"

/** A contract cell as the fake kernel's steps, with what IPython would give for each. */
const fakeStep = (step: CellStep): FakeCellStep => {
  if ("print" in step) return { print: step.print }
  if ("set" in step) return { set: { [step.set.name]: step.set.value } }
  if ("get" in step) return { get: step.get }
  if ("html" in step) return { display: { "text/html": step.html, "text/plain": "<IPython.core.display.HTML object>" } }
  if ("png" in step)
    return { display: { "image/png": CONTRACT_PNG, "text/plain": "<IPython.core.display.Image object>" } }
  if ("result" in step) return { result: { "text/plain": `'${step.result}'` } }
  if ("raise" in step)
    return { raise: { name: "ValueError", value: step.raise, traceback: [`ValueError: ${step.raise}`] } }
  if ("sleepMs" in step) return { sleep: step.sleepMs }
  if ("ignoreSigint" in step) return { ignoreSigint: true }
  if ("flood" in step) return { print: "x".repeat(step.flood) }
  if ("tool" in step) return { toolCall: { tool: step.tool.name, args: step.tool.args } }
  return { late: step.late }
}

// The sessions contract on the fake runtime (its exec emulates the session shell), under the TestClock.
sessionContract("fake", {
  base: Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()),
  sessions: (options) => Session.layer({ sweepOnStart: false, ...options }),
  command: fakeProgram,
  snippet: (program) => ({ language: "python", code: fakeProgram(program) }),
  cell: (...steps) => fakeCell(...steps.map(fakeStep)),
  time: testClockTime
})
