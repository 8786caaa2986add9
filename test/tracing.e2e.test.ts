/**
 * OpenTelemetry traces on the real engine (issue 31, item 2): with OTEL_EXPORTER_OTLP_ENDPOINT set,
 * the Promise facade exports over OTLP/HTTP (protobuf, the default) to a loopback receiver
 * (test/support/otlpReceiver.ts, decoding with the official OTLP message types); each execution is one trace under the caller's
 * active OpenTelemetry span (the application's own tracer provider and context manager), with its
 * phase spans and a tool call's span; a timeout carries its outcome and an error status.
 * One executor for the file.
 */
import { context, type Span, SpanStatusCode } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./support/otlpReceiver.js"

describe("OpenTelemetry traces over OTLP/HTTP", () => {
  let receiver: OtlpReceiver
  let executor: SandboxExecutor
  // The application's own tracing: its provider (exporting nowhere) and context manager.
  const contextManager = new AsyncLocalStorageContextManager().enable()
  const agent = new BasicTracerProvider().getTracer("agent")
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT

  beforeAll(async () => {
    context.setGlobalContextManager(contextManager)
    receiver = await startOtlpReceiver()
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.endpoint
    executor = await createExecutor({ timeoutMs: 20_000, awaitRemoval: false })
  })

  afterAll(async () => {
    await executor?.close()
    if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved
    await receiver.close()
    context.disable()
  })

  it("one trace per execution under the caller's active span: its phases, a tool call, outcomes and statuses", async () => {
    const inSpan = <T>(name: string, f: (span: Span) => Promise<T>) =>
      agent.startActiveSpan(name, async (span) => {
        try {
          return await f(span)
        } finally {
          span.end()
        }
      })
    const ok = await inSpan("agent step 1", async (span) => ({
      span: span.spanContext(),
      result: await executor.executeCode({
        language: "python",
        code: "from hermes_tools import add\nprint(add(a=2, b=3))",
        tools: { add: { handler: ({ a, b }: { a: number; b: number }) => a + b } }
      })
    }))
    expect(ok.result.stdout).toBe("5\n")
    const slow = await inSpan("agent step 2", async (span) => ({
      span: span.spanContext(),
      result: await executor.executeCode({ language: "python", code: "import time\ntime.sleep(60)", timeoutMs: 1_000 })
    }))
    expect(slow.result.timedOut).toBe(true)
    // Closing the executor waits for the removals, then flushes the exporter.
    await executor.close()

    expect([...new Set(receiver.requests.map((r) => `${r.path} ${r.contentType}`))]).toEqual([
      "POST /v1/traces application/x-protobuf"
    ])
    const received = receiver.spans()
    for (const run of [ok, slow]) {
      const inTrace = received.filter((s) => s.traceId === run.span.traceId)
      const execute = inTrace.filter((s) => s.name === "hermes_sandbox.execute")
      expect(execute.length).toBe(1)
      const e = execute[0] as ReceivedSpan
      expect(e.parentSpanId).toBe(run.span.spanId)
      expect(e.attributes["hermes_sandbox.execution_id"]).toBe(run.result.executionId)
      expect(e.attributes["hermes_sandbox.container_name"]).toBe(run.result.containerName)
      expect(e.attributes["hermes_sandbox.language"]).toBe("python")
      const phases = inTrace
        .filter((s) => s.name.startsWith("hermes_sandbox.phase.") && s.parentSpanId === e.spanId)
        .map((s) => s.attributes["hermes_sandbox.phase"])
      expect([...phases].sort()).toEqual(["create", "queue", "removal", "run", "start"])
    }
    const [okExecute, slowExecute] = [ok, slow].map(
      (run) =>
        received.find((s) => s.traceId === run.span.traceId && s.name === "hermes_sandbox.execute") as ReceivedSpan
    )
    expect(okExecute?.attributes["hermes_sandbox.outcome"]).toBe("ok")
    expect(okExecute?.status.code).toBe(SpanStatusCode.OK)
    expect(slowExecute?.attributes["hermes_sandbox.outcome"]).toBe("timeout")
    expect(slowExecute?.status.code).toBe(SpanStatusCode.ERROR)
    const toolCall = received.filter((s) => s.name === "hermes_sandbox.tool_call")
    expect(toolCall.length).toBe(1)
    expect(toolCall[0]?.parentSpanId).toBe(okExecute?.spanId)
    expect(toolCall[0]?.attributes["hermes_sandbox.tool"]).toBe("add")
    expect(toolCall[0]?.attributes["hermes_sandbox.outcome"]).toBe("completed")
    // Nothing of ours outside the two traces (every span had its caller's parent).
    expect(received.every((s) => s.traceId === ok.span.traceId || s.traceId === slow.span.traceId)).toBe(true)
  })
})
