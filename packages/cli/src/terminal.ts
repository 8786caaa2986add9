/**
 * What the CLI writes to a terminal. A sandboxed program's output is untrusted: on a terminal,
 * escape sequences would act on it (retitle the window, clear the screen, move the cursor, rewrite
 * lines, reorder text with bidi overrides), and a plain line could pose as the CLI's own. So when
 * a stream is a terminal:
 *
 * - the program's output is neutralized: C0 controls other than \n and \t (ESC, and with it every
 *   CSI/OSC/DCS sequence; \r, backspace, BEL, ...), DEL, C1 controls U+0080–U+009F (8-bit CSI, OSC,
 *   ...), bidi controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069) and CLI_MARK are shown as
 *   `\xNN` / `\uNNNN` text instead; a \r right before \n (CRLF line ends) is dropped, since a
 *   terminal shows that as \n anyway. Invalid UTF-8 becomes U+FFFD.
 * - the CLI's own lines start with CLI_MARK, which program output therefore never contains.
 *
 * Anything else (a pipe, a file, --json) gets the program's bytes untouched and the CLI's lines as
 * "hermes-sandbox: ...", as before.
 */

/** Starts every line the CLI writes to a terminal; escaped wherever program output contains it. */
export const CLI_MARK = "\u27e6hermes-sandbox\u27e7"
const MARK_CHAR = 0x27e6

const isNeutralized = (c: number): boolean =>
  (c < 0x20 && c !== 0x0a && c !== 0x09) ||
  (c >= 0x7f && c <= 0x9f) ||
  c === 0x061c ||
  c === 0x200e ||
  c === 0x200f ||
  (c >= 0x202a && c <= 0x202e) ||
  (c >= 0x2066 && c <= 0x2069) ||
  c === MARK_CHAR

const shown = (c: number): string =>
  c < 0x100 ? `\\x${c.toString(16).padStart(2, "0")}` : `\\u${c.toString(16).padStart(4, "0")}`

/** Text as a terminal may safely show it (see the module comment); \r before \n is dropped. */
export const sanitizeForTerminal = (text: string): string => {
  let out = ""
  let from = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (!isNeutralized(c)) continue
    out += text.slice(from, i)
    from = i + 1
    if (c === 0x0d && text.charCodeAt(i + 1) === 0x0a) continue
    out += shown(c)
  }
  return from === 0 ? text : out + text.slice(from)
}

/**
 * A string from the journal (a tool's name, a client's name, a path, a message: sandboxed code or
 * an MCP client chose them) as part of one line the CLI prints, on a terminal or not: neutralized
 * as above, and a line break shown as `\x0a`, so that it can neither act on a terminal nor pose as
 * a line of its own. (`--json` prints the journal's strings exactly instead.)
 */
export const journalText = (text: string): string => sanitizeForTerminal(text).replaceAll("\n", "\\x0a")

/**
 * One output stream of the program, chunk by chunk: UTF-8 sequences and a CRLF split across
 * chunks are joined before sanitizing (an escape split across chunks needs nothing: its ESC is
 * escaped wherever it falls).
 */
export class TerminalSanitizer {
  private readonly decoder = new TextDecoder("utf-8")
  private pendingCr = false

  push(chunk: Uint8Array): string {
    return this.sanitize(this.decoder.decode(chunk, { stream: true }))
  }

  /** What is held back at the end of the stream (an unfinished UTF-8 sequence, a final \r). */
  end(): string {
    const rest = this.sanitize(this.decoder.decode())
    if (!this.pendingCr) return rest
    this.pendingCr = false
    return `${rest}${shown(0x0d)}`
  }

  private sanitize(text: string): string {
    if (text === "") return ""
    let prefix = ""
    if (this.pendingCr) {
      this.pendingCr = false
      if (text.charCodeAt(0) !== 0x0a) prefix = shown(0x0d)
    }
    if (text.charCodeAt(text.length - 1) === 0x0d) {
      this.pendingCr = true
      text = text.slice(0, -1)
    }
    return prefix + sanitizeForTerminal(text)
  }
}

/**
 * The CLI's own line: on a terminal "⟦hermes-sandbox⟧ message" (the message sanitized too: an
 * error may quote a file name), preceded by a newline when the cursor is not at the start of a
 * line, so the mark starts the line; elsewhere "hermes-sandbox: message", as before.
 */
export const cliLine = (message: string, options: { readonly tty: boolean; readonly atLineStart?: boolean }): string =>
  options.tty
    ? `${options.atLineStart === false ? "\n" : ""}${CLI_MARK} ${sanitizeForTerminal(message)}\n`
    : `hermes-sandbox: ${message}\n`

/** Writes the CLI's own line to standard error, marked when it is a terminal. */
export const writeCliLine = (message: string, atLineStart?: boolean): void => {
  process.stderr.write(
    cliLine(message, { tty: process.stderr.isTTY === true, ...(atLineStart === undefined ? {} : { atLineStart }) })
  )
}
