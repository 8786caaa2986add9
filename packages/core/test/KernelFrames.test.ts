/**
 * The kernel supervisor's frames on the host (RunnerProtocol.KernelFrameDecoder): its grammar — 'g'
 * once first; cells 'C' … 'Z' for the cell the host sent; records 'M' + exactly their bytes in 'm';
 * outside a cell only 'L', 'N' late, 'E' and 'G', and between the host's cell command and its 'C'
 * the lock's 'w' (at most once) and 'l' — and every frame not the
 * supervisor's (no key, a forged payload, out of grammar) a violation after which nothing is decoded.
 * The kernel's commands and header, as the supervisor reads them.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as RunnerProtocol from "@hermes-sandbox/core/RunnerProtocol"

const {
  decodeKernelCommand,
  decodeKernelHeader,
  encodeCellCommand,
  encodeFrame,
  encodeInterruptCommand,
  encodeKernelHeader,
  encodeRestartCommand,
  FrameDecoder,
  KernelFrameDecoder,
  makeRunKey
} = RunnerProtocol

const CELL = "cell-1"

const decoded = (bundleBytes = 1024, tools = false) => {
  const key = makeRunKey()
  const got: Array<string> = []
  const violations: Array<string> = []
  const records: Array<[string, string]> = []
  const decoder = new KernelFrameDecoder(key, bundleBytes, {
    ready: (r) => got.push(`ready ${r.pid} ${r.start} [${r.preloadFailed.join(",")}]`),
    cellStarted: (id, idle) => got.push(`C ${id} ${idle}`),
    stdout: (c) => got.push(`o ${Buffer.from(c).toString()}`),
    stderr: (c) => got.push(`e ${Buffer.from(c).toString()}`),
    dropped: (s, n) => got.push(`d ${s} ${n}`),
    record: (kind, json) => records.push([kind, Buffer.from(json).toString()]),
    skipped: (kind, bytes, reason) => got.push(`N ${kind} ${bytes} ${reason}`),
    cellEnded: (e) => got.push(`Z ${e.cellId} ${e.status} ${e.stdoutBytes} ${e.stderrBytes} ${e.records} ${e.skipped}`),
    late: (c) => got.push(`L ${Buffer.from(c).toString()}`),
    gone: (g) => got.push(`G ${g.exitCode} ${g.signal} ${String(g.oomKilled)} ${g.cause}`),
    lockWait: (h) => got.push(`w ${h}`),
    locked: () => got.push("l"),
    setupFailed: (m) => got.push(`E ${m}`),
    toolFrame: (type, bytes) => (tools ? (got.push(`${type} ${bytes.toString()}`), undefined) : "no tools"),
    toolArguments: (c) => (tools ? (got.push(`a ${Buffer.from(c).toString()}`), undefined) : "no tools"),
    violation: (reason) => violations.push(reason)
  })
  const f = (type: string, payload: string | Uint8Array = "") => decoder.push(encodeFrame(key, type, payload))
  return { key, decoder, f, got, violations, records }
}

/** A kernel that is ready and has been sent cell CELL. */
const ready = (bundleBytes?: number, tools = false) => {
  const d = decoded(bundleBytes, tools)
  d.f("g", "42 12345")
  d.decoder.expectCell(CELL)
  return d
}

