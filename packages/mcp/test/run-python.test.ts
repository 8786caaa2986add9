/**
 * run_python through the MCP SDK's own Client (over its in-memory transport), on the fake runtime
 * and its fake kernel (core's internal/fakeKernel: a cell is `#!cell [steps]`): state across calls,
 * the last expression as Out[n], a PNG display as image content (and one whose bytes are not a PNG,
 * or over the server's image limits, not), an exception's traceback, a timeout that keeps the
 * state, one that loses it and says so, reset, the result's bounds (SECURITY.md, Kernels, the row
 * "MCP run_python"), and files shared with read_file / write_file (the fake kernel cannot open
 * files: a cell reading what write_file wrote is test/mcp-run-python.test.ts, on the engine).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Effect, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CellResult } from "@hermes-sandbox/core"
import { type FakeCellStep, fakeCell } from "@hermes-sandbox/core/testing"
import { Journal } from "@hermes-sandbox/events"
import { McpSandbox, type McpToolLimits } from "../src/McpSandbox.js"
import { connectInMemory, fakeServices } from "./support/fakeMcp.js"
import {
  type CellContext,
  cellResult,
  MAX_LISTED_OUTPUTS,
  TEXT_BUDGET,
  TRACEBACK_BYTES
} from "../src/tools/cellResult.js"

/** A real 1×1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
/** A real (tiny) JPEG's first bytes: the signature is what is checked. */
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]).toString("base64")

const opened: Array<McpSandbox> = []
const open = async (limits: McpToolLimits = {}, kernel: Record<string, unknown> = {}) => {
  const sandbox = await McpSandbox.open(
    { limits: { defaultTimeoutS: 30, ...limits }, session: { kernel: { interruptGraceMs: 200, ...kernel } } },
    fakeServices()
  )
  opened.push(sandbox)
  return sandbox
}
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()))
})

const connect = (on: McpSandbox) => connectInMemory(on, "run-python-test")

type Block = { type: string; text?: string; data?: string; mimeType?: string }
type Json = Record<string, any>
const call = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  const content = result.content as Array<Block>
  const json = JSON.parse(content[0]?.text ?? "") as Json
  return { result, content, json, structured: result.structuredContent as Json }
}
const cell = (client: Client, steps: ReadonlyArray<FakeCellStep>, more: Record<string, unknown> = {}) =>
  call(client, "run_python", { code: fakeCell(...steps), ...more })

