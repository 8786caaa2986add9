import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { CompletionScanner, completionMarker, encodeRunnerPayload, makeReportNonce } from "@hermes-sandbox/core"

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

describe("CompletionScanner", () => {
  it.prop(
    "delivers exactly the output before the marker, whatever the chunking, and reports the exit code",
    [fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 0, max: 255 }), fc.array(fc.nat(400), { maxLength: 12 }), fc.uint8Array({ maxLength: 40 })],
    ([output, code, cuts, after]) => {
      const nonce = makeReportNonce()
      const stream = concat([output, enc.encode(`\x1eHERMES-DONE ${nonce} ${code}\n`), after])
      const delivered: Array<Uint8Array> = []
      let reported: number | undefined
      const scanner = new CompletionScanner(completionMarker(nonce), (c) => delivered.push(Uint8Array.from(c)), (c) => (reported = c))
      for (const chunk of chunked(stream, cuts)) scanner.push(chunk)
      expect(reported).toBe(code)
      expect(concat(delivered).equals(Buffer.from(output))).toBe(true)
    }
  )

  it.prop(
    "without a marker, everything is delivered once the stream is flushed",
    [fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(400), { maxLength: 12 })],
    ([output, cuts]) => {
      const nonce = makeReportNonce()
      const delivered: Array<Uint8Array> = []
      const scanner = new CompletionScanner(completionMarker(nonce), (c) => delivered.push(Uint8Array.from(c)), () => {
        throw new Error("no marker was sent")
      })
      for (const chunk of chunked(output, cuts)) scanner.push(chunk)
      scanner.flush()
      expect(concat(delivered).equals(Buffer.from(output))).toBe(true)
    }
  )

  it("another run's marker (other nonce) is ordinary output", () => {
    const delivered: Array<Uint8Array> = []
    const scanner = new CompletionScanner(completionMarker(makeReportNonce()), (c) => delivered.push(Uint8Array.from(c)), () => {
      throw new Error("must not complete")
    })
    const forged = enc.encode(`\x1eHERMES-DONE ${makeReportNonce()} 0\n`)
    scanner.push(forged)
    scanner.flush()
    expect(concat(delivered).equals(Buffer.from(forged))).toBe(true)
  })

  it("the payload header carries the report nonce only when asked", () => {
    const base = { language: "python" as const, code: enc.encode("print(1)"), files: [], stdin: new Uint8Array() }
    const header = (p: Uint8Array) => new TextDecoder().decode(p.subarray(0, p.indexOf(10)))
    expect(header(encodeRunnerPayload(base))).toBe('HERMES/1 {"language":"python","code":8,"files":[]}')
    expect(header(encodeRunnerPayload({ ...base, report: "ab".repeat(16) }))).toContain(`"report":"${"ab".repeat(16)}"`)
  })
})
