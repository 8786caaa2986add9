/**
 * docs/custom-images.md's offline Dockerfile, built as written: an image FROM the project's
 * python image keeps what the SDK needs (the supervisor, the runner-protocol label, uid 1001),
 * so the executor runs it with every hardening setting, and the added module is importable.
 */
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { createExecutor } from "@hermes-sandbox/docker"

const run = promisify(execFile)
const tag = `hermes-sandbox-test/custom-python:${process.pid}`
const dir = mkdtempSync(join(tmpdir(), "hs-custom-image-"))
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  await run("docker", ["rmi", "-f", tag]).catch(() => {})
})

/** The fenced block right after the marker comment: the doc is the test's source. */
const documentedDockerfile = () => {
  const doc = readFileSync(new URL("../docs/custom-images.md", import.meta.url), "utf8")
  const after = doc.slice(doc.indexOf("<!-- custom-image-offline"))
  const block = /```dockerfile\n([\s\S]*?)```/.exec(after)
  if (block?.[1] === undefined)
    throw new Error("docs/custom-images.md: no dockerfile block after the custom-image-offline marker")
  return block[1]
}

describe("custom images (docs/custom-images.md)", () => {
  it("an image built FROM hermes-sandbox/python as documented runs through the executor, hardened, with its module", async () => {
    writeFileSync(join(dir, "Dockerfile"), documentedDockerfile())
    mkdirSync(join(dir, "mylib"))
    writeFileSync(join(dir, "mylib", "greet.py"), "def hello():\n    return 'hello from mylib'\n")
    // --network none: nothing to fetch (and this machine's engine has no bridge network).
    await run("docker", ["build", "--network", "none", "-q", "-t", tag, dir], { timeout: 120_000 })
    await using executor = await createExecutor({ images: { python: tag } })
    const r = await executor.executeCode({
      language: "python",
      code: "import os, greet\nprint(greet.hello())\nprint(os.getuid(), os.getgid())\nopen('/etc/x', 'w')\n"
    })
    expect(r.stdout).toBe("hello from mylib\n1001 1001\n")
    // The root filesystem stays read-only in a custom image too.
    expect(r.stderr).toMatch(/Read-only file system/)
    expect(r.exitCode).toBe(1)
  }, 180_000)
})
