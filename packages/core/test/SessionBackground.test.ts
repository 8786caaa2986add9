/**
 * A session's background processes (session/background.ts) on the fake runtime: bounded output,
 * bounded count, kill and wait, the session's end, the journal (never the command's text). The
 * engine test of the same path is test/session-background.e2e.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { OutputRing } from "../src/session/background.js"
import { withFakeSessions } from "./support/fakeSessions.js"

const bytes = (s: string) => new TextEncoder().encode(s)
const text = (b: Uint8Array) => new TextDecoder().decode(b)

describe("OutputRing: head and tail of a stream in bounded memory", () => {
  it("keeps the first and the last bytes, counts the middle, and reads from any offset", () => {
    const ring = new OutputRing(4, 6)
    // A stream of 0..9 digits, 37 bytes, pushed in uneven chunks (one larger than the tail).
    const stream = Array.from({ length: 37 }, (_, i) => String(i % 10)).join("")
    for (const chunk of [
      stream.slice(0, 3),
      stream.slice(3, 5),
      stream.slice(5, 20),
      stream.slice(20, 21),
      stream.slice(21)
    ])
      ring.push(bytes(chunk))
    expect(ring.total).toBe(37)
    const all = ring.read(0)
    expect(text(all.head)).toBe(stream.slice(0, 4))
    expect(all.omittedBytes).toBe(37 - 4 - 6)
    expect(text(all.tail)).toBe(stream.slice(31))
    expect(all.next).toBe(37)
    // From inside the head, from the gap, from inside the tail, from the end.
    expect(ring.read(2)).toMatchObject({ omittedBytes: 27 })
    expect(text(ring.read(2).head)).toBe(stream.slice(2, 4))
    const fromGap = ring.read(10)
    expect([text(fromGap.head), fromGap.omittedBytes, text(fromGap.tail)]).toEqual(["", 21, stream.slice(31)])
    const inTail = ring.read(33)
    expect([text(inTail.head), inTail.omittedBytes]).toEqual([stream.slice(33), 0])
    expect(ring.read(37).head.byteLength).toBe(0)
    expect(ring.read(1000).next).toBe(37)
  })

  it("nothing dropped: one piece, whatever the chunking", () => {
    const ring = new OutputRing(4, 100)
    for (const c of ["ab", "cdef", "ghij"]) ring.push(bytes(c))
    const r = ring.read(0)
    expect([text(r.head), r.omittedBytes, text(r.tail)]).toEqual(["abcdefghij", 0, ""])
    expect(text(ring.read(5).head)).toBe("fghij")
  })

  it("a million one-byte writes: memory is the head and the tail", () => {
    const ring = new OutputRing(8, 16)
    const one = bytes("x")
    for (let i = 0; i < 1_000_000; i++) ring.push(one)
    const r = ring.read(0)
    expect([r.head.byteLength, r.omittedBytes, r.tail.byteLength]).toEqual([8, 1_000_000 - 24, 16])
  })
})

describe("session.spawn (fake runtime)", () => {
  it.live(
    "a flood is kept as head and tail, the rest counted; the journal has the command's hash, never its text",
    () =>
      withFakeSessions(({ events, sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open({ background: { headBytes: 1024, tailBytes: 2048 } })
          const flood = `${"a".repeat(1024)}${"m".repeat(600 * 1024)}${"z".repeat(2047)}!`
          const command = fakeProgram({ stdout: flood })
          const p = yield* s.spawn(command)
          const done = yield* p.wait()
          expect(done).toMatchObject({ running: false, exitCode: 0, outputBytes: flood.length })
          const out = yield* p.output()
          expect(out.head).toBe("a".repeat(1024))
          expect(out.tail).toBe(`${"z".repeat(2047)}!`)
          expect(out.omittedBytes).toBe(600 * 1024)
          expect(out.next).toBe(flood.length)
          const stream = yield* events(s.sessionId)
          const started = stream.find((e) => e.type === "ProcessStarted")
          const exited = stream.find((e) => e.type === "ProcessExited")
          expect(started?.data).toMatchObject({ processId: p.id, pid: p.pid, commandBytes: command.length })
          expect(exited?.data).toMatchObject({ processId: p.id, exitCode: 0, stdoutBytes: flood.length })
          expect(JSON.stringify(stream)).not.toContain("#!fake")
          yield* s.close
        })
      )
  )

  it.live("at most maxProcesses at once: the next spawn is refused until one is killed", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open({ background: { maxProcesses: 2 } })
        const a = yield* s.spawn(fakeProgram({ hang: true }))
        yield* s.spawn(fakeProgram({ hang: true }))
        const refused = yield* Effect.flip(s.spawn(fakeProgram({ hang: true })))
        expect(refused).toMatchObject({ _tag: "InvalidRequest", field: "spawn" })
        expect(refused.message).toContain("at most 2 at once")
        yield* a.kill("SIGTERM")
        expect(yield* a.wait()).toMatchObject({ running: false, exitCode: 143, signal: "SIGTERM" })
        const c = yield* s.spawn(fakeProgram({ hang: true }))
        expect((yield* s.processes).filter((x) => x.running).map((x) => x.id)).toContain(c.id)
        yield* s.close
      })
    )
  )

  it.live("kill() is SIGKILL; wait with a timeout returns a running status; calls go on meanwhile", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        const p = yield* s.spawn(fakeProgram({ hang: true }))
        expect(yield* p.wait({ timeoutMs: 50 })).toMatchObject({ running: true, exitCode: undefined })
        const r = yield* s.run(fakeProgram({ stdout: "call\n" }))
        expect(r.stdout).toBe("call\n")
        yield* p.kill()
        expect(yield* p.wait()).toMatchObject({ running: false, exitCode: 137, signal: "SIGKILL" })
        // Ended: a no-op.
        yield* p.kill("SIGTERM")
        expect(yield* Effect.flip(p.kill("SIGSTOP" as never))).toMatchObject({ _tag: "InvalidRequest" })
        expect(yield* Effect.flip(p.output({ since: -1 }))).toMatchObject({ _tag: "InvalidRequest" })
        yield* s.close
      })
    )
  )

  it.live("one that never exits does not hold up close; its end is journaled as the session's", () =>
    withFakeSessions(({ events, sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        const p = yield* s.spawn(fakeProgram({ hang: true }))
        yield* s.close
        expect(yield* p.status).toMatchObject({ running: false, endReason: "the session ended" })
        const types = (yield* events(s.sessionId)).map((e) => e.type)
        expect(types.indexOf("ProcessExited")).toBeLessThan(types.indexOf("SessionClosed"))
        expect(yield* Effect.flip(s.spawn(fakeProgram({})))).toMatchObject({ _tag: "SessionEnded" })
      })
    )
  )

  it.live("it sees the session's exported variables and its own env; what it exports is not carried to calls", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        yield* s.run(fakeProgram({ export: { SHARED: "from-call" } }))
        const p = yield* s.spawn(fakeProgram({ printEnv: "SHARED", export: { LEAKED: "x" } }), { env: { OWN: "1" } })
        yield* p.wait()
        expect((yield* p.output()).head).toBe("from-call\n")
        const own = yield* s.spawn(fakeProgram({ printEnv: "OWN" }), { env: { OWN: "1" } })
        yield* own.wait()
        expect((yield* own.output()).head).toBe("1\n")
        const q = yield* s.spawn(fakeProgram({ printEnv: "OWN" }))
        yield* q.wait()
        expect((yield* q.output()).head).toBe("\n")
        expect((yield* s.run(fakeProgram({ printEnv: "LEAKED" }))).stdout).toBe("\n")
        yield* s.close
      })
    )
  )

  it.live("refused: an empty command, NUL bytes, a persistent sandbox", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        expect(yield* Effect.flip(s.spawn(" "))).toMatchObject({ _tag: "InvalidRequest", field: "command" })
        expect(yield* Effect.flip(s.spawn("a\0b"))).toMatchObject({ _tag: "InvalidRequest", field: "command" })
        expect(yield* Effect.flip(s.spawn("true", { cwd: "" }))).toMatchObject({ _tag: "InvalidRequest", field: "cwd" })
        yield* s.close
        const persistent = yield* sessions.openPersistent({ profile: "bg" })
        expect(yield* Effect.flip(persistent.spawn("true"))).toMatchObject({ _tag: "InvalidRequest", field: "spawn" })
        yield* persistent.destroy
      })
    )
  )
})
