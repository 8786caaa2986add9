/**
 * OpenTelemetry traces through the Promise facade on the fake runtime (unit tier: no engine), over
 * real OTLP/HTTP to a loopback receiver (test/support/otlpReceiver.ts, decoding with the official
 * packages): the caller's active @opentelemetry/api span is the parent; the standard environment
 * (the protocol, http/protobuf by default; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES through
 * @opentelemetry/resources' env detection; OTEL_SDK_DISABLED; an unsupported protocol); and one
 * tracer provider and exporter per process, shared by two executors and kept until the last closes.
 */
import { context, type Span } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Tracing } from "@hermes-sandbox/core"
import { createFakeExecutor } from "@hermes-sandbox/docker/testing"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver, withEnv } from "./support/otlpReceiver.js"

const EXECUTE = "hermes_sandbox.execute"
const executorOf = (s: ReceivedSpan) => s.attributes["hermes_sandbox.executor_id"]

describe("traces through the Promise facade (fake runtime, OTLP/HTTP to a loopback receiver)", () => {
  let receiver: OtlpReceiver
  const contextManager = new AsyncLocalStorageContextManager()
  // The application's own tracing: its provider (exporting nowhere) and its context manager.
  const agent = new BasicTracerProvider().getTracer("agent")
  /** The variables of a case: the receiver's endpoint, the batch's timer far off (exports happen at close). */
  const env = (vars: Readonly<Record<string, string | undefined>> = {}) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined,
    OTEL_EXPORTER_OTLP_PROTOCOL: undefined,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: undefined,
    OTEL_SERVICE_NAME: undefined,
    OTEL_RESOURCE_ATTRIBUTES: undefined,
    OTEL_SDK_DISABLED: undefined,
    OTEL_TRACES_EXPORTER: undefined,
    OTEL_BSP_SCHEDULE_DELAY: "600000",
    ...vars
  })

  beforeAll(async () => {
    receiver = await startOtlpReceiver()
    context.setGlobalContextManager(contextManager.enable())
  })
  afterAll(async () => {
    context.disable()
    await receiver.close()
  })
  beforeEach(() => {
    receiver.requests.length = 0
  })

  it("the caller's active span is the parent; protobuf by default; the resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES", () =>
    withEnv(
      env({ OTEL_SERVICE_NAME: "agent-platform", OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test,team=infra" }),
      async () => {
        const executor = await createFakeExecutor()
        const step = await agent.startActiveSpan("agent step", async (span: Span) => {
          try {
            const result = await executor.executeCode({ language: "python", code: "print(1)" })
            return { span: span.spanContext(), result }
          } finally {
            span.end()
          }
        })
        // Outside any span: a root of its own.
        const alone = await executor.executeCode({ language: "python", code: "print(2)" })
        await executor.close()
        expect(receiver.requests.map((r) => `${r.path} ${r.contentType}`)).toEqual([
          "POST /v1/traces application/x-protobuf"
        ])
        const executes = receiver.spans().filter((s) => s.name === EXECUTE)
        const under = executes.find((s) => s.attributes["hermes_sandbox.execution_id"] === step.result.executionId)
        expect(under?.traceId).toBe(step.span.traceId)
        expect(under?.parentSpanId).toBe(step.span.spanId)
        const root = executes.find((s) => s.attributes["hermes_sandbox.execution_id"] === alone.executionId)
        expect(root?.parentSpanId).toBe("")
        expect(root?.traceId).not.toBe(step.span.traceId)
        expect(under?.resource).toMatchObject({
          "service.name": "agent-platform",
          "deployment.environment": "test",
          team: "infra",
          "telemetry.sdk.language": "nodejs"
        })
      }
    ))

  it("OTEL_EXPORTER_OTLP_PROTOCOL=http/json exports JSON; service.name defaults to hermes-sandbox", () =>
    withEnv(env({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }), async () => {
      const executor = await createFakeExecutor()
      const r = await executor.executeCode({ language: "bash", code: "true" })
      await executor.close()
      expect(receiver.requests.map((q) => q.contentType)).toEqual(["application/json"])
      const execute = receiver.spans().find((s) => s.name === EXECUTE)
      expect(execute?.attributes["hermes_sandbox.execution_id"]).toBe(r.executionId)
      expect(execute?.resource["service.name"]).toBe("hermes-sandbox")
    }))

  it("two executors in one process share one exporter: the first close flushes both; the second keeps exporting until it closes", () =>
    withEnv(env(), async () => {
      const a = await createFakeExecutor()
      const b = await createFakeExecutor()
      await a.executeCode({ language: "python", code: "print('a')" })
      await b.executeCode({ language: "python", code: "print('b')" })
      await a.close()
      // One exporter: closing A flushed the one batch, B's span with A's, in one request.
      expect(receiver.requests.length).toBe(1)
      expect(new Set(receiver.requests[0]?.spans.filter((s) => s.name === EXECUTE).map(executorOf))).toEqual(
        new Set([a.executorId, b.executorId])
      )
      // A's end did not shut it down: B's next span is exported at B's close.
      const later = await b.executeCode({ language: "python", code: "print('b again')" })
      await b.close()
      expect(receiver.requests.length).toBe(2)
      expect(
        receiver.requests[1]?.spans.some((s) => s.attributes["hermes_sandbox.execution_id"] === later.executionId)
      ).toBe(true)
      // The last close shut it down: a new executor gets a new one, and it exports.
      const c = await createFakeExecutor()
      const third = await c.executeCode({ language: "python", code: "print('c')" })
      await c.close()
      expect(receiver.spans().some((s) => s.attributes["hermes_sandbox.execution_id"] === third.executionId)).toBe(true)
    }))

  it("OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none or an unsupported protocol: nothing is exported", async () => {
    for (const vars of [
      { OTEL_SDK_DISABLED: "true" },
      { OTEL_TRACES_EXPORTER: "none" },
      { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }
    ]) {
      await withEnv(env(vars), async () => {
        const executor = await createFakeExecutor()
        await executor.executeCode({ language: "python", code: "print(1)" })
        await executor.close()
      })
    }
    expect(receiver.requests).toEqual([])
    expect(Tracing.endpointConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://x", OTEL_SDK_DISABLED: "TRUE" })).toBe(
      false
    )
    expect(Tracing.exportProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toEqual({ _tag: "Left", left: "grpc" })
    // The signal's own variable wins over the general one; unset, the specification's default.
    expect(
      Tracing.exportProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" })
    ).toEqual({ _tag: "Right", right: "http/json" })
    expect(Tracing.exportProtocol({})).toEqual({ _tag: "Right", right: "http/protobuf" })
  })
})
