/**
 * The `.env` file that `docker_forward_env` names may be read from (`~/.hermes/.env`): `KEY=VALUE`,
 * `export KEY=VALUE`, `#` comments (full-line, and ` # ...` after an unquoted value), single or
 * double quotes (with `\n`, `\r`, `\t`, `\"`, `\\` escapes in double quotes). Lines it cannot read
 * are warnings naming the line, never their content (they may hold secrets).
 */

/** The variables of a `.env` file's text; `shown` names the file in warnings. */
export const parseDotEnv = (text: string, shown: string, warnings: Array<string>): Map<string, string> => {
  const values = new Map<string, string>()
  for (const [index, rawLine] of text.split(/\r?\n/).entries()) {
    const line = rawLine.trim()
    if (line === "" || line.startsWith("#")) continue
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line)
    if (match === null) {
      warnings.push(`${shown}:${index + 1}: ignoring a line that is not KEY=VALUE`)
      continue
    }
    const name = match[1] ?? ""
    const rest = match[2] ?? ""
    let value: string
    const quote = rest[0]
    if (quote === '"' || quote === "'") {
      const end = quote === '"' ? findClosingDoubleQuote(rest) : rest.indexOf("'", 1)
      if (end < 0) {
        warnings.push(`${shown}:${index + 1}: ignoring ${name}: unterminated quote`)
        continue
      }
      const inner = rest.slice(1, end)
      value =
        quote === '"'
          ? inner.replace(/\\([nrt"\\])/g, (_, c: string) => ({ n: "\n", r: "\r", t: "\t" })[c] ?? c)
          : inner
    } else {
      value = rest.replace(/\s+#.*$/, "").trim()
    }
    values.set(name, value)
  }
  return values
}

const findClosingDoubleQuote = (text: string): number => {
  for (let i = 1; i < text.length; i++) {
    if (text[i] === "\\") i++
    else if (text[i] === '"') return i
  }
  return -1
}
