/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in the root
 * package.json) against the BUILT `hermes-sandbox mcp --http` on loopback: every server scenario
 * the suite lists (`list --server`), in one run of its CLI (`server --suite all`), each asserted on
 * the suite's own result (its checks.json per scenario), and its exit code against a baseline of
 * the expected failures below, which the suite evaluates itself (a failure not listed, or a listed
 * one that now passes, exits 1).
 *
 * Most of the suite's server scenarios drive the fixtures of its own reference server (tools named
 * test_*, resources test://…, prompts): they fail here for that reason, and each is listed with it;
 * the check that each fails for exactly that reason (its error message) keeps a real failure from
 * hiding behind the list.
 *
 * The suite needs Node 22+: it runs on the `node` devDependency's binary (Node 24), resolved from
 * node_modules (patches/node@24.21.0.patch drops that package's bin, else node_modules/.bin/node
 * would put every tool of the workspace on Node 24). The server runs on this Node, as users run it.
 *
 * The suite's server mode cannot send a header (its CLI takes a --url only) and /mcp refuses every
 * request without the bearer token, which stays required: a reverse proxy on loopback (below) adds
 * `Authorization: Bearer` and changes nothing else. A run straight to the server without the token
 * shows the refusals the proxy makes the suite get past.
 */
import { execFileSync, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { Agent, createServer, request, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { docker } from "./support/docker.js"
import { type HttpServerProcess, startHttpServer } from "./support/mcp.js"

const root = fileURLToPath(new URL("..", import.meta.url))
/** Node 24 from the `node` devDependency (its preinstall puts the binary there). */
const node24 = join(root, "node_modules/node/bin/node")
const suitePackage = join(root, "node_modules/@modelcontextprotocol/conformance")
if (!existsSync(node24) || !existsSync(join(suitePackage, "package.json"))) {
  throw new Error(
    `${node24} or ${suitePackage} is missing: run pnpm install (the root devDependencies node and @modelcontextprotocol/conformance)`
  )
}
/** The suite's CLI: its package's bin, run with node24 (not the .bin shim, which would take this Node). */
const suiteCli = join(
  suitePackage,
  (JSON.parse(readFileSync(join(suitePackage, "package.json"), "utf8")) as { bin: { conformance: string } }).bin
    .conformance
)

/** The server scenarios, as the suite lists them (`list --server`: "  - name [spec versions]"). */
const scenarios = [
  ...execFileSync(node24, [suiteCli, "list", "--server"], { encoding: "utf8", timeout: 60_000 }).matchAll(
    /^\s+- (\S+)/gm
  )
].map((m) => m[1]!)

const TOOLS = "execute_code, terminal, process, run_python, read_file, write_file, patch, search_files, reset_session"
/** A scenario that calls a tool of the suite's reference server, which this one has not: "Unknown tool". */
const fixtureTool = (tool: string): Expectation => ({
  verdict: "fails",
  reason: `calls the suite's fixture tool ${tool}, which only its reference server has (this server's tools: ${TOOLS})`,
  error: new RegExp(`Unknown tool: ${tool}; this server has ${TOOLS}`)
})
/** A scenario that reads a resource of the suite's reference server. */
const fixtureResource = (uri: string): Expectation => ({
  verdict: "fails",
  reason: `reads the suite's fixture resource ${uri} (this server's resources: sandbox://executions/{id}/events and …/files/{+path})`,
  error: new RegExp(`Unknown resource ${uri.replace(/[/.]/g, "\\$&")}: this server has sandbox://executions/`)
})
/** A scenario of a capability this server does not declare: the SDK answers -32601, as the spec has it. */
const undeclared = (what: string): Expectation => ({
  verdict: "fails",
  reason: what,
  error: /^Failed: MCP error -32601: Method not found$/
})
const NO_PROMPTS = "this server declares no `prompts` capability (it offers no prompts): prompts/* is -32601"

type Expectation =
  /** At least one failed check, every one with this error message. */
  | { readonly verdict: "fails"; readonly reason: string; readonly error: RegExp }
  /** No check passed or failed: only these warnings (the suite's summary counts that a pass, its baseline a failure). */
  | { readonly verdict: "warns"; readonly reason: string; readonly warnings: ReadonlyArray<string> }

/** Every scenario not here must pass: at least one successful check, none failed, no warning. */
const EXPECTED: Readonly<Record<string, Expectation>> = {
  "logging-set-level": undeclared(
    "this server declares no `logging` capability (it sends no log messages): logging/setLevel is -32601"
  ),
  "completion-complete": undeclared(
    "this server declares no `completions` capability (no prompts or templates to complete): completion/complete is -32601"
  ),
  "tools-call-simple-text": fixtureTool("test_simple_text"),
  "tools-call-image": fixtureTool("test_image_content"),
  "tools-call-audio": fixtureTool("test_audio_content"),
  "tools-call-embedded-resource": fixtureTool("test_embedded_resource"),
  "tools-call-mixed-content": fixtureTool("test_multiple_content_types"),
  "tools-call-with-logging": undeclared(
    "sets a log level first (no `logging` capability here: -32601), then would call the fixture tool test_tool_with_logging"
  ),
  "tools-call-error": fixtureTool("test_error_handling"),
  "tools-call-with-progress": fixtureTool("test_tool_with_progress"),
  "tools-call-sampling": fixtureTool("test_sampling"),
  "tools-call-elicitation": fixtureTool("test_elicitation"),
  "json-schema-2020-12": {
    verdict: "fails",
    reason: "looks for the suite's fixture tool json_schema_2020_12_tool in tools/list",
    error: new RegExp(`Tool 'json_schema_2020_12_tool' not found. Available tools: ${TOOLS}`)
  },
  "elicitation-sep1034-defaults": fixtureTool("test_elicitation_sep1034_defaults"),
  "elicitation-sep1330-enums": fixtureTool("test_elicitation_sep1330_enums"),
  "server-sse-polling": {
    verdict: "warns",
    reason:
      "calls the fixture tool test_reconnection (an error event here), then only warns that the POST stream has no priming event and no retry field: resumable streams (SEP-1699, a SHOULD) need an event store, which this server does not keep",
    warnings: ["server-sse-priming-event", "server-sse-retry-field"]
  },
  "resources-read-text": fixtureResource("test://static-text"),
  "resources-read-binary": fixtureResource("test://static-binary"),
  "resources-templates-read": fixtureResource("test://template/123/data"),
  "resources-subscribe": undeclared(
    "resources are declared without `subscribe` (they do not change in place): resources/subscribe is -32601"
  ),
  "resources-unsubscribe": undeclared("resources are declared without `subscribe`: resources/unsubscribe is -32601"),
  "prompts-list": undeclared(NO_PROMPTS),
  "prompts-get-simple": undeclared(NO_PROMPTS),
  "prompts-get-with-args": undeclared(NO_PROMPTS),
  "prompts-get-embedded-resource": undeclared(NO_PROMPTS),
  "prompts-get-with-image": undeclared(NO_PROMPTS)
}

interface Check {
  readonly id: string
  readonly status: "SUCCESS" | "FAILURE" | "WARNING" | "INFO" | "SKIPPED"
  readonly errorMessage?: string
  /** The DNS-rebinding checks': the request's Host and the answer. */
  readonly details?: {
    readonly hostHeader?: string
    readonly statusCode?: number
    readonly body?: { readonly error?: { readonly message?: string } }
  }
}

const dir = mkdtempSync(join(tmpdir(), "mcp-conformance-"))
const token = "conformance-token-0123456789abcdef"
const tokenFile = join(dir, "token")
writeFileSync(tokenFile, `${token}\n`)
/** The expected failures as the suite's own baseline file (--expected-failures; it counts a warning as a failure). */
const baseline = join(dir, "expected-failures.yaml")
writeFileSync(
  baseline,
  `server:\n${Object.keys(EXPECTED)
    .map((name) => `  - ${name}\n`)
    .join("")}`
)

/** One run of the suite's CLI on Node 24 (killed after 60 s), its results written under a fresh directory. */
const runSuite = (args: ReadonlyArray<string>): Promise<{ code: number | null; output: string; resultDir: string }> =>
  new Promise((resolve, reject) => {
    const resultDir = mkdtempSync(join(dir, "results-"))
    const child = spawn(node24, [suiteCli, ...args, "--output-dir", resultDir], {
      cwd: resultDir,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d: Buffer) => (output += d.toString()))
    child.stderr.on("data", (d: Buffer) => (output += d.toString()))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`the conformance suite did not finish within 60 s: ${output}`))
    }, 60_000)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, output, resultDir })
    })
  })

