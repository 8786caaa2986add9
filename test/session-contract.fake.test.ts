import { Layer } from "effect"
import { Session } from "@hermes-sandbox/core"
import { fakeProgram, FakeRuntime } from "@hermes-sandbox/core/testing"
import { MemoryJournal } from "@hermes-sandbox/events"
import { testClockTime } from "./support/contractTime.js"
import { sessionContract } from "./support/sessionContract.js"

// The sessions contract on the fake runtime (its exec emulates the session shell), under the TestClock.
sessionContract("fake", {
  base: Layer.merge(FakeRuntime.layer(), MemoryJournal.layer()),
  sessions: (options) => Session.layer({ sweepOnStart: false, ...options }),
  command: fakeProgram,
  snippet: (program) => ({ language: "python", code: fakeProgram(program) }),
  time: testClockTime
})