describe("run_python on the fake kernel, through the SDK's client", () => {
  let sandbox: McpSandbox
  beforeAll(async () => {
    sandbox = await open()
  })

  it("is listed with schemas, says its limits and that state persists", async () => {
    const { client, close } = await connect(sandbox)
    const { tools } = await client.listTools()
    const tool = tools.find((t) => t.name === "run_python")!
    expect(tool.inputSchema.required).toEqual(["code"])
    expect(Object.keys(tool.inputSchema.properties ?? {}).sort()).toEqual(["code", "images", "reset", "timeout_s"])
    expect(tool.outputSchema?.properties).toHaveProperty("state_lost")
    expect(tool.description).toMatch(/State persists between calls/)
    expect(tool.description).toMatch(/50000 bytes/)
    expect(tool.description).toMatch(/HTML and SVG are not sent/)
    expect(tool.description).toMatch(/at most 4 per call/)
    await close()
  })

  it("state across calls; the last expression as Out[n]; the same JSON as text and structuredContent", async () => {
    const { client, close } = await connect(sandbox)
    const first = await cell(client, [{ set: { x: "41" } }, { print: "set\n" }])
    expect(first.result.isError).toBeFalsy()
    expect(first.structured).toEqual(first.json)
    expect(first.structured).toMatchObject({ status: "ok", execution_count: 1, stdout: "set\n", state_lost: false })
    const second = await cell(client, [{ get: "x" }, { result: { "text/plain": "42", "text/html": "<b>42</b>" } }])
    expect(second.structured).toMatchObject({
      status: "ok",
      execution_count: 2,
      stdout: "41\n",
      result: { mime_types: ["text/plain", "text/html"], text: "42", image: false },
      state_lost: false,
      session_id: first.structured.session_id
    })
    expect(second.structured.output).toBe("41\nOut[2]: 42")
    // HTML is named, never sent.
    expect(JSON.stringify(second.content)).not.toContain("<b>42</b>")
    await close()
  })

  it("a PNG display is image content; a JPEG too; bytes that are not the type they claim are not", async () => {
    const { client, close } = await connect(sandbox)
    const r = await cell(client, [
      { display: { "image/png": PNG, "text/plain": "<Figure size 640x480 with 1 Axes>" } },
      { display: { "image/jpeg": JPEG } },
      // Valid base64 with the PNG's magic but declared JPEG: dropped by the host's own check, or not shown here.
      { display: { "image/jpeg": PNG, "text/plain": "liar" } },
      { display: { "image/svg+xml": "<svg onload='x()'/>", "text/html": "<script>x()</script>", "text/plain": "svg" } }
    ])
    const images = r.content.filter((b) => b.type === "image")
    expect(images.map((b) => b.mimeType)).toEqual(["image/png", "image/jpeg"])
    expect(images[0]!.data).toBe(PNG)
    expect(r.structured.displays.map((d: Json) => [d.mime_types, d.image])).toEqual([
      [["image/png", "text/plain"], true],
      [["image/jpeg"], true],
      // The host dropped the lying entry (CellCapture: invalid); its text stays.
      [["text/plain"], false],
      [["image/svg+xml", "text/html", "text/plain"], false]
    ])
    expect(r.structured.displays_omitted).toEqual({ count: 0, bytes: 0, reasons: { invalid: 1 } })
    expect(r.structured.output).toContain(
      "[display 1: image/png, text/plain; 70 B, PNG 1×1; sent as image 1]\n<Figure size 640x480 with 1 Axes>\n"
    )
    expect(r.structured.output).toContain("Parts of outputs were dropped (invalid: 1).")
    const all = JSON.stringify(r.content)
    expect(all).not.toContain("<svg")
    expect(all).not.toContain("<script>")
    await close()
  })

  it("an exception: status error, isError, the traceback in output and error", async () => {
    const { client, close } = await connect(sandbox)
    const r = await cell(client, [
      { print: "before\n" },
      {
        raise: {
          name: "ValueError",
          value: "no good",
          traceback: ["Traceback (most recent call last):", "ValueError: no good"]
        }
      }
    ])
    expect(r.result.isError).toBe(true)
    expect(r.structured).toMatchObject({
      status: "error",
      error: {
        name: "ValueError",
        value: "no good",
        traceback: "Traceback (most recent call last):\nValueError: no good",
        truncated: false
      }
    })
    expect(r.structured.output).toBe("before\n--- error ---\nTraceback (most recent call last):\nValueError: no good")
    await close()
  })

  it("a timeout the kernel stops for keeps the state; one it ignores loses it, and the next result says so too", async () => {
    const { client, close } = await connect(sandbox)
    await cell(client, [{ set: { kept: "yes" } }])
    const timedOut = await cell(client, [{ sleep: 3_600_000 }], { timeout_s: 0.2 })
    expect(timedOut.structured).toMatchObject({ status: "timeout", state_lost: false })
    expect(timedOut.structured.output).toMatch(
      /⏰ Timed out after 0.2 s: the cell was interrupted \(KeyboardInterrupt\); the kernel stopped and keeps its state/
    )
    expect((await cell(client, [{ get: "kept" }])).structured).toMatchObject({ status: "ok", stdout: "yes\n" })

    const killed = await cell(client, [{ ignoreSigint: true }, { sleep: 3_600_000 }], { timeout_s: 0.2 })
    expect(killed.structured).toMatchObject({ status: "timeout", state_lost: true })
    expect(killed.structured.output).toContain("variables and imports from earlier cells are gone")
    const after = await cell(client, [{ get: "kept" }])
    expect(after.structured).toMatchObject({ status: "error", execution_count: 1, error: { name: "NameError" } })
    await close()
  })

  it("a client's cancel interrupts the cell, not the kernel: the next call finds the state", async () => {
    const { client, close } = await connect(sandbox)
    await cell(client, [{ set: { before: "kept" } }])
    const controller = new AbortController()
    const cancelled = client.callTool(
      { name: "run_python", arguments: { code: fakeCell({ sleep: 3_600_000 }) } },
      undefined,
      { signal: controller.signal }
    )
    setTimeout(() => controller.abort("the user stopped it"), 100)
    await expect(cancelled).rejects.toThrow()
    const after = await cell(client, [{ get: "before" }])
    expect(after.structured).toMatchObject({ status: "ok", stdout: "kept\n", state_lost: false, execution_count: 3 })
    await close()
  })

  it("reset: true restarts the kernel first (not a loss: it was asked for)", async () => {
    const { client, close } = await connect(sandbox)
    await cell(client, [{ set: { gone: "1" } }])
    const r = await cell(client, [{ get: "gone" }], { reset: true })
    expect(r.structured).toMatchObject({
      status: "error",
      execution_count: 1,
      state_lost: false,
      error: { name: "NameError" }
    })
    expect(r.structured.output).toContain("The kernel was restarted first (reset)")
    await close()
  })

  it("reset_session ends the kernel with the sandbox, on request: the next cell starts fresh without state_lost", async () => {
    const { client, close } = await connect(sandbox)
    const first = await cell(client, [{ set: { a: "1" } }])
    await call(client, "reset_session", {})
    const r = await cell(client, [{ get: "a" }])
    expect(r.structured).toMatchObject({ status: "error", state_lost: false, execution_count: 1 })
    expect(r.structured.session_id).not.toBe(first.structured.session_id)
    await close()
  })

  it("a session sandbox gone without reset_session (an idle expiry): the next cell, in a new one, says state_lost, and the journal's CellExecuted the same", async () => {
    const { client, session, close } = await connect(sandbox)
    const first = await cell(client, [{ set: { a: "1" } }])
    // Removed under the MCP session, as the idle expiry does: the next call opens a new one.
    await sandbox.runtime.runPromise(Effect.flatMap(session.useSandbox, (s) => s.destroy))
    const r = await cell(client, [{ get: "a" }])
    expect(r.structured).toMatchObject({ status: "error", state_lost: true, execution_count: 1 })
    expect(r.structured.session_id).not.toBe(first.structured.session_id)
    expect(r.structured.output).toMatch(/the session sandbox was removed after \d+ s without a call/)
    const next = await cell(client, [{ print: "x" }])
    expect(next.structured).toMatchObject({ state_lost: false })
    const journaled = await sandbox.runtime.runPromise(
      Effect.flatMap(Journal.Journal, (j) =>
        j.read({ streamId: r.structured.session_id }).pipe(Stream.runCollect, Effect.orDie)
      )
    )
    expect([...journaled].flatMap((e) => (e.type === "CellExecuted" ? [e.data.stateLost] : []))).toEqual([true, false])
    await close()
  })

  it("a kernel that dies (OOM) ends the cell crashed, state_lost; the session sandbox lives on", async () => {
    const { client, close } = await connect(sandbox)
    const r = await cell(client, [{ die: { oom: true } }])
    expect(r.structured).toMatchObject({ status: "crashed", state_lost: true, oom_killed: true })
    expect(r.structured.output).toMatch(/ran out of memory/)
    const next = await cell(client, [{ print: "alive\n" }])
    expect(next.structured).toMatchObject({ status: "ok", stdout: "alive\n", session_id: r.structured.session_id })
    await close()
  })

  it("run_python, terminal and the file tools share one session sandbox (the same session_id)", async () => {
    const { client, close } = await connect(sandbox)
    const c = await cell(client, [{ print: "x" }])
    const written = await call(client, "write_file", { path: "data.csv", content: "a,b\n1,2\n" })
    expect(written.structured).toEqual({ path: "/workspace/data.csv", bytes_written: 8 })
    const terminal = await call(client, "terminal", { command: "true" })
    expect(terminal.structured.session_id).toBe(c.structured.session_id)
    await close()
  })
})

