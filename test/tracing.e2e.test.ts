/**
 * OpenTelemetry traces on the real engine (issue 31, item 2): with OTEL_EXPORTER_OTLP_ENDPOINT set,
 * the Promise facade exports over OTLP/HTTP (JSON) to a loopback receiver in this file (node:http,
 * the bodies read as the exporter's JSON protocol); each execution is one trace under the caller's
 * active OpenTelemetry span (the application's own tracer provider and context manager), with its
 * phase spans and a tool call's span; a timeout carries its outcome and an error status.
 * One executor for the file.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { context, type Span, SpanStatusCode } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
  readonly status?: { readonly code?: number; readonly message?: string }
}
interface OtlpTraces {
  readonly resourceSpans?: ReadonlyArray<{
    readonly resource?: { readonly attributes?: OtlpSpan["attributes"] }
    readonly scopeSpans?: ReadonlyArray<{ readonly spans?: ReadonlyArray<OtlpSpan> }>
  }>
}

const attr = (s: OtlpSpan, key: string): unknown => {
  const v = s.attributes?.find((a) => a.key === key)?.value
  return v === undefined ? undefined : Object.values(v)[0]
}

describe("OpenTelemetry traces over OTLP/HTTP", () => {
  const received: Array<OtlpSpan> = []
  const contentTypes = new Set<string>()
  let server: Server
  let executor: SandboxExecutor
  // The application's own tracing: its provider (exporting nowhere) and context manager.
  const contextManager = new AsyncLocalStorageContextManager().enable()
  const agent = new BasicTracerProvider().getTracer("agent")
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT

  beforeAll(async () => {
    context.setGlobalContextManager(contextManager)
    server = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        contentTypes.add(`${req.method} ${req.url} ${req.headers["content-type"]}`)
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpTraces
        for (const r of body.resourceSpans ?? [])
          for (const s of r.scopeSpans ?? []) for (const span of s.spans ?? []) received.push(span)
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    executor = await createExecutor({ timeoutMs: 20_000, awaitRemoval: false })
  })

  afterAll(async () => {
    await executor?.close()
    if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved
    await new Promise<void>((resolve) => server.close(() => resolve()))
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

    expect([...contentTypes]).toEqual(["POST /v1/traces application/json"])
    for (const run of [ok, slow]) {
      const inTrace = received.filter((s) => s.traceId === run.span.traceId)
      const execute = inTrace.filter((s) => s.name === "hermes_sandbox.execute")
      expect(execute.length).toBe(1)
      const e = execute[0] as OtlpSpan
      expect(e.parentSpanId).toBe(run.span.spanId)
      expect(attr(e, "hermes_sandbox.execution_id")).toBe(run.result.executionId)
      expect(attr(e, "hermes_sandbox.container_name")).toBe(run.result.containerName)
      expect(attr(e, "hermes_sandbox.language")).toBe("python")
      const phases = inTrace
        .filter((s) => s.name.startsWith("hermes_sandbox.phase.") && s.parentSpanId === e.spanId)
        .map((s) => attr(s, "hermes_sandbox.phase"))
      expect([...phases].sort()).toEqual(["create", "queue", "removal", "run", "start"])
    }
    const [okExecute, slowExecute] = [ok, slow].map(
      (run) => received.find((s) => s.traceId === run.span.traceId && s.name === "hermes_sandbox.execute") as OtlpSpan
    )
    expect(attr(okExecute as OtlpSpan, "hermes_sandbox.outcome")).toBe("ok")
    expect(okExecute?.status?.code).toBe(SpanStatusCode.OK)
    expect(attr(slowExecute as OtlpSpan, "hermes_sandbox.outcome")).toBe("timeout")
    expect(slowExecute?.status?.code).toBe(SpanStatusCode.ERROR)
    const toolCall = received.filter((s) => s.name === "hermes_sandbox.tool_call")
    expect(toolCall.length).toBe(1)
    expect(toolCall[0]?.parentSpanId).toBe(okExecute?.spanId)
    expect(attr(toolCall[0] as OtlpSpan, "hermes_sandbox.tool")).toBe("add")
    expect(attr(toolCall[0] as OtlpSpan, "hermes_sandbox.outcome")).toBe("completed")
    // Nothing of ours outside the two traces (every span had its caller's parent).
    expect(received.every((s) => s.traceId === ok.span.traceId || s.traceId === slow.span.traceId)).toBe(true)
  })
})
