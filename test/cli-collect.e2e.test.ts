/**
 * `hermes-sandbox run --collect PATTERN --out DIR` on the real engine, as a user runs it: the files
 * a run sends back land under DIR (nested paths created), listed on standard error while standard
 * output stays the program's; what is already in DIR is never written through (a symbolic link
 * there pointing outside is refused, its target untouched); --json carries the metadata and
 * --json-content the bytes; the command line's mistakes exit 2 before anything runs.
 */
import { createHash } from "node:crypto"
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cli } from "./support/cli.js"

const dir = mkdtempSync(join(tmpdir(), "hermes-cli-collect-"))
const journal = join(dir, "journal.sqlite")
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex")

// A real PNG from Python's standard library alone (zlib + struct), 16x16; and files in subdirectories.
const program = String.raw`
import os, struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
w = h = 16
raw = b"".join(b"\x00" + b"".join(bytes((x * 16, y * 16, 128)) for x in range(w)) for y in range(h))
open("chart.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
os.makedirs("out/deep/er", exist_ok=True)
open("out/table.csv", "w").write("a,b\n1,2\n")
open("out/deep/er/blob.bin", "wb").write(bytes(range(256)) * 4)
open("out/big.bin", "wb").write(b"x" * 300000)
print("the program's own output")
`
const programFile = join(dir, "make.py")
writeFileSync(programFile, program)

