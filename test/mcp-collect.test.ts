/**
 * execute_code's `collect` through the MCP server, with the official SDK's Client against the real
 * engine: a PNG comes back as an image block and as a resource_link whose resources/read returns
 * the same bytes; other files as links and in the text; skipped entries with reasons; the server's
 * file store bounded in bytes (oldest evicted first) and in time; over HTTP (serveHttp, a real
 * HTTP server) one MCP session cannot read another's files; and the MCP Inspector's CLI, a client
 * this project did not write, gets the resource_link.
 */
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HttpServing, McpSandbox, type McpSandboxOptions, serveHttp } from "@hermes-sandbox/mcp"
import { docker, waitFor } from "./support/docker.js"
import { connectInMemory } from "./support/mcpInMemory.js"
import { mcpServerCommand, runInspector } from "./support/mcp.js"
import { connectHttp } from "./support/mcpHttpClient.js"

const opened: Array<McpSandbox> = []
const servings: Array<HttpServing> = []
const dir = mkdtempSync(join(tmpdir(), "mcp-collect-"))
const openSandbox = async (options: McpSandboxOptions = {}) => {
  const sandbox = await McpSandbox.open({
    journal: "memory",
    ...options,
    limits: { defaultTimeoutS: 30, ...options.limits }
  })
  opened.push(sandbox)
  return sandbox
}
let sandbox: McpSandbox
beforeAll(async () => {
  sandbox = await openSandbox()
})
afterAll(async () => {
  await Promise.allSettled(servings.map((s) => s.close()))
  await Promise.all(opened.map((s) => s.close()))
  rmSync(dir, { recursive: true, force: true })
})

const connect = (on: McpSandbox = sandbox, transport: "stdio" | "http" = "stdio") =>
  connectInMemory(on, { transport, clientName: "collect-test", clientVersion: "1" })

type Block = {
  type: string
  text?: string
  data?: string
  mimeType?: string
  uri?: string
  name?: string
  size?: number
  description?: string
}
type Structured = Record<string, unknown> & {
  files?: Array<Record<string, unknown>>
  skipped_files?: Array<Record<string, unknown>>
}
const call = async (client: Client, args: Record<string, unknown>) => {
  const result = await client.callTool({ name: "execute_code", arguments: args })
  const content = result.content as Array<Block>
  return {
    result,
    content,
    json: JSON.parse(content[0]?.text ?? "") as Structured,
    structured: result.structuredContent as Structured
  }
}
const blocks = (content: Array<Block>, type: string) => content.filter((b) => b.type === type)
const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex")
const readBytes = async (client: Client, uri: string) => {
  const { contents } = await client.readResource({ uri })
  const c = contents[0] as { uri: string; mimeType?: string; blob?: string; text?: string }
  return { ...c, bytes: c.blob === undefined ? Buffer.from(c.text ?? "", "utf8") : Buffer.from(c.blob, "base64") }
}

/** A real PNG (w x h, a gradient) from Python's standard library alone, written to `name`. */
const pngProgram = (name: string, w = 32, h = 32) => String.raw`
import struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
w, h = ${w}, ${h}
raw = b"".join(b"\x00" + b"".join(bytes(((x * 7) % 256, (y * 5) % 256, (x * y) % 256)) for x in range(w)) for y in range(h))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")
open(${JSON.stringify(name)}, "wb").write(png)
`

