/**
 * A session's patchFile and searchFiles (session/edit.ts) on the host: the replacement and the
 * unified diff's application, the parse of grep's and find's output as hostile bytes, and both
 * operations end to end on the fake runtime (its filesystem answers the supervisor's read and
 * write; a search's "grep" prints what the test makes it print — the fake runs the `#!fake`
 * program of an exec's argv, here the pattern). What the real grep, find and supervisor do with
 * symlinks, FIFOs, binary and huge files: test/session-edit.e2e.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { Session } from "@hermes-sandbox/core"
import {
  applyDiff,
  applyReplace,
  MAX_MATCH_TEXT_BYTES,
  MAX_PATCH_BYTES,
  MAX_SEARCH_OUTPUT_BYTES,
  parseSearchOutput
} from "../src/session/edit.js"
import { withFakeSessions } from "./support/fakeSessions.js"

const P = "/workspace/f"
const bytes = (s: string) => new TextEncoder().encode(s)
const failure = <A, E>(e: Effect.Effect<A, E>) => Effect.flip(e)

describe("applyReplace", () => {
  it.effect("one occurrence: replaced, its line named; bytes that are not UTF-8 survive", () =>
    Effect.gen(function* () {
      const text = Buffer.from([0x61, 0xff, 0x0a, 0x62, 0x0a, 0x63, 0x0a]).toString("latin1")
      const r = yield* applyReplace(P, text, { oldString: "b", newString: "é\nB" })
      expect(Buffer.from(r.text, "latin1")).toEqual(
        Buffer.from([0x61, 0xff, 0x0a, 0xc3, 0xa9, 0x0a, 0x42, 0x0a, 0x63, 0x0a])
      )
      expect(r).toMatchObject({ replacements: 1, lines: [2] })
    })
  )

  it.effect("not unique: PatchFailed ambiguous with the count and the lines; replaceAll replaces each", () =>
    Effect.gen(function* () {
      const text = "x = 1\ny = x\nx = 2\n"
      const e = yield* failure(applyReplace(P, text, { oldString: "x =", newString: "z =" }))
      expect(e).toMatchObject({ _tag: "PatchFailed", reason: "ambiguous", matches: 2, lines: [1, 3] })
      expect(e.message).toContain("occurs 2 times (lines 1, 3)")
      expect(e.message).toContain("replace_all")
      const all = yield* applyReplace(P, text, { oldString: "x =", newString: "zz\n=", replaceAll: true })
      expect(all).toMatchObject({ text: "zz\n= 1\ny = x\nzz\n= 2\n", replacements: 2, lines: [1, 4] })
    })
  )

  it.effect("missing: PatchFailed no-match, naming where its first line is when only whitespace differs", () =>
    Effect.gen(function* () {
      const text = "def f():\n    return 1\n"
      const e = yield* failure(applyReplace(P, text, { oldString: "  return 1\n  ", newString: "x" }))
      expect(e).toMatchObject({ reason: "no-match", matches: 0 })
      expect(e.message).toContain("occurs on line 2")
      const none = yield* failure(applyReplace(P, text, { oldString: "absent", newString: "x" }))
      expect(none.message).toContain("was not found")
    })
  )

  it.effect("a replaceAll that would grow the file past the limit is refused before anything is built", () =>
    Effect.gen(function* () {
      const text = "a".repeat(1 << 20)
      const e = yield* failure(applyReplace(P, text, { oldString: "a", newString: "b".repeat(16), replaceAll: true }))
      expect(e).toMatchObject({ reason: "too-large", matches: 1 << 20 })
    })
  )
})

describe("applyDiff", () => {
  const file = "one\ntwo\nthree\nfour\nfive\n"

  it.effect("hunks where their headers say, or where their lines are when the numbers are off", () =>
    Effect.gen(function* () {
      const diff =
        "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n two\n-three\n+THREE\n@@ -9,2 +9,3 @@\n four\n+four and a half\n five\n"
      const r = yield* applyDiff(P, file, diff)
      expect(r).toMatchObject({
        text: "one\ntwo\nTHREE\nfour\nfour and a half\nfive\n",
        replacements: 2,
        lines: [2, 4]
      })
    })
  )

  it.effect("a removed line that reads like a header stays a line (the header's counts end the hunk)", () =>
    Effect.gen(function* () {
      const r = yield* applyDiff(P, "a\n-- b\nc\n", "@@ -1,3 +1,2 @@\n a\n--- b\n c\n")
      expect(r.text).toBe("a\nc\n")
    })
  )

  it.effect("'\\ No newline at end of file' on either side; an insertion at the top", () =>
    Effect.gen(function* () {
      expect((yield* applyDiff(P, "a\nb", "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n")).text).toBe("a\nc\n")
      expect((yield* applyDiff(P, "a\nb\n", "@@ -2 +2 @@\n-b\n+c\n\\ No newline at end of file\n")).text).toBe("a\nc")
      expect((yield* applyDiff(P, "a\n", "@@ -0,0 +1 @@\n+top\n")).text).toBe("top\na\n")
    })
  )

  it.effect("a hunk whose lines are not in the file, two files, no hunk, a stray line: refused", () =>
    Effect.gen(function* () {
      const miss = yield* failure(applyDiff(P, file, "@@ -2,2 +2,2 @@\n two\n-3\n+4\n"))
      expect(miss).toMatchObject({ reason: "no-match" })
      expect(miss.message).toContain("hunk 1 (@@ -2,2 +2,2 @@)")
      const two = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-one\n+1\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-x\n+y\n"
      expect(yield* failure(applyDiff(P, file, two))).toMatchObject({ reason: "malformed-diff" })
      expect(yield* failure(applyDiff(P, file, "just text\n"))).toMatchObject({ reason: "malformed-diff" })
      expect(yield* failure(applyDiff(P, file, "@@ -1 +1 @@\n-one\n+1\n+2\n"))).toMatchObject({
        reason: "malformed-diff"
      })
      expect(yield* failure(applyDiff(P, file, "@@ -1,2 +1,2 @@\n one\n*two\n"))).toMatchObject({
        reason: "malformed-diff"
      })
    })
  )
})

describe("parseSearchOutput (hostile bytes)", () => {
  const rec = (name: Buffer | string, line: number, text: string) =>
    Buffer.concat([Buffer.from(name), Buffer.from([0]), Buffer.from(`${line}:${text}\n`)])

  it("names with newlines and colons, text with colons; a long line cut; non-UTF-8 names counted, not returned", () => {
    const out = Buffer.concat([
      rec("/workspace/a\nb:3:c", 7, "x:y:z"),
      rec(Buffer.from([0x2f, 0x77, 0xff]), 1, "bad name"),
      rec("/workspace/long", 2, "q".repeat(MAX_MATCH_TEXT_BYTES + 5))
    ])
    const r = parseSearchOutput(out, "content", 10)
    expect(r.matches).toEqual([
      { path: "/workspace/a\nb:3:c", line: 7, text: "x:y:z", textTruncated: false },
      { path: "/workspace/long", line: 2, text: "q".repeat(MAX_MATCH_TEXT_BYTES), textTruncated: true }
    ])
    expect(r).toMatchObject({ more: false, omitted: 1 })
  })

  it("at most max results (more: true); a record cut short, or not grep's shape, ends the parse (more: true)", () => {
    const three = Buffer.concat([rec("/w/a", 1, "a"), rec("/w/b", 2, "b"), rec("/w/c", 3, "c")])
    expect(parseSearchOutput(three, "content", 2)).toMatchObject({
      matches: [{ path: "/w/a" }, { path: "/w/b" }],
      more: true
    })
    const cut = Buffer.concat([rec("/w/a", 1, "a"), Buffer.from("/w/b\u00002:no newline")])
    expect(parseSearchOutput(cut, "content", 10)).toMatchObject({ matches: [{ path: "/w/a" }], more: true })
    for (const forged of ["/w/x\u0000zero:1\n", "/w/x\u0000-1:t\n", "relative\u00001:t\n", "/w/x\u00001 2:t\n"])
      expect(parseSearchOutput(Buffer.from(forged), "content", 10)).toEqual({ matches: [], more: true, omitted: 0 })
    const files = Buffer.from("/w/a\u0000/w/b\nc\u0000/w/d")
    expect(parseSearchOutput(files, "files", 10)).toEqual({
      matches: [
        { path: "/w/a", line: 0, text: "", textTruncated: false },
        { path: "/w/b\nc", line: 0, text: "", textTruncated: false }
      ],
      more: true,
      omitted: 0
    })
  })
})

describe("patchFile and searchFiles on a session (fake runtime)", () => {
  it.effect(
    "patch: edited in place, the mode kept; refused (nothing written) when missing, ambiguous or too large",
    () =>
      withFakeSessions(({ sessions }) =>
        Effect.gen(function* () {
          const s = yield* sessions.open()
          yield* s.writeFile("src/a.py", "def f():\n    return 1\n\nx = f()\n", { mode: 0o755 })
          const r = yield* s.patchFile("src/a.py", { oldString: "return 1", newString: "return 2" })
          expect(r).toMatchObject({ path: "/workspace/src/a.py", replacements: 1, lines: [2], bytesBefore: 31 })
          const after = yield* s.readFile("src/a.py")
          expect(Buffer.from(after.content).toString()).toBe("def f():\n    return 2\n\nx = f()\n")
          expect(after.mode).toBe(0o755)
          const d = yield* s.patchFile("/workspace/src/a.py", { diff: "@@ -4 +4 @@\n-x = f()\n+x = f() + 1\n" })
          expect(d).toMatchObject({ replacements: 1, lines: [4] })
          expect(yield* failure(s.patchFile("src/a.py", { oldString: "f()", newString: "g()" }))).toMatchObject({
            _tag: "PatchFailed",
            reason: "ambiguous",
            matches: 2,
            lines: [1, 4]
          })
          expect(yield* failure(s.patchFile("nope.py", { oldString: "a", newString: "b" }))).toMatchObject({
            _tag: "FileNotFound"
          })
          yield* s.writeFile("big", new Uint8Array(MAX_PATCH_BYTES + 1).fill(0x61))
          const big = yield* failure(s.patchFile("big", { oldString: "a", newString: "b" }))
          expect(big).toMatchObject({ _tag: "PatchFailed", reason: "too-large" })
          expect(big.message).toContain(`${MAX_PATCH_BYTES + 1} bytes`)
          expect((yield* s.readFile("big", { limit: 1 })).content).toEqual(bytes("a"))
          expect(Buffer.from((yield* s.readFile("src/a.py")).content).toString()).toBe(
            "def f():\n    return 2\n\nx = f() + 1\n"
          )
        })
      )
  )

  it.effect("patch: refused before anything runs for what is not a patch or a path outside the roots", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        for (const [path, patch, field] of [
          ["a", { oldString: "", newString: "x" }, "oldString"],
          ["a", { oldString: "x", newString: "x" }, "newString"],
          ["a", { oldString: "x" }, "newString"],
          ["a", { diff: "  " }, "diff"],
          ["a", { diff: "@@", oldString: "x", newString: "y" }, "patch"],
          ["/etc/passwd", { oldString: "root", newString: "x" }, "path"],
          ["../etc/passwd", { oldString: "root", newString: "x" }, "path"]
        ] as const)
          expect(yield* failure(s.patchFile(path, patch as never))).toMatchObject({ _tag: "InvalidRequest", field })
      })
    )
  )

  it.effect("search: the tool's hostile output is bounded and parsed (names with newlines, the cap, truncated)", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        // The fake's "grep" prints what the pattern says (the fake runs an argv's #!fake program).
        const grep = (stdout: string, o: Partial<Session.SearchFilesOptions> = {}) =>
          s.searchFiles({ pattern: fakeProgram({ stdout }).trimEnd(), ...o })
        const out = "/workspace/b\u00002:beta\n/workspace/a\nx:1\u00009:al:pha\n/workspace/b\u00001:b\n"
        const r = yield* grep(out)
        expect(r).toEqual({
          path: "/workspace",
          target: "content",
          matches: [
            { path: "/workspace/a\nx:1", line: 9, text: "al:pha", textTruncated: false },
            { path: "/workspace/b", line: 1, text: "b", textTruncated: false },
            { path: "/workspace/b", line: 2, text: "beta", textTruncated: false }
          ],
          truncated: false,
          omitted: 0,
          incomplete: false
        })
        expect(yield* grep(out, { maxResults: 2 })).toMatchObject({ truncated: true, matches: { length: 2 } })
        // More than the output bound: what was kept is parsed, the rest counted as truncated.
        yield* s.writeFile(
          "/tmp/flood",
          `/workspace/e\u00001:e\n/workspace/f\u00001:${"z".repeat(MAX_SEARCH_OUTPUT_BYTES)}\n`
        )
        const cut = yield* s.searchFiles({ pattern: fakeProgram({ cat: "/tmp/flood" }).trimEnd() })
        expect(cut).toMatchObject({ truncated: true, matches: [{ path: "/workspace/e", line: 1, text: "e" }] })
        // A pattern the tool refuses (grep exits 2, nothing found): the pattern is named.
        const bad = yield* failure(
          s.searchFiles({ pattern: fakeProgram({ stderr: "grep: Unmatched ( or \\(", exitCode: 2 }).trimEnd() })
        )
        expect(bad).toMatchObject({ _tag: "InvalidRequest", field: "pattern" })
        expect(bad.message).toContain("Unmatched (")
        // find's trouble (an unreadable directory) with nothing found is an incomplete result, not a bad pattern.
        const unreadable = yield* s.searchFiles({
          pattern: fakeProgram({ stderr: "find: '/workspace/x': Permission denied", exitCode: 1 }).trimEnd(),
          target: "files"
        })
        expect(unreadable).toMatchObject({ matches: [], incomplete: true, truncated: false })
        // An image without the tool.
        const missing = yield* failure(s.searchFiles({ pattern: fakeProgram({ exitCode: 127 }).trimEnd() }))
        expect(missing).toMatchObject({ _tag: "SandboxFileError", operation: "search" })
      })
    )
  )

  it.effect("search: the path is checked like the other file operations, and must exist", () =>
    withFakeSessions(({ sessions }) =>
      Effect.gen(function* () {
        const s = yield* sessions.open()
        for (const [o, field] of [
          [{ pattern: "x", path: "/etc" }, "path"],
          [{ pattern: "x", path: "a/../../etc" }, "path"],
          [{ pattern: "" }, "pattern"],
          [{ pattern: "x", maxResults: 0 }, "maxResults"],
          [{ pattern: "x", maxResults: 1001 }, "maxResults"],
          [{ pattern: "x", target: "dirs" }, "target"],
          [{ pattern: "*.py", target: "files", glob: "*.py" }, "glob"]
        ] as const)
          expect(yield* failure(s.searchFiles(o as never))).toMatchObject({ _tag: "InvalidRequest", field })
        expect(yield* failure(s.searchFiles({ pattern: "x", path: "nowhere" }))).toMatchObject({ _tag: "FileNotFound" })
        yield* s.writeFile("one.txt", "x\n")
        expect(yield* s.searchFiles({ pattern: "x", path: "one.txt" })).toMatchObject({ path: "/workspace/one.txt" })
      })
    )
  )
})
