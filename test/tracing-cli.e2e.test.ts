/**
 * The CLI's traces on the real engine (issue 31, item 2), through the installed bin: with
 * OTEL_EXPORTER_OTLP_ENDPOINT pointing at a loopback receiver (test/support/otlpReceiver.ts, the
 * official OTLP message types), `hermes-sandbox run` delivers its execution's trace before the
 * process exits — also when SIGINT interrupts the run — and `hermes-sandbox mcp` (stdio, the MCP
 * SDK's client) delivers a span per execute_code call. The batch's timer is set far off, so what
 * arrives was flushed by the process's end, not sent on a schedule.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { cli, cliCommand } from "./support/cli.js"
import { stdioClient } from "./support/mcpClient.js"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver, withEnv } from "./support/otlpReceiver.js"
import { waitFor } from "./support/docker.js"

const EXECUTE = "hermes_sandbox.execute"
const executes = (spans: ReadonlyArray<ReceivedSpan>) => spans.filter((s) => s.name === EXECUTE)
const phasesOf = (spans: ReadonlyArray<ReceivedSpan>, parent: ReceivedSpan) =>
  spans
    .filter((s) => s.parentSpanId === parent.spanId && s.name.startsWith("hermes_sandbox.phase."))
    .map((s) => s.attributes["hermes_sandbox.phase"])
    .sort()

describe("the CLI's traces over OTLP/HTTP", () => {
  let receiver: OtlpReceiver
  const otel = () => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_SERVICE_NAME: "hermes-cli-test",
    OTEL_BSP_SCHEDULE_DELAY: "600000"
  })

  beforeAll(async () => {
    receiver = await startOtlpReceiver()
  })
  afterAll(async () => {
    await receiver.close()
  })
  beforeEach(() => {
    receiver.requests.length = 0
  })

  it("run: the execution's trace is delivered before the process exits", async () => {
    const r = await cli(["run", "--no-daemon", "--no-journal", "-e", "print(6 * 7)"], { env: otel() })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe("42\n")
    // Already here when the process ended (the exporter awaited the receiver's answer).
    const spans = receiver.spans()
    const [execute, ...more] = executes(spans)
    expect(more).toEqual([])
    expect(execute?.attributes["hermes_sandbox.outcome"]).toBe("ok")
    expect(execute?.resource["service.name"]).toBe("hermes-cli-test")
    expect(phasesOf(spans, execute as ReceivedSpan)).toEqual(["create", "queue", "removal", "run", "start"])
    expect(receiver.requests.every((q) => q.contentType === "application/x-protobuf")).toBe(true)
  })

  it("run interrupted by SIGINT mid-run: exit 130, and the interrupted execution's trace is delivered", async () => {
    const [command, ...args] = cliCommand
    const child: ChildProcess = spawn(
      command as string,
      [
        ...args,
        "run",
        "--no-daemon",
        "--no-journal",
        "-e",
        "import time\nprint('started', flush=True)\ntime.sleep(60)"
      ],
      { env: { ...process.env, ...otel() }, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (d) => (stdout += d))
    child.stderr?.on("data", (d) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    expect(await waitFor(async () => stdout.includes("started\n"), 60_000, 50), stderr).toBe(true)
    child.kill("SIGINT")
    expect(await exited, stderr).toBe(130)
    const spans = receiver.spans()
    const [execute, ...more] = executes(spans)
    expect(more).toEqual([])
    expect(execute?.attributes["hermes_sandbox.outcome"]).toBe("interrupted")
    expect(execute?.status.code).toBe(2) // ERROR
    // The run's phases, and its removal, which the interrupted command still waited for.
    expect(phasesOf(spans, execute as ReceivedSpan)).toEqual(["create", "queue", "removal", "run", "start"])
  })

  it("mcp (stdio): a span per execute_code call", async () => {
    const client = await withEnv(otel(), () => stdioClient(["--no-journal"]))
    const calls = []
    try {
      for (const code of ["print(1)", "raise SystemExit(3)"]) {
        const result = await client.client.callTool({ name: "execute_code", arguments: { language: "python", code } })
        calls.push(result)
      }
    } finally {
      await client.close()
    }
    expect(calls.length).toBe(2)
    // The server flushes as it ends (its stdin closed); the client does not wait for that.
    await receiver.until((spans) => executes(spans).length >= 2)
    const spans = executes(receiver.spans())
    expect(spans.length).toBe(2)
    expect(spans.map((s) => s.attributes["hermes_sandbox.outcome"]).sort()).toEqual(["error", "ok"])
    expect(new Set(spans.map((s) => s.attributes["hermes_sandbox.executor_id"]))).toEqual(new Set([client.executorId]))
  })
})
