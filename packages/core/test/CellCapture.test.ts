/**
 * A cell's output on the host (CellCapture): every per-cell bound of SECURITY.md's kernel table
 * checked again here, whatever the supervisor forwarded — bundle bytes, outputs and bytes per cell,
 * MIME types per bundle and their names, metadata, JSON nesting and values measured before parsing,
 * images that are valid base64 with their magic bytes, the error's name, value and traceback (head
 * and tail), late output; and CellExecuted's bounded list of outputs.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import {
  boundTraceback,
  CellCapture,
  LateOutput,
  MAX_ERROR_NAME_BYTES,
  MAX_ERROR_VALUE_BYTES,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  MAX_LATE_BYTES,
  MAX_METADATA_BYTES,
  MAX_TRACEBACK_BYTES,
  measureJson,
  validImage
} from "@hermes-sandbox/core/CellCapture"

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]).toString("base64")

const limits = { outputLimitBytes: 100, maxBundleBytes: 10_000_000, maxDisplays: 100, maxDisplayBytes: 32_000_000 }
const bytes = (v: unknown) => Buffer.from(JSON.stringify(v))
const display = (data: Record<string, unknown>, metadata: unknown = {}) => bytes({ data, metadata })

describe("CellCapture", () => {
  it("keeps displays in order, the result, and the error; counts outputs for the journal", () => {
    const c = new CellCapture(limits)
    expect(c.record("D", display({ "text/html": "<b>1</b>", "text/plain": "1" }))).toBeDefined()
    c.record("D", display({ "image/png": PNG }))
    c.record("R", display({ "text/plain": "'done'" }))
    c.record("X", bytes({ ename: "ValueError", evalue: "bad", traceback: ["line 1", "ValueError: bad"] }))
    expect(c.displays.map((d) => Object.keys(d.data))).toEqual([["text/html", "text/plain"], ["image/png"]])
    expect(c.result?.data).toEqual({ "text/plain": "'done'" })
    expect(c.error).toEqual({
      name: "ValueError",
      value: "bad",
      traceback: ["line 1", "ValueError: bad"],
      truncated: false
    })
    expect(c.displaysOmitted).toEqual({ count: 0, bytes: 0, reasons: {} })
    expect(c.journal()).toEqual({
      outputs: [
        {
          kind: "display",
          mime: [
            { type: "text/html", bytes: 8 },
            { type: "text/plain", bytes: 1 }
          ]
        },
        { kind: "display", mime: [{ type: "image/png", bytes: PNG.length }] },
        { kind: "result", mime: [{ type: "text/plain", bytes: 6 }] }
      ],
      outputsOmitted: 0
    })
  })

  it("one bundle past maxBundleBytes, outputs past maxDisplays, bytes past maxDisplayBytes: omitted whole, counted by reason", () => {
    const c = new CellCapture({ ...limits, maxBundleBytes: 100, maxDisplays: 3, maxDisplayBytes: 150 })
    c.record("D", display({ "text/plain": "x".repeat(200) })) // too large
    c.record("D", display({ "text/plain": "a".repeat(40) })) // 71 bytes
    c.record("D", display({ "text/plain": "b".repeat(40) })) // 142 in all
    c.record("D", display({ "text/plain": "c" })) // 174 > 150: total
    c.record("D", display({ "text/plain": "d" })) // total again (bytes first checked after count: 2 < 3)
    c.record("R", display({ "text/plain": "e" })) // over the count? 2 kept, so total
    expect(c.displays).toHaveLength(2)
    expect(c.displaysOmitted.count).toBe(4)
    expect(c.displaysOmitted.reasons).toEqual({ "too-large": 1, total: 3 })
    const d = new CellCapture({ ...limits, maxDisplays: 2 })
    for (let i = 0; i < 5; i++) d.record("D", display({ "text/plain": String(i) }))
    expect(d.displays).toHaveLength(2)
    expect(d.displaysOmitted).toMatchObject({ count: 3, reasons: { count: 3 } })
  })

  it("10,000 displays keep at most maxDisplays, and the journal lists at most 100 outputs of 16 types", () => {
    const c = new CellCapture({ ...limits, maxDisplays: 1000 })
    const many = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`text/x-${i}`, "v"]))
    for (let i = 0; i < 10_000; i++) c.record("D", display(many))
    expect(c.displays).toHaveLength(1000)
    expect(c.displaysOmitted.count).toBe(9000)
    const j = c.journal()
    expect(j.outputs).toHaveLength(100)
    expect(j.outputsOmitted).toBe(900)
    expect(j.outputs.every((o) => o.mime.length === 16)).toBe(true)
  })

  it("a record that is not JSON, or not a bundle, is malformed; a second result too", () => {
    const c = new CellCapture(limits)
    c.record("D", Buffer.from("{not json"))
    c.record("D", bytes([1, 2]))
    c.record("D", bytes({ data: "text" }))
    c.record("X", bytes({ ename: 1, evalue: "x", traceback: [] }))
    c.record("R", display({ "text/plain": "1" }))
    c.record("R", display({ "text/plain": "2" }))
    expect(c.result?.data).toEqual({ "text/plain": "1" })
    expect(c.displaysOmitted.reasons).toEqual({ malformed: 5 })
  })

  it("MIME types: at most 32 a bundle, names of at most 255 bytes, text values only (JSON types as JSON text)", () => {
    const c = new CellCapture(limits)
    const data: Record<string, unknown> = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`text/t${i}`, "x"]))
    c.record("D", display(data))
    expect(Object.keys(c.displays[0]!.data)).toHaveLength(32)
    c.record(
      "D",
      display({
        ["a/" + "b".repeat(254)]: "too long a name",
        ["a/" + "b".repeat(253)]: "255 bytes",
        "text/plain": 42,
        "application/json": { a: [1, 2, { b: null }] },
        "application/vnd.custom+json": [1],
        "text/markdown": "# hi"
      })
    )
    expect(c.displays[1]!.data).toEqual({
      ["a/" + "b".repeat(253)]: "255 bytes",
      "application/json": '{"a":[1,2,{"b":null}]}',
      "application/vnd.custom+json": "[1]",
      "text/markdown": "# hi"
    })
    expect(c.displaysOmitted).toEqual({ count: 0, bytes: 0, reasons: { types: 8, invalid: 2 } })
  })

  it("a type named __proto__ stays a plain key", () => {
    const c = new CellCapture(limits)
    c.record("D", Buffer.from('{"data":{"__proto__":"x","text/plain":"y"},"metadata":{}}'))
    const data = c.displays[0]!.data
    expect(Object.keys(data)).toEqual(["__proto__", "text/plain"])
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype)
  })

  it("application/json past 64 levels or 100,000 values is dropped, measured before parsing", () => {
    const deep = (n: number): unknown => (n === 0 ? 1 : [deep(n - 1)])
    const c = new CellCapture(limits)
    c.record("D", display({ "application/json": deep(MAX_JSON_DEPTH - 1), "text/plain": "ok" }))
    c.record("D", display({ "application/json": deep(MAX_JSON_DEPTH + 1), "text/plain": "deep" }))
    c.record("D", display({ "application/json": Array(MAX_JSON_VALUES + 1).fill(0), "text/plain": "wide" }))
    expect(c.displays.map((d) => Object.keys(d.data))).toEqual([
      ["application/json", "text/plain"],
      ["text/plain"],
      ["text/plain"]
    ])
    expect(c.displaysOmitted.reasons).toEqual({ invalid: 2 })
    // A record nested far deeper than any bundle may be is dropped whole, unparsed.
    const bomb = Buffer.from(`{"data":{"application/json":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}}`)
    const d = new CellCapture(limits)
    d.record("D", bomb)
    expect(d.displays).toEqual([])
    expect(d.displaysOmitted).toEqual({ count: 1, bytes: bomb.byteLength, reasons: { invalid: 1 } })
  })

  it("measureJson counts nesting and values, skipping strings (escaped quotes and brackets inside)", () => {
    expect(measureJson('{"a":[1,2,{"b":"x\\"]]]"}]}', 10, 100)).toEqual({ depth: 3, values: 8, over: false })
    expect(measureJson("[[[[]]]]", 3, 100).over).toBe(true)
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
        const m = measureJson(JSON.stringify(v), 1000, 1_000_000)
        expect(m.over).toBe(false)
        expect(m.depth).toBeLessThanOrEqual(7)
      })
    )
  })

  it("image/png and image/jpeg: valid base64 with their magic bytes, else dropped as invalid", () => {
    expect(validImage("image/png", PNG)).toBe(true)
    expect(validImage("image/png", `${PNG.slice(0, 40)}\n${PNG.slice(40)}\n`)).toBe(true)
    expect(validImage("image/jpeg", JPEG)).toBe(true)
    expect(validImage("image/png", JPEG)).toBe(false)
    expect(validImage("image/jpeg", PNG)).toBe(false)
    expect(validImage("image/png", "not base64!")).toBe(false)
    expect(validImage("image/png", `${PNG}A`)).toBe(false)
    expect(validImage("image/png", "")).toBe(false)
    expect(validImage("image/png", Buffer.from("<svg onload=alert(1)>").toString("base64"))).toBe(false)
    const c = new CellCapture(limits)
    c.record("D", display({ "image/png": "PHN2Zz4=", "image/jpeg": JPEG, "text/plain": "fig" }))
    expect(Object.keys(c.displays[0]!.data)).toEqual(["image/jpeg", "text/plain"])
    expect(c.displaysOmitted.reasons).toEqual({ invalid: 1 })
  })

  it("metadata past 64 KiB becomes {}, counted", () => {
    const c = new CellCapture(limits)
    c.record("D", display({ "text/plain": "a" }, { big: "x".repeat(MAX_METADATA_BYTES) }))
    c.record("D", display({ "text/plain": "b" }, { width: 10 }))
    expect(c.displays.map((d) => d.metadata)).toEqual([{}, { width: 10 }])
    expect(c.displaysOmitted.reasons).toEqual({ metadata: 1 })
  })

  it("an error: name 256 bytes, value 64 KiB, traceback 256 KiB (head and tail kept), truncated said", () => {
    const c = new CellCapture(limits)
    // A deep recursion: thousands of frames.
    const frames = Array.from({ length: 20_000 }, (_, i) => `  File "<cell>", line 1, in f  # frame ${i}`)
    c.record(
      "X",
      bytes({
        ename: "é".repeat(200),
        evalue: "v".repeat(100_000),
        traceback: ["Traceback (head)", ...frames, "RecursionError: tail"]
      })
    )
    const e = c.error!
    expect(Buffer.byteLength(e.name)).toBeLessThanOrEqual(MAX_ERROR_NAME_BYTES)
    expect(e.name).toBe("é".repeat(128))
    expect(e.value).toHaveLength(MAX_ERROR_VALUE_BYTES)
    expect(e.truncated).toBe(true)
    expect(e.traceback[0]).toBe("Traceback (head)")
    expect(e.traceback.at(-1)).toBe("RecursionError: tail")
    expect(e.traceback.reduce((n, l) => n + Buffer.byteLength(l), 0)).toBeLessThanOrEqual(MAX_TRACEBACK_BYTES)
    expect(e.traceback.length).toBeLessThan(frames.length)
  })

  it("boundTraceback keeps everything within the bound, and one huge line is cut", () => {
    expect(boundTraceback(["a", "b"], 10)).toEqual({ traceback: ["a", "b"], truncated: false })
    const got = boundTraceback(["x".repeat(1000)], 100)
    expect(got.truncated).toBe(true)
    expect(got.traceback.join("").length).toBeLessThanOrEqual(100)
  })

  it("stdout and stderr are capped at outputLimitBytes, the rest counted", () => {
    const c = new CellCapture(limits)
    c.stdout.push(Buffer.from("y".repeat(250)))
    c.stdout.countAtLeast(1000)
    expect(c.stdout.text()).toBe("y".repeat(100))
    expect([c.stdout.total, c.stdout.truncated]).toEqual([1000, true])
  })
})

describe("LateOutput", () => {
  it("keeps 64 KiB between two cells, counts the rest (the 'C' frame's idle bytes), and starts again", () => {
    const late = new LateOutput()
    expect(late.take(0)).toBeUndefined()
    late.push(Buffer.from("z".repeat(MAX_LATE_BYTES + 10)))
    expect(late.take(MAX_LATE_BYTES + 5000)).toEqual({
      bytes: MAX_LATE_BYTES + 5000,
      text: "z".repeat(MAX_LATE_BYTES),
      truncated: true
    })
    late.push(Buffer.from("next"))
    expect(late.take(4)).toEqual({ bytes: 4, text: "next", truncated: false })
  })
})