describe("execute_code collect: the tool's schema", () => {
  it("advertises collect as an array of strings with a description; a bad pattern is InvalidArguments naming its index, before any sandbox", async () => {
    const { client, close } = await connect()
    const tool = (await client.listTools()).tools.find((t) => t.name === "execute_code")!
    const collect = (
      tool.inputSchema.properties as Record<string, { type?: string; items?: { type?: string }; description?: string }>
    ).collect
    expect(collect).toMatchObject({ type: "array", items: { type: "string" } })
    expect(collect?.description).toMatch(/glob patterns relative to \/workspace.*resource_link/s)
    expect(tool.description).toMatch(/collect .* resource_link .* image content/)
    for (const [pattern, message] of [
      ["/etc/passwd", /relative/],
      ["../x", /'\.\.'/],
      ["", /1 to 1024 bytes/]
    ] as const) {
      const r = await call(client, { language: "python", code: "print(1)", collect: ["ok.txt", pattern] })
      expect(r.result.isError).toBe(true)
      const error = r.json.error as { _tag: string; issues: Array<{ field: string; message: string }> }
      expect(error._tag).toBe("InvalidArguments")
      expect(error.issues.find((i) => i.field === "collect[1]")?.message, JSON.stringify(error)).toMatch(message)
    }
    await close()
  })
})