/** The checks the suite saved for `scenario` (its directory: server-<scenario>-<timestamp>/checks.json). */
const checksOf = (resultDir: string, scenario: string): Array<Check> => {
  const dirs = readdirSync(resultDir).filter(
    (d) => d.startsWith(`server-${scenario}-`) && /^\d{4}-/.test(d.slice(`server-${scenario}-`.length))
  )
  if (dirs.length !== 1)
    throw new Error(
      `expected one result directory of ${scenario} in ${resultDir}, found: ${readdirSync(resultDir).join(", ")}`
    )
  return JSON.parse(readFileSync(join(resultDir, dirs[0]!, "checks.json"), "utf8")) as Array<Check>
}
const shown = (checks: ReadonlyArray<Check>) => checks.map((c) => `${c.id}: ${c.errorMessage ?? c.status}`)

/**
 * A reverse proxy on loopback that adds `Authorization: Bearer <token>` to every request and
 * changes nothing else: method, path, body and every header the suite sent — Host and Origin
 * included, so the DNS-rebinding scenario's forged Host/Origin reach the server's own check —
 * go through as sent, and responses (SSE streams included) come back as they are.
 */
const startProxy = async (target: URL): Promise<{ readonly url: string; readonly close: () => Promise<void> }> => {
  const agent = new Agent({ keepAlive: false })
  const server: Server = createServer((req, res) => {
    const upstream = request(
      {
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${token}` },
        agent
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      }
    )
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502)
      res.end()
    })
    // The suite closing a response (its GET event stream, an abandoned POST) closes it at the server too.
    res.on("close", () => upstream.destroy())
    req.pipe(upstream)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
        agent.destroy()
      })
  }
}

let mcp: HttpServerProcess
let executor: string
let proxy: Awaited<ReturnType<typeof startProxy>>
/** The whole suite, every server scenario in one run of its CLI. */
let suite: Awaited<ReturnType<typeof runSuite>>
beforeAll(async () => {
  // --client-sessions: the suite opens one MCP session per scenario and never ends one (its SDK
  // client's close() sends no DELETE), 32 in all for 0.1.16, against 8 per token by default. The
  // other caps stay as they are: 32 per address (every loopback address is one) fits exactly, so
  // a suite that opens more shows "429 … at most 32 per address" in a scenario's failure.
  mcp = await startHttpServer(["--port", "0", "--token-file", tokenFile, "--client-sessions", "32"])
  executor = /\(executor ([0-9a-f-]+)\)/.exec(mcp.stderr())?.[1] ?? ""
  proxy = await startProxy(new URL(mcp.url))
  suite = await runSuite(["server", "--url", proxy.url, "--suite", "all", "--expected-failures", baseline])
})
afterAll(async () => {
  await proxy?.close()
  const code = await mcp?.stop()
  // No scenario calls a tool of this server: nothing may have reached the engine.
  const left =
    executor === ""
      ? []
      : await docker.listContainers({ all: true, filters: { label: [`org.hermes-sandbox.executor=${executor}`] } })
  rmSync(dir, { recursive: true, force: true })
  expect(code).toBe(130)
  expect(left).toEqual([])
})

describe("the MCP conformance suite against hermes-sandbox mcp --http", () => {
  it("lists the scenarios this file expects, dns-rebinding-protection among them", () => {
    expect(scenarios).toContain("dns-rebinding-protection")
    expect(Object.keys(EXPECTED).filter((name) => !scenarios.includes(name))).toEqual([])
  })

  it("ran every server scenario it lists; its own verdict against the baseline: the expected failures only, none stale", () => {
    expect(readdirSync(suite.resultDir).length).toBe(scenarios.length)
    expect(suite.output).toMatch(/Expected failures \(in baseline\):/)
    expect(suite.output).not.toMatch(/Unexpected failures|Stale baseline entries/)
    expect(suite.code, suite.output).toBe(0)
  })

  for (const scenario of scenarios) {
    const expected = EXPECTED[scenario]
    it(`${scenario}: ${expected === undefined ? "passes" : `${expected.verdict} (${expected.reason})`}`, () => {
      const checks = checksOf(suite.resultDir, scenario)
      const failed = checks.filter((c) => c.status === "FAILURE")
      const passed = checks.filter((c) => c.status === "SUCCESS")
      if (expected === undefined) {
        expect(shown(failed)).toEqual([])
        expect(checks.filter((c) => c.status === "WARNING").map((c) => c.id)).toEqual([])
        expect(passed.length).toBeGreaterThan(0)
      } else if (expected.verdict === "fails") {
        expect(failed.length).toBeGreaterThan(0)
        for (const c of failed) expect(c.errorMessage ?? "", `${scenario}: ${c.id}`).toMatch(expected.error)
      } else {
        expect(shown(failed)).toEqual([])
        expect(shown(passed)).toEqual([])
        expect(checks.filter((c) => c.status === "WARNING").map((c) => c.id)).toEqual(expected.warnings)
      }
    })
  }

  it("dns-rebinding-protection: the refusal is the server's own (its 403 and message), and the loopback Host it accepts is the proxy's, another port than its own", () => {
    const checks = checksOf(suite.resultDir, "dns-rebinding-protection")
    const rejected = checks.find((c) => c.id === "localhost-host-rebinding-rejected")
    const accepted = checks.find((c) => c.id === "localhost-host-valid-accepted")
    expect(rejected?.status).toBe("SUCCESS")
    expect(rejected?.details?.statusCode).toBe(403)
    expect(rejected?.details?.body?.error?.message).toBe(`forbidden: Host "evil.example.com" is not this server's`)
    expect(accepted?.status).toBe("SUCCESS")
    expect(accepted?.details?.statusCode).toBe(200)
    expect(accepted?.details?.hostHeader).toBe(new URL(proxy.url).host)
    expect(new URL(proxy.url).port).not.toBe(new URL(mcp.url).port)
  })

  it("dns-rebinding-protection straight to the server, without the token: the forged Host is refused (403) and the loopback one is 401", async () => {
    const run = await runSuite(["server", "--url", mcp.url, "--scenario", "dns-rebinding-protection"])
    const checks = checksOf(run.resultDir, "dns-rebinding-protection")
    const rejected = checks.find((c) => c.id === "localhost-host-rebinding-rejected")
    const accepted = checks.find((c) => c.id === "localhost-host-valid-accepted")
    expect(rejected?.status).toBe("SUCCESS")
    expect(rejected?.details?.statusCode).toBe(403)
    // The token stays required: the suite's accepted check fails on it, and the suite exits 1.
    expect(accepted?.status).toBe("FAILURE")
    expect(accepted?.details?.statusCode).toBe(401)
    expect(run.code).toBe(1)
  })
})
