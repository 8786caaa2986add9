import { Layer } from "effect"
import { Executor } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { testClockTime } from "./support/contractTime.js"
import { executorContract } from "./support/executorContract.js"

// The executor contract on the fake runtime, under the TestClock (deadlines cost nothing).
executorContract("fake", {
  base: Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()),
  executor: (options) => Executor.layer(options),
  language: "python",
  program: ({ spin, stdout, stdoutBytes, ...rest }) =>
    fakeProgram({
      ...rest,
      ...(spin ? { hang: true } : {}),
      ...(stdout || stdoutBytes ? { stdout: `${stdout ?? ""}${"x".repeat(stdoutBytes ?? 0)}` } : {})
    }),
  time: testClockTime,
  warmPool: false
})
