/**
 * The audit trail (`recordCode`, issue 31 item 4) on the real engine: the Promise facades record a
 * run's code and output head (a flood cut at 16 KiB, what the supervisor counted), a session's call
 * and cell; `hermes-sandbox mcp --record-code` records an MCP client's execute_code, and
 * `hermes-sandbox run --record-code` then `events` prints the records as bounded lines. One
 * executor and one session for the file; the CLI cases start the installed bin.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createExecutor, createSession, type SandboxExecutor } from "@hermes-sandbox/docker"
import type { EventEnvelope } from "@hermes-sandbox/events"
import { cli } from "./support/cli.js"
import { readJournal, stdioClient } from "./support/mcpClient.js"

const scratch = mkdtempSync(join(tmpdir(), "hermes-record-code-"))
const facadeJournal = join(scratch, "facade.sqlite")
const recorded = (events: ReadonlyArray<EventEnvelope>, streamId: string) =>
  events.filter((e) => e.streamId === streamId && (e.type === "CodeRecorded" || e.type === "OutputRecorded"))

describe("recordCode on the engine", () => {
  let executor: SandboxExecutor

  beforeAll(async () => {
    executor = await createExecutor({ recordCode: true, journal: { path: facadeJournal }, timeoutMs: 30_000 })
  })
  afterAll(async () => {
    await executor?.close()
    rmSync(scratch, { recursive: true, force: true })
  })

  it("a run's code and the head of a flood; a session's call and cell", async () => {
    const code = "import sys\nsys.stdout.write('x' * 3_000_000)\nsys.stderr.write('done\\n')\nraise SystemExit(4)\n"
    const result = await executor.executeCode({ language: "python", code })
    expect(result.exitCode).toBe(4)
    const sessionJournal = join(scratch, "session.sqlite")
    const session = await createSession({ recordCode: true, journal: { path: sessionJournal } })
    const sessionId = session.sessionId
    const [call, cell] = await (async () => {
      try {
        return [
          await session.run("echo audited; echo err >&2"),
          await session.runCell({ code: "print(6 * 7)" })
        ] as const
      } finally {
        await session.close()
      }
    })()
    const events = [...(await readJournal(facadeJournal)), ...(await readJournal(sessionJournal))]

    const run = recorded(events, result.executionId)
    expect(run.map((e) => e.type)).toEqual(["CodeRecorded", "OutputRecorded"])
    expect(run[0]?.data).toEqual({ code, codeBytes: code.length, truncated: false })
    const output = run[1]?.data as { stdout: string; stderr: string; stdoutBytes: number; truncated: boolean }
    expect(output.stdout).toBe("x".repeat(16 * 1024))
    expect(output.stdoutBytes).toBe(3_000_000)
    expect(output.stderr).toBe("done\n")
    expect(output.truncated).toBe(true)
    // Right after the request; right before the terminal event.
    const stream = events.filter((e) => e.streamId === result.executionId).map((e) => e.type)
    expect(stream.slice(0, 2)).toEqual(["ExecutionRequested", "CodeRecorded"])
    expect(stream[stream.indexOf("ContainerExited") - 1]).toBe("OutputRecorded")

    expect(recorded(events, call.executionId).map((e) => e.data)).toEqual([
      { code: "echo audited; echo err >&2", codeBytes: 26, truncated: false },
      { stdout: "audited\n", stderr: "err\n", stdoutBytes: 8, stderrBytes: 4, truncated: false }
    ])
    const cellEvents = events.filter(
      (e) => e.streamId === sessionId && (e.data as { cellId?: string }).cellId === cell.cellId
    )
    expect(cellEvents.map((e) => e.type)).toEqual(["CodeRecorded", "OutputRecorded", "CellExecuted"])
    expect(cellEvents[1]?.data).toMatchObject({ stdout: "42\n", stderr: "" })
  })

  it("hermes-sandbox mcp --record-code records what an MCP client ran; without it, nothing", async () => {
    const ran = async (record: boolean) => {
      const path = join(scratch, `mcp-${record}.sqlite`)
      const client = await stdioClient([...(record ? ["--record-code"] : []), "--journal", path])
      try {
        const result = await client.client.callTool({
          name: "execute_code",
          arguments: { language: "python", code: "print('from the agent')" }
        })
        expect(result.isError).toBeFalsy()
      } finally {
        await client.close()
      }
      return (await readJournal(path)).filter((e) => e.type === "CodeRecorded" || e.type === "OutputRecorded")
    }
    const on = await ran(true)
    expect(on.map((e) => e.data)).toEqual([
      expect.objectContaining({ code: "print('from the agent')", truncated: false }),
      expect.objectContaining({ stdout: "from the agent\n", truncated: false })
    ])
    expect(await ran(false)).toEqual([])
  })

  it("hermes-sandbox run --record-code, then events prints the records as bounded lines", async () => {
    const path = join(scratch, "cli.sqlite")
    const code = `print('y' * 100_000)  # ${"z".repeat(300)}`
    const run = await cli(["run", "--no-daemon", "--record-code", "--journal", path, "-e", code])
    expect(run.code).toBe(0)
    const events = await cli(["events", "--journal", path])
    expect(events.code).toBe(0)
    const lines = events.stdout.split("\n")
    const codeLine = lines.find((l) => l.includes("CodeRecorded"))
    const outputLine = lines.find((l) => l.includes("OutputRecorded"))
    expect(codeLine).toContain(`${Buffer.byteLength(code)} B code: "print('y' * 100_000)  # zzz`)
    expect(outputLine).toContain(`stdout 100001 B "yyy`)
    expect(outputLine).toContain("(heads recorded)")
    for (const line of [codeLine, outputLine]) expect(line!.length).toBeLessThan(600)
  })
})
