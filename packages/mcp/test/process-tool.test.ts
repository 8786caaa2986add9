/**
 * terminal's background mode and the process tool through the MCP SDK's own Client (in-memory
 * transport), on the fake runtime: start returns at once with a process id; list, poll (only what
 * is new), log, wait with a timeout, kill (SIGTERM by default); unknown ids and missing ids are
 * argument errors; a flood's output stays within the result's cap with the omission said. The real
 * engine: test/session-background.e2e.test.ts (the SDK) and the MCP suites' tool lists.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { McpSandbox } from "../src/McpSandbox.js"
import { callJson, connectInMemory, fakeServices } from "./support/fakeMcp.js"

describe("terminal background and the process tool (fake runtime, the SDK's client)", () => {
  let sandbox: McpSandbox
  let client: Client
  let close: () => Promise<void>
  beforeAll(async () => {
    sandbox = await McpSandbox.open(
      { limits: { defaultTimeoutS: 30, resultCaps: { stdoutBytes: 2000, stderrBytes: 1000 } } },
      fakeServices()
    )
    ;({ client, close } = await connectInMemory(sandbox, "process-tool-test"))
  })
  afterAll(async () => {
    await close()
    await sandbox.close()
  })

  const call = (name: string, args: Record<string, unknown>) => callJson(client, name, args)

  it("a hanging server starts at once, is listed, polled, waited for with a timeout and killed with SIGTERM", async () => {
    const started = await call("terminal", {
      command: fakeProgram({ stdout: "listening\n", hang: true }),
      background: true
    })
    expect(started.isError).toBe(false)
    expect(started.json).toMatchObject({ status: "success", exit_code: null, execution_id: "" })
    const id = started.json.process_id as string
    expect(typeof id).toBe("string")
    expect(started.json.pid).toBeGreaterThan(0)
    const list = await call("process", { action: "list" })
    expect(list.json.processes.map((p: { process_id: string }) => p.process_id)).toContain(id)
    expect((await call("process", { action: "poll", id })).json).toMatchObject({
      output: "listening\n",
      process: { running: true }
    })
    // Only what is new since the last poll.
    expect((await call("process", { action: "poll", id })).json.output).toBe("")
    expect((await call("process", { action: "log", id })).json.output).toBe("listening\n")
    expect((await call("process", { action: "wait", id, timeout_s: 0.1 })).json).toMatchObject({ timed_out: true })
    const killed = await call("process", { action: "kill", id })
    expect(killed.json).toMatchObject({ process: { running: false, exit_code: 143, signal: "SIGTERM" } })
    // terminal calls go on meanwhile, and after.
    expect((await call("terminal", { command: fakeProgram({ stdout: "fg\n" }) })).json.stdout).toBe("fg\n")
  })

  it("a flood's log stays within the result's cap and says what was left out", async () => {
    const flood = `${"a".repeat(100_000)}END`
    const started = await call("terminal", { command: fakeProgram({ stdout: flood }), background: true })
    const id = started.json.process_id as string
    expect((await call("process", { action: "wait", id })).json).toMatchObject({ process: { exit_code: 0 } })
    const log = (await call("process", { action: "log", id })).json
    expect(Buffer.byteLength(log.output as string)).toBeLessThanOrEqual(2000 + 100)
    expect(log.output).toMatch(/\[\.\.\. \d+ bytes omitted \.\.\.\]\n/)
    expect((log.output as string).slice(-40)).toBe("a".repeat(37) + "END")
    expect(log.output_bytes_omitted).toBeGreaterThan(90_000)
  })

  it("an unknown or missing id, and a bad action, are argument errors", async () => {
    expect(await call("process", { action: "poll", id: "nope" })).toMatchObject({ isError: true })
    expect(await call("process", { action: "kill" })).toMatchObject({ isError: true })
    expect(await call("process", { action: "restart", id: "x" })).toMatchObject({ isError: true })
  })
})
