/**
 * run_python through the MCP SDK's Client against the real engine and the real kernel
 * (`hermes-run --kernel python`, IPython in hermes-sandbox/python): state across calls, the last
 * expression as Out[n], a real PNG display as image content, an exception's traceback without
 * colour, a timeout that keeps the state and one that loses it, reset, and the files shared with
 * write_file / read_file (a file write_file wrote is read by a cell, a chart a cell saved is read by
 * read_file), on runc and on gVisor's runsc when the engine has it. The fake-kernel suite is
 * packages/mcp/test/run-python.test.ts.
 */
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { Sessions } from "@hermes-sandbox/core/Session"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { McpSandbox } from "@hermes-sandbox/mcp"
import { containerExists, waitFor } from "./support/docker.js"
import { RUNTIMES } from "./hostile/support.js"
import { connectInMemory } from "./support/mcpInMemory.js"

let sandbox: McpSandbox

type Block = { type: string; text?: string; data?: string; mimeType?: string }
type Json = Record<string, any>
const call = async (client: Awaited<ReturnType<typeof connect>>["client"], name: string, args: Json) => {
  const result = await client.callTool({ name, arguments: args })
  const content = result.content as Array<Block>
  return {
    result,
    content,
    json: JSON.parse(content[0]?.text ?? "") as Json,
    structured: result.structuredContent as Json
  }
}
const connect = () => connectInMemory(sandbox, { clientName: "run-python-test" })

/** A real PNG (w x h) from the standard library alone: `png` is its bytes. */
const PNG_PROGRAM = String.raw`
import struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
w, h = 16, 16
raw = b"".join(b"\x00" + b"".join(bytes((x * 16, y * 16, 128)) for x in range(w)) for y in range(h))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
`

