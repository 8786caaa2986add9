/**
 * `hermes-sandbox run --upstream-config FILE`: the built CLI (packages/cli/dist/bin.js in plain
 * Node; `pnpm build` first) runs a program on the real engine that calls the tools of the reference
 * MCP server @modelcontextprotocol/server-everything (installed in the test package), configured
 * as `hermes-sandbox mcp --upstream-config` takes it. The program's results on standard output;
 * `--json`'s toolCallsMade; --tool-max-calls and --tool-timeout; an upstream that cannot start
 * fails the command naming it (125), a configuration it refuses is a usage error (2); no
 * server-everything process is left after the command, also after SIGINT or SIGTERM during a call;
 * and a run without the option never loads the MCP client code.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { cli } from "./support/cli.js"
import { containerExists, waitFor } from "./support/docker.js"
import { builtBin, builtCliCommand } from "./support/mcp.js"
import { goneWithin, pidsWith, processMarker } from "./support/processes.js"

const testDir = new URL(".", import.meta.url).pathname
const everything = `${testDir}node_modules/@modelcontextprotocol/server-everything/dist/index.js`
const dir = mkdtempSync(join(tmpdir(), "cli-tools-"))
let files = 0
const newFile = (name: string) => join(dir, `${++files}-${name}`)

// The built CLI in plain Node: the installed bin in the real-engine tiers, else dist/bin.js with the
// sibling packages' dist/ by the workspace's export condition (support/mcp.ts; it says to run
// `pnpm build` when that is missing).
const command = builtCliCommand()
const run = (args: Array<string>, env: Record<string, string> = {}) =>
  cli(["run", "--no-journal", ...args], { command, env })

const markers: Array<string> = []
/** A configuration file with server-everything as "everything" (its process found by its marker), plus `more` entries. */
const configFile = (everythingEntry: Record<string, unknown> = {}, more: Record<string, unknown> = {}) => {
  const marker = processMarker("cli-tools")
  markers.push(marker)
  const path = newFile("upstream.json")
  writeFileSync(
    path,
    JSON.stringify({
      mcpServers: {
        everything: { command: process.execPath, args: [everything, "stdio", marker], ...everythingEntry },
        ...more
      }
    })
  )
  return { path, marker }
}

const program = (code: string) => {
  const path = newFile("prog.py")
  writeFileSync(path, code)
  return path
}

