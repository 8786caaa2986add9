/**
 * The engine's live events arrive late (an engine under heavy load): the runtime must still
 * tell a program's own exit from a kill from outside. When the engine's exit report has come
 * but the container's `die` event has not within TESTIMONY_TIMEOUT_MS (5 s), DockerRuntime
 * asks the engine's event log instead. Here a proxy in front of the shared engine holds back
 * every byte of the event subscription for good, so only that fallback can give a verdict:
 * without it these executions would hang until their deadline and end as timeouts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import { containerExists, docker, waitFor } from "../support/docker.js"
import { startSleeper, testExecutor } from "../support/executor.js"
import { EventHoldingProxy } from "./eventHoldingProxy.js"

/** Far beyond the fallback's 5 s: reaching it would mean the fallback never answered. */
const DEADLINE_MS = 45_000

describe("the engine's live events are late (held by a proxy)", () => {
  let proxy: EventHoldingProxy
  let executor: SandboxExecutor

  beforeAll(async () => {
    proxy = await EventHoldingProxy.start()
    // No watchdog: it would talk to the engine through the proxy, which the suite closes.
    executor = await testExecutor({
      socketPath: proxy.socketPath,
      timeoutMs: DEADLINE_MS,
      watchdog: false,
      sweepOnStart: false
    })
  }, 60_000)

  afterAll(async () => {
    await executor?.close()
    await proxy?.close()
  }, 60_000)

  const heldDie = (containerName: string) =>
    proxy.heldEvents().some((e) => e.Action === "die" && e.Actor?.Attributes?.["name"] === containerName)

  it("a program's own exit is its result while the engine's events are held: the supervisor's report needs none of them", async () => {
    // Before runner protocol 2, os._exit skipped the runner's report and only the engine's exit could
    // tell; the supervisor reports every exit of its program, so nothing waits for the held die.
    const r = await executor.executeCode({
      language: "python",
      code: "import os\nprint('partial', flush=True)\nos._exit(3)"
    })
    expect(r).toMatchObject({ exitCode: 3, timedOut: false, oomKilled: false, stdout: "partial\n" })
    // The die event did come from the engine, and the SDK never received it.
    expect(proxy.subscriptions).toBeGreaterThan(0)
    expect(await waitFor(async () => heldDie(r.containerName), 10_000)).toBe(true)
    expect(await waitFor(async () => !(await containerExists(r.containerName)), 15_000)).toBe(true)
  }, 60_000)

  it("a kill from outside is still a ContainerFailed, found in the engine's event log", async () => {
    const { run, container: target } = await startSleeper(executor, {
      code: "import time\nprint('up', flush=True)\ntime.sleep(120)"
    })
    await docker.getContainer(target.id).kill({ signal: "SIGKILL" })
    await expect(run).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "killed-externally",
      message: expect.stringMatching(/killed from outside the SDK \(signal (9|SIGKILL), exit code 137\)/)
    })
    expect(heldDie(target.name)).toBe(true)
    expect(await waitFor(async () => !(await containerExists(target.name)), 15_000)).toBe(true)
  }, 60_000)
})
