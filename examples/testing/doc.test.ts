/**
 * docs/testing.md shows these files verbatim: each `<!-- file: PATH -->` line there is followed by
 * a fenced block that must equal PATH, and every example file here must be shown. So the doc's
 * code is the code this suite runs. After changing an example, refresh the doc with
 * `HERMES_SANDBOX_UPDATE_DOCS=1 npx vitest run examples/testing/doc.test.ts`.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

const root = new URL("../../", import.meta.url)
const docPath = new URL("docs/testing.md", root)
const block = /<!-- file: (\S+) -->\n```ts\n([\s\S]*?)```\n/g

const examples = readdirSync(new URL("examples/testing/", root))
  .filter((name) => name.endsWith(".ts") && name !== "doc.test.ts")
  .map((name) => `examples/testing/${name}`)

describe("docs/testing.md", () => {
  it("shows every example file verbatim", () => {
    const doc = readFileSync(docPath, "utf8")
    const current = (path: string) => readFileSync(new URL(path, root), "utf8")
    if (process.env.HERMES_SANDBOX_UPDATE_DOCS === "1") {
      writeFileSync(
        docPath,
        doc.replace(block, (_, path: string) => `<!-- file: ${path} -->\n\`\`\`ts\n${current(path)}\`\`\`\n`)
      )
    }
    const shown = [...readFileSync(docPath, "utf8").matchAll(block)].map(([, path, code]) => ({
      path: path!,
      code: code!
    }))
    expect(shown.map((s) => s.path).sort()).toEqual([...examples].sort())
    for (const { path, code } of shown) {
      expect(code, `docs/testing.md's copy of ${path} is out of date (HERMES_SANDBOX_UPDATE_DOCS=1 refreshes it)`).toBe(
        current(path)
      )
    }
  })
})