describe("execute_code collect: results and file resources (in-memory transport, real engine)", () => {
  it("a PNG comes back as an image block with the right bytes and as a resource_link whose resources/read returns the same bytes; listed in the text and structuredContent", async () => {
    const { client, close } = await connect()
    const r = await call(client, {
      language: "python",
      code: `${pngProgram("chart.png")}\nprint("drawn")`,
      collect: ["*.png"]
    })
    expect(r.result.isError).toBeFalsy()
    expect(r.content[0]?.type).toBe("text")
    expect(r.json).toEqual(r.structured)
    const [image] = blocks(r.content, "image")
    expect(image?.mimeType).toBe("image/png")
    const png = Buffer.from(image!.data!, "base64")
    expect(png.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a")
    const id = String(r.structured.execution_id)
    const uri = `sandbox://executions/${id}/files/chart.png`
    expect(r.structured.files).toEqual([
      {
        path: "chart.png",
        size_bytes: png.length,
        sha256: sha256(png),
        mime_type: "image/png",
        uri,
        image: true,
        width: 32,
        height: 32
      }
    ])
    expect(r.structured).toMatchObject({
      skipped_files: [],
      files_truncated: false,
      collection: { status: "complete" }
    })
    expect(String(r.structured.output)).toMatch(
      /^drawn\nCollected 1 file from \/workspace: "chart\.png" \([\d.]+ KB, PNG 32×32; sent as image 1\)\. Read each with resources\/read/
    )
    const [link] = blocks(r.content, "resource_link")
    expect(link).toMatchObject({ uri, name: "chart.png", mimeType: "image/png", size: png.length })
    expect(link?.description).toContain(sha256(png))
    const read = await readBytes(client, uri)
    expect(read).toMatchObject({ uri, mimeType: "image/png" })
    expect(read.blob).toBeDefined()
    expect(read.bytes.equals(png)).toBe(true)
    // The session's resources list it beside the run's events.
    const { resources } = await client.listResources()
    expect(resources.map((x) => x.uri)).toEqual(expect.arrayContaining([uri, `sandbox://executions/${id}/events`]))
    expect(resources.find((x) => x.uri === uri)).toMatchObject({
      name: "chart.png",
      mimeType: "image/png",
      size: png.length
    })
    const { resourceTemplates } = await client.listResourceTemplates()
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain("sandbox://executions/{id}/files/{+path}")
    await close()
  })

  it("a CSV (and an odd name) come back as resource_links read as text, listed in the text; skipped entries listed with their reasons; no image block", async () => {
    const { client, close } = await connect()
    const odd = "out/with space #1?.csv"
    const r = await call(client, {
      language: "python",
      code: `import os\nos.makedirs("out")\nopen("out/table.csv", "w").write("a,b\\n1,2\\n")\nopen(${JSON.stringify(odd)}, "w").write("odd\\n")\nos.symlink("/etc/passwd", "out/passwd.csv")\nos.mkfifo("out/fifo.csv")`,
      collect: ["out/*.csv", "missing.txt"]
    })
    expect(r.result.isError).toBeFalsy()
    expect(blocks(r.content, "image")).toEqual([])
    const id = String(r.structured.execution_id)
    const links = blocks(r.content, "resource_link")
    expect(links.map((l) => l.name)).toEqual(["out/table.csv", odd])
    expect(links[1]?.uri).toBe(`sandbox://executions/${id}/files/out/with%20space%20%231%3F.csv`)
    expect(r.structured.files?.map((f) => [f.path, f.mime_type, f.image])).toEqual([
      ["out/table.csv", "text/csv", false],
      [odd, "text/csv", false]
    ])
    expect(Object.fromEntries((r.structured.skipped_files ?? []).map((s) => [s.path, s.reason]))).toEqual({
      "out/passwd.csv": "symlink",
      "out/fifo.csv": "not-regular",
      "missing.txt": "not-found"
    })
    // The text block (what a client that drops the other blocks shows) names every file and every skipped entry.
    const text = r.content[0]!.text!
    for (const name of ["out/table.csv", "with space #1?.csv", "out/passwd.csv", "missing.txt", "not-regular"])
      expect(text).toContain(name)
    expect(String(r.structured.output)).toContain(
      'Not collected: "out/fifo.csv" (not-regular), "out/passwd.csv" (symlink), "missing.txt" (not-found).'
    )
    const table = await readBytes(client, links[0]!.uri!)
    expect(table).toMatchObject({ mimeType: "text/csv", text: "a,b\n1,2\n" })
    expect((await readBytes(client, links[1]!.uri!)).text).toBe("odd\n")
    await expect(client.readResource({ uri: `sandbox://executions/${id}/files/out/nope.csv` })).rejects.toThrow(
      /not found/i
    )
    await expect(client.readResource({ uri: `sandbox://executions/${id}/files/out/%E0%A4%A.csv` })).rejects.toThrow(
      /Unknown resource|not found/i
    )
    await close()
  })

  it("whatever the limits, a result lists at most 1,000 files and 100 skipped entries (and 256 KiB of their paths), and counts the rest (hostile review 2, #2)", async () => {
    const wide = await openSandbox({ limits: { collectLimits: { maxFiles: 5_000 } } })
    const { client, close } = await connect(wide, "http")
    // 3,000 small files and ~16,000 symlinks whose paths are ~3.8 KiB each (until the inodes run out).
    const r = await call(client, {
      language: "python",
      code: String.raw`
import os
for i in range(3000):
    open("f%04d.txt" % i, "w").write("x")
d = "/workspace/" + "/".join(["d" * 250] * 14)
os.makedirs(d)
n = 0
try:
    for i in range(20000):
        os.symlink("x", d + "/" + ("%05d" % i) + "L" * 240)
        n += 1
except OSError:
    pass
print(n)
`,
      collect: ["**"]
    })
    expect(r.result.isError).toBeFalsy()
    const made = Number(String(r.structured.stdout).trim())
    expect(made).toBeGreaterThan(5_000)
    expect(r.structured.files).toHaveLength(1_000)
    expect(r.structured.files_omitted).toBe(2_000)
    expect(blocks(r.content, "resource_link")).toHaveLength(1_000)
    const skipped = r.structured.skipped_files ?? []
    expect(skipped.length).toBeLessThanOrEqual(100)
    expect(skipped.length + Number(r.structured.skipped_files_omitted)).toBe(made)
    // The whole response: ~125 MB before the bounds.
    expect(JSON.stringify(r.result).length).toBeLessThan(2 * 1024 * 1024)
    expect(String(r.structured.output)).toContain("Not collected: ")
    expect(String(r.structured.output)).toContain(`and ${made - 20} more (see the JSON).`)
    await close()
  })

  it("images past maxImageBytes or maxImages are links only; a run that collects nothing says so", async () => {
    const small = await openSandbox({ limits: { maxImages: 1, maxImageBytes: 4000 } })
    const { client, close } = await connect(small)
    const r = await call(client, {
      language: "python",
      code: `${pngProgram("a.png", 8, 8)}\n${pngProgram("b.png", 8, 8)}\n${pngProgram("c.png", 64, 64)}`,
      collect: ["*.png"]
    })
    expect(r.structured.files?.map((f) => [f.path, f.image])).toEqual([
      ["a.png", true],
      ["b.png", false],
      ["c.png", false]
    ])
    expect(blocks(r.content, "image")).toHaveLength(1)
    expect(blocks(r.content, "resource_link")).toHaveLength(3)
    const none = await call(client, { language: "python", code: "print('nothing')", collect: ["*.png"] })
    expect(none.structured).toMatchObject({
      files: [],
      skipped_files: [],
      output: "nothing\ncollect matched no file in /workspace."
    })
    expect(none.content).toHaveLength(1)
    await close()
  })

  it("the file store is bounded: past fileStoreBytes the oldest call's files are evicted first (and a file larger than the store is never collected); past fileRetentionS they expire", async () => {
    const bounded = await openSandbox({ limits: { fileStoreBytes: 300_000 } })
    const { client, close } = await connect(bounded)
    const write = (name: string, size: number) =>
      call(client, {
        language: "python",
        code: `open(${JSON.stringify(name)}, "wb").write(b"${name[0]}" * ${size})`,
        collect: [name]
      })
    const first = await write("a.bin", 200_000)
    const uriA = String(first.structured.files?.[0]?.uri)
    expect((await readBytes(client, uriA)).bytes.length).toBe(200_000)
    const second = await write("b.bin", 200_000)
    const uriB = String(second.structured.files?.[0]?.uri)
    await expect(client.readResource({ uri: uriA })).rejects.toThrow(/not found.*oldest evicted first/i)
    const b = await readBytes(client, uriB)
    expect(b.bytes.equals(Buffer.alloc(200_000, "b"))).toBe(true)
    expect(bounded.files.bytes).toBe(200_000)
    expect((await client.listResources()).resources.map((x) => x.uri)).not.toContain(uriA)
    // A call's files are capped at the store's size: a larger file is listed as too-large, never held.
    const huge = await write("c.bin", 400_000)
    expect(huge.structured.skipped_files).toEqual([{ path: "c.bin", size_bytes: 400_000, reason: "too-large" }])
    expect(huge.structured.files_truncated).toBe(true)
    await close()

    const brief = await openSandbox({ limits: { fileRetentionS: 1 } })
    const c = await connect(brief)
    const kept = await call(c.client, { language: "bash", code: "echo hi > a.txt", collect: ["a.txt"] })
    const uri = String(kept.structured.files?.[0]?.uri)
    expect((await readBytes(c.client, uri)).text).toBe("hi\n")
    expect(
      await waitFor(async () => brief.files.get(String(kept.structured.execution_id)) === undefined, 5_000, 100)
    ).toBe(true)
    await expect(c.client.readResource({ uri })).rejects.toThrow(/not found/i)
    await c.close()
  })
})

describe("full_output: a cut stream kept whole (issue 29, item 4), on the real engine", () => {
  it("past the SDK's own 1 MiB cap the supervisor relays up to the kept bound: 3 MB whole with its last line; a 40 MiB flood keeps its first 10 MiB, the rest only counted; the store holds them within its bound", async () => {
    const { client, close } = await connect()
    try {
      const whole = await call(client, {
        language: "python",
        code: 'import sys\nsys.stdout.write(("x" * 99 + "\\n") * 30000)\nprint("THE-END")'
      })
      expect(whole.structured).toMatchObject({ stdout_truncated: true, stdout_bytes_total: 3_000_008 })
      const kept = (whole.structured.full_output as Record<string, Record<string, unknown>>).stdout!
      expect(kept).toMatchObject({ bytes: 3_000_008, complete: true })
      const last = await client.callTool({ name: "read_file", arguments: { path: kept.uri, offset: 30001 } })
      expect(JSON.parse((last.content as Array<Block>)[0]!.text!)).toMatchObject({
        content: "THE-END\n",
        total_lines: 30001
      })
      const flood = await call(client, {
        language: "python",
        code: 'import sys\nfor _ in range(40):\n    sys.stdout.write(("y" * 1023 + "\\n") * 1024)\nprint("NEVER-KEPT")'
      })
      expect(flood.structured.stdout_bytes_total).toBe(40 * 1024 * 1024 + 11)
      const floodKept = (flood.structured.full_output as Record<string, Record<string, unknown>>).stdout!
      expect(floodKept).toMatchObject({ bytes: 10 * 1024 * 1024, complete: false })
      const text = (await readBytes(client, String(floodKept.uri))).bytes
      expect([text.length, text.includes("NEVER-KEPT")]).toEqual([10 * 1024 * 1024, false])
      expect(sandbox.files.bytes).toBeLessThanOrEqual(sandbox.limits.fileStoreBytes)
    } finally {
      await close()
    }
  })
})

describe("execute_code collect over Streamable HTTP (serveHttp, the SDK's HTTP client)", () => {
  const token = "collect-token-0123456789abcdef"
  it("another MCP session cannot read the first one's file resource; the first can", async () => {
    const serving = await serveHttp(sandbox, { token })
    servings.push(serving)
    const a = await connectHttp(serving.url, token, "collect-http")
    const b = await connectHttp(serving.url, token, "collect-http")
    const r = await call(a.client, {
      language: "bash",
      code: "printf 'mine only' > secret.txt",
      collect: ["secret.txt"]
    })
    const uri = String(r.structured.files?.[0]?.uri)
    expect(blocks(r.content, "resource_link")[0]?.uri).toBe(uri)
    expect((await readBytes(a.client, uri)).text).toBe("mine only")
    await expect(b.client.readResource({ uri })).rejects.toThrow(/not found.*in this MCP session/i)
    expect((await b.client.listResources()).resources.map((x) => x.uri)).not.toContain(uri)
    const id = String(r.structured.execution_id)
    expect(sandbox.files.get(id)).toBeDefined()
    await a.close()
    // The session's end drops its files: no one else may read them.
    expect(await waitFor(async () => sandbox.files.get(id) === undefined, 5_000, 50)).toBe(true)
    await b.close()
    await serving.close()
  })
})

describe("execute_code collect through the MCP Inspector's CLI", () => {
  it("tools/call with collect: the JSON it prints has the resource_link and the file in structuredContent", async () => {
    const { command, args } = mcpServerCommand(["--no-journal"])
    const home = mkdtempSync(join(dir, "home-"))
    const run = await runInspector(
      [
        command,
        ...args,
        "--method",
        "tools/call",
        "--tool-name",
        "execute_code",
        "--tool-arg",
        "code=open('report.csv', 'w').write('x,y\\n1,2\\n')",
        "--tool-arg",
        "language=python",
        "--tool-arg",
        'collect=["*.csv"]'
      ],
      { cwd: home, env: { ...process.env, HOME: home } }
    )
    expect(run.code, run.stderr).toBe(0)
    const result = JSON.parse(run.stdout) as { content: Array<Block>; structuredContent: Structured; isError?: boolean }
    expect(result.isError).toBeFalsy()
    const id = String(result.structuredContent.execution_id)
    expect(result.content.find((b) => b.type === "resource_link")).toMatchObject({
      uri: `sandbox://executions/${id}/files/report.csv`,
      name: "report.csv",
      mimeType: "text/csv",
      size: 8
    })
    expect(result.structuredContent.files).toEqual([
      expect.objectContaining({ path: "report.csv", sha256: sha256("x,y\n1,2\n") })
    ])
    // The server it started (and its sandbox) is gone with the inspector.
    expect(
      await waitFor(
        async () =>
          (await docker.listContainers({ all: true, filters: { name: [`hermes-sandbox-${id}`] } })).length === 0,
        10_000
      )
    ).toBe(true)
  })
})
