/**
 * Test doubles live only under each package's `./testing` entry: a production import never
 * loads the fake runtime or fast-check arbitraries.
 */
import * as Core from "@hermes-sandbox/core"
import * as CoreTesting from "@hermes-sandbox/core/testing"
import * as Docker from "@hermes-sandbox/docker"
import * as DockerTesting from "@hermes-sandbox/docker/testing"
import * as Events from "@hermes-sandbox/events"
import * as EventsTesting from "@hermes-sandbox/events/testing"
import { describe, expect, it } from "vitest"

const doubles = (names: ReadonlyArray<string>) => names.filter((n) => /^Fake|^fake|^arb/.test(n))

describe("package entry points", () => {
  it("core, events and docker export no test double", () => {
    expect(doubles(Object.keys(Core))).toEqual([])
    expect(doubles(Object.keys(Events))).toEqual([])
    expect(doubles(Object.keys(Docker))).toEqual([])
  })

  it("the testing entries have them", () => {
    expect(Object.keys(CoreTesting)).toEqual(
      expect.arrayContaining(["FakeRuntime", "FakeRuntimeControl", "fakeProgram"])
    )
    expect(Object.keys(EventsTesting)).toEqual(
      expect.arrayContaining(["arbLifecycle", "arbJournalHistory", "toEnvelopes"])
    )
    expect(Object.keys(DockerTesting)).toEqual(
      expect.arrayContaining([
        "createFakeExecutor",
        "fakeProgram",
        "arbFakeProgram",
        "arbExecuteRequest",
        "arbExecutorOptions",
        "arbLifecycle",
        "arbJournalHistory"
      ])
    )
  })
})
