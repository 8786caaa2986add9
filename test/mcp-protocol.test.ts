/**
 * The MCP server's protocol, through the official SDK's Client over its in-memory transport,
 * against the real engine: the tools and their schemas, each tool's success and error shapes
 * (the client validates every structuredContent against the tool's outputSchema), progress,
 * cancellation, the session sandbox's life, the journal behind it, the caps.
 */
import { readFileSync } from "node:fs"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Chunk, Effect, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Journal } from "@hermes-sandbox/events"
import { McpSandbox, type McpSandboxOptions, VERSION } from "@hermes-sandbox/mcp"
import { containerExists, waitFor } from "./support/docker.js"
import { connectInMemory } from "./support/mcpInMemory.js"

const opened: Array<McpSandbox> = []
const openSandbox = async (options: McpSandboxOptions = {}) => {
  const sandbox = await McpSandbox.open({
    journal: "memory",
    ...options,
    limits: { progressIntervalMs: 300, defaultTimeoutS: 30, ...options.limits }
  })
  opened.push(sandbox)
  return sandbox
}
let sandbox: McpSandbox
beforeAll(async () => {
  sandbox = await openSandbox()
})
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()))
})

const connect = (on: McpSandbox = sandbox, transport: "stdio" | "http" = "stdio") =>
  connectInMemory(on, { transport, clientName: "protocol-test", clientVersion: "1.2.3" })

type Structured = Record<string, unknown>
const call = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  const text = (result.content as Array<{ type: string; text: string }>)[0]?.text ?? ""
  return {
    result,
    text,
    json: JSON.parse(text) as Structured,
    structured: result.structuredContent as Structured | undefined
  }
}

const journalOf = (s: McpSandbox, streamId?: string) =>
  s.runtime.runPromise(
    Effect.flatMap(Journal.Journal, (j) => Stream.runCollect(j.read(streamId === undefined ? {} : { streamId }))).pipe(
      Effect.map(Chunk.toReadonlyArray)
    )
  )

/** Every array in a JSON Schema has `items` (VS Code refuses one without). */
const arraysWithoutItems = (schema: unknown, at = "$"): Array<string> => {
  if (typeof schema !== "object" || schema === null) return []
  const s = schema as Record<string, unknown>
  const here = s.type === "array" && s.items === undefined ? [at] : []
  return [...here, ...Object.entries(s).flatMap(([k, v]) => arraysWithoutItems(v, `${at}.${k}`))]
}

