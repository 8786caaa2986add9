/**
 * `hermes-sandbox mcp --config` applies the Hermes agent's terminal: section as its Docker backend
 * does: docker_env reaches every sandbox, docker_volumes and lifetime_seconds the session sandbox
 * (terminal, read_file) — execute_code's single-use sandboxes take no mounts, and a configuration
 * with volumes is not refused as `run` refuses it. The built server, the SDK's client, the engine.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, describe, expect, it } from "vitest"
import { mcpServerCommand } from "./support/mcp.js"

const dir = mkdtempSync(join(tmpdir(), "hs-mcp-hermes-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("hermes-sandbox mcp --config (the Hermes agent's terminal: section)", () => {
  it("docker_env in every sandbox; docker_volumes and lifetime_seconds in the session sandbox only", async () => {
    // Readable by the sandbox's user (uid 1001): mkdtemp makes the directory 0700.
    chmodSync(dir, 0o755)
    writeFileSync(join(dir, "in.txt"), "from the host\n", { mode: 0o644 })
    const config = join(dir, "config.yaml")
    writeFileSync(
      config,
      [
        "terminal:",
        "  backend: docker",
        `  docker_volumes: ["${dir}:/data"]`,
        "  docker_env: { MODE: hermes-mode }",
        "  lifetime_seconds: 2",
        ""
      ].join("\n")
    )
    const { command, args } = mcpServerCommand(["--config", config, "--no-journal"])
    const client = new Client({ name: "hermes-config-test", version: "1" })
    await client.connect(
      new StdioClientTransport({ command, args, stderr: "pipe", env: { ...process.env } as Record<string, string> })
    )
    try {
      const oneShot = await client.callTool({
        name: "execute_code",
        arguments: { language: "python", code: "import os\nprint(os.environ.get('MODE'), os.path.exists('/data'))" }
      })
      expect(oneShot.structuredContent).toMatchObject({ status: "success", stdout: "hermes-mode False\n" })
      const first = await client.callTool({
        name: "terminal",
        arguments: { command: 'cat /data/in.txt; echo "$MODE"; touch /data/x 2>/dev/null || echo read-only' }
      })
      expect(first.structuredContent).toMatchObject({
        status: "success",
        stdout: "from the host\nhermes-mode\nread-only\n"
      })
      const read = await client.callTool({ name: "read_file", arguments: { path: "/data/in.txt" } })
      // The mount is readable, but outside the writable roots read_file serves.
      expect(read.isError).toBe(true)
      // lifetime_seconds: 2 — idle past it, the next call gets a fresh session sandbox.
      await new Promise((r) => setTimeout(r, 4_000))
      const later = await client.callTool({ name: "terminal", arguments: { command: "true" } })
      expect((later.structuredContent as { session_id: string }).session_id).not.toBe(
        (first.structuredContent as { session_id: string }).session_id
      )
    } finally {
      await client.close()
    }
  })
})
