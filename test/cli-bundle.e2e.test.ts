/**
 * The CLI's bin as it is installed: packages/cli/bundle/hermes-sandbox.cjs (`pnpm build`; written
 * by packages/cli/scripts/bundle.mjs), the launcher that runs the bundled CLI through V8's code
 * cache. Run in plain Node from a folder outside the workspace, with no export condition: it must
 * find the docker package's files (seccomp profile, watchdog) where the package is installed, keep
 * its compile cache only in a directory of the user's own, and leave no sandbox behind when it is
 * SIGKILLed (the watchdog it spawned removes it). test/installed.e2e.test.ts runs it installed
 * from the packed tarball.
 */
import { spawn } from "node:child_process"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli } from "./support/cli.js"
import { containerExists, waitFor } from "./support/docker.js"

const root = new URL("..", import.meta.url).pathname
const manifest = JSON.parse(readFileSync(join(root, "packages/cli/package.json"), "utf8")) as {
  version: string
  bin: Record<string, string>
  publishConfig: { bin: Record<string, string> }
}
const bin = join(root, "packages/cli", manifest.bin["hermes-sandbox"]!)
const outside = mkdtempSync(join(tmpdir(), "hermes-cli-bundle-"))
const command = [process.execPath, bin]

/**
 * A host of its own: the CLI's startup sweep then leaves other files' owners' containers alone, so
 * its standard error is the run's own (ci50: it removed 5 orphans of another file's SIGKILLed owner
 * and said so there; as test/cli-terminal.e2e.test.ts).
 */
const OWN_HOST = { HERMES_SANDBOX_HOST_ID: `cli-bundle-${process.pid}` }

/** The CLI with its compile cache under `cacheHome` (XDG_CACHE_HOME), from a folder outside the workspace. */
const bundled = (args: Array<string>, cacheHome: string, env: Record<string, string> = {}) =>
  cli(args, { command, cwd: outside, env: { NODE_OPTIONS: "", XDG_CACHE_HOME: cacheHome, ...OWN_HOST, ...env } })

const cacheFiles = (cacheHome: string) => {
  const dir = join(cacheHome, "hermes-sandbox")
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith("compile-")) : []
}

const PRINT = ["run", "--json", "--no-journal", "-e", "print(6*7)"]