describe("MCP server: tools/list", () => {
  it("lists the nine tools with object input schemas, output schemas, honest annotations; initialize names the server and its version", async () => {
    const { client, close } = await connect()
    expect(client.getServerVersion()).toMatchObject({ name: "hermes-sandbox", version: VERSION })
    expect(VERSION).toBe(
      JSON.parse(readFileSync(new URL("../packages/mcp/package.json", import.meta.url), "utf8")).version
    )
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual([
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
    for (const t of tools) {
      expect(t.inputSchema.type).toBe("object")
      expect(t.outputSchema?.type).toBe("object")
      expect(arraysWithoutItems(t.inputSchema)).toEqual([])
      expect(JSON.stringify(t.inputSchema)).not.toContain("$ref")
      expect(t.annotations?.openWorldHint).toBe(false)
      expect(t.description?.length).toBeGreaterThan(40)
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
    expect(byName.read_file?.annotations?.readOnlyHint).toBe(true)
    expect(byName.execute_code?.annotations?.readOnlyHint).toBe(false)
    expect(byName.execute_code?.inputSchema.required).toEqual(["code", "language"])
    expect(
      (byName.execute_code?.inputSchema.properties as Record<string, { enum?: Array<string> }> | undefined)?.language
        ?.enum
    ).toEqual(["python", "javascript", "bash"])
    await close()
  })
})

describe("MCP server: execute_code", () => {
  for (const [language, code] of [
    ["python", "print(6*7)"],
    ["javascript", "console.log(6*7)"],
    ["bash", "echo $((6*7))"]
  ] as const) {
    it(`${language}: success, structuredContent and the same JSON as text, shaped like Hermes' result`, async () => {
      const { client, close } = await connect()
      const { result, structured, json } = await call(client, "execute_code", { code, language })
      expect(result.isError).toBeFalsy()
      expect(structured).toEqual(json)
      expect(structured).toMatchObject({
        status: "success",
        output: "42",
        stdout: "42\n",
        stderr: "",
        exit_code: 0,
        stdout_truncated: false,
        stdout_bytes_total: 3,
        stdout_bytes_omitted: 0
      })
      expect(structured?.container_name).toBe(`hermes-sandbox-${structured?.execution_id}`)
      expect(structured?.duration_seconds).toBeGreaterThan(0)
      // Removed right after the result (in the background: the result does not wait for it).
      expect(await waitFor(async () => !(await containerExists(String(structured?.container_name))), 10_000)).toBe(true)
      await close()
    })
  }

  it("a non-zero exit is status error with isError and says so in output (stderr after its marker); files and stdin reach the program", async () => {
    const { client, close } = await connect()
    const { result, structured } = await call(client, "execute_code", {
      language: "python",
      code: "import sys\nprint(open('data/in.txt').read().strip(), open('bin', 'rb').read().hex(), sys.stdin.read())\nprint('bad', file=sys.stderr)\nsys.exit(3)",
      stdin: "from-stdin",
      files: [
        { path: "data/in.txt", content: "hello" },
        { path: "bin", content: Buffer.from([0, 1, 255]).toString("base64"), encoding: "base64" }
      ]
    })
    expect(result.isError).toBe(true)
    expect(structured).toMatchObject({
      status: "error",
      exit_code: 3,
      stdout: "hello 0001ff from-stdin\n",
      stderr: "bad\n"
    })
    expect(structured?.output).toBe("hello 0001ff from-stdin\n--- stderr ---\nbad\nThe program exited with code 3.")
    await close()
  })

  it("a timeout is status timeout, isError, and output says so (never empty)", async () => {
    const { client, close } = await connect()
    const { result, structured } = await call(client, "execute_code", {
      language: "python",
      code: "import time\nwhile True: time.sleep(0.1)",
      timeout_s: 1
    })
    expect(result.isError).toBe(true)
    expect(structured).toMatchObject({ status: "timeout", exit_code: 137 })
    expect(structured?.output).toMatch(/^⏰ Timed out after 1 s: the sandbox was killed/)
    expect(await waitFor(async () => !(await containerExists(String(structured?.container_name))), 10_000)).toBe(true)
    await close()
  })

  it("output past the result's cap keeps its head and tail with the byte counts", async () => {
    const capped = await openSandbox({ limits: { resultCaps: { stdoutBytes: 1000, stderrBytes: 100 } } })
    const { client, close } = await connect(capped)
    const { structured } = await call(client, "execute_code", { language: "python", code: "print('A' * 5000 + 'END')" })
    expect(structured).toMatchObject({
      status: "success",
      stdout_truncated: true,
      stdout_bytes_total: 5004,
      stdout_bytes_captured: 1000,
      stdout_bytes_omitted: 4004
    })
    expect(String(structured?.stdout)).toMatch(/^A{400}\n\[\.\.\. 4004 bytes omitted \.\.\.\]\nA+END\n$/)
    expect(structured?.output).toContain("Output was cut: 4004 bytes of stdout")
    await close()
  })

  it("bad arguments are an isError result naming each field, before any sandbox exists; the server keeps serving", async () => {
    const { client, close } = await connect()
    const before = (await journalOf(sandbox)).filter((e) => e.type === "ExecutionRequested").length
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ code: "print(1)", language: "ruby" }, "language", /python.*javascript.*bash/],
      [{ language: "python" }, "code", /missing/i],
      [{ code: 1, language: "python" }, "code", /string/i],
      [{ code: "x", language: "python", timeout_s: 10_000 }, "timeout_s", /at most 300/],
      [{ code: "x", language: "python", timeout_s: -1 }, "timeout_s", /positive/i],
      [
        { code: "x", language: "python", files: [{ path: "a", content: "%%%", encoding: "base64" }] },
        "files[0].content",
        /base64/
      ],
      [{ code: "x", language: "python", files: [{ path: "a" }] }, "files[0].content", /missing/i],
      [{ code: "x", language: "python", files: "a" }, "files", /array/i]
    ]
    for (const [args, field, message] of cases) {
      const { result, json } = await call(client, "execute_code", args)
      expect(result.isError, JSON.stringify(args)).toBe(true)
      expect(result.structuredContent).toBeUndefined()
      const error = json.error as { _tag: string; issues: Array<{ field: string; message: string }> }
      expect(error._tag).toBe("InvalidArguments")
      expect(error.issues.find((i) => i.field === field)?.message, JSON.stringify(error)).toMatch(message)
    }
    // Code over the executor's maxCodeBytes: the SDK's own InvalidRequest, naming the field.
    const big = await call(client, "execute_code", { language: "python", code: "#".repeat(1024 * 1024 + 1) })
    expect(big.json.error).toMatchObject({ _tag: "InvalidRequest", field: "code" })
    // A command given to execute_code: the hint Hermes gives.
    const misdirected = await call(client, "execute_code", { command: "ls" })
    expect(misdirected.json.hint).toMatch(/terminal\(command=/)
    const after = (await journalOf(sandbox)).filter((e) => e.type === "ExecutionRequested").length
    expect(after).toBe(before)
    await expect(client.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(/Unknown tool: no_such_tool/)
    expect(
      (await call(client, "execute_code", { language: "bash", code: "echo still-serving" })).structured?.stdout
    ).toBe("still-serving\n")
    await close()
  })

  it("progress: with a progress token the lifecycle and 'still running' arrive as progress notifications", async () => {
    const { client, close } = await connect()
    const messages: Array<string> = []
    const progress: Array<number> = []
    const result = await client.callTool(
      { name: "execute_code", arguments: { language: "bash", code: "sleep 1.5; echo done" } },
      undefined,
      {
        onprogress: (p) => {
          messages.push(p.message ?? "")
          progress.push(p.progress)
        },
        resetTimeoutOnProgress: true
      }
    )
    expect((result.structuredContent as Structured).stdout).toBe("done\n")
    expect(messages).toEqual(expect.arrayContaining(["requested", "sandbox created", "program started"]))
    expect(messages.some((m) => /^still running/.test(m))).toBe(true)
    expect(progress).toEqual([...progress].sort((a, b) => a - b))
    await close()
  })

  it("cancel: an aborted call kills and removes its container, and the journal records the interruption", async () => {
    const { client, session, close } = await connect()
    const abort = new AbortController()
    const pending = client.callTool(
      {
        name: "execute_code",
        arguments: { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(60)" }
      },
      undefined,
      { signal: abort.signal }
    )
    expect(
      await waitFor(
        async () =>
          session.executions.length === 1 && (await containerExists(`hermes-sandbox-${session.executions[0]}`)),
        20_000
      )
    ).toBe(true)
    const id = session.executions[0]!
    abort.abort("the user pressed stop")
    await expect(pending).rejects.toThrow()
    expect(await waitFor(async () => !(await containerExists(`hermes-sandbox-${id}`)), 10_000)).toBe(true)
    expect(
      await waitFor(async () => (await journalOf(sandbox, id)).some((e) => e.type === "ContainerDestroyed"), 10_000)
    ).toBe(true)
    const events = await journalOf(sandbox, id)
    expect(events.map((e) => e.type)).toContain("ExecutionInterrupted")
    expect(events.find((e) => e.type === "ContainerDestroyed")?.data).toMatchObject({ reason: "interrupted" })
    await close()
  })
})

describe("MCP server: the session sandbox (terminal, read_file, write_file, reset_session)", () => {
  it("terminal carries cwd and exported variables between calls; workdir changes directory first; a failing command is isError", async () => {
    const { client, close } = await connect()
    const first = await call(client, "terminal", {
      command: "mkdir -p /workspace/proj && cd /workspace/proj && export ANSWER=42"
    })
    expect(first.structured).toMatchObject({ status: "success", exit_code: 0 })
    const second = await call(client, "terminal", { command: 'echo "$PWD $ANSWER"' })
    expect(second.structured?.stdout).toBe("/workspace/proj 42\n")
    expect(second.structured?.session_id).toBe(first.structured?.session_id)
    const third = await call(client, "terminal", { command: "pwd", workdir: "/tmp" })
    expect(third.structured?.stdout).toBe("/tmp\n")
    const failed = await call(client, "terminal", { command: "echo oops >&2; exit 4" })
    expect(failed.result.isError).toBe(true)
    expect(failed.structured).toMatchObject({ status: "error", exit_code: 4, stderr: "oops\n" })
    const timedOut = await call(client, "terminal", { command: "sleep 30", timeout_s: 1 })
    expect(timedOut.structured).toMatchObject({ status: "timeout" })
    // Its words say what was killed: the command, not the session's sandbox.
    expect(timedOut.structured?.output).toMatch(
      /^⏰ Timed out after 1 s: the command was killed, not the session's sandbox/
    )
    expect(timedOut.structured?.output).not.toMatch(/the sandbox was killed/)
    // The session lives on after a timed-out command.
    expect((await call(client, "terminal", { command: "echo $ANSWER" })).structured?.stdout).toBe("42\n")
    await close()
  })

  it("write_file and read_file: text with lines, binary as base64, relative to the terminal's directory; outside the roots, missing, a directory: clear errors", async () => {
    const { client, close } = await connect()
    const lines = Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join("\n") + "\n"
    expect((await call(client, "write_file", { path: "/workspace/notes/a.txt", content: lines })).structured).toEqual({
      path: "/workspace/notes/a.txt",
      bytes_written: lines.length
    })
    const whole = await call(client, "read_file", { path: "/workspace/notes/a.txt" })
    expect(whole.structured).toEqual({
      path: "/workspace/notes/a.txt",
      content: lines,
      encoding: "utf8",
      size_bytes: lines.length,
      total_lines: 10,
      offset: 1,
      truncated: false
    })
    const part = await call(client, "read_file", { path: "/workspace/notes/a.txt", offset: 3, limit: 2 })
    expect(part.structured).toMatchObject({ content: "line 3\nline 4\n", offset: 3, truncated: true })
    await call(client, "terminal", { command: "cd /workspace/notes" })
    expect((await call(client, "read_file", { path: "a.txt", limit: 1 })).structured?.content).toBe("line 1\n")
    const binary = Buffer.from([0, 1, 2, 250, 251, 0, 10, 13])
    expect(
      (await call(client, "write_file", { path: "/tmp/b.bin", content: binary.toString("base64"), encoding: "base64" }))
        .structured?.bytes_written
    ).toBe(8)
    const readBinary = await call(client, "read_file", { path: "/tmp/b.bin" })
    expect(readBinary.structured).toMatchObject({ encoding: "base64", size_bytes: 8, truncated: false })
    expect(Buffer.from(String(readBinary.structured?.content), "base64").equals(binary)).toBe(true)
    expect(
      (await call(client, "terminal", { command: "od -An -tx1 /tmp/b.bin | tr -d ' \\n'" })).structured?.stdout
    ).toBe("000102fafb000a0d")
    for (const [path, reason] of [
      ["/etc/passwd", "outside-sandbox"],
      ["/workspace/../etc/shadow", "outside-sandbox"],
      ["/tmp/.hermes-session/env", "outside-sandbox"],
      ["/workspace/missing.txt", "not-found"],
      ["/workspace/notes", "not-a-file"]
    ] as const) {
      const r = await call(client, "read_file", { path })
      expect(r.result.isError, path).toBe(true)
      expect(r.json.error, path).toMatchObject({ _tag: "FileOperationFailed", reason })
    }
    // A name with a newline (and what looks like the script's own output lines) round-trips.
    const odd = "/workspace/odd\n999\nbinary\n0\nZm9v name.txt"
    expect((await call(client, "write_file", { path: odd, content: "odd content\n" })).structured).toEqual({
      path: odd,
      bytes_written: 12
    })
    expect((await call(client, "read_file", { path: odd })).structured).toMatchObject({
      path: odd,
      content: "odd content\n",
      encoding: "utf8",
      size_bytes: 12
    })
    // A symbolic link the sandboxed code planted does not lead out of the roots.
    await call(client, "terminal", { command: "ln -sf /etc/hostname /workspace/link" })
    expect((await call(client, "read_file", { path: "/workspace/link" })).json.error).toMatchObject({
      reason: "outside-sandbox"
    })
    expect((await call(client, "write_file", { path: "/workspace/link", content: "x" })).json.error).toMatchObject({
      reason: "outside-sandbox"
    })
    expect((await call(client, "write_file", { path: "/usr/bin/evil", content: "x" })).json.error).toMatchObject({
      reason: "outside-sandbox"
    })
    expect(
      (await call(client, "write_file", { path: "/workspace/x", content: "@@", encoding: "base64" })).json.error
    ).toMatchObject({ _tag: "InvalidArguments" })
    await close()
  })

  it("read_file/write_file are the session's file operations: no execution journaled, '..' resolved, an existing file's mode kept, no symlink followed even inside the roots, files past one read's chunk", async () => {
    const { client, session, close } = await connect()
    await call(client, "terminal", {
      command:
        "mkdir -p /workspace/d && printf '#!/bin/sh\\necho old\\n' > /workspace/d/run.sh && chmod 755 /workspace/d/run.sh"
    })
    const ran = session.executions.length
    expect(
      (await call(client, "write_file", { path: "/workspace/d/../d/run.sh", content: "#!/bin/sh\necho new\n" }))
        .structured
    ).toEqual({ path: "/workspace/d/run.sh", bytes_written: 19 })
    expect((await call(client, "read_file", { path: "d/./run.sh" })).structured).toMatchObject({
      path: "/workspace/d/run.sh",
      content: "#!/bin/sh\necho new\n",
      total_lines: 2
    })
    // Neither was an execution of the session (nothing in the journal, nothing in resources/list).
    expect(session.executions.length).toBe(ran)
    expect(
      (await call(client, "terminal", { command: "stat -c %a /workspace/d/run.sh && /workspace/d/run.sh" })).structured
        ?.stdout
    ).toBe("755\nnew\n")
    // A symlink is never followed, even one that stays inside /workspace.
    await call(client, "terminal", {
      command: "ln -s /workspace/d/run.sh /workspace/inside-link && ln -s /workspace/d /workspace/dir-link"
    })
    for (const path of ["/workspace/inside-link", "/workspace/dir-link/run.sh"]) {
      expect((await call(client, "read_file", { path })).json.error, path).toMatchObject({
        _tag: "FileOperationFailed",
        reason: "outside-sandbox"
      })
      expect((await call(client, "write_file", { path, content: "x" })).json.error, path).toMatchObject({
        reason: "outside-sandbox"
      })
    }
    expect((await call(client, "terminal", { command: "cat /workspace/d/run.sh" })).structured?.stdout).toBe(
      "#!/bin/sh\necho new\n"
    )
    // A text file of ~6 MiB (more than one read's 4 MiB): every line counted, the last lines read.
    await call(client, "terminal", {
      command: "seq 1 800000 | sed 's/$/ abc/' > /workspace/big.txt; wc -l < /workspace/big.txt"
    })
    const tail = await call(client, "read_file", { path: "/workspace/big.txt", offset: 799_999 })
    expect(tail.structured).toMatchObject({
      content: "799999 abc\n800000 abc\n",
      total_lines: 800_000,
      offset: 799_999,
      truncated: false
    })
    // A binary file read past the first chunk.
    await call(client, "terminal", {
      command: "head -c 5000000 /dev/zero > /workspace/zeros.bin && printf 'END' >> /workspace/zeros.bin"
    })
    const end = await call(client, "read_file", { path: "/workspace/zeros.bin", offset: 5_000_001, limit: 10 })
    expect(end.structured).toMatchObject({ encoding: "base64", size_bytes: 5_000_003, truncated: false })
    expect(Buffer.from(String(end.structured?.content), "base64").toString()).toBe("END")
    await close()
  })

  it("reset_session destroys the sandbox; the next call gets a fresh one; the MCP session's close removes it", async () => {
    const { client, close } = await connect()
    const first = await call(client, "terminal", { command: "export KEPT=1; touch /workspace/f; echo $HOSTNAME" })
    const firstId = String(first.structured?.session_id)
    const reset = await call(client, "reset_session", {})
    expect(reset.structured).toEqual({ reset: true, session_id: firstId })
    expect(await containerExists(`hermes-sandbox-${firstId}`)).toBe(false)
    const second = await call(client, "terminal", {
      command: 'echo "${KEPT:-unset}"; ls /workspace/f 2>&1 >/dev/null | wc -l'
    })
    expect(second.structured?.stdout).toBe("unset\n1\n")
    const secondId = String(second.structured?.session_id)
    expect(secondId).not.toBe(firstId)
    expect((await call(client, "reset_session", {})).structured?.reset).toBe(true)
    expect((await call(client, "reset_session", {})).structured).toEqual({ reset: false, session_id: null })
    await call(client, "terminal", { command: "true" })
    const live = sandbox.liveSessionSandboxes
    await close()
    expect(sandbox.liveSessionSandboxes).toBe(live - 1)
    await close()
  })

  it("two MCP sessions never share a session sandbox", async () => {
    const a = await connect()
    const b = await connect()
    await call(a.client, "write_file", { path: "/workspace/owner", content: "a" })
    const inB = await call(b.client, "read_file", { path: "/workspace/owner" })
    expect(inB.json.error).toMatchObject({ reason: "not-found" })
    const ida = (await call(a.client, "terminal", { command: "true" })).structured?.session_id
    const idb = (await call(b.client, "terminal", { command: "true" })).structured?.session_id
    expect(ida).not.toBe(idb)
    await a.close()
    await b.close()
  })

  it("the server's cap on live session sandboxes: a clear error, and room again once one is reset", async () => {
    const capped = await openSandbox({ limits: { maxSessionSandboxes: 1 } })
    const a = await connect(capped)
    const b = await connect(capped)
    expect((await call(a.client, "terminal", { command: "true" })).structured?.status).toBe("success")
    const refused = await call(b.client, "terminal", { command: "true" })
    expect(refused.json.error).toMatchObject({ _tag: "SessionLimitReached", limit: 1, scope: "server" })
    await call(a.client, "reset_session", {})
    expect((await call(b.client, "terminal", { command: "true" })).structured?.status).toBe("success")
    await a.close()
    await b.close()
  })
})

describe("MCP server: the journal behind it", () => {
  it("every call is an execution tagged with the MCP session, the tool and the client; its events are a resource", async () => {
    const { client, session, close } = await connect()
    const run = await call(client, "execute_code", { language: "bash", code: "echo journaled" })
    const term = await call(client, "terminal", { command: "echo journaled" })
    const id = String(run.structured?.execution_id)
    const requested = (await journalOf(sandbox, id)).find((e) => e.type === "ExecutionRequested")
    expect(requested?.data).toMatchObject({
      tags: {
        "mcp.session": session.id,
        "mcp.tool": "execute_code",
        "mcp.transport": "stdio",
        "mcp.client_name": "protocol-test 1.2.3"
      }
    })
    const termRequested = (await journalOf(sandbox, String(term.structured?.execution_id))).find(
      (e) => e.type === "ExecutionRequested"
    )
    expect(termRequested?.data).toMatchObject({
      sessionId: term.structured?.session_id,
      tags: { "mcp.session": session.id, "mcp.tool": "terminal" }
    })

    const { resourceTemplates } = await client.listResourceTemplates()
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual([
      "sandbox://executions/{id}/events",
      "sandbox://executions/{id}/files/{+path}",
      "sandbox://cells/{id}/{name}",
      "sandbox://executions/{id}/output/{stream}"
    ])
    const { resources } = await client.listResources()
    expect(resources.map((r) => r.uri)).toContain(`sandbox://executions/${id}/events`)
    expect(
      await waitFor(async () => (await journalOf(sandbox, id)).some((e) => e.type === "ContainerDestroyed"), 10_000)
    ).toBe(true)
    const read = await client.readResource({ uri: `sandbox://executions/${id}/events` })
    const events = JSON.parse(String((read.contents[0] as { text: string }).text)) as Array<{
      type: string
      streamId: string
    }>
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining([
        "ExecutionRequested",
        "ContainerCreated",
        "ContainerStarted",
        "ContainerExited",
        "ContainerDestroyed"
      ])
    )
    expect(events.every((e) => e.streamId === id)).toBe(true)
    await expect(client.readResource({ uri: "sandbox://executions/nope/events" })).rejects.toThrow(/not found/i)
    await expect(client.readResource({ uri: "file:///etc/passwd" })).rejects.toThrow(/Unknown resource/)
    await close()
  })

  it("over HTTP a session cannot read another session's execution events", async () => {
    const a = await connect(sandbox, "http")
    const b = await connect(sandbox, "http")
    const id = String(
      (await call(a.client, "execute_code", { language: "bash", code: "echo mine" })).structured?.execution_id
    )
    expect((await a.client.readResource({ uri: `sandbox://executions/${id}/events` })).contents).toHaveLength(1)
    await expect(b.client.readResource({ uri: `sandbox://executions/${id}/events` })).rejects.toThrow(/not found/i)
    await a.close()
    await b.close()
  })
})
