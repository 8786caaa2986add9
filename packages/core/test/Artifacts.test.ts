import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import * as fc from "fast-check"
import { FileReceiver, MAX_SKIPPED_LISTED, MAX_SKIPPED_NAME_BYTES, mimeOf, patternIssue } from "../src/Artifacts.js"

const limits = { maxFiles: 10, maxFileBytes: 1000, maxTotalBytes: 2000 }
const words = (w: string, path: string | Buffer) =>
  Buffer.concat([Buffer.from(`${w} `), Buffer.isBuffer(path) ? path : Buffer.from(path)])

/** The frames the supervisor writes for one file, the content cut into the given pieces. */
const send = (r: FileReceiver, path: string | Buffer, content: Buffer, cuts: ReadonlyArray<number> = []) => {
  const errors = [r.frame("f", words(`644 ${content.length}`, path))]
  let at = 0
  for (const cut of [...cuts, content.length]) {
    const end = Math.min(content.length, Math.max(at, cut))
    if (end > at) errors.push(r.content(content.subarray(at, end)))
    at = end
  }
  errors.push(r.frame("F", Buffer.from(String(content.length))))
  return errors.filter((e) => e !== undefined)
}

describe("FileReceiver", () => {
  it("round-trips any files in any chunking: content, size and the sha256 the host computes", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            name: fc.string({ minLength: 1, maxLength: 20 }),
            content: fc.uint8Array({ maxLength: 150 }),
            cuts: fc.array(fc.nat(150), { maxLength: 5 })
          }),
          { maxLength: 8 }
        ),
        (files) => {
          const r = new FileReceiver(limits)
          for (const f of files)
            expect(
              send(
                r,
                f.name,
                Buffer.from(f.content),
                [...f.cuts].sort((a, b) => a - b)
              )
            ).toEqual([])
          const out = r.outcome({ complete: true, timedOut: false })
          expect(out.files.map((f) => [f.path, Buffer.from(f.content).toString("hex"), f.size, f.sha256])).toEqual(
            files.map((f) => [
              f.name,
              Buffer.from(f.content).toString("hex"),
              f.content.length,
              createHash("sha256").update(f.content).digest("hex")
            ])
          )
          expect(out.collection).toEqual({ status: "complete" })
          expect(out.filesTruncated).toBe(false)
        }
      )
    )
  })

  it("refuses what the supervisor does not write: out of order, over the limits, longer or miscounted", () => {
    const fresh = () => new FileReceiver(limits)
    expect(fresh().content(Buffer.from("x"))).toMatch(/outside a file/)
    expect(fresh().frame("F", Buffer.from("0"))).toMatch(/never began/)
    const nested = fresh()
    nested.frame("f", words("644 1", "a"))
    expect(nested.frame("f", words("644 1", "b"))).toMatch(/inside another/)
    expect(nested.frame("s", words("symlink 0", "c"))).toMatch(/inside a file/)
    expect(fresh().frame("f", words("644 1001", "big"))).toMatch(/over 1000/)
    // Names count against maxTotalBytes with the content (the supervisor counts them so too).
    const total = fresh()
    expect(send(total, "a", Buffer.alloc(1000))).toEqual([])
    expect(send(total, "b", Buffer.alloc(998))).toEqual([])
    expect(total.frame("f", words("644 0", "c"))).toMatch(/over 2000 bytes in all/)
    expect(fresh().frame("f", words("644 0", "n".repeat(2001)))).toMatch(/over 2000 bytes in all/)
    const longer = fresh()
    longer.frame("f", words("644 2", "a"))
    expect(longer.content(Buffer.from("abc"))).toMatch(/longer than announced/)
    const miscount = fresh()
    miscount.frame("f", words("644 1", "a"))
    miscount.content(Buffer.from("a"))
    expect(miscount.frame("F", Buffer.from("2"))).toMatch(/does not count/)
    const many = new FileReceiver({ ...limits, maxFiles: 1 })
    send(many, "a", Buffer.from("a"))
    expect(many.frame("f", words("644 1", "b"))).toMatch(/more than 1 files/)
    for (const bad of ["644", "x 1 a", "644 -1 a", "644 1 "])
      expect(fresh().frame("f", Buffer.from(bad)), bad).toBeDefined()
    expect(fresh().frame("s", words("made-up 0", "a"))).toMatch(/not the supervisor's/)
    expect(fresh().frame("x", Buffer.from(""))).toMatch(/where files were expected/)
    for (const bad of ["symlink", "symlink 0", "made-up 3", "symlink 3 x", "symlink -1"])
      expect(fresh().frame("S", Buffer.from(bad)), bad).toMatch(/not the supervisor's/)
  })

  it("a cut-short run keeps what arrived whole and says why; literal patterns that named nothing are listed", () => {
    const r = new FileReceiver(limits, ["*.png", "report.csv", "out/summary.txt", "data"])
    send(r, "a.png", Buffer.from("png"))
    send(r, "data/x.csv", Buffer.from("x"))
    r.frame("f", words("644 3", "b.png"))
    r.content(Buffer.from("pn"))
    expect(r.outcome({ complete: false, timedOut: true })).toMatchObject({
      files: [{ path: "a.png" }, { path: "data/x.csv" }],
      skippedFiles: [],
      filesTruncated: true,
      collection: { status: "partial", reason: "timed-out" }
    })
    expect(new FileReceiver(limits).outcome({ complete: false, timedOut: false }).collection).toEqual({
      status: "none",
      reason: "sandbox-ended"
    })
    const done = new FileReceiver(limits, ["*.png", "report.csv", "out/summary.txt", "data"])
    send(done, "data/x.csv", Buffer.from("x"))
    expect(done.outcome({ complete: true, timedOut: false }).skippedFiles).toEqual([
      { path: "report.csv", size: 0, skipped: "not-found" },
      { path: "out/summary.txt", size: 0, skipped: "not-found" }
    ])
  })

  it("the skipped list is bounded in entries and in path bytes, whatever arrives; the rest are counted per reason", () => {
    // 20,000 symlinks with 4 KiB paths: 78 MiB of names before the bound.
    const long = new FileReceiver(limits)
    for (let i = 0; i < 20_000; i++)
      expect(long.frame("s", words("symlink 1", `${String(i).padStart(5, "0")}${"L".repeat(4091)}`))).toBeUndefined()
    const cut = long.outcome({ complete: true, timedOut: false })
    expect(cut.skippedFiles.length).toBe(Math.floor(MAX_SKIPPED_NAME_BYTES / 4096))
    expect(cut.skippedFiles.reduce((n, s) => n + s.path.length, 0)).toBeLessThanOrEqual(MAX_SKIPPED_NAME_BYTES)
    expect(cut.skippedFilesOmitted).toBe(20_000 - cut.skippedFiles.length)
    expect(cut.filesTruncated).toBe(false) // symlinks are never sent: not a limit
    // Short names: the count binds; the supervisor's own counts ('S') add up; a limit among the omitted truncates.
    const many = new FileReceiver(limits, ["report.csv"])
    for (let i = 0; i < 5_000; i++) many.frame("s", words("not-regular 0", `f${i}`))
    expect(many.frame("S", Buffer.from("total-limit 7"))).toBeUndefined()
    const counted = many.outcome({ complete: true, timedOut: false })
    expect(counted.skippedFiles.length).toBe(MAX_SKIPPED_LISTED) // and no "not-found" claimed: report.csv may be among the omitted
    expect(counted.skippedFilesOmitted).toBe(5_000 - MAX_SKIPPED_LISTED + 7)
    expect(counted.filesTruncated).toBe(true)
    const none = new FileReceiver(limits)
    expect(none.outcome({ complete: true, timedOut: false }).skippedFilesOmitted).toBeUndefined()
  })

  it("names that are not UTF-8 are listed, not returned under a different name; a short read is unreadable", () => {
    const r = new FileReceiver(limits)
    expect(send(r, Buffer.from([0x66, 0xff, 0x2e, 0x74]), Buffer.from("x"))).toEqual([])
    r.frame("f", words("644 5", "short"))
    r.content(Buffer.from("ab"))
    expect(r.frame("F", Buffer.from("2"))).toBeUndefined()
    const out = r.outcome({ complete: true, timedOut: false })
    expect(out.files).toEqual([])
    expect(out.skippedFiles.map((s) => s.skipped)).toEqual(["name-not-utf8", "unreadable"])
  })
})

