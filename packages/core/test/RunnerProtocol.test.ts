import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as RunnerProtocol from "@hermes-sandbox/core/RunnerProtocol"

const { decodeRunnerPayload, encodeFrame, encodeRunnerPayload, FrameDecoder, makeRunKey, parseExitPayload } =
  RunnerProtocol
const enc = new TextEncoder()

/** Split bytes at the given cut points (as a stream would). */
const chunked = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  const out: Array<Uint8Array> = []
  let from = 0
  for (const p of [...points, bytes.length]) {
    out.push(bytes.subarray(from, p))
    from = p
  }
  return out
}

const concat = (parts: ReadonlyArray<Uint8Array>) => Buffer.concat(parts.map((p) => Buffer.from(p)))

const collect = (key: string) => {
  const got = {
    stdout: [] as Array<Buffer>,
    stderr: [] as Array<Buffer>,
    control: [] as Array<[string, string]>,
    violations: [] as Array<string>
  }
  const decoder = new FrameDecoder(key, {
    stdout: (c) => got.stdout.push(Buffer.from(c)),
    stderr: (c) => got.stderr.push(Buffer.from(c)),
    control: (t, p) => got.control.push([t, p]),
    violation: (r) => got.violations.push(r)
  })
  return { decoder, got, text: () => ({ stdout: Buffer.concat(got.stdout), stderr: Buffer.concat(got.stderr) }) }
}

describe("FrameDecoder", () => {
  it.prop(
    "delivers each stream's bytes exactly and the report once, whatever the chunking",
    [
      fc.array(fc.tuple(fc.boolean(), fc.uint8Array({ minLength: 0, maxLength: 200 })), { maxLength: 8 }),
      fc.integer({ min: 0, max: 255 }),
      fc.array(fc.nat(3000), { maxLength: 20 })
    ],
    ([pieces, code, cuts]) => {
      const key = makeRunKey()
      const frames = pieces.map(([isOut, bytes]) => encodeFrame(key, isOut ? "o" : "e", bytes))
      const stream = concat([...frames, encodeFrame(key, "x", `${code} 0 0 0`)])
      const { decoder, got, text } = collect(key)
      for (const c of chunked(stream, cuts)) decoder.push(c)
      expect(got.violations).toEqual([])
      expect(text().stdout).toEqual(concat(pieces.filter(([o]) => o).map(([, b]) => b)))
      expect(text().stderr).toEqual(concat(pieces.filter(([o]) => !o).map(([, b]) => b)))
      expect(got.control).toEqual([["x", `${code} 0 0 0`]])
    }
  )

  it.prop(
    "never takes anything without the run's key: a forged frame (another key) is a violation, never output or a report",
    [fc.uint8Array({ maxLength: 100 }), fc.integer({ min: 0, max: 255 }), fc.array(fc.nat(400), { maxLength: 8 })],
    ([prefix, code, cuts]) => {
      const key = makeRunKey()
      const forger = makeRunKey()
      const stream = concat([
        encodeFrame(key, "o", prefix),
        encodeFrame(forger, "x", `${code} 0 0 0`),
        encodeFrame(key, "x", "3 0 0 0")
      ])
      const { decoder, got } = collect(key)
      for (const c of chunked(stream, cuts)) decoder.push(c)
      expect(got.violations).toHaveLength(1)
      expect(got.control).toEqual([])
    }
  )

  it("raw bytes on the channel (the program writing to the container's stdout) are a violation", () => {
    const key = makeRunKey()
    const { decoder, got } = collect(key)
    decoder.push(enc.encode(`\x1eHERMES-DONE ${key} 0\n`))
    expect(got.violations).toHaveLength(1)
    expect(got.control).toEqual([])
  })

  it("refuses oversized frames, unknown types and bytes after the end, holding nothing", () => {
    const key = makeRunKey()
    const huge = Buffer.from(encodeFrame(key, "o", new Uint8Array(0)))
    huge.writeUInt32BE(1 << 30, 17)
    for (const stream of [
      huge,
      encodeFrame(key, "Z", "x"),
      concat([encodeFrame(key, "x", "0 0 0 0"), encodeFrame(key, "o", "late")])
    ]) {
      const { decoder, got } = collect(key)
      decoder.push(stream)
      expect(got.violations).toHaveLength(1)
    }
  })

  it("holds nothing back (so it is linear and bounded): 8 MiB in one-byte chunks arrive as one-byte pieces", () => {
    const key = makeRunKey()
    let delivered = 0
    let largest = 0
    const decoder = new FrameDecoder(key, {
      stdout: (c) => {
        delivered += c.byteLength
        largest = Math.max(largest, c.byteLength)
      },
      stderr: () => {},
      control: () => {},
      violation: () => {}
    })
    const frame = encodeFrame(key, "o", new Uint8Array(65_536).fill(65))
    for (let f = 0; f < 128; f++) for (let i = 0; i < frame.length; i += 1) decoder.push(frame.subarray(i, i + 1))
    expect(delivered).toBe(128 * 65_536)
    // A decoder that accumulated (as the old marker scanner did after a marker prefix) would deliver larger pieces.
    expect(largest).toBe(1)
  })
})