describe("run_python's bounds (SECURITY.md, Kernels: the row MCP run_python)", () => {
  it("stdout and stderr as execute_code's: head and tail within 50,000 and 10,000 bytes, counted", async () => {
    const { client, close } = await connect(await open())
    const r = await cell(client, [{ print: `${"a".repeat(60_000)}END` }, { stderr: `${"e".repeat(20_000)}ERR` }])
    expect(r.structured).toMatchObject({
      stdout_truncated: true,
      stdout_bytes_total: 60_003,
      stdout_bytes_captured: 50_000,
      stderr_truncated: true,
      stderr_bytes_total: 20_003,
      stderr_bytes_captured: 10_000
    })
    expect(r.structured.stdout.endsWith("END")).toBe(true)
    expect(r.structured.stderr.endsWith("ERR")).toBe(true)
    expect(r.structured.output).toMatch(/Output was cut: 10003 bytes of stdout and 10003 bytes of stderr/)
    await close()
  })

  it("text/plain of the value and the displays: 20,000 bytes in all, the value first", async () => {
    const { client, close } = await connect(await open())
    const r = await cell(client, [
      { display: { "text/plain": `${"d".repeat(15_000)}` } },
      { display: { "text/plain": `${"e".repeat(15_000)}` } },
      { display: { "text/plain": "third" } },
      { result: { "text/plain": `${"v".repeat(12_000)}` } }
    ])
    const s = r.structured
    expect(s.result).toMatchObject({ text: "v".repeat(12_000), text_truncated: false })
    expect(s.displays[0].text_truncated).toBe(true)
    expect(s.displays[1].text).toBeUndefined()
    expect(s.displays[2].text).toBeUndefined()
    const kept = [s.result, ...s.displays].reduce(
      (n: number, o: Json) =>
        n + Buffer.byteLength((o.text ?? "").replace(/\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n/, "")),
      0
    )
    expect(kept).toBeLessThanOrEqual(TEXT_BUDGET)
    expect(s.output).toMatch(/Text output was cut/)
    await close()
  })

  it("a traceback: head and tail within 20,000 bytes", async () => {
    const { client, close } = await connect(await open())
    const lines = Array.from({ length: 2000 }, (_, i) => `  File "<cell>", line ${i}, in f`)
    const r = await cell(client, [
      {
        raise: {
          name: "RecursionError",
          value: "deep",
          traceback: ["Traceback (most recent call last):", ...lines, "RecursionError: deep"]
        }
      }
    ])
    const tb: string = r.structured.error.traceback
    expect(r.structured.error.truncated).toBe(true)
    expect(tb.startsWith("Traceback (most recent call last):")).toBe(true)
    expect(tb.endsWith("RecursionError: deep")).toBe(true)
    expect(Buffer.byteLength(tb.replace(/\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n/, ""))).toBeLessThanOrEqual(
      TRACEBACK_BYTES
    )
    await close()
  })

  it("images: at most maxImages per call and maxImageBytes each; the others named, not sent", async () => {
    const big = Buffer.concat([Buffer.from(PNG, "base64"), Buffer.alloc(3000)]).toString("base64")
    const { client, close } = await connect(await open({ maxImages: 2, maxImageBytes: 2048 }))
    const r = await cell(client, [
      { display: { "image/png": big } },
      { display: { "image/png": PNG } },
      { display: { "image/png": PNG } },
      { display: { "image/png": PNG } }
    ])
    expect(r.content.filter((b) => b.type === "image")).toHaveLength(2)
    expect(r.structured.displays.map((d: Json) => d.image)).toEqual([false, true, true, false])
    expect(r.structured.output).toContain("not sent: over 2 KB per image")
    expect(r.structured.output).toContain("not sent: 2 images per call at most")
    expect(r.structured.output).not.toMatch(/shown/)
    await close()
  })

  it("displays past the 100 described are counted, not listed", async () => {
    const { client, close } = await connect(await open({}, { maxDisplays: 150 }))
    const steps = Array.from({ length: 120 }, (_, i): FakeCellStep => ({ display: { "text/plain": `#${i}` } }))
    const r = await cell(client, steps)
    expect(r.structured.displays).toHaveLength(MAX_LISTED_OUTPUTS)
    expect(r.structured.displays_omitted).toMatchObject({ count: 20, reasons: { unlisted: 20 } })
    await close()
  })
})

