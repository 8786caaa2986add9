/**
 * The CLI's terminal output (hostile review 1, finding 14): a program's escape sequences and
 * look-alike lines are neutralized on a terminal, and the CLI's own lines carry a mark that
 * sanitized program output cannot contain. The CLI itself runs through a pseudo-terminal in
 * test/cli-terminal.e2e.test.ts.
 */
import { describe, expect, it } from "vitest"
import { FastCheck as fc } from "effect"
import { CLI_MARK, cliLine, sanitizeForTerminal, TerminalSanitizer } from "../src/terminal.js"

const encoder = new TextEncoder()

/** Any code point the sanitizer must never let through. */
const dangerous = (c: number): boolean =>
  (c < 0x20 && c !== 0x0a && c !== 0x09) ||
  (c >= 0x7f && c <= 0x9f) ||
  [0x061c, 0x200e, 0x200f, 0x27e6].includes(c) ||
  (c >= 0x202a && c <= 0x202e) ||
  (c >= 0x2066 && c <= 0x2069)

const hasDangerous = (s: string): boolean => [...s].some((ch) => dangerous(ch.codePointAt(0)!))

describe("sanitizeForTerminal", () => {
  it("keeps text, \\n and \\t as they are", () => {
    const text = "plain ascii, ünïcödé, 漢字, emoji 🙂, tab\there\nand lines\n"
    expect(sanitizeForTerminal(text)).toBe(text)
  })

  it.each([
    ["OSC window title", "\x1b]0;pwned-title\x07", "\\x1b]0;pwned-title\\x07"],
    ["clear screen, cursor home (CSI)", "\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"],
    ["colours (SGR)", "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"],
    ["OSC 52 clipboard write", "\x1b]52;c;cHduZWQ=\x1b\\", "\\x1b]52;c;cHduZWQ=\\x1b\\"],
    ["DCS", "\x1bP+q544e\x1b\\", "\\x1bP+q544e\\x1b\\"],
    ["8-bit CSI and OSC (C1)", "\u009b2J\u009d0;t\u009c", "\\x9b2J\\x9d0;t\\x9c"],
    ["carriage return overwriting a line", "real\rfake", "real\\x0dfake"],
    ["backspace, BEL, NUL, DEL", "a\b\x07\0\x7f", "a\\x08\\x07\\x00\\x7f"],
    [
      "bidi override (Trojan Source)",
      "x\u202eevil\u202c\u2066y\u2069\u200f\u061c",
      "x\\u202eevil\\u202c\\u2066y\\u2069\\u200f\\u061c"
    ],
    ["the CLI's own mark", `${CLI_MARK} timed out`, "\\u27e6hermes-sandbox\u27e7 timed out"]
  ])("neutralizes %s", (_, input, shown) => {
    const out = sanitizeForTerminal(input)
    expect(out).toBe(shown)
    expect(hasDangerous(out)).toBe(false)
  })

  it("drops a \\r right before \\n (CRLF line ends look the same on a terminal)", () => {
    expect(sanitizeForTerminal("one\r\ntwo\r\n")).toBe("one\ntwo\n")
    expect(sanitizeForTerminal("\r\r\n")).toBe("\\x0d\n")
  })

  it("a program's copy of the CLI's line no longer starts with the mark", () => {
    const forged = `${CLI_MARK} timed out after 5000 ms; the sandbox was killed\n`
    expect(sanitizeForTerminal(forged).startsWith(CLI_MARK)).toBe(false)
    // The old unmarked form stays text the program printed; the CLI's lines on a terminal are marked.
    expect(cliLine("timed out after 5000 ms; the sandbox was killed", { tty: true })).toBe(forged)
  })

  it("whatever the input, the output holds no control, C1, bidi or mark character (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (s) => {
        const out = sanitizeForTerminal(s)
        expect(hasDangerous(out)).toBe(false)
        expect(out.includes(CLI_MARK)).toBe(false)
      }),
      { numRuns: 500 }
    )
  })
})

describe("TerminalSanitizer (a stream in chunks)", () => {
  const feed = (chunks: ReadonlyArray<Uint8Array>): string => {
    const s = new TerminalSanitizer()
    return chunks.map((c) => s.push(c)).join("") + s.end()
  }

  it("joins UTF-8 sequences and CRLF split across chunks; an escape split across chunks stays neutral", () => {
    const bytes = encoder.encode("é🙂\r\n\x1b[2J\u009b\u202e")
    const oneByOne = Array.from(bytes, (b) => Uint8Array.of(b))
    expect(feed(oneByOne)).toBe("é🙂\n\\x1b[2J\\x9b\\u202e")
    expect(feed([bytes])).toBe(feed(oneByOne))
  })

  it("a \\r at the end of the stream, or not followed by \\n, is shown", () => {
    expect(feed([encoder.encode("progress 50%\r")])).toBe("progress 50%\\x0d")
    expect(feed([encoder.encode("50%\r"), encoder.encode("60%")])).toBe("50%\\x0d60%")
    expect(feed([encoder.encode("line\r"), encoder.encode("\nnext")])).toBe("line\nnext")
  })

  it("invalid UTF-8 (a raw 8-bit CSI byte 0x9b) becomes U+FFFD, never a control", () => {
    expect(feed([Uint8Array.of(0x9b, 0x32, 0x4a), Uint8Array.of(0xc3)])).toBe("\ufffd2J\ufffd")
  })

  it("whatever the bytes and however they are cut, the output holds nothing dangerous (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 10 }), (chunks) => {
        const out = feed(chunks)
        expect(hasDangerous(out)).toBe(false)
      }),
      { numRuns: 500 }
    )
  })
})

describe("cliLine", () => {
  it("on a terminal: marked, sanitized, and on a line of its own", () => {
    expect(cliLine("the program ran out of memory (OOM kill)", { tty: true })).toBe(
      `${CLI_MARK} the program ran out of memory (OOM kill)\n`
    )
    expect(cliLine("x", { tty: true, atLineStart: false })).toBe(`\n${CLI_MARK} x\n`)
    expect(cliLine("cannot create file \x1b[2Jevil", { tty: true })).toBe(
      `${CLI_MARK} cannot create file \\x1b[2Jevil\n`
    )
  })

  it("elsewhere: the former 'hermes-sandbox: ' lines, byte for byte", () => {
    expect(cliLine("output past the cap was discarded", { tty: false })).toBe(
      "hermes-sandbox: output past the cap was discarded\n"
    )
    expect(cliLine("x\x1b", { tty: false, atLineStart: false })).toBe("hermes-sandbox: x\x1b\n")
  })
})
