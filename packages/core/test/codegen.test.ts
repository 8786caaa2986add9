/**
 * `pnpm codegen` (scripts/codegen.ts): every generated module is what the codegen would write now,
 * so a source edited without regenerating fails the unit tier as well as `pnpm check`; and the
 * check names a stale module.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { describe, expect, it } from "vitest"
import { HERMES_TOOLS_JS } from "../src/tools/runtime/hermes_tools.js.generated.js"
import { HERMES_TOOLS_PY } from "../src/tools/runtime/hermes_tools.py.generated.js"
import { SESSION_SHELL } from "../src/internal/sessionShell.js"
import * as RunnerProtocolTable from "@hermes-sandbox/core/RunnerProtocolTable"
import { cStringBody, GENERATED, outOfDate, ROOT } from "../../../scripts/codegen.js"

/** The bytes of consecutive C string literals (`"..." "...";`), as a C compiler reads them (latin1: one char a byte). */
const cStringValue = (literals: string): string => {
  let out = ""
  for (const m of literals.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    out += m[1]!.replace(/\\([0-7]{3}|.)/g, (_, e: string) =>
      /^[0-7]{3}$/.test(e)
        ? String.fromCharCode(parseInt(e, 8))
        : (({ n: "\n", t: "\t" } as Record<string, string>)[e] ?? e)
    )
  }
  return out
}

describe("pnpm codegen", () => {
  it("has written every generated module as it would now (run `pnpm codegen` if this fails)", async () => {
    expect((await outOfDate()).map((s) => s.target)).toEqual([])
  })

  it("embeds the programs' files as they are", () => {
    const text = (path: string) => readFileSync(join(ROOT, path), "utf8")
    expect(HERMES_TOOLS_PY).toBe(text("packages/core/src/tools/runtime/hermes_tools.py"))
    expect(HERMES_TOOLS_JS).toBe(text("packages/core/src/tools/runtime/hermes_tools.js"))
    expect(SESSION_SHELL).toBe(text("packages/core/src/internal/session-shell.sh"))
    // The supervisor's preload: the C string, read back, is the file without its leading comment lines.
    const literal = text("images/runner/preload.h").split("static const char PYTHON_PRELOAD[] =\n")[1]!
    expect(cStringValue(literal)).toBe(text("images/runner/preload.py").replace(/^(#[^\n]*\n)+/, ""))
  })

  it("writes C string literals whose escapes read back as the bytes (octal for all but printable ASCII)", () => {
    const tricky = new Uint8Array([0x5c, 0x22, 0x3f, 0x3f, 0x3d, 0x0a, 0x09, 0x00, 0x37, 0x01, 0x7f, 0xc3, 0xa9, 0x61])
    expect(cStringBody(tricky)).toBe('\\\\\\"\\??=\\n\\t\\0007\\001\\177\\303\\251a')
    expect(Buffer.from(cStringValue(`"${cStringBody(tricky)}";`), "latin1")).toEqual(Buffer.from(tricky))
  })

  it("writes the supervisor's protocol.h from the table: its limits, frame types and words", () => {
    const header = readFileSync(join(ROOT, "images/runner/protocol.h"), "utf8")
    for (const limit of Object.values(RunnerProtocolTable.LIMITS)) {
      expect(header).toMatch(new RegExp(`^#define ${limit.c} +(${limit.value}|0${limit.value.toString(8)}) `, "m"))
    }
    for (const frame of Object.values(RunnerProtocolTable.FRAMES)) expect(header).toContain(` '${frame.type}'\n`)
    for (const word of Object.keys(RunnerProtocolTable.HEADER_WORDS)) expect(header).toContain(` "${word}"\n`)
    expect(header).toContain(`#define HERMES_RUNNER_FEATURES "${RunnerProtocolTable.RUNNER_FEATURES.join(",")}"`)
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
      writeFileSync(
        join(root, first!.sources[0]!),
        `${readFileSync(join(root, first!.sources[0]!), "utf8")}\n# edited\n`
      )
      rmSync(join(root, second!.target))
      expect((await outOfDate(root)).map((s) => s.target)).toEqual([first!.target, second!.target])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