afterAll(async () => {
  try {
    for (const marker of markers)
      expect(await goneWithin(marker, 10_000), `a server-everything process with ${marker} is left`).toBe(true)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

const CALLS = program(String.raw`
from hermes_tools import everything_echo, everything_get_sum
print(everything_echo(message="hi from the CLI"))
print(everything_get_sum(a=2, b=40))
`)

describe("hermes-sandbox run --upstream-config", () => {
  it("the program calls server-everything's echo and get-sum and prints their results; the upstream process ends with the command", async () => {
    const { path, marker } = configFile()
    const r = await run(["--upstream-config", path, CALLS])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe("Echo: hi from the CLI\nThe sum of 2 and 40 is 42.\n")
    // What the upstreams offer is said with --events only; standard error is the program's (and the upstream's own).
    expect(r.stderr).not.toContain("tools for the program")
    expect(pidsWith(marker)).toEqual([])
  })

  it("--json has toolCallsMade (refused calls not counted); without --upstream-config it has none", async () => {
    const { path } = configFile()
    const code = program(String.raw`
from hermes_tools import everything_echo, everything_get_sum, ToolRefused
print(everything_echo(message="one"))
try:
    everything_get_sum(a="two", b=3)
except ToolRefused as e:
    print("ToolRefused:", str(e).split(":")[0])
print(everything_get_sum(a=1, b=2))
`)
    const r = await run(["--json", "--upstream-config", path, code])
    expect(r.code, r.stderr).toBe(0)
    const result = JSON.parse(r.stdout) as Record<string, unknown>
    expect(result).toMatchObject({
      exitCode: 0,
      stdout: "Echo: one\nToolRefused: invalid arguments for everything_get_sum\nThe sum of 1 and 2 is 3.\n",
      toolCallsMade: 2
    })

    const plain = await run(["--json", "-e", "print(1)"])
    expect(plain.code, plain.stderr).toBe(0)
    expect(JSON.parse(plain.stdout)).not.toHaveProperty("toolCallsMade")
  })

  it("--tool-max-calls and --tool-timeout bound the program's calls as they bound execute_code's; --events says what the upstreams offer", async () => {
    const { path } = configFile()
    const code = program(String.raw`
from hermes_tools import everything_echo, everything_trigger_long_running_operation, ToolError, ToolRefused
try:
    everything_trigger_long_running_operation(duration=30, steps=1)
except ToolRefused as e:
    print("refused?!", e)
except ToolError as e:
    print("ToolError:", e)
print(everything_echo(message="second"))
try:
    everything_echo(message="third")
except ToolRefused as e:
    print("ToolRefused:", e)
`)
    const started = Date.now()
    const r = await run([
      "--json",
      "--events",
      "--upstream-config",
      path,
      "--tool-max-calls",
      "2",
      "--tool-timeout",
      "1s",
      code
    ])
    expect(r.code, r.stderr).toBe(0)
    expect(Date.now() - started).toBeLessThan(25_000)
    const result = JSON.parse(r.stdout) as { stdout: string; toolCallsMade: number }
    expect(result.stdout.split("\n")).toEqual([
      "ToolError: everything_trigger_long_running_operation did not answer within 1000 ms (callTimeoutMs)",
      "Echo: second",
      "ToolRefused: tool call limit reached (2 calls per execution); no more tool calls are served in this run",
      ""
    ])
    expect(result.toolCallsMade).toBe(2)
    expect(r.stderr).toMatch(
      /hermes-sandbox: upstream MCP server "everything" \(mcp-servers\/everything 2\.0\.0\): 12 tools for the program: everything_echo, /
    )
    expect(r.stderr).toMatch(/tool simulate-research-query not offered/)
    expect(r.stderr).toMatch(/ToolCallFailed +call 1 everything_trigger_long_running_operation/)
  })

  it("an upstream that cannot start fails the command naming it (exit 125; --json: McpUpstreamFailed); the one that started is closed; the program never runs", async () => {
    const { path, marker } = configFile({}, { broken: { command: "/nonexistent/mcp-server" } })
    const ran = program("print('ran')\n")
    const r = await run(["--upstream-config", path, ran])
    expect(r.code, r.stderr).toBe(125)
    expect(r.stderr).toMatch(
      /hermes-sandbox: the upstream MCP server "broken" could not be used: the MCP server \/nonexistent\/mcp-server could not be connected to: .*ENOENT/
    )
    expect(r.stdout).toBe("")
    expect(await goneWithin(marker, 10_000)).toBe(true)

    const json = await run(["--json", "--upstream-config", path, ran])
    expect(json.code).toBe(125)
    expect(JSON.parse(json.stdout)).toMatchObject({
      error: { _tag: "McpUpstreamFailed", upstream: "broken", reason: "connect-failed" }
    })
  })

  it("a configuration the upstream refuses, a bad file and tool limits without a file are usage errors (exit 2), as for mcp", async () => {
    const { path, marker } = configFile({ include: ["echo", "get_sum"] })
    const refused = await run(["--upstream-config", path, CALLS])
    expect(refused.code, refused.stderr).toBe(2)
    expect(refused.stderr).toMatch(
      /--upstream-config .*: the upstream MCP server "everything" could not be used: .*has no tool "get_sum"/
    )
    expect(await goneWithin(marker, 10_000)).toBe(true)

    const bad = newFile("bad.yaml")
    writeFileSync(bad, "mcpServers:\n  fs:\n    command: npx\n    exlude: [write_file]\n")
    const typo = await run(["--upstream-config", bad, CALLS])
    expect(typo.code).toBe(2)
    expect(typo.stderr).toContain(`--upstream-config ${bad}: mcpServers.fs: unknown key "exlude"`)
    const missing = await run(["--upstream-config", join(dir, "nope.json"), CALLS])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("nope.json: no such file")
    const limits = await run(["--tool-timeout", "5s", CALLS])
    expect(limits.code).toBe(2)
    expect(limits.stderr).toContain("--tool-max-calls and --tool-timeout: only with --upstream-config")
  })
})

/** The built CLI started (not awaited): its output as it comes, its exit. */
const started = (args: Array<string>) => {
  const child: ChildProcess = spawn(command[0]!, [...command.slice(1), "run", "--no-journal", ...args], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => (stdout += d))
  child.stderr!.on("data", (d) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, exited, stdout: () => stdout, stderr: () => stderr }
}

describe("hermes-sandbox run --upstream-config: a signal during a tool call", () => {
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143]
  ] as const) {
    it(`${signal} while the program waits on a call: exit ${code}, the sandbox removed, no server-everything process left`, async () => {
      const { path, marker } = configFile()
      const waiting = program(String.raw`
from hermes_tools import everything_echo, everything_trigger_long_running_operation
print(everything_echo(message="ready"), flush=True)
everything_trigger_long_running_operation(duration=50, steps=50)
print("not reached")
`)
      const c = started(["--events", "--upstream-config", path, waiting])
      expect(await waitFor(async () => c.stdout().includes("Echo: ready\n"), 60_000, 50), c.stderr()).toBe(true)
      // The second call is in flight, on the upstream, when the signal comes.
      expect(await waitFor(async () => /ToolCallRequested +call 2 /.test(c.stderr()), 10_000, 50), c.stderr()).toBe(
        true
      )
      expect(pidsWith(marker)).toHaveLength(1)
      const container = /ContainerCreated +(hermes-sandbox-\S+)/.exec(c.stderr())?.[1]
      expect(container).toBeDefined()
      c.child.kill(signal)
      expect(await c.exited, c.stderr()).toBe(code)
      expect(c.stdout()).not.toContain("not reached")
      expect(await goneWithin(marker, 10_000), "server-everything outlived the command").toBe(true)
      expect(await containerExists(container!)).toBe(false)
    })
  }
})

