/** The REPL's images (replImages.ts): named, written under --out as cell-<n>-<i>.<ext>, bounded per REPL, types by signature. */
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ReplImages } from "../src/replImages.js"

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
const PNG_BYTES = Buffer.from(PNG, "base64")
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]).toString("base64")
const output = (data: Record<string, string>) => ({ data, metadata: {} })

const dirs: Array<string> = []
const fresh = () => {
  const d = mkdtempSync(join(tmpdir(), "repl-images-"))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe("ReplImages", () => {
  it("without --out an image is named with its type and size; an output without one is not an image", () => {
    const images = new ReplImages(undefined)
    expect(images.name(output({ "image/png": PNG, "text/plain": "<Figure>" }), 3, 1)).toBe("[image/png 70 B]")
    expect(images.name(output({ "text/html": "<b>x</b>", "text/plain": "x" }), 3, 2)).toBeUndefined()
  })

  it("with --out: cell-<n>-<i>.png / .jpg, the bytes as sent, the path named", () => {
    const dir = fresh()
    const images = new ReplImages(join(dir, "out"))
    expect(images.name(output({ "image/png": PNG }), 4, 2)).toMatch(/^\[image\/png 70 B → \S+\/out\/cell-4-2\.png\]$/)
    expect(images.name(output({ "image/jpeg": JPEG }), 5, 1)).toMatch(/cell-5-1\.jpg\]$/)
    expect(readdirSync(join(dir, "out")).sort()).toEqual(["cell-4-2.png", "cell-5-1.jpg"])
    expect(readFileSync(join(dir, "out", "cell-4-2.png")).equals(PNG_BYTES)).toBe(true)
  })

  it("a type is believed only from the bytes' signature: a PNG claimed to be a JPEG, or text claimed to be a PNG, is not an image", () => {
    const images = new ReplImages(fresh())
    expect(images.name(output({ "image/jpeg": PNG }), 1, 1)).toBeUndefined()
    expect(
      images.name(output({ "image/png": Buffer.from("<svg onload=x()>").toString("base64") }), 1, 2)
    ).toBeUndefined()
  })

  it("at most maxBytes written per REPL, then named but not written", () => {
    const dir = fresh()
    const images = new ReplImages(dir, 2 * PNG_BYTES.length)
    expect(images.name(output({ "image/png": PNG }), 1, 1)).toContain("→")
    expect(images.name(output({ "image/png": PNG }), 2, 1)).toContain("→")
    expect(images.name(output({ "image/png": PNG }), 3, 1)).toBe(
      "[image/png 70 B, not written: --out has had 140 B from this REPL]"
    )
    expect(readdirSync(dir).sort()).toEqual(["cell-1-1.png", "cell-2-1.png"])
  })

  it("a symbolic link already at the name is not written through, and says so", () => {
    const dir = fresh()
    const elsewhere = join(fresh(), "target")
    writeFileSync(elsewhere, "keep")
    symlinkSync(elsewhere, join(dir, "cell-1-1.png"))
    expect(new ReplImages(dir).name(output({ "image/png": PNG }), 1, 1)).toMatch(
      /not written to .*a symbolic link is already there/
    )
    expect(readFileSync(elsewhere, "utf8")).toBe("keep")
  })
})