describe("KernelFrameDecoder", () => {
  it("decodes a kernel's life: ready, late output, a cell with output, a record, a skip, its end, the kernel's end", () => {
    const d = decoded()
    d.f("g", "42 12345 nosuch.mod other")
    d.f("L", "between")
    d.f("N", "D 10 late")
    d.decoder.expectCell(CELL)
    d.f("w", "77 python3 -c x")
    d.f("l")
    d.f("C", `${CELL} 7`)
    d.f("o", "out")
    d.f("e", "err")
    d.f("d", "o 5000")
    d.f("M", "R 10")
    d.f("m", '{"data":')
    d.f("m", "1}")
    d.f("N", "D 99999 too-large")
    // Garbage on the records pipe: no kind could be read.
    d.f("N", "? 57 malformed")
    d.f("Z", `${CELL} ok 5000 3 1 2`)
    d.f("G", "137 9 ? requested")
    expect(d.violations).toEqual([])
    expect(d.records).toEqual([["R", '{"data":1}']])
    expect(d.got).toEqual([
      "ready 42 12345 [nosuch.mod,other]",
      "L between",
      "N D 10 late",
      "w 77 python3 -c x",
      "l",
      `C ${CELL} 7`,
      "o out",
      "e err",
      "d o 5000",
      "N D 99999 too-large",
      "N ? 57 malformed",
      `Z ${CELL} ok 5000 3 1 2`,
      "G 137 9 undefined requested"
    ])
    expect(d.decoder.ended).toBe(true)
  })

  it("a record's bytes arrive whole however the frames are cut, and an empty record is delivered at once", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.integer({ min: 1, max: 50 }), (text, piece) => {
        const d = ready(100_000)
        d.f("C", `${CELL} 0`)
        const bytes = Buffer.from(JSON.stringify({ data: { "text/plain": text } }))
        d.f("M", `D ${bytes.byteLength}`)
        for (let at = 0; at < bytes.byteLength; at += piece) d.f("m", bytes.subarray(at, at + piece))
        d.f("M", "X 0")
        d.f("Z", `${CELL} error 0 0 2 0`)
        expect(d.violations).toEqual([])
        expect(d.records).toEqual([
          ["D", bytes.toString()],
          ["X", ""]
        ])
      })
    )
  })

  // Each of these is out of the grammar; the decoder stops at it and decodes nothing more.
  const outOfGrammar: ReadonlyArray<[string, (d: ReturnType<typeof ready>) => void]> = [
    ["a second 'g'", (d) => d.f("g", "43 1")],
    ["'C' for a cell the host did not send", (d) => d.f("C", "other-cell 0")],
    ["output outside a cell", (d) => d.f("o", "x")],
    ["stderr outside a cell", (d) => d.f("e", "x")],
    ["a record outside a cell", (d) => d.f("M", "D 1")],
    ["record content outside a record", (d) => (d.f("C", `${CELL} 0`), d.f("m", "x"))],
    ["a record longer than it said", (d) => (d.f("C", `${CELL} 0`), d.f("M", "D 2"), d.f("m", "xyz"))],
    ["a frame inside a record", (d) => (d.f("C", `${CELL} 0`), d.f("M", "D 2"), d.f("o", "x"))],
    ["a record over the header's bound", (d) => (d.f("C", `${CELL} 0`), d.f("M", "D 1025"))],
    ["a record of an unknown kind", (d) => (d.f("C", `${CELL} 0`), d.f("M", "Q 1"))],
    ["'Z' outside a cell", (d) => d.f("Z", `${CELL} ok 0 0 0 0`)],
    ["'Z' for another cell", (d) => (d.f("C", `${CELL} 0`), d.f("Z", "other ok 0 0 0 0"))],
    ["'Z' counting records that never came", (d) => (d.f("C", `${CELL} 0`), d.f("Z", `${CELL} ok 0 0 1 0`))],
    ["'Z' with a status that is not one", (d) => (d.f("C", `${CELL} 0`), d.f("Z", `${CELL} fine 0 0 0 0`))],
    ["late output inside a cell", (d) => (d.f("C", `${CELL} 0`), d.f("L", "x"))],
    ["a late skip inside a cell", (d) => (d.f("C", `${CELL} 0`), d.f("N", "D 1 late"))],
    ["a cell's skip outside a cell", (d) => d.f("N", "D 1 count")],
    ["a lock frame inside a cell", (d) => (d.f("C", `${CELL} 0`), d.f("w", "1 x"))],
    [
      "a lock frame after a cell's end, before the host sent another",
      (d) => (d.f("l"), d.f("C", `${CELL} 0`), d.f("Z", `${CELL} ok 0 0 0 0`), d.f("l"))
    ],
    ["a second 'l' for one cell", (d) => (d.f("l"), d.f("l"))],
    ["a 'w' after the cell's 'l'", (d) => (d.f("l"), d.f("w", "1 x"))],
    ["a second 'w' for one cell", (d) => (d.f("w", "1 x"), d.f("w", "1 x"))],
    ["an end-of-run frame (not the kernel's)", (d) => d.f("x", "0 0 0 0")],
    ["a run's started frame", (d) => d.f("p", "12 34")],
    ["a file frame", (d) => d.f("f", "644 1 a")],
    ["a tool call where no tools were given", (d) => (d.f("C", `${CELL} 0`), d.f("t", "1 2 add"))],
    ["a 'G' with a cause that is not one", (d) => d.f("G", "0 0 0 bored")],
    ["a 'G' with an exit code past 255", (d) => d.f("G", "300 0 0 crashed")],
    ["a dropped-bytes frame that is not the supervisor's", (d) => (d.f("C", `${CELL} 0`), d.f("d", "o lots"))],
    ["anything after 'G'", (d) => (d.f("G", "0 0 0 requested"), d.f("L", "x"))]
  ]
  for (const [what, act] of outOfGrammar) {
    it(`${what} is a violation, and nothing after it is decoded`, () => {
      const d = ready()
      act(d)
      expect(d.violations).toHaveLength(1)
      const before = d.got.length
      d.f("L", "after")
      d.f("G", "0 0 0 requested")
      expect(d.got).toHaveLength(before)
      expect(d.violations).toHaveLength(1)
    })
  }

  it("a cell's tool calls ('t' 'a' 'b' 'q') go to its channel, only inside the cell", () => {
    const d = ready(1024, true)
    d.f("C", `${CELL} 0`)
    d.f("t", "1 7 add")
    d.f("a", '{"a":1}')
    d.f("b", "2 99999 big")
    d.f("q", "1")
    d.f("Z", `${CELL} ok 0 0 0 0`)
    expect(d.violations).toEqual([])
    expect(d.got.slice(-5)).toEqual(["t 1 7 add", 'a {"a":1}', "b 2 99999 big", "q 1", `Z ${CELL} ok 0 0 0 0`])
    const idle = ready(1024, true)
    idle.f("t", "1 2 add")
    expect(idle.violations).toEqual(["a frame 't' outside a cell's window"])
  })

  it("the lock's 'w' and 'l' come only for a cell the host sent, before its 'C': not before 'g', not at idle", () => {
    for (const frame of ["w", "l"]) {
      const starting = decoded()
      starting.f(frame, frame === "w" ? "1 x" : "")
      expect(starting.violations).toEqual([`a lock frame ('${frame}') for no cell the host sent`])
      const idle = decoded()
      idle.f("g", "42 12345")
      idle.f(frame, frame === "w" ? "1 x" : "")
      expect(idle.violations).toEqual([`a lock frame ('${frame}') for no cell the host sent`])
    }
    // Each cell waits for the lock afresh.
    const d = ready()
    for (const id of [CELL, "cell-2"]) {
      d.decoder.expectCell(id)
      d.f("w", "77 python3")
      d.f("l")
      d.f("C", `${id} 0`)
      d.f("Z", `${id} ok 0 0 0 0`)
    }
    expect(d.violations).toEqual([])
  })

  it("a frame without this kernel's key is a violation (a forged write into the supervisor's stdout)", () => {
    const d = ready()
    d.decoder.push(encodeFrame(makeRunKey(), "C", `${CELL} 0`))
    expect(d.violations).toEqual(["a frame without this run's key"])
    expect(d.got).toEqual(["ready 42 12345 []"])
  })

  it("'g' with a payload that is not the supervisor's is a violation", () => {
    for (const payload of ["0 1", "42", "42 x", "42 1 bad-name", `42 1 ${"a".repeat(5)};rm`]) {
      const d = decoded()
      d.f("g", payload)
      expect(d.violations).toHaveLength(1)
    }
  })

  it("'E' and 'G' may cut a cell short ('E' anywhere, 'G' even inside a record)", () => {
    const d = ready()
    d.f("C", `${CELL} 0`)
    d.f("M", "D 10")
    d.f("m", "12345")
    d.f("E", "hermes-run: pipe: EMFILE")
    d.f("G", "255 0 ? supervisor")
    expect(d.violations).toEqual([])
    expect(d.got.slice(-2)).toEqual(["E hermes-run: pipe: EMFILE", "G 255 0 undefined supervisor"])
    expect(d.records).toEqual([])
  })

  it("a run's decoder refuses every kernel frame", () => {
    for (const type of ["g", "C", "M", "m", "N", "Z", "L", "G"]) {
      const key = makeRunKey()
      const violations: Array<string> = []
      const decoder = new FrameDecoder(key, {
        stdout: () => {},
        stderr: () => {},
        control: () => {},
        violation: (r) => violations.push(r)
      })
      decoder.push(encodeFrame(key, type, "x"))
      expect(violations).toEqual([`a kernel frame '${type}' where no kernel runs`])
    }
  })
})