describe("the bundled bin (packages/cli/bundle)", () => {
  it("is the package's bin, published too: plain Node with a #! line, executable", () => {
    expect(manifest.bin["hermes-sandbox"]).toBe("./bundle/hermes-sandbox.cjs")
    expect(manifest.publishConfig.bin["hermes-sandbox"]).toBe("./bundle/hermes-sandbox.cjs")
    expect(existsSync(bin), `${bin} (run pnpm build)`).toBe(true)
    expect(readFileSync(bin, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node")
    expect(statSync(bin).mode & 0o111).not.toBe(0)
  })

  it("runs a program from another folder, with the caller's relative paths, and knows its version", async () => {
    const cache = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    const v = await bundled(["--version"], cache)
    expect({ code: v.code, stdout: v.stdout }).toEqual({ code: 0, stdout: `${manifest.version}\n` })
    writeFileSync(join(outside, "in.txt"), "from-file")
    const r = await bundled(
      ["run", "--json", "--no-journal", "--file", "in.txt=in.txt", "-e", "print(open('in.txt').read())"],
      cache
    )
    expect(r.stderr).toBe("")
    expect(JSON.parse(r.stdout)).toMatchObject({ exitCode: 0, stdout: "from-file\n" })
  })

  it("keeps one compile cache per command, written once, in a directory only the user can write", async () => {
    const cache = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    const first = await bundled(PRINT, cache)
    expect(JSON.parse(first.stdout)).toMatchObject({ exitCode: 0, stdout: "42\n" })
    // The run's, and the daemon client's (`run` asks it first; its bundle, its own key).
    const files = cacheFiles(cache)
    const file = files.find((f) => f.endsWith("-run.bin"))
    const client = files.find((f) => f.endsWith("-daemon-client.bin"))
    expect(files).toHaveLength(2)
    expect(file).toMatch(new RegExp(`^compile-[0-9a-f]{16}-${process.version}-${process.arch}-run\\.bin$`))
    expect(client).toMatch(new RegExp(`^compile-[0-9a-f]{16}-${process.version}-${process.arch}-daemon-client\\.bin$`))
    const path = join(cache, "hermes-sandbox", file!)
    expect(statSync(join(cache, "hermes-sandbox")).mode & 0o777).toBe(0o700)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    const written = statSync(path).mtimeMs

    // Used, not written again.
    expect(JSON.parse((await bundled(PRINT, cache)).stdout)).toMatchObject({ stdout: "42\n" })
    expect(statSync(path).mtimeMs).toBe(written)

    // Another command has its own.
    expect((await bundled(["--version"], cache)).code).toBe(0)
    expect(cacheFiles(cache).sort()).toEqual([file, client, file!.replace(/-run\.bin$/, "-main.bin")].sort())

    // A cache V8 refuses costs the compile only, and is replaced.
    writeFileSync(path, "not a code cache")
    expect(JSON.parse((await bundled(PRINT, cache)).stdout)).toMatchObject({ stdout: "42\n" })
    expect(readFileSync(path).toString("latin1")).not.toBe("not a code cache")
  })

  it("keeps the caches of the four most recently written bundles (each build is another), removing older ones", async () => {
    const cache = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    const dir = join(cache, "hermes-sandbox")
    mkdirSync(dir, { mode: 0o700 })
    const older = ["0000000000000001", "0000000000000002", "0000000000000003", "0000000000000004", "0000000000000005"]
    older.forEach((key, i) => {
      const file = join(dir, `compile-${key}-${process.version}-${process.arch}-run.bin`)
      writeFileSync(file, "old")
      utimesSync(file, new Date(Date.UTC(2020, 0, 1 + i)), new Date(Date.UTC(2020, 0, 1 + i)))
    })
    // The daemon client's caches are pruned among themselves, by the same rule.
    const olderClient = older.map((k) => k.replace(/^0+/, (z) => "a".padStart(z.length, "0")))
    olderClient.forEach((key, i) => {
      const file = join(dir, `compile-${key}-${process.version}-${process.arch}-daemon-client.bin`)
      writeFileSync(file, "old")
      utimesSync(file, new Date(Date.UTC(2020, 0, 1 + i)), new Date(Date.UTC(2020, 0, 1 + i)))
    })
    expect(JSON.parse((await bundled(PRINT, cache)).stdout)).toMatchObject({ stdout: "42\n" })
    const clientKeys = cacheFiles(cache)
      .filter((f) => f.endsWith("-daemon-client.bin"))
      .map((f) => f.slice("compile-".length, "compile-".length + 16))
      .sort()
    expect(clientKeys).toHaveLength(4)
    expect(clientKeys.slice(0, 3)).toEqual(olderClient.slice(2))
    // (The daemon client's caches are not among the CLI's.)
    const keys = cacheFiles(cache)
      .filter((f) => !f.endsWith("-daemon-client.bin"))
      .map((f) => f.slice("compile-".length, "compile-".length + 16))
      .sort()
    expect(keys).toHaveLength(4)
    expect(keys.slice(0, 3)).toEqual(["0000000000000003", "0000000000000004", "0000000000000005"])
  })

  it("uses no cache directory another user could write to, and none at all with NODE_DISABLE_COMPILE_CACHE=1", async () => {
    const open = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    mkdirSync(join(open, "hermes-sandbox"))
    chmodSync(join(open, "hermes-sandbox"), 0o777)
    expect(JSON.parse((await bundled(PRINT, open)).stdout)).toMatchObject({ stdout: "42\n" })
    expect(cacheFiles(open)).toEqual([])

    const off = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    expect(JSON.parse((await bundled(PRINT, off, { NODE_DISABLE_COMPILE_CACHE: "1" })).stdout)).toMatchObject({
      stdout: "42\n"
    })
    expect(existsSync(join(off, "hermes-sandbox"))).toBe(false)
  })

  it("SIGKILLed mid-run: the watchdog it spawned (from the docker package's files) removes the sandbox", async () => {
    const cache = mkdtempSync(join(tmpdir(), "hermes-cache-"))
    const child = spawn(
      process.execPath,
      [bin, "run", "--events", "--no-journal", "-e", "import time\nprint('up', flush=True)\ntime.sleep(120)"],
      {
        cwd: outside,
        env: { ...process.env, NODE_OPTIONS: "", XDG_CACHE_HOME: cache }
      }
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)))
    expect(await waitFor(async () => stdout.includes("up"), 60_000), stderr).toBe(true)
    const container = /ContainerCreated\s+(hermes-sandbox-\S+)/.exec(stderr)?.[1]
    expect(container, stderr).toBeDefined()
    expect(await containerExists(container!)).toBe(true)
    child.kill("SIGKILL")
    expect(await exited).toBe("SIGKILL")
    expect(await waitFor(async () => !(await containerExists(container!)), 20_000), `${container} still exists`).toBe(
      true
    )
    expect(await containerExists(container!)).toBe(false)
  }, 120_000)
})
