/**
 * The whole output is never just gone (issue 29, item 4), through the MCP SDK's own Client on the
 * fake runtime: a result that cuts a stream (head and tail) names where the server keeps it whole
 * (full_output), read_file reads it by that URI in lines and resources/read serves it; the
 * server's bound per stream and its store's bound in all hold; over HTTP another MCP session
 * cannot read it. The real engine (the supervisor relaying up to the kept bound, a flood):
 * test/mcp-collect.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { McpSandbox, type McpToolLimits } from "../src/McpSandbox.js"
import { callJson, connectInMemory, fakeServices } from "./support/fakeMcp.js"

/** A resource's text (the server serves a kept output as text). */
const textOf = (r: { contents: ReadonlyArray<Record<string, unknown>> }) => r.contents[0]?.["text"]

/** n numbered lines ("line 1\n"...), then a last one the head/tail cut would keep too. */
const lines = (n: number) => `${Array.from({ length: n }, (_, i) => `line ${i + 1}`).join("\n")}\nTHE-END\n`

const open = async (limits: McpToolLimits, transport: "stdio" | "http" = "stdio") => {
  const sandbox = await McpSandbox.open(
    { limits: { resultCaps: { stdoutBytes: 200, stderrBytes: 100 }, ...limits } },
    fakeServices()
  )
  const first = await connectInMemory(sandbox, "full-output-test", transport)
  return { sandbox, client: first.client, call: callJson, close: () => first.close().then(() => sandbox.close()) }
}

describe("full_output: a cut stream kept whole (fake runtime, the SDK's client)", () => {
  let t: Awaited<ReturnType<typeof open>>
  beforeAll(async () => {
    t = await open({ fullOutputBytes: 5000 })
  })
  afterAll(async () => await t.close())

  it("execute_code: the result is cut as before and names the whole stdout; read_file reads it by lines, resources/read whole", async () => {
    const printed = lines(300) // 2,700 bytes
    const r = await t.call(t.client, "execute_code", {
      language: "python",
      code: fakeProgram({ stdout: printed, stderr: "warn\n" })
    })
    expect(r.json).toMatchObject({ stdout_truncated: true, stderr_truncated: false })
    const uri = `sandbox://executions/${r.json.execution_id}/output/stdout`
    // stderr was not cut: only stdout is kept.
    expect(r.json.full_output).toEqual({ stdout: { uri, bytes: printed.length, complete: true } })
    expect(r.json.output).toContain(`read_file with path ${uri}`)
    const read = await t.call(t.client, "read_file", { path: uri, offset: 150, limit: 2, line_numbers: true })
    expect(read.json).toMatchObject({
      path: uri,
      content: "   150|line 150\n   151|line 151\n",
      total_lines: 301,
      size_bytes: printed.length,
      truncated: true
    })
    const resource = await t.client.readResource({ uri })
    expect(resource.contents).toEqual([{ uri, mimeType: "text/plain", text: printed }])
    const listed = await t.client.listResources()
    expect(listed.resources.map((x) => x.uri)).toContain(uri)
    const templates = await t.client.listResourceTemplates()
    expect(templates.resourceTemplates.map((x) => x.uriTemplate)).toContain("sandbox://executions/{id}/output/{stream}")
  })

  it("terminal: the same, for a command in the session's sandbox", async () => {
    const printed = lines(100)
    const r = await t.call(t.client, "terminal", { command: fakeProgram({ stderr: printed }) })
    const uri = `sandbox://executions/${r.json.execution_id}/output/stderr`
    expect(r.json.full_output).toEqual({ stderr: { uri, bytes: printed.length, complete: true } })
    expect((await t.call(t.client, "read_file", { path: uri, offset: 101 })).json.content).toBe("THE-END\n")
  })

  it("the server's bound per stream: its first fullOutputBytes, complete: false, and the words say so", async () => {
    const printed = lines(1000) // 8,800 bytes
    const r = await t.call(t.client, "execute_code", { language: "python", code: fakeProgram({ stdout: printed }) })
    expect(r.json.full_output.stdout).toMatchObject({ bytes: 5000, complete: false })
    expect(r.json.output).toContain("its first 5000 bytes")
    const resource = await t.client.readResource({ uri: r.json.full_output.stdout.uri })
    expect(textOf(resource)).toBe(printed.slice(0, 5000))
  })

  it("a URI of no kept output is not found, in words (read_file) and as the spec's -32002 (resources/read)", async () => {
    const uri = "sandbox://executions/0000-none/output/stdout"
    const r = await t.call(t.client, "read_file", { path: uri })
    expect(r.isError).toBe(true)
    expect(JSON.stringify(r.json)).toContain("no kept stdout of run 0000-none")
    await expect(t.client.readResource({ uri })).rejects.toMatchObject({ code: -32002 })
  })
})

describe("full_output's bounds", () => {
  it("the store holds at most fileStoreBytes in all: the oldest run's output is evicted first", async () => {
    // fullOutputBytes is at most half the store: 6,000 of 12,000 bytes.
    const t = await open({ fullOutputBytes: 1_000_000, fileStoreBytes: 12_000 })
    try {
      const runs = []
      for (let i = 0; i < 3; i++) {
        const r = await t.call(t.client, "execute_code", {
          language: "python",
          code: fakeProgram({ stdout: lines(1000) })
        })
        expect(r.json.full_output.stdout).toMatchObject({ bytes: 6000, complete: false })
        runs.push(r.json.full_output.stdout.uri as string)
      }
      expect(t.sandbox.files.bytes).toBeLessThanOrEqual(12_000)
      await expect(t.client.readResource({ uri: runs[0]! })).rejects.toMatchObject({ code: -32002 })
      expect(textOf(await t.client.readResource({ uri: runs[2]! }))).toHaveLength(6000)
    } finally {
      await t.close()
    }
  })

  it("fullOutputBytes 0 keeps none: no full_output, and the words say the whole output is not kept", async () => {
    const t = await open({ fullOutputBytes: 0 })
    try {
      const r = await t.call(t.client, "execute_code", {
        language: "python",
        code: fakeProgram({ stdout: lines(300) })
      })
      expect(r.json.full_output).toBeUndefined()
      expect(r.json.output).toContain("The whole output is not kept: this server keeps none")
    } finally {
      await t.close()
    }
  })

  it("a bound that is no number of bytes is refused when the server opens", async () => {
    await expect(open({ fullOutputBytes: -1 })).rejects.toThrow(/limits\.fullOutputBytes/)
  })

  it("over HTTP, another MCP session of the same server cannot read it", async () => {
    const t = await open({}, "http")
    try {
      const r = await t.call(t.client, "execute_code", {
        language: "python",
        code: fakeProgram({ stdout: lines(300) })
      })
      const uri = r.json.full_output.stdout.uri as string
      expect(textOf(await t.client.readResource({ uri }))).toContain("THE-END")
      const other = await connectInMemory(t.sandbox, "another", "http")
      try {
        await expect(other.client.readResource({ uri })).rejects.toMatchObject({ code: -32002 })
        const read = await other.client.callTool({ name: "read_file", arguments: { path: uri } })
        expect(read.isError).toBe(true)
      } finally {
        await other.close()
      }
    } finally {
      await t.close()
    }
  })
})