describe("the supervisor's exit report", () => {
  it("accepts only codes 0-255 and decimal byte counts", () => {
    expect(parseExitPayload("0 0 0 0")).toEqual({ exitCode: 0, stdoutBytes: 0, stderrBytes: 0, outsideSignal: 0 })
    expect(parseExitPayload("255 12 3 15")).toEqual({
      exitCode: 255,
      stdoutBytes: 12,
      stderrBytes: 3,
      outsideSignal: 15
    })
    for (const bad of [
      "-1 0 0 0",
      "300 0 0 0",
      "1e300 0 0 0",
      " 0 0 0",
      "",
      "0",
      "00 0 0 0",
      "9007199254740993 0 0 0",
      "0 0 0",
      "0 0 0 0 0",
      "0x1 0 0 0",
      "0 0 0 -1",
      "0 0 0 300"
    ]) {
      expect(parseExitPayload(bad), bad).toBeUndefined()
    }
  })
})

describe("the payload", () => {
  it.prop(
    "round-trips: key, cap, code, files with any bytes in their names, args and stdin",
    [
      fc.string({ maxLength: 200 }),
      fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 40 }), fc.uint8Array({ maxLength: 100 })), {
        maxLength: 5
      }),
      fc.array(fc.string({ maxLength: 30 }), { maxLength: 5 }),
      fc.uint8Array({ maxLength: 100 })
    ],
    ([code, files, args, stdin]) => {
      const key = makeRunKey()
      const bytes = encodeRunnerPayload({
        key,
        capBytes: 1024,
        language: "python",
        code: enc.encode(code),
        files,
        args,
        stdin,
        lock: "/tmp/l",
        killLeftovers: true
      })
      const d = decodeRunnerPayload(bytes)!
      expect(d.key).toBe(key)
      expect(d.capBytes).toBe(1024)
      expect(Buffer.from(d.code!).toString()).toBe(code)
      expect(d.files.map(([p, c]) => [p, Buffer.from(c)])).toEqual(files.map(([p, c]) => [p, Buffer.from(c)]))
      expect(d.args).toEqual(args)
      expect(Buffer.from(d.stdin)).toEqual(Buffer.from(stdin))
      expect(d.lock).toBe("/tmp/l")
      expect(d.killLeftovers).toBe(true)
    }
  )

  it("never carries the key in plain mode", () => {
    const text = Buffer.from(
      encodeRunnerPayload({ language: "bash", code: enc.encode("echo"), stdin: new Uint8Array(0) })
    ).toString()
    expect(text.startsWith("HERMES/2\n")).toBe(true)
    expect(text).not.toContain("key ")
  })
})
