/**
 * `pnpm codegen` (scripts/codegen.ts): every generated module is what the codegen would write now,
 * so a source edited without regenerating fails the unit tier as well as `pnpm check`; and the
 * check names a stale module.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { describe, expect, it } from "vitest"
import { HERMES_TOOLS_JS } from "@hermes-sandbox/core/tools/runtime/hermes_tools.js.generated"
import { HERMES_TOOLS_PY } from "@hermes-sandbox/core/tools/runtime/hermes_tools.py.generated"
import { SESSION_SHELL } from "@hermes-sandbox/core/internal/sessionShell"
import { GENERATED, outOfDate, ROOT } from "../../../scripts/codegen.js"

describe("pnpm codegen", () => {
  it("has written every generated module as it would now (run `pnpm codegen` if this fails)", async () => {
    expect((await outOfDate()).map((s) => s.target)).toEqual([])
  })

  it("embeds the programs' files as they are", () => {
    const text = (path: string) => readFileSync(join(ROOT, path), "utf8")
    expect(HERMES_TOOLS_PY).toBe(text("packages/core/src/tools/runtime/hermes_tools.py"))
    expect(HERMES_TOOLS_JS).toBe(text("packages/core/src/tools/runtime/hermes_tools.js"))
    expect(SESSION_SHELL).toBe(text("packages/core/src/internal/session-shell.sh"))
  })

  it("names a generated module whose source changed, or that is missing", async () => {
    const root = mkdtempSync(join(tmpdir(), "hermes-codegen-"))
    try {
      for (const g of GENERATED) {
        for (const file of [...g.sources, g.target]) {
          mkdirSync(dirname(join(root, file)), { recursive: true })
          cpSync(join(ROOT, file), join(root, file))
        }
      }
      expect(await outOfDate(root)).toEqual([])
      const [first, second] = GENERATED
      writeFileSync(join(root, first!.sources[0]!), `${readFileSync(join(root, first!.sources[0]!), "utf8")}\n# edited\n`)
      rmSync(join(root, second!.target))
      expect((await outOfDate(root)).map((s) => s.target)).toEqual([first!.target, second!.target])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
