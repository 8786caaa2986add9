/**
 * ExitWitnesses' own logic (line framing, the kill-before-die verdict, a broken stream, the
 * subscription's lifetime) against a scripted event stream. Whether the engine really logs a
 * kill before a die is Docker's behaviour and is tested on the engine (execute.e2e: docker
 * kill / docker stop; chaos/engine-restart: a graceful restart, kill -9 of dockerd).
 */
import { PassThrough } from "node:stream"
import type Docker from "dockerode"
import { afterEach, describe, expect, it, vi } from "vitest"
import { ExitWitnesses } from "../src/internal/exitWitness.js"

interface Dial {
  readonly options: {
    readonly path: string
    readonly abortSignal: AbortSignal
    readonly options: { readonly since: string; readonly filters: string }
  }
  readonly stream: PassThrough
}

/** Witnesses over a docker client whose /events responses are streams the test writes to. */
const scriptedEngine = (clockOffsetMs = 0) => {
  const dials: Array<Dial> = []
  const docker = {
    modem: {
      dial: (options: Dial["options"], callback: (error: unknown, res: unknown) => void) => {
        const stream = new PassThrough()
        options.abortSignal.addEventListener("abort", () => stream.destroy())
        dials.push({ options, stream })
        // The engine answers (headers) with its first event; here at once.
        queueMicrotask(() => callback(null, stream))
      }
    }
  } as unknown as Docker
  return { witnesses: new ExitWitnesses(docker, clockOffsetMs), dials }
}

const event = (action: string, id: string, attributes: Record<string, string> = {}) =>
  `${JSON.stringify({ Type: "container", Action: action, id, Actor: { ID: id, Attributes: attributes } })}\n`

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe("ExitWitnesses", () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it("a die with no kill before it is the program's own exit; a kill before the die names its signal", async () => {
    const { witnesses, dials } = scriptedEngine()
    const own = witnesses.watch("a")
    const killed = witnesses.watch("b")
    await tick()
    expect(dials).toHaveLength(1) // one subscription serves both
    const filters = JSON.parse(dials[0]!.options.options.filters)
    expect(filters).toEqual({
      type: ["container"],
      event: ["kill", "die"],
      label: ["org.hermes-sandbox.project=hermes-sandbox"]
    })
    dials[0]!.stream.write(event("kill", "b", { signal: "15" }) + event("die", "a"))
    // Before the die (a runner reporting the end first), the kill is already known; and it stays known.
    await tick()
    expect([own.killSeen(), killed.killSeen()]).toEqual([undefined, "15"])
    dials[0]!.stream.write(event("die", "b", { exitCode: "143" }))
    expect(await own.testimony).toEqual({ _tag: "OwnExit" })
    expect(await killed.testimony).toEqual({ _tag: "Killed", signal: "15" })
    expect(killed.killSeen()).toBe("15")
    witnesses.close()
  })

  it("reads events split across chunks and ignores other containers, blank lines and garbage", async () => {
    const { witnesses, dials } = scriptedEngine()
    const w = witnesses.watch("mine")
    await tick()
    const text =
      event("kill", "other", { signal: "9" }) +
      "\nnot json\n" +
      event("kill", "mine", { signal: "9" }) +
      event("die", "mine")
    for (let i = 0; i < text.length; i += 7) dials[0]!.stream.write(text.slice(i, i + 7))
    expect(await w.testimony).toEqual({ _tag: "Killed", signal: "9" })
    witnesses.close()
  })

  it("a stream that breaks while a container is watched: its exit cannot be told; the next watch subscribes again", async () => {
    const { witnesses, dials } = scriptedEngine()
    const w = witnesses.watch("a")
    await tick()
    dials[0]!.stream.end()
    const t = await w.testimony
    expect(t._tag).toBe("Unknown")
    const again = witnesses.watch("b")
    await tick()
    expect(dials).toHaveLength(2)
    dials[1]!.stream.write(event("die", "b"))
    expect(await again.testimony).toEqual({ _tag: "OwnExit" })
    witnesses.close()
  })

  it("asks for a replay from before the subscription was sent (the engine shows nothing until its first event)", async () => {
    const { witnesses, dials } = scriptedEngine(10_000) // the engine's clock is 10 s ahead
    const before = Date.now()
    witnesses.watch("a")
    await tick()
    const since = Number(dials[0]!.options.options.since) * 1000
    expect(since).toBeGreaterThanOrEqual(before + 10_000 - 2_000 - 1)
    expect(since).toBeLessThanOrEqual(Date.now() + 10_000 - 2_000 + 1)
    witnesses.close()
  })

  it("a released witness stays pending; the idle subscription closes a moment after the last witness, and close() settles the rest", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] })
    const { witnesses, dials } = scriptedEngine()
    const released = witnesses.watch("a")
    let settled = false
    void released.testimony.then(() => (settled = true))
    await tick()
    released.release()
    dials[0]!.stream.write(event("die", "a"))
    await tick()
    await tick()
    expect(settled).toBe(false)
    expect(dials[0]!.options.abortSignal.aborted).toBe(false) // lingering for the next execution
    vi.advanceTimersByTime(999)
    expect(dials[0]!.options.abortSignal.aborted).toBe(false)
    vi.advanceTimersByTime(1)
    expect(dials[0]!.options.abortSignal.aborted).toBe(true)
    vi.useRealTimers()

    const open = witnesses.watch("b")
    await tick()
    expect(dials).toHaveLength(2)
    witnesses.close()
    expect(await open.testimony).toMatchObject({ _tag: "Unknown", reason: "the runtime was closed" })
    expect(dials[1]!.options.abortSignal.aborted).toBe(true)
    expect(await witnesses.watch("c").testimony).toMatchObject({ _tag: "Unknown" })
  })
})
