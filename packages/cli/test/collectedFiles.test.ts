/**
 * run --collect --out DIR's writer on the host filesystem alone (the e2e test drives it through
 * the CLI and the engine): what a collected path may name, what already in DIR is replaced, what
 * is refused and left untouched.
 */
import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { formatBytes, shownPath, sizeOption, writeCollected } from "../src/collectedFiles.js"

const base = mkdtempSync(join(tmpdir(), "hs-collected-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))
let n = 0
const fresh = () => {
  const dir = join(base, `case-${n++}`)
  mkdirSync(dir)
  return { dir, out: join(dir, "out"), outside: join(dir, "outside") }
}
const file = (path: string, content: string | Uint8Array, mode = 0o644) => ({
  path,
  mode,
  content: typeof content === "string" ? Buffer.from(content) : content
})

describe("writeCollected", () => {
  it("writes nested paths (creating DIR and the directories), byte for byte; a file executable in the sandbox stays executable", () => {
    const { out } = fresh()
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i)
    const report = writeCollected(out, [
      file("a.txt", "a"),
      file("deep/er/b.bin", bytes),
      file("run.sh", "#!/bin/sh\n", 0o755),
      file("new\nline é.txt", "odd")
    ])
    expect(report.notWritten).toEqual([])
    expect(report.written).toEqual(["a.txt", "deep/er/b.bin", "run.sh", "new\nline é.txt"])
    expect(readFileSync(join(out, "deep/er/b.bin"))).toEqual(Buffer.from(bytes))
    expect(readFileSync(join(out, "new\nline é.txt"), "utf8")).toBe("odd")
    expect(statSync(join(out, "run.sh")).mode & 0o100).toBe(0o100)
    expect(statSync(join(out, "a.txt")).mode & 0o111).toBe(0)
    // No temporary file is left behind.
    expect(readdirSync(out).filter((f) => f.includes(".hermes-sandbox-"))).toEqual([])
  })

  it("replaces a regular file already there, without writing through a hard link to a file outside DIR", () => {
    const { dir, out, outside } = fresh()
    mkdirSync(out)
    writeFileSync(join(out, "old.txt"), "old")
    writeFileSync(outside, "outside")
    linkSync(outside, join(out, "linked.txt"))
    const report = writeCollected(out, [file("old.txt", "new"), file("linked.txt", "replaced")])
    expect(report.notWritten).toEqual([])
    expect(readFileSync(join(out, "old.txt"), "utf8")).toBe("new")
    expect(readFileSync(join(out, "linked.txt"), "utf8")).toBe("replaced")
    expect(readFileSync(outside, "utf8")).toBe("outside")
    expect(existsSync(dir)).toBe(true)
  })

  it("refuses a symbolic link at the path or on the way (to a file or a directory outside DIR), a directory, a FIFO; leaves them and the outside untouched", () => {
    const { out, outside } = fresh()
    mkdirSync(out)
    writeFileSync(outside, "outside")
    const outsideDir = `${outside}-dir`
    mkdirSync(outsideDir)
    symlinkSync(outside, join(out, "link.txt"))
    symlinkSync(outsideDir, join(out, "sub"))
    symlinkSync("/nonexistent/dangling", join(out, "dangling.txt"))
    mkdirSync(join(out, "adir"))
    execFileSync("mkfifo", [join(out, "fifo")])
    const report = writeCollected(out, [
      file("link.txt", "evil"),
      file("sub/x.txt", "evil"),
      file("dangling.txt", "evil"),
      file("adir", "evil"),
      file("fifo", "evil"),
      file("ok.txt", "fine")
    ])
    expect(report.written).toEqual(["ok.txt"])
    expect(Object.fromEntries(report.notWritten.map((r) => [r.path, r.reason]))).toEqual({
      "link.txt": expect.stringMatching(/symbolic link is already there/),
      "sub/x.txt": expect.stringMatching(/^sub is a symbolic link, not a directory/),
      "dangling.txt": expect.stringMatching(/symbolic link/),
      adir: expect.stringMatching(/a directory is already there/),
      fifo: expect.stringMatching(/a FIFO is already there/)
    })
    expect(readFileSync(outside, "utf8")).toBe("outside")
    expect(readdirSync(outsideDir)).toEqual([])
    expect(lstatSync(join(out, "link.txt")).isSymbolicLink()).toBe(true)
    expect(existsSync("/nonexistent/dangling")).toBe(false)
  })

  it("refuses paths that are absolute, empty, or have '.', '..' or empty segments; and a file where a directory is needed", () => {
    const { dir, out } = fresh()
    const report = writeCollected(out, [
      file("/etc/x", "e"),
      file("", "e"),
      file("../escape.txt", "e"),
      file("a/../../escape.txt", "e"),
      file("./a", "e"),
      file("a//b", "e"),
      file("plain", "p"),
      file("plain/inside", "e")
    ])
    expect(report.written).toEqual(["plain"])
    expect(report.notWritten.map((r) => r.path)).toEqual([
      "/etc/x",
      "",
      "../escape.txt",
      "a/../../escape.txt",
      "./a",
      "a//b",
      "plain/inside"
    ])
    expect(report.notWritten.at(-1)?.reason).toMatch(/^plain is a file, not a directory/)
    expect(existsSync(join(dir, "escape.txt"))).toBe(false)
  })

  it("a DIR that cannot be made is a usage error; a directory DIR cannot write into is reported per file", () => {
    const { dir, out } = fresh()
    writeFileSync(join(dir, "afile"), "")
    expect(() => writeCollected(join(dir, "afile", "out"), [file("a", "a")])).toThrow(/--out/)
    if (process.getuid?.() !== 0) {
      mkdirSync(out)
      chmodSync(out, 0o500)
      expect(writeCollected(out, [file("a", "a")]).notWritten).toHaveLength(1)
    }
  })
})

describe("the CLI's words for sizes and paths", () => {
  it("sizeOption: bytes or k/m/g; anything else names the flag", () => {
    expect(sizeOption("--x", "1048576")).toBe(1 << 20)
    expect(sizeOption("--x", "512k")).toBe(512 << 10)
    expect(sizeOption("--x", "10M")).toBe(10 << 20)
    expect(sizeOption("--x", "1GiB")).toBe(1 << 30)
    expect(sizeOption("--x", undefined)).toBeUndefined()
    for (const bad of ["", "0", "-1", "1.5m", "10q", "m"])
      expect(() => sizeOption("--x", bad), bad).toThrow(/--x: expected a size/)
  })
  it("formatBytes and shownPath", () => {
    expect([formatBytes(512), formatBytes(5325), formatBytes(3 << 20)]).toEqual(["512 B", "5.2 KiB", "3.0 MiB"])
    expect(shownPath("out/chart.png")).toBe("out/chart.png")
    expect(shownPath("a b\n.txt")).toBe('"a b\\n.txt"')
    expect(shownPath("\u001b[2J")).toBe('"\\u001b[2J"')
  })
})