describe("kernel commands and header", () => {
  it("the header round-trips as the supervisor reads it", () => {
    const header = {
      key: makeRunKey(),
      capBytes: 1000,
      lock: "/tmp/.hermes-session/lock",
      killLeftovers: true,
      display: { bundleBytes: 4096, count: 10, totalBytes: 65536 },
      graceMs: 2000,
      preload: ["pandas", "matplotlib.pyplot"]
    }
    const bytes = encodeKernelHeader(header)
    const text = Buffer.from(bytes).toString()
    expect(text).toContain("\ndisplay 4096 10 65536\ngrace 2000\npreload 24\npandas matplotlib.pyplot")
    expect(text.endsWith("run\n")).toBe(true)
    const got = decodeKernelHeader(bytes)
    expect(got).toEqual({ header, next: bytes.byteLength })
    expect(decodeKernelHeader(bytes.subarray(0, bytes.byteLength - 2))).toBe("incomplete")
  })

  it("cells (any code bytes, newlines and 'run' lines included), interrupts and restart round-trip", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 1, max: 10_000 }), (code, count) => {
        const bytes = Buffer.concat([
          encodeCellCommand(CELL, count, code),
          encodeInterruptCommand(CELL),
          encodeRestartCommand()
        ])
        const a = decodeKernelCommand(bytes, 0)
        if (a === undefined || a === "incomplete") throw new Error("no cell")
        expect(a.command).toEqual({ command: "cell", cellId: CELL, executionCount: count, code: Buffer.from(code) })
        const b = decodeKernelCommand(bytes, a.next)
        if (b === undefined || b === "incomplete") throw new Error("no interrupt")
        expect(b.command).toEqual({ command: "interrupt", cellId: CELL })
        const c = decodeKernelCommand(bytes, b.next)
        if (c === undefined || c === "incomplete") throw new Error("no restart")
        expect(c).toEqual({ command: { command: "restart" }, next: bytes.byteLength })
      })
    )
  })
})
