/**
 * docs/mcp.md's client configurations work as written: each stdio snippet (the Hermes agent's
 * mcp_servers entry, Claude Desktop's, Cursor's, VS Code's) is parsed from the page, its command
 * started with ONLY the environment the snippet gives (plus PATH, as the Hermes agent passes a
 * baseline and nothing else) — `hermes-sandbox` standing for the built bin — and driven by the
 * SDK's client: the nine tools are listed and execute_code runs.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, describe, expect, it } from "vitest"
import { parse as parseYaml } from "yaml"
import { mcpServerCommand } from "./support/mcp.js"

const page = readFileSync(new URL("../docs/mcp.md", import.meta.url), "utf8")
const blocks = (lang: string) =>
  [...page.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]!)
// JSON blocks may start with a `// where it goes` comment line.
const json = blocks("json").map((b) => JSON.parse(b.replace(/^\s*\/\/.*$/gm, "")) as Record<string, unknown>)
const yaml = blocks("yaml").map((b) => parseYaml(b) as Record<string, unknown>)

interface StdioEntry {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Record<string, string>
}
const home = mkdtempSync(join(tmpdir(), "hs-mcp-docs-"))
afterAll(() => rmSync(home, { recursive: true, force: true }))

const snippets: Array<[string, StdioEntry | undefined]> = [
  [
    "Hermes agent (mcp_servers.sandbox)",
    (
      yaml.find((y) => (y.mcp_servers as Record<string, { command?: string }> | undefined)?.sandbox?.command) as
        | { mcp_servers: { sandbox: StdioEntry } }
        | undefined
    )?.mcp_servers.sandbox
  ],
  [
    "Claude Desktop (mcpServers with env)",
    (
      json.find((j) => (j.mcpServers as Record<string, StdioEntry> | undefined)?.["hermes-sandbox"]?.env) as
        | { mcpServers: Record<string, StdioEntry> }
        | undefined
    )?.mcpServers["hermes-sandbox"]
  ],
  [
    "Cursor (mcpServers)",
    (
      json.find((j) => {
        const e = (j.mcpServers as Record<string, StdioEntry> | undefined)?.["hermes-sandbox"]
        return e !== undefined && e.env === undefined
      }) as { mcpServers: Record<string, StdioEntry> } | undefined
    )?.mcpServers["hermes-sandbox"]
  ],
  [
    "VS Code (servers, type stdio)",
    (
      json.find(
        (j) => (j.servers as Record<string, { type?: string }> | undefined)?.["hermes-sandbox"]?.type === "stdio"
      ) as { servers: Record<string, StdioEntry> } | undefined
    )?.servers["hermes-sandbox"]
  ]
]

describe("docs/mcp.md's configuration snippets", () => {
  for (const [name, entry] of snippets) {
    it(`${name}: starts the server with only its own environment; tools listed, execute_code runs`, async () => {
      expect(entry, `${name} not found in docs/mcp.md`).toBeDefined()
      expect(basename(entry!.command)).toBe("hermes-sandbox")
      expect(entry!.args[0]).toBe("mcp")
      const built = mcpServerCommand(entry!.args.slice(1))
      // The snippet's HOME is a placeholder: this test's own stands for it.
      const env = { PATH: process.env.PATH ?? "", ...entry!.env, HOME: home }
      const transport = new StdioClientTransport({ command: built.command, args: built.args, env, stderr: "pipe" })
      const client = new Client({ name: "docs-test", version: "1" })
      await client.connect(transport)
      try {
        expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
          "execute_code",
          "patch",
          "process",
          "read_file",
          "reset_session",
          "run_python",
          "search_files",
          "terminal",
          "write_file"
        ])
        const r = await client.callTool({ name: "execute_code", arguments: { language: "python", code: "print(6*7)" } })
        expect(r.structuredContent).toMatchObject({ status: "success", stdout: "42\n" })
      } finally {
        await client.close()
      }
    })
  }

  it("the HTTP snippets name the endpoint and the bearer header the server requires", () => {
    const hermes = yaml.find((y) => (y.mcp_servers as Record<string, { url?: string }> | undefined)?.sandbox?.url) as {
      mcp_servers: { sandbox: { url: string; headers: Record<string, string> } }
    }
    expect(hermes.mcp_servers.sandbox.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
    expect(hermes.mcp_servers.sandbox.headers.Authorization).toMatch(/^Bearer /)
    const vscode = json.find(
      (j) => (j.servers as Record<string, { type?: string }> | undefined)?.["hermes-sandbox"]?.type === "http"
    ) as { servers: Record<string, { url: string; headers: Record<string, string> }> }
    expect(vscode.servers["hermes-sandbox"]!.url).toBe(hermes.mcp_servers.sandbox.url)
    expect(vscode.servers["hermes-sandbox"]!.headers.Authorization).toMatch(/^Bearer /)
  })
})
