/**
 * patch, search_files and read_file's line_numbers through the MCP SDK's own Client (in-memory
 * transport), on the fake runtime: the arguments' rules, the errors a model reads (how many
 * matches, on which lines), the paths resolved as read_file's, and search results from hostile
 * tool output (the fake's "grep" prints what its pattern says: core runs the `#!fake` program of an
 * exec's argv). The real grep, find and supervisor against planted symlinks, FIFOs and huge files:
 * test/session-edit.e2e.test.ts.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { McpSandbox } from "../src/McpSandbox.js"
import { callJson, connectInMemory, fakeServices } from "./support/fakeMcp.js"
import { withLineNumbers } from "../src/tools/sessionFiles.js"

describe("patch, search_files and read_file line_numbers (fake runtime, the SDK's client)", () => {
  let sandbox: McpSandbox
  let client: Client
  let close: () => Promise<void>
  beforeAll(async () => {
    sandbox = await McpSandbox.open({ limits: { defaultTimeoutS: 30, maxReadBytes: 4096 } }, fakeServices())
    ;({ client, close } = await connectInMemory(sandbox, "edit-tools-test"))
  })
  afterAll(async () => {
    await close()
    await sandbox.close()
  })

  const call = (name: string, args: Record<string, unknown>) => callJson(client, name, args)

  it("both are listed with honest annotations and inline schemas", async () => {
    const { tools } = await client.listTools()
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
    expect(byName.patch?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true })
    expect(byName.search_files?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false })
    expect(byName.patch?.inputSchema.required).toEqual(["path"])
    expect(byName.search_files?.inputSchema.required).toEqual(["pattern"])
    expect(Object.keys(byName.read_file?.inputSchema.properties ?? {})).toContain("line_numbers")
    for (const t of [byName.patch, byName.search_files]) expect(JSON.stringify(t)).not.toContain("$ref")
  })

  it("read_file line_numbers: LINE|CONTENT from the offset, within the byte cap (the prefixes count)", async () => {
    await call("write_file", { path: "n.txt", content: "alpha\nbeta\ngamma\n" })
    const all = await call("read_file", { path: "n.txt", line_numbers: true })
    expect(all.json).toMatchObject({ content: "     1|alpha\n     2|beta\n     3|gamma\n", truncated: false })
    const from2 = await call("read_file", { path: "n.txt", line_numbers: true, offset: 2, limit: 1 })
    expect(from2.json).toMatchObject({ content: "     2|beta\n", truncated: true, total_lines: 3 })
    // 4,000 empty lines fit the 4096-byte cap raw; numbered they would take 32,000 bytes.
    await call("write_file", { path: "empty-lines", content: "\n".repeat(4000) })
    const many = await call("read_file", { path: "empty-lines", line_numbers: true })
    expect(many.json.truncated).toBe(true)
    expect(Buffer.byteLength(many.json.content)).toBeLessThanOrEqual(4096)
    expect(many.json.content.startsWith("     1|\n     2|\n")).toBe(true)
    expect(withLineNumbers("", 1, 10)).toEqual({ text: "", lines: 0, cut: false })
    expect(withLineNumbers("x".repeat(50), 1, 10)).toEqual({ text: `     1|${"x".repeat(50)}\n`, lines: 1, cut: false })
  })

  it("patch: replaced once; ambiguous and missing text are errors that say where; replace_all; a diff", async () => {
    await call("write_file", { path: "/workspace/app.py", content: "a = 1\nb = a\na = 2\n" })
    const once = await call("patch", { path: "app.py", old_string: "b = a", new_string: "b = a + 1" })
    expect(once).toEqual({
      isError: false,
      json: { path: "/workspace/app.py", replacements: 1, lines: [2], bytes_written: 22 }
    })
    const twice = await call("patch", { path: "app.py", old_string: "a = ", new_string: "A = " })
    expect(twice.isError).toBe(true)
    expect(twice.json.error).toMatchObject({ _tag: "PatchFailed", reason: "ambiguous", matches: 2, lines: [1, 3] })
    expect(twice.json.error.message).toContain("occurs 2 times (lines 1, 3)")
    const missing = await call("patch", { path: "app.py", old_string: "c = 3", new_string: "c = 4" })
    expect(missing.json.error).toMatchObject({ _tag: "PatchFailed", reason: "no-match" })
    const all = await call("patch", { path: "app.py", old_string: "a = ", new_string: "A = ", replace_all: true })
    expect(all.json).toMatchObject({ replacements: 2, lines: [1, 3] })
    const diff = await call("patch", {
      path: "app.py",
      diff: "--- a/app.py\n+++ b/app.py\n@@ -3 +3 @@\n-A = 2\n+A = 3\n"
    })
    expect(diff.json).toMatchObject({ replacements: 1, lines: [3] })
    expect((await call("read_file", { path: "app.py" })).json.content).toBe("A = 1\nb = a + 1\nA = 3\n")
  })

  it("patch: arguments that are not one patch, paths outside the roots or in the session's state are refused", async () => {
    for (const [args, field] of [
      [{ path: "app.py" }, "old_string"],
      [{ path: "app.py", old_string: "x" }, "new_string"],
      [{ path: "app.py", diff: "@@ -1 +1 @@\n-a\n+b\n", old_string: "a" }, "diff"]
    ] as const) {
      const r = await call("patch", args)
      expect(r.isError).toBe(true)
      expect(r.json.error).toMatchObject({ _tag: "InvalidArguments", issues: [expect.objectContaining({ field })] })
    }
    for (const path of ["/etc/passwd", "../../etc/passwd", "/tmp/.hermes-session/env"]) {
      const r = await call("patch", { path, old_string: "a", new_string: "b" })
      expect(r.json.error).toMatchObject({ _tag: "FileOperationFailed", reason: "outside-sandbox" })
    }
    const none = await call("patch", { path: "nope.py", old_string: "a", new_string: "b" })
    expect(none.json.error).toMatchObject({ _tag: "FileOperationFailed", reason: "not-found" })
  })

  it("search_files: the tool's hostile output bounded and shaped (names with newlines, lines), default path, files target", async () => {
    const grep = (stdout: string, more: Record<string, unknown> = {}) =>
      call("search_files", { pattern: fakeProgram({ stdout }).trimEnd(), ...more })
    const r = await grep("/workspace/b\u00002:b: two\n/workspace/a\nz\u00001:one\n")
    expect(r).toEqual({
      isError: false,
      json: {
        path: "/workspace",
        target: "content",
        matches: [
          { path: "/workspace/a\nz", line: 1, text: "one" },
          { path: "/workspace/b", line: 2, text: "b: two" }
        ],
        count: 2,
        truncated: false,
        incomplete: false
      }
    })
    const files = await grep("/workspace/x.py\u0000/workspace/d/y.py\u0000", { target: "files", max_results: 1 })
    expect(files.json).toMatchObject({ target: "files", matches: [{ path: "/workspace/x.py" }], truncated: true })
    expect(files.json.matches[0]).not.toHaveProperty("line")
    const outside = await call("search_files", { pattern: "x", path: "/etc" })
    expect(outside.json.error).toMatchObject({ _tag: "FileOperationFailed", reason: "outside-sandbox" })
    const bad = await call("search_files", { pattern: "x", max_results: 5000 })
    expect(bad.json.error).toMatchObject({ _tag: "InvalidArguments" })
  })
})