describe("hermes-sandbox run without --upstream-config: startup unchanged", () => {
  it("never loads the MCP client code (@hermes-sandbox/mcp, the MCP SDK); with the option it does", async () => {
    // A module hook that appends every URL the CLI's ESM loader resolves to a file.
    const hooks = newFile("hooks.mjs")
    writeFileSync(
      hooks,
      `import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(process.env.HERMES_TEST_RESOLVED, resolved.url + "\\n")
  return resolved
}
`
    )
    const register = newFile("register.mjs")
    writeFileSync(
      register,
      `import { register } from "node:module"\nregister(${JSON.stringify(pathToFileURL(hooks).href)})\n`
    )
    const loaded = async (args: Array<string>) => {
      const log = newFile("resolved.txt")
      writeFileSync(log, "")
      const r = await cli(["run", "--no-journal", ...args], {
        // dist/bin.js, whose modules Node's loader resolves one by one (the bin's bundle is one file).
        command: [
          process.execPath,
          "--import",
          pathToFileURL(register).href,
          "--conditions=hermes-sandbox-dist",
          builtBin
        ],
        env: { HERMES_TEST_RESOLVED: log }
      })
      expect(r.code, r.stderr).toBe(0)
      return readFileSync(log, "utf8")
        .split("\n")
        .filter((u) => u !== "")
    }
    const mcpCode = (urls: ReadonlyArray<string>) => urls.filter((u) => /packages\/mcp\/|@modelcontextprotocol/.test(u))

    const without = await loaded(["--json", "-e", "print(1)"])
    expect(
      without.some((u) => u.includes("packages/docker/")),
      "the probe saw the SDK load"
    ).toBe(true)
    expect(mcpCode(without)).toEqual([])
    const { path } = configFile()
    expect(mcpCode(await loaded(["--json", "--upstream-config", path, CALLS])).length).toBeGreaterThan(0)
  })
})
