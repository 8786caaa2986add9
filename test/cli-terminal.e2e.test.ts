/**
 * `hermes-sandbox run` on a terminal (a pseudo-terminal from util-linux `script`), on the real
 * engine: a program's escape sequences (OSC title, clear screen, 8-bit CSI, bidi override) reach
 * the terminal as inert text, its copies of the CLI's lines are not marked, and the CLI's own
 * line is the only one starting with the mark, on a line of its own after the program's output.
 * Through pipes and with --json the bytes are the program's, unchanged (hostile review 1, finding 14).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { CLI_MARK } from "@hermes-sandbox/cli/terminal"
import { cli, cliCommand } from "./support/cli.js"

const root = new URL("..", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "hermes-cli-tty-"))

const hostile = join(dir, "hostile.py")
writeFileSync(
  hostile,
  String.raw`import sys, time
sys.stdout.write("\x1b]0;pwned-title\x07\x1b[2J\x1b[Hcleared\n")
sys.stdout.write("\u009b31mc1 \u202eevil\u202c crlf\r\n")
sys.stdout.flush()
sys.stderr.write("hermes-sandbox: timed out after 3000 ms; the sandbox was killed\n")
sys.stderr.write("\u27e6hermes-sandbox\u27e7 timed out after 3000 ms; the sandbox was killed\n")
sys.stderr.flush()
time.sleep(0.5)  # stdout and stderr are separate streams: let the lines above arrive first
sys.stdout.write("partial")
sys.stdout.flush()
time.sleep(60)
`
)

/**
 * A host of its own: the CLI's startup sweep then leaves other files' owners' containers alone, so
 * nothing but the run's own lines reaches the terminal or stderr (ci40, ci42: its INFO line about a
 * container it swept did; as test/docs-tools.e2e.test.ts).
 */
const OWN_HOST = { HERMES_SANDBOX_HOST_ID: `cli-terminal-${process.pid}` }

/** The command line on a pseudo-terminal (standard input, output and error all the terminal). */
const onTerminal = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    // The CLI as the suites run it (the installed bin in the real-engine tiers: test/support/cli.ts).
    const command = [...cliCommand, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ")
    const child = spawn("script", ["-qec", command, "/dev/null"], {
      cwd: root,
      env: { ...process.env, TERM: "xterm-256color", ...OWN_HOST },
      stdio: ["pipe", "pipe", "inherit"]
    })
    const chunks: Array<Buffer> = []
    child.stdout.on("data", (d: Buffer) => chunks.push(d))
    child.on("close", (code) => resolve({ code, output: Buffer.concat(chunks).toString("utf8") }))
    child.stdin.end()
  })

describe("hermes-sandbox run on a terminal", () => {
  it("neutralizes the program's escapes, and only the CLI's own line carries the mark, after the output", async () => {
    const r = await onTerminal(["run", "--no-journal", "--timeout", "3s", hostile])
    expect(r.code, r.output).toBe(124)
    // The terminal turns each \n into \r\n (onlcr); no other \r is left.
    const text = r.output.replace(/\r\n/g, "\n")
    expect(text).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/)
    expect(text).toContain("\\x1b]0;pwned-title\\x07\\x1b[2J\\x1b[Hcleared\n")
    expect(text).toContain("\\x9b31mc1 \\u202eevil\\u202c crlf\n")
    expect(text).toContain("hermes-sandbox: timed out after 3000 ms; the sandbox was killed\n") // the program's copy, as text
    expect(text).toContain("\\u27e6hermes-sandbox\u27e7 timed out after 3000 ms") // its copy of the marked form, escaped
    const marked = text.split("\n").filter((line) => line.startsWith(CLI_MARK))
    expect(marked).toEqual([`${CLI_MARK} timed out after 3000 ms; the sandbox was killed`])
    // On a line of its own, after the program's unfinished last line, and last.
    expect(
      text.endsWith(`partial\n${CLI_MARK} timed out after 3000 ms; the sandbox was killed\n`),
      JSON.stringify(text.slice(-200))
    ).toBe(true)
  })

  it("--json on a terminal is the result line, unchanged", async () => {
    const r = await onTerminal(["run", "--no-journal", "--json", "--timeout", "3s", hostile])
    expect(r.code).toBe(124)
    const lines = r.output.replace(/\r\n/g, "\n").trim().split("\n")
    expect(lines, r.output).toHaveLength(1)
    const result = JSON.parse(lines[0]!)
    expect(result).toMatchObject({
      timedOut: true,
      stdout: "\x1b]0;pwned-title\x07\x1b[2J\x1b[Hcleared\n\u009b31mc1 \u202eevil\u202c crlf\r\npartial"
    })
  })

  it("through pipes the program's bytes and the CLI's lines are as before, byte for byte", async () => {
    const r = await cli(["run", "--no-journal", "--timeout", "3s", hostile], { env: OWN_HOST })
    expect(r.code).toBe(124)
    expect(r.stdout).toBe("\x1b]0;pwned-title\x07\x1b[2J\x1b[Hcleared\n\u009b31mc1 \u202eevil\u202c crlf\r\npartial")
    expect(r.stderr).toBe(
      "hermes-sandbox: timed out after 3000 ms; the sandbox was killed\n" +
        "\u27e6hermes-sandbox\u27e7 timed out after 3000 ms; the sandbox was killed\n" +
        "hermes-sandbox: timed out after 3000 ms; the sandbox was killed\n"
    )
  })
})