describe("cellResult on its own: what the host let through is checked again", () => {
  const base: CellResult = {
    sessionId: "s",
    cellId: "c",
    status: "ok",
    executionCount: 3,
    stdout: "",
    stderr: "",
    stdoutBytes: 0,
    stderrBytes: 0,
    stdoutTruncated: false,
    stderrTruncated: false,
    displays: [],
    displaysOmitted: { count: 0, bytes: 0, reasons: {} },
    stateLost: false,
    oomKilled: false,
    kernel: { id: "k", generation: 1, started: false },
    toolCallsMade: 0,
    durationMs: 5
  }
  const context: CellContext = {
    caps: { stdoutBytes: 50_000, stderrBytes: 10_000 },
    images: "inline",
    imageLimits: { images: "inline", maxImages: 4, maxImageBytes: 1024 * 1024, maxImageTotalBytes: 2 * 1024 * 1024 },
    keepImages: () => undefined,
    timeoutS: 50,
    maxTimeoutS: 300,
    reset: false,
    sandboxReplaced: false,
    sessionIdleS: 600
  }
  it("an image/png whose bytes are not a PNG is not sent; a JPEG posing as a PNG neither", () => {
    const r = cellResult(
      {
        ...base,
        displays: [
          { data: { "image/png": Buffer.from("<svg/>").toString("base64") }, metadata: {} },
          { data: { "image/png": JPEG }, metadata: {} }
        ]
      },
      context
    )
    expect(r.content).toEqual([])
    expect(r.value.displays.map((d) => d.image)).toEqual([false, false])
  })
  it("the value's image is sent too (first of all: of a cell's outputs it is what was asked for)", () => {
    const r = cellResult(
      { ...base, result: { data: { "image/png": PNG, "text/plain": "<Image>" }, metadata: {} } },
      context
    )
    expect(r.content).toEqual([{ type: "image", data: PNG, mimeType: "image/png" }])
    expect(r.value.output).toBe("Out[3]: <Image>\n[Out[3]: 70 B, PNG 1×1; sent as image 1]")
  })
  it("a sandbox replaced under the cells (idle expiry) is state_lost, in words", () => {
    const r = cellResult({ ...base, stateLost: true }, { ...context, sandboxReplaced: true })
    expect(r.value.state_lost).toBe(true)
    expect(r.value.output).toMatch(
      /the session sandbox was removed after 600 s without a call and this is a new one; variables and imports from earlier cells are gone/
    )
  })
  it("the words follow the result's stateLost: a replaced sandbox whose result says no loss claims none", () => {
    const r = cellResult(base, { ...context, sandboxReplaced: true })
    expect(r.value.state_lost).toBe(false)
    expect(r.value.output).not.toMatch(/state_lost/)
  })
})