describe("mimeOf and patterns", () => {
  it("raster images by their signature, never by a name alone; others by extension", () => {
    expect(mimeOf("x.bin", Buffer.from("89504e470d0a1a0a00", "hex"))).toBe("image/png")
    expect(mimeOf("x.png", Buffer.from("not a png"))).toBe("application/octet-stream")
    expect(mimeOf("x.jpg", Buffer.from("ffd8ffe0", "hex"))).toBe("image/jpeg")
    expect(mimeOf("a.webp", Buffer.concat([Buffer.from("RIFF"), Buffer.alloc(4), Buffer.from("WEBP")]))).toBe(
      "image/webp"
    )
    expect(mimeOf("t.CSV", Buffer.from("a,b"))).toBe("text/csv")
    expect(mimeOf("noext", Buffer.from("?"))).toBe("application/octet-stream")
  })

  it("patterns: relative, inside /workspace, bounded", () => {
    for (const ok of ["*.png", "out/**", "./a/b.txt", "**/*.csv", ".hidden"])
      expect(patternIssue(ok), ok).toBeUndefined()
    for (const bad of ["", "/etc/passwd", "../x", "a/../../b", "a\0b", "**/**/**/**/**", "x".repeat(1025), ".", "./"])
      expect(patternIssue(bad), JSON.stringify(bad)).toBeDefined()
  })
})
