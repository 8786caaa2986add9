/**
 * docs/tools.md's examples run as written, on the real engine. Each "```ts tools-example NAME"
 * block is a whole program; it is written to a directory under test/ (so its imports resolve as
 * they would for a user of the packages), run with tsx, and its standard output must be exactly the
 * "```text tools-output NAME" block the page shows. The programs are type-checked as well, and the
 * page must keep its Python, JavaScript, bash and Effect examples.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"

const run = promisify(execFile)
const root = new URL("..", import.meta.url).pathname
const testDir = join(root, "test")
const page = readFileSync(join(root, "docs/tools.md"), "utf8")

/** The fenced blocks whose info string is "<language> <marker> <name>", by name, in page order. */
const blocks = (marker: string): ReadonlyArray<readonly [string, string]> =>
  [...page.matchAll(new RegExp(`^\`\`\`\\w+ ${marker} ([\\w-]+)\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map(
    (m) => [m[1]!, m[2]!] as const
  )

const examples = blocks("tools-example")
const outputs = new Map(blocks("tools-output"))

// A dot-directory: the repository's own tsc and lint (test/**) do not pick it up while it exists.
const dir = mkdtempSync(join(testDir, ".docs-tools-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const fileOf = (name: string) => join(dir, `${name}.mts`)
for (const [name, code] of examples) writeFileSync(fileOf(name), code)

describe("docs/tools.md's examples", () => {
  it("has the Python, JavaScript, bash and Effect examples, each name once, each with its output", () => {
    const names = examples.map(([name]) => name)
    expect(new Set(names).size, "an example name is used twice").toBe(names.length)
    expect(names).toEqual(expect.arrayContaining(["python", "javascript", "bash", "effect"]))
    expect([...outputs.keys()].sort()).toEqual([...names].sort())
  })

  it("type-checks as written", async () => {
    // Against the packages' published declarations (dist/*.d.ts, as a user's program is checked),
    // not their sources: checking the sources again cost ~35 s of CPU, a second whole-project tsc.
    // The condition is hermes-sandbox-modules (dist/, whose .d.ts are what a packed package's
    // publishConfig names as its types); hermes-sandbox-dist picks bundle/, which has no
    // declarations, so TypeScript fell through to src/ and checked 250 source files again.
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: join(root, "tsconfig.base.json"),
        compilerOptions: { noEmit: true, customConditions: ["hermes-sandbox-modules"] },
        include: ["*.mts"]
      })
    )
    const checked = await run(join(root, "node_modules/.bin/tsc"), ["-p", join(dir, "tsconfig.json")], {
      cwd: dir,
      timeout: 240_000
    }).then(
      () => "",
      (e: { stdout?: string; message: string }) => e.stdout || e.message
    )
    expect(checked).toBe("")
  }, 300_000)

  for (const [name] of examples) {
    it(`${name}: prints what the page shows`, async () => {
      // From test/: the MCP example's `npx -y @modelcontextprotocol/server-everything` finds the test package's copy.
      // On the packages as built (dist/, what an installed package runs), as the type-check above:
      // tsx then transforms only the example, not the packages' sources again (~0.5 CPU-s a run).
      const { stdout, stderr } = await run(
        join(root, "node_modules/.bin/tsx"),
        ["--conditions=hermes-sandbox-dist", fileOf(name)],
        {
          cwd: testDir,
          timeout: 150_000,
          // A host of its own: the example's startup sweep then leaves the containers of other test
          // files' owners alone (a chaos file's killed owner is theirs to sweep), as on another machine.
          env: { ...process.env, HERMES_SANDBOX_HOST_ID: `docs-tools-${process.pid}-${name}` }
        }
      ).catch((e: { stdout?: string; stderr?: string; message: string }) => ({
        stdout: e.stdout ?? "",
        stderr: `${e.message}\n${e.stderr ?? ""}`
      }))
      // Past their deadline, other files' containers are anyone's to sweep, and the Effect example's
      // logger then says so (ci31: "startup sweep: removed 1 orphaned container(s)"): not the page's.
      const printed = stdout.replace(/^timestamp=\S+ level=INFO fiber=#\d+ message="startup sweep: .*\n/gm, "")
      expect(printed, `docs/tools.md example "${name}" printed something else (stderr: ${stderr})`).toBe(
        outputs.get(name)
      )
    }, 180_000)
  }
})
