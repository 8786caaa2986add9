/**
 * The compiled packages (`pnpm build`: dist/ with JavaScript and declarations) run in plain Node,
 * without tsx or any TypeScript loader — as a user who installed the packages runs them. Inside
 * the workspace the "hermes-sandbox-dist" export condition selects dist/ (published manifests
 * point there directly, see publishConfig); `pnpm test` builds first.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { PROMISE_API_PROGRAM, README_PLAIN_NODE_PROGRAM } from "./support/plainNodeProgram.js"

const testDir = new URL(".", import.meta.url).pathname

const plainNode = (script: string) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // No --import tsx, and nothing inherited that could load one. A host of its own: the executor's
    // startup sweep then leaves other files' owners' orphans alone, and says nothing of them on
    // standard error (as test/cli-bundle.e2e.test.ts).
    const env = { ...process.env, NODE_OPTIONS: "", HERMES_SANDBOX_HOST_ID: `compiled-${process.pid}` }
    const child = spawn(process.execPath, ["--conditions=hermes-sandbox-dist", "--input-type=module", "-e", script], {
      cwd: testDir,
      env
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

describe("the compiled packages", () => {
  it("exist: pnpm build wrote dist/ for every package", () => {
    for (const entry of ["events/dist/index", "core/dist/index", "docker/dist/index", "cli/dist/main"]) {
      for (const ext of [".js", ".d.ts"]) {
        expect(
          existsSync(new URL(`../packages/${entry}${ext}`, import.meta.url)),
          `packages/${entry}${ext} (run pnpm build)`
        ).toBe(true)
      }
    }
  })

  // Plain Node cannot load a .ts file (ERR_UNKNOWN_FILE_EXTENSION): a run that succeeds loaded only JavaScript.
  it("run an execution in plain Node: the result and its lifecycle events arrive", async () => {
    const r = await plainNode(PROMISE_API_PROGRAM)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout.trim())
    expect(out).toMatchObject({ exitCode: 0, stdout: "42\n" })
    expect(out.types).toEqual([
      "ExecutionRequested",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerExited",
      "ContainerDestroyed"
    ])
  })

  it("run the README's plain-JavaScript snippet as written (Node 20 has no `await using`)", async () => {
    const r = await plainNode(README_PLAIN_NODE_PROGRAM)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toContain('result 0 "42\\n"')
    for (const type of [
      "ExecutionRequested",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerExited",
      "ContainerDestroyed"
    ])
      expect(lines).toContain(type)
  })
})