describe.each(RUNTIMES)("run_python on the engine's kernel, through the SDK's client (%s)", (runtime) => {
  beforeAll(async () => {
    sandbox = await McpSandbox.open({
      journal: "memory",
      runtime,
      limits: { defaultTimeoutS: 30 },
      // Generous: a kernel that stops for SIGINT must be seen to stop even on a loaded machine under gVisor.
      session: { kernel: { interruptGraceMs: 5000 } }
    })
  })
  afterAll(async () => {
    await sandbox?.close()
  })

  it("state across calls, Out[n], a PNG display as image content, an exception without colour", async () => {
    const { client, close } = await connect()
    const first = await call(client, "run_python", { code: "x = 41\nprint('set')" })
    expect(first.result.isError, JSON.stringify(first.json)).toBeFalsy()
    expect(first.structured).toEqual(first.json)
    expect(first.structured).toMatchObject({ status: "ok", execution_count: 1, stdout: "set\n", state_lost: false })

    const second = await call(client, "run_python", { code: "x + 1" })
    expect(second.structured).toMatchObject({ status: "ok", execution_count: 2, result: { text: "42" } })
    expect(second.structured.output).toBe("Out[2]: 42")

    const shown = await call(client, "run_python", {
      code: `${PNG_PROGRAM}\nfrom IPython.display import Image, HTML, display\ndisplay(Image(data=png))\ndisplay(HTML("<script>x()</script><b>t</b>"))`
    })
    expect(shown.structured.status, shown.structured.output).toBe("ok")
    const images = shown.content.filter((b) => b.type === "image")
    expect(images).toHaveLength(1)
    expect(images[0]!.mimeType).toBe("image/png")
    expect(Buffer.from(images[0]!.data!, "base64").subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a")
    expect(shown.structured.displays.map((d: Json) => [d.mime_types.includes("image/png"), d.image])).toEqual([
      [true, true],
      [false, false]
    ])
    expect(shown.structured.displays[1].mime_types).toContain("text/html")
    expect(JSON.stringify(shown.content)).not.toContain("<script>")

    const failed = await call(client, "run_python", { code: "def f():\n    return 1 / 0\nf()" })
    expect(failed.result.isError).toBe(true)
    expect(failed.structured).toMatchObject({ status: "error", error: { name: "ZeroDivisionError" } })
    expect(failed.structured.error.traceback).toContain("ZeroDivisionError")
    expect(failed.structured.error.traceback).not.toContain("\u001b[")
    expect(failed.structured.output).toContain("--- error ---")
    await close()
  })

  it("a timeout the kernel stops for keeps the state; SIGINT ignored loses it and says so; reset discards it", async () => {
    const { client, close } = await connect()
    await call(client, "run_python", { code: "kept = 'yes'" })
    const slow = await call(client, "run_python", { code: "import time\ntime.sleep(600)", timeout_s: 1 })
    expect(slow.structured).toMatchObject({ status: "timeout", state_lost: false })
    expect(slow.structured.output).toMatch(/⏰ Timed out after 1 s/)
    expect((await call(client, "run_python", { code: "kept" })).structured).toMatchObject({
      status: "ok",
      result: { text: "'yes'" }
    })

    const stubborn = await call(client, "run_python", {
      code: "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)",
      timeout_s: 1
    })
    expect(stubborn.structured).toMatchObject({ status: "timeout", state_lost: true })
    expect(stubborn.structured.output).toContain("variables and imports from earlier cells are gone")
    const after = await call(client, "run_python", { code: "kept" })
    expect(after.structured).toMatchObject({ status: "error", error: { name: "NameError" }, execution_count: 1 })

    await call(client, "run_python", { code: "again = 1" })
    const reset = await call(client, "run_python", { code: "again", reset: true })
    expect(reset.structured).toMatchObject({ status: "error", error: { name: "NameError" }, state_lost: false })
    await close()
  })

  it("files: write_file → a cell reads it; a chart the cell saves → read_file; the same session_id as terminal", async () => {
    const { client, close } = await connect()
    await call(client, "write_file", { path: "data.csv", content: "a,b\n1,2\n3,4\n" })
    const read = await call(client, "run_python", {
      code: "rows = open('/workspace/data.csv').read().splitlines()\nlen(rows), rows[-1]"
    })
    expect(read.structured).toMatchObject({ status: "ok", result: { text: "(3, '3,4')" } })

    const saved = await call(client, "run_python", {
      code: `${PNG_PROGRAM}\nopen('/workspace/chart.png', 'wb').write(png)`
    })
    expect(saved.structured.status, saved.structured.output).toBe("ok")
    const file = await call(client, "read_file", { path: "/workspace/chart.png" })
    expect(file.structured.encoding).toBe("base64")
    expect(Buffer.from(file.structured.content, "base64").subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a")

    // A glob, not ls: coreutils' statx of /workspace fails with EINVAL under this engine's gVisor.
    const terminal = await call(client, "terminal", { command: "printf '%s\\n' /workspace/*" })
    expect(terminal.structured.stdout, JSON.stringify(terminal.structured)).toBe(
      "/workspace/chart.png\n/workspace/data.csv\n"
    )
    expect(terminal.structured.session_id).toBe(read.structured.session_id)
    // A terminal call between cells does not end the kernel.
    expect((await call(client, "run_python", { code: "rows[0]" })).structured).toMatchObject({
      status: "ok",
      result: { text: "'a,b'" }
    })
    const name = `hermes-sandbox-${read.structured.session_id}`
    await close()
    // The MCP session's end removes its sandbox, kernel and all.
    expect(await containerExists(name)).toBe(false)
  })
})

describe("run_python with the server's host tools", () => {
  const open = () =>
    McpSandbox.open({
      journal: "memory",
      limits: { defaultTimeoutS: 30 },
      tools: {
        now: { description: "The host's time (ISO 8601)", handler: () => "2026-12-01T00:00:00.000Z" }
      },
      toolLimits: { maxCalls: 3 }
    })

  it("a cell calls them as execute_code's code does (hermes_tools); the description lists them; tool_calls_made counts the served calls", async () => {
    const withTools = await open()
    try {
      const { client, close } = await connectInMemory(withTools, { clientName: "run-python-test" })
      const tool = (await client.listTools()).tools.find((t) => t.name === "run_python")!
      expect(tool.description).toContain("\n- now(): The host's time (ISO 8601)\n")
      const first = await call(client, "run_python", {
        code: "from hermes_tools import now\ntimes = [now() for _ in range(3)]\ntimes[0]"
      })
      expect(first.structured, JSON.stringify(first.json)).toMatchObject({
        status: "ok",
        result: { text: "'2026-12-01T00:00:00.000Z'" },
        tool_calls_made: 3
      })
      await close()
    } finally {
      await withTools.close()
    }
  })

  // Failed until the kernel's supervisor numbered each cell's tool calls from 1, as the host's channel
  // of each cell expects (it took the second cell's first call for a forgery and killed the kernel).
  it("a later cell calls them too, with a budget of its own", async () => {
    const withTools = await open()
    try {
      const { client, close } = await connectInMemory(withTools, { clientName: "run-python-test" })
      await call(client, "run_python", { code: "from hermes_tools import now\nwhen = now()" })
      const again = await call(client, "run_python", { code: "[now() for _ in range(3)][-1] == when" })
      expect(again.structured, JSON.stringify(again.json)).toMatchObject({
        status: "ok",
        result: { text: "True" },
        tool_calls_made: 3
      })
      await close()
    } finally {
      await withTools.close()
    }
  })
})

describe("run_python with images: link (runc)", () => {
  it("a real PNG display is no image block and no base64: its resource (sandbox://cells/…) returns the bytes the cell made", async () => {
    const linked = await McpSandbox.open({
      journal: "memory",
      runtime: "runc",
      limits: { defaultTimeoutS: 30, images: "link" }
    })
    try {
      const { client, close } = await connectInMemory(linked, { clientName: "run-python-images-test" })
      const r = await call(client, "run_python", {
        code: `${PNG_PROGRAM}\nimport hashlib\nfrom IPython.display import Image, display\ndisplay(Image(data=png))\nprint(hashlib.sha256(png).hexdigest())`
      })
      expect(r.structured.status, r.structured.output).toBe("ok")
      expect(r.content.map((b) => b.type)).toEqual(["text"])
      expect(JSON.stringify(r.result)).not.toMatch(/[A-Za-z0-9+/]{80,}/)
      const display = r.structured.displays[0]
      expect(display).toMatchObject({ image: false, width: 16, height: 16 })
      expect(r.structured.output).toContain(`PNG 16×16; not sent as an image (images: link): resource ${display.uri}]`)
      const { contents } = await client.readResource({ uri: display.uri })
      const bytes = Buffer.from((contents[0] as { blob: string }).blob, "base64")
      expect(createHash("sha256").update(bytes).digest("hex")).toBe(r.structured.stdout.trim())
      await close()
    } finally {
      await linked.close()
    }
  })
})

describe("run_python with matplotlib (hermes-sandbox/python-data)", () => {
  it("a figure is a PNG display sent as image content, with its text/plain; savefig's file is read_file's", async () => {
    const data = await McpSandbox.open({
      journal: "memory",
      limits: { defaultTimeoutS: 60 },
      session: { image: "hermes-sandbox/python-data:latest" }
    })
    try {
      const { client, close } = await connectInMemory(data, { clientName: "run-python-test" })
      const r = await call(client, "run_python", {
        code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('/workspace/fig.png')"
      })
      expect(r.structured.status, r.structured.output).toBe("ok")
      const images = r.content.filter((b) => b.type === "image")
      expect(images.map((b) => b.mimeType)).toEqual(["image/png"])
      expect(r.structured.displays).toHaveLength(1)
      expect(r.structured.displays[0]).toMatchObject({ image: true })
      expect(r.structured.displays[0].text).toMatch(/^<Figure size .* with 1 Axes>$/)
      const file = await call(client, "read_file", { path: "fig.png" })
      expect(Buffer.from(file.structured.content, "base64").subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a")
      await close()
    } finally {
      await data.close()
    }
  })
})

describe("run_python with a session pool (runc)", () => {
  it("an MCP session's first run_python takes a ready session whose kernel is up; the session carries the MCP session's tags", async () => {
    const pooled = await McpSandbox.open({ journal: "memory", runtime: "runc", sessionPool: { size: 1 } })
    const events: Array<EventEnvelope> = []
    const stop = pooled.subscribe((e) => void events.push(e))
    try {
      const ready = () => pooled.runtime.runPromise(Effect.flatMap(Sessions, (s) => s.poolReady))
      expect(await waitFor(async () => (await ready()) === 1, 60_000)).toBe(true)
      const { client, close } = await connectInMemory(pooled, { clientName: "run-python-pool-test" })
      try {
        const first = await call(client, "run_python", { code: "1 + 1" })
        expect(first.structured).toMatchObject({
          status: "ok",
          execution_count: 1,
          result: { text: "2" },
          state_lost: false
        })
        const claimed = events.find((e) => e.type === "SessionClaimed")
        expect(claimed?.data).toMatchObject({ tags: { "mcp.transport": "stdio", "mcp.tool": "terminal" } })
        // The kernel the cell ran in is the one the pool started before any MCP session existed.
        const stream = events.filter((e) => e.streamId === claimed?.streamId).map((e) => e.type)
        expect(stream.indexOf("KernelStarted")).toBeLessThan(stream.indexOf("SessionClaimed"))
        expect(stream.filter((t) => t === "KernelStarted")).toHaveLength(1)
        expect(stream.indexOf("CellExecuted")).toBeGreaterThan(stream.indexOf("SessionClaimed"))
      } finally {
        await close()
      }
    } finally {
      stop()
      await pooled.close()
    }
  }, 120_000)
})
