/**
 * When the REPL's input is a whole cell (docs/design/kernel.md §13), decided on the host from the
 * text alone, as Python's own prompt does: a line that opens a block (ends in `:`, starts with a
 * compound statement's keyword, or is a decorator) continues until an empty line; open brackets, an open triple-quoted string or a
 * trailing backslash continue until they close. Anything else is sent as it is: a syntax error is
 * the kernel's to report. (A kernel-side `check_complete` would be exact: open question 6.)
 */

/** Statements that open a block even when their body is on the same line (`if x: y` waits for an empty line, as in Python). */
const COMPOUND = new Set([
  "if",
  "elif",
  "else",
  "for",
  "while",
  "def",
  "class",
  "with",
  "try",
  "except",
  "finally",
  "async"
])

/** What scanning the text left open. */
interface Scan {
  /** Brackets ( [ { still open. */
  readonly depth: number
  /** Inside a triple-quoted string. */
  readonly inTriple: boolean
  /** The last line ends with a backslash outside a string (an explicit continuation). */
  readonly continued: boolean
  /** Some logical line at depth 0 ended with `:` or started with `@`: a block is open. */
  readonly block: boolean
}

const scan = (text: string): Scan => {
  let depth = 0
  let quote: string | undefined
  let block = false
  let continued = false
  /** The last significant character of the current line outside strings and comments. */
  let last = ""
  /** The first significant character of the current logical line, and its first word. */
  let first = ""
  let word = ""
  const opensBlock = () => last === ":" || first === "@" || COMPOUND.has(word)
  const endLine = () => {
    if (quote !== undefined && quote.length === 1) quote = undefined // an unterminated string: the kernel's SyntaxError
    if (quote === undefined && depth === 0 && !continued) {
      if (opensBlock()) block = true
      first = ""
      word = ""
    }
    last = ""
  }
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === "\n") {
      continued = false
      endLine()
      continue
    }
    if (quote !== undefined) {
      if (c === "\\") {
        i++
        if (text[i] === "\n") continued = false
        continue
      }
      if (text.startsWith(quote, i)) {
        i += quote.length - 1
        quote = undefined
        last = c
      }
      continue
    }
    if (c === "#") {
      const end = text.indexOf("\n", i)
      i = (end < 0 ? text.length : end) - 1
      continue
    }
    if (c === " " || c === "\t" || c === "\r" || c === "\f") continue
    continued = false
    if (c === "\\") {
      // A continuation only right before the line's end (else it is the kernel's SyntaxError).
      if (i + 1 === text.length || text[i + 1] === "\n") {
        continued = true
        if (text[i + 1] === "\n") i++
        continue
      }
    }
    if (first === "") {
      first = c
      word = /^[A-Za-z_]\w*/.exec(text.slice(i, i + 16))?.[0] ?? ""
    }
    if (c === '"' || c === "'") {
      quote = text.startsWith(c.repeat(3), i) ? c.repeat(3) : c
      i += quote.length - 1
      last = c
      continue
    }
    if (c === "(" || c === "[" || c === "{") depth++
    else if (c === ")" || c === "]" || c === "}") depth = Math.max(0, depth - 1)
    last = c
  }
  if (quote !== undefined && quote.length === 1) quote = undefined
  if (quote === undefined && depth === 0 && !continued && opensBlock()) block = true
  return { depth, inTriple: quote !== undefined, continued, block }
}

/**
 * Whether `lines` (what was typed since the last `>>> `, the newest last) needs more before it is
 * run. An empty first line needs nothing (and is not run).
 */
export const needsMore = (lines: ReadonlyArray<string>): boolean => {
  const s = scan(lines.join("\n"))
  if (s.inTriple || s.depth > 0 || s.continued) return true
  // In a block, only an empty line ends it (as Python's prompt: `... ` until an empty line).
  if (s.block) return lines.length === 1 || lines[lines.length - 1]!.trim() !== ""
  return false
}
