/**
 * `hermes-sandbox repl` under a real terminal: the CLI runs inside `script`'s pty (util-linux
 * script -qefc), driven by keystrokes written to it, on the real engine and kernel. What a person
 * sees: `>>> ` and `... ` prompts, a block run after its empty line, `Out[n]: `, state kept from cell
 * to cell, Ctrl-C interrupting a cell (the state kept; a cell that ignores SIGINT killed, the state
 * lost and said so) and clearing a line at the prompt, a PNG written under --out and named, an
 * escape sequence the cell prints shown as text (never acted on by the terminal), a traceback;
 * Ctrl-D ends it with exit 0 and the sandbox removed. SECURITY.md, Kernels, the row "repl --out"
 * (its 1 GiB per REPL: packages/cli/test/replImages.test.ts).
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cli, cliCommand } from "./support/cli.js"
import { containerExists } from "./support/docker.js"

const dir = mkdtempSync(join(tmpdir(), "hs-repl-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** The REPL in a pty: keystrokes in, the terminal's bytes out. */
const openRepl = (args: ReadonlyArray<string>) => {
  const command = [...cliCommand, "repl", ...args].map(shellQuote).join(" ")
  const child = spawn("script", ["-qefc", command, "/dev/null"], {
    env: { ...process.env, TERM: "xterm", COLUMNS: "200", LINES: "50" },
    stdio: ["pipe", "pipe", "pipe"]
  })
  let output = ""
  let seen = 0
  child.stdout.on("data", (d: Buffer) => (output += d.toString("utf8")))
  child.stderr.on("data", (d: Buffer) => (output += d.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return {
    get output() {
      return output
    },
    /** Waits until `pattern` appears in what came since the last wait; returns that part. */
    waitFor: async (pattern: RegExp | string, timeoutMs = 60_000): Promise<string> => {
      const found = () => {
        const rest = output.slice(seen)
        return typeof pattern === "string" ? rest.includes(pattern) : pattern.test(rest)
      }
      const deadline = Date.now() + timeoutMs
      while (!found()) {
        if (Date.now() > deadline)
          throw new Error(
            `no ${String(pattern)} within ${timeoutMs} ms; since the last wait: ${JSON.stringify(output.slice(seen))}`
          )
        await new Promise((r) => setTimeout(r, 50))
      }
      const rest = output.slice(seen)
      seen = output.length
      return rest
    },
    type: (keys: string) => child.stdin.write(keys),
    exited,
    kill: () => child.kill("SIGKILL")
  }
}

/** A 2×2 PNG from the standard library, shown with IPython's display. */
const PNG_CELL =
  "import struct, zlib; from IPython.display import Image, display; " +
  "c = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d)); " +
  "display(Image(data=b'\\x89PNG\\r\\n\\x1a\\n' + c(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 2, 0, 0, 0)) + c(b'IDAT', zlib.compress(b'\\x00' + b'\\xff' * 6 + b'\\x00' + b'\\x10' * 6)) + c(b'IEND', b'')))"

describe("hermes-sandbox repl under a pty", () => {
  it("prompts, blocks, Out[n], state, Ctrl-C on a cell and at the prompt, an image to --out, escapes shown as text, Ctrl-D removes the sandbox", async () => {
    const out = join(dir, "images")
    const repl = openRepl(["--no-journal", "--out", out, "--image", "hermes-sandbox/python:latest"])
    try {
      const banner = await repl.waitFor(">>> ")
      const container = /Python in sandbox (hermes-sandbox-[0-9a-f-]+)/.exec(banner)?.[1]
      expect(container, banner).toBeDefined()

      repl.type("x = 41\r")
      await repl.waitFor(">>> ")
      repl.type("x + 1\r")
      expect(await repl.waitFor(">>> ")).toContain("Out[2]: 42")

      // A block: `... ` until an empty line, then it runs.
      repl.type("for i in range(3):\r")
      await repl.waitFor("... ")
      repl.type("    print(i * 10)\r")
      const inBlock = await repl.waitFor("... ")
      // Not run yet: only the line's echo.
      expect(inBlock).not.toMatch(/\r\n0\r\n/)
      repl.type("\r")
      expect(await repl.waitFor(">>> ")).toMatch(/0\r\n10\r\n20\r\n/)

      // Brackets continue too.
      repl.type("y = (1,\r")
      await repl.waitFor("... ")
      repl.type("2)\r")
      await repl.waitFor(">>> ")

      // What the cell prints cannot act on the terminal: ESC, BEL and \r are shown as text.
      repl.type("print('\\x1b]0;pwned\\x07\\x1b[2Jafter\\rover')\r")
      const printed = await repl.waitFor(">>> ")
      expect(printed).toContain("\\x1b]0;pwned\\x07\\x1b[2Jafter\\x0dover")
      expect(printed).not.toContain("\u001b]0;pwned")
      expect(printed).not.toContain("\u001b[2J")

      // Ctrl-C during a cell interrupts the cell, not the REPL; the state is kept.
      repl.type("import time; print('sleeping', flush=True); time.sleep(600)\r")
      await repl.waitFor(/sleeping\r\n/)
      repl.type("\u0003")
      expect(await repl.waitFor(">>> ")).toContain("KeyboardInterrupt")
      repl.type("x, y\r")
      expect(await repl.waitFor(">>> ")).toMatch(/Out\[\d+\]: \(41, \(1, 2\)\)/)

      // Ctrl-C at the prompt drops the line typed so far.
      repl.type("undefined_name")
      repl.type("\u0003")
      await repl.waitFor(">>> ")
      repl.type("'cleared'\r")
      const cleared = await repl.waitFor(">>> ")
      expect(cleared).toMatch(/Out\[\d+\]: 'cleared'/)
      expect(cleared).not.toContain("NameError")

      // An image goes to --out as cell-<n>-<i>.png and is named.
      repl.type(`${PNG_CELL}\r`)
      const shown = await repl.waitFor(">>> ")
      const named = /\[image\/png \d+ B → (\S+cell-(\d+)-1\.png)\]/.exec(shown)
      expect(named, shown).not.toBeNull()
      expect(readdirSync(out)).toEqual([`cell-${named![2]}-1.png`])
      expect(
        readFileSync(join(out, `cell-${named![2]}-1.png`))
          .subarray(0, 8)
          .toString("hex")
      ).toBe("89504e470d0a1a0a")

      // A traceback, and the REPL goes on.
      repl.type("1/0\r")
      expect(await repl.waitFor(">>> ")).toContain("ZeroDivisionError")

      // A cell that ignores SIGINT: Ctrl-C ends in a kill after the grace, and the REPL says the state is gone.
      repl.type(
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ignoring', flush=True); time.sleep(600)\r"
      )
      await repl.waitFor(/ignoring\r\n/)
      repl.type("\u0003")
      expect(await repl.waitFor(">>> ")).toContain("state lost: variables and imports from earlier cells are gone")
      repl.type("x\r")
      const fresh = await repl.waitFor(">>> ")
      expect(fresh).toContain("NameError")
      // Said once, not again on the new kernel's first cell.
      expect(fresh).not.toContain("state lost")

      // Ctrl-D ends it: exit 0, the sandbox removed.
      repl.type("\u0004")
      expect(await repl.exited).toBe(0)
      expect(await containerExists(container!)).toBe(false)
    } finally {
      repl.kill()
    }
  })

  it("standard input that is not a terminal is a usage error (exit 2), before any sandbox", async () => {
    const r = await cli(["repl", "--no-journal"], { stdin: "1+1\n" })
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/repl reads from a terminal/)
  })
})