describe("hermes-sandbox run --collect --out", () => {
  it("writes the files under DIR with their subdirectories; stderr lists each (path, size, sha256) and the skipped with reasons; stdout is the program's", async () => {
    const out = join(dir, "results")
    const r = await cli([
      "run",
      "--journal",
      journal,
      "--collect",
      "*.png",
      "--collect",
      "out/**",
      "--collect",
      "missing.txt",
      "--collect-max-file-bytes",
      "100k",
      "--out",
      out,
      programFile
    ])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe("the program's own output\n")
    const png = readFileSync(join(out, "chart.png"))
    expect(png.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a")
    expect(readFileSync(join(out, "out/table.csv"), "utf8")).toBe("a,b\n1,2\n")
    expect(readFileSync(join(out, "out/deep/er/blob.bin"))).toEqual(
      Buffer.concat(Array.from({ length: 4 }, () => Buffer.from(Array.from({ length: 256 }, (_, i) => i))))
    )
    expect(existsSync(join(out, "out/big.bin"))).toBe(false)
    expect(r.stderr).toContain(
      `hermes-sandbox: wrote ${join(out, "chart.png")} (${png.length} B, sha256 ${sha256(png).slice(0, 12)})\n`
    )
    expect(r.stderr).toContain(
      `hermes-sandbox: wrote ${join(out, "out/deep/er/blob.bin")} (1.0 KiB, sha256 ${sha256(readFileSync(join(out, "out/deep/er/blob.bin"))).slice(0, 12)})\n`
    )
    expect(r.stderr).toContain("hermes-sandbox: not collected out/big.bin (293.0 KiB): too-large\n")
    expect(r.stderr).toContain("hermes-sandbox: not collected missing.txt: not-found\n")
    expect(r.stderr).toMatch(/held back by the limits/)

    // The same run again: the regular files already there are replaced.
    writeFileSync(join(out, "out/table.csv"), "stale")
    const again = await cli(["run", "--no-journal", "--collect", "out/table.csv", "--out", out, programFile])
    expect(again.code, again.stderr).toBe(0)
    expect(readFileSync(join(out, "out/table.csv"), "utf8")).toBe("a,b\n1,2\n")

    // events shows the collection readably.
    const events = await cli(["events", "--journal", journal])
    expect(events.stdout).toMatch(
      /ArtifactsCollected {4}3 files, \d+ B, 2 skipped \(1 too-large, 1 not-found\), truncated/
    )
  })

  it("refuses a symbolic link already in DIR (to a file outside, to a directory outside): nothing is written through it, the host files untouched", async () => {
    const out = join(dir, "trap")
    const outsideFile = join(dir, "outside.txt")
    const outsideDir = join(dir, "outside-dir")
    mkdirSync(out)
    mkdirSync(outsideDir)
    writeFileSync(outsideFile, "host secret\n")
    symlinkSync(outsideFile, join(out, "chart.png"))
    symlinkSync(outsideDir, join(out, "out"))
    const r = await cli([
      "run",
      "--no-journal",
      "--collect",
      "*.png",
      "--collect",
      "out/*.csv",
      "--out",
      out,
      "-e",
      "open('chart.png', 'w').write('EVIL')\nimport os\nos.makedirs('out')\nopen('out/x.csv', 'w').write('EVIL')"
    ])
    expect(r.code, r.stderr).toBe(0)
    expect(readFileSync(outsideFile, "utf8")).toBe("host secret\n")
    expect(existsSync(join(outsideDir, "x.csv"))).toBe(false)
    expect(lstatSync(join(out, "chart.png")).isSymbolicLink()).toBe(true)
    expect(r.stderr).toContain(
      `hermes-sandbox: not written ${join(out, "chart.png")}: a symbolic link is already there`
    )
    expect(r.stderr).toContain(
      `hermes-sandbox: not written ${join(out, "out/x.csv")}: out is a symbolic link, not a directory`
    )
    const json = await cli([
      "run",
      "--no-journal",
      "--json",
      "--collect",
      "*.png",
      "--out",
      out,
      "-e",
      "open('chart.png', 'w').write('EVIL')"
    ])
    const result = JSON.parse(json.stdout) as {
      out: { written: Array<string>; notWritten: Array<{ path: string; reason: string }> }
    }
    expect(result.out).toMatchObject({
      written: [],
      notWritten: [{ path: "chart.png", reason: expect.stringMatching(/symbolic link/) }]
    })
    expect(readFileSync(outsideFile, "utf8")).toBe("host secret\n")
  })

  it("--json: the files' metadata (path, size, sha256, mime, mode), skippedFiles, filesTruncated, collection; no content", async () => {
    const r = await cli([
      "run",
      "--no-journal",
      "--json",
      "--collect",
      "*.png",
      "--collect",
      "out/*.csv",
      "--collect",
      "nope.txt",
      programFile
    ])
    expect(r.code, r.stderr).toBe(0)
    const result = JSON.parse(r.stdout) as Record<string, unknown> & { files: Array<Record<string, unknown>> }
    expect(result.stdout).toBe("the program's own output\n")
    expect(result.files.map((f) => f.path)).toEqual(["chart.png", "out/table.csv"])
    expect(result.files[1]).toEqual({
      path: "out/table.csv",
      size: 8,
      sha256: sha256("a,b\n1,2\n"),
      mime: "text/csv",
      mode: 0o644
    })
    expect(result.files[0]).toMatchObject({ mime: "image/png" })
    expect(result.files.every((f) => !("content" in f))).toBe(true)
    expect(result).toMatchObject({
      skippedFiles: [{ path: "nope.txt", size: 0, skipped: "not-found" }],
      filesTruncated: false,
      collection: { status: "complete" }
    })
    expect("out" in result).toBe(false)
  })

  it("--json-content: each file's content as base64, equal to the file --out writes", async () => {
    const out = join(dir, "both")
    const r = await cli([
      "run",
      "--no-journal",
      "--json",
      "--json-content",
      "--collect",
      "*.png",
      "--collect",
      "out/deep/**",
      "--out",
      out,
      programFile
    ])
    expect(r.code, r.stderr).toBe(0)
    const result = JSON.parse(r.stdout) as {
      files: Array<{ path: string; sha256: string; content: string }>
      out: { dir: string; written: Array<string> }
    }
    expect(result.out.written).toEqual(["chart.png", "out/deep/er/blob.bin"])
    for (const f of result.files) {
      const bytes = Buffer.from(f.content, "base64")
      expect(bytes.equals(readFileSync(join(out, f.path))), f.path).toBe(true)
      expect(sha256(bytes)).toBe(f.sha256)
    }
    // --json prints nothing of its own on stderr.
    expect(r.stderr).not.toMatch(/wrote/)
  })

  it("usage errors exit 2 before anything runs, naming the flag", async () => {
    const notADir = join(dir, "a-file")
    writeFileSync(notADir, "")
    const cases: Array<[Array<string>, RegExp]> = [
      [["--collect", "*.png"], /--collect: give --out DIR/],
      [["--out", join(dir, "x")], /--out: only with --collect/],
      [["--json-content", "--collect", "*.png"], /--json-content: only with --json/],
      [["--json", "--json-content"], /--json-content: only with --collect/],
      [["--collect-max-files", "3", "--json"], /only with --collect/],
      [["--collect", "*.png", "--json", "--collect-max-bytes", "lots"], /--collect-max-bytes: expected a size/],
      [
        ["--collect", "*.png", "--json", "--collect-max-files", "1.5"],
        /--collect-max-files: expected a positive integer/
      ],
      [["--collect", "*.png", "--out", notADir], /not a directory/],
      [["--collect", "../escape", "--json"], /collect/],
      [["--collect", "/etc/passwd", "--json"], /collect/]
    ]
    for (const [args, message] of cases) {
      const r = await cli(["run", "--no-journal", ...args, "-e", "print('never')"])
      expect(r.code, args.join(" ")).toBe(2)
      expect(r.stderr, args.join(" ")).toMatch(message)
      expect(r.stdout).not.toContain("never")
    }
    expect(existsSync(join(dir, "x"))).toBe(false)
  })
})
