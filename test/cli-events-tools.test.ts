/**
 * `hermes-sandbox events` and `events summary` on a journal holding tool calls (written here
 * through the journal's own client, so no engine is needed): the timeline shows each call, the
 * summary counts them per tool, in text and JSON.
 */
import { spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { Event, openJournal } from "@hermes-sandbox/events"
import { cli, cliCommand } from "./support/cli.js"

const scratch = mkdtempSync(join(tmpdir(), "hermes-cli-tools-"))
const journal = join(scratch, "journal.sqlite")
/** A journal whose sandbox-chosen strings (a tool name, an MCP client's name) carry terminal escapes. */
const hostileJournal = join(scratch, "hostile.sqlite")
const HOSTILE_TOOL = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mX"
const E = Event.make
const container = { containerName: "hermes-sandbox-1", containerId: "c1" }
const sha = "ab".repeat(32)
/** A run's first event, with the tags given. */
const requested = (tags?: Record<string, string>) =>
  E("ExecutionRequested", {
    language: "python",
    image: "hermes-sandbox/python:latest",
    codeBytes: 40,
    codeSha256: sha,
    stdinBytes: 0,
    fileCount: 0,
    timeoutMs: 30_000,
    limits: { memoryBytes: 1, nanoCpus: 1, pidsLimit: 1, outputLimitBytes: 1 },
    network: false,
    runtime: "docker",
    ...(tags === undefined ? {} : { tags })
  })

beforeAll(async () => {
  const client = await openJournal({ path: journal })
  try {
    await client.append({
      streamId: "01a23261-e690-75bb-95e7-a93c6a6de2d8",
      executorId: "test",
      events: [
        requested(),
        E("ContainerCreated", { ...container, imageId: "sha256:i" }),
        E("ContainerStarted", { containerId: "c1" }),
        E("ToolCallRequested", { callId: 1, tool: "web_search", argumentBytes: 15, argumentsSha256: sha }),
        E("ToolCallRequested", { callId: 2, tool: "add", argumentBytes: 13, argumentsSha256: sha }),
        E("ToolCallCompleted", { callId: 2, tool: "add", durationMs: 1, resultBytes: 1 }),
        E("ToolCallFailed", {
          callId: 1,
          tool: "web_search",
          durationMs: 60_000,
          reason: "timed-out",
          message: "no answer in 60 s"
        }),
        E("ToolCallRequested", { callId: 3, tool: "nope", argumentBytes: 2, argumentsSha256: sha }),
        E("ToolCallRefused", { callId: 3, tool: "nope", reason: "unknown-tool", message: "no tool named nope" }),
        E("ContainerExited", { exitCode: 0, oomKilled: false, durationMs: 61_000 }),
        E("ContainerDestroyed", { ...container, reason: "completed" })
      ]
    })
  } finally {
    await client.close()
  }
  const hostile = await openJournal({ path: hostileJournal })
  try {
    await hostile.append({
      streamId: "01a23261-e690-75bb-95e7-a93c6a6de2d9",
      executorId: "test",
      events: [
        requested({ "mcp.client_name": "\x1b[2Jevil\nclient" }),
        E("ContainerCreated", { ...container, imageId: "sha256:i" }),
        E("ContainerStarted", { containerId: "c1" }),
        E("ToolCallRequested", { callId: 1, tool: HOSTILE_TOOL, argumentBytes: 2, argumentsSha256: sha }),
        E("ToolCallRefused", {
          callId: 1,
          tool: HOSTILE_TOOL,
          reason: "unknown-tool",
          message: `no tool named ${HOSTILE_TOOL}`
        })
      ]
    })
  } finally {
    await hostile.close()
  }
})

/** The command's output as a terminal gets it: run under script(1), on a pseudo-terminal. */
const onTerminal = (args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) => {
    const quoted = [...cliCommand, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ")
    const child = spawn("script", ["-qec", quoted, "/dev/null"], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString("latin1")))
    child.on("error", reject)
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`script exited ${code}: ${out}`))))
  })

describe("events on a terminal (hostile review 2, #5)", () => {
  it("a tool name and a client name with escape sequences reach the terminal escaped, never as control bytes", async () => {
    const out = await onTerminal(["events", "--journal", hostileJournal])
    expect(out).toContain("ToolCallRefused")
    // The sequences would set the window title, clear the screen and colour the line.
    expect(out).not.toContain("\x1b]0;PWNED")
    expect(out).not.toContain("\x1b[2J")
    expect(out).not.toContain("\x07")
    expect(out).toContain("\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mX")
    expect(out).toContain("\\x1b[2Jevil\\x0aclient")
  })
})

describe("events with tool calls", () => {
  it("the timeline shows each call on its line", async () => {
    const r = await cli(["events", "--journal", journal])
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toHaveLength(11)
    expect(lines[3]).toMatch(/ToolCallRequested {5}call 1 web_search, 15 B arguments \(sha256 abababababab\)$/)
    expect(lines[5]).toMatch(/ToolCallCompleted {5}call 2 add, 1 B result after 1 ms$/)
    expect(lines[6]).toMatch(/ToolCallFailed {8}call 1 web_search timed-out after 60000 ms: no answer in 60 s$/)
    expect(lines[8]).toMatch(/ToolCallRefused {7}call 3 nope refused \(unknown-tool\): no tool named nope$/)
  })

  it("summary counts them per tool, in text and JSON", async () => {
    const text = await cli(["events", "summary", "--journal", journal])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain(
      [
        "tool calls        add: 1 requested, 1 completed, 0 failed, 0 refused",
        "                  nope: 1 requested, 0 completed, 0 failed, 1 refused",
        "                  web_search: 1 requested, 0 completed, 1 failed, 0 refused"
      ].join("\n")
    )
    const json = await cli(["events", "summary", "--json", "--journal", journal])
    expect(JSON.parse(json.stdout)).toMatchObject({
      total: 1,
      openLifecycles: 0,
      toolCalls: {
        add: { requested: 1, completed: 1, failed: 0, refused: 0 },
        nope: { requested: 1, completed: 0, failed: 0, refused: 1 },
        web_search: { requested: 1, completed: 0, failed: 1, refused: 0 }
      }
    })
  })
})
