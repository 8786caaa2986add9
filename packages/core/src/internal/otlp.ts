/**
 * The OpenTelemetry side of Tracing.ts, loaded by its dynamic import() only when an OTLP endpoint
 * is set: `@effect/opentelemetry`'s tracer over a tracer provider of this layer's own (never the
 * process's global one, which belongs to the application), a batch span processor (bounded queue:
 * spans past it are dropped, never held without bound) and the OTLP/HTTP exporter, which reads the
 * `OTEL_EXPORTER_OTLP_*` variables itself (endpoint, headers, timeout).
 */
import * as OtelApi from "@opentelemetry/api"
import * as Resource from "@effect/opentelemetry/Resource"
import * as EffectOtel from "@effect/opentelemetry/Tracer"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, type Tracer } from "effect"
import type { TracingOptions } from "../Tracing.js"

/** How long the layer's end may take to flush what is pending. */
const SHUTDOWN_TIMEOUT_MS = 5_000

const provider = Layer.scoped(
  EffectOtel.OtelTracerProvider,
  Effect.flatMap(Resource.Resource, (resource) =>
    Effect.acquireRelease(
      Effect.sync(
        () => new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] })
      ),
      (p) =>
        Effect.promise(() => p.forceFlush().then(() => p.shutdown())).pipe(
          Effect.ignoreLogged,
          Effect.interruptible,
          Effect.timeoutOption(SHUTDOWN_TIMEOUT_MS)
        )
    )
  )
)

/** Effect's tracer exporting over OTLP/HTTP (JSON) to the configured endpoint. */
export const layer = (options: TracingOptions): Layer.Layer<never> =>
  EffectOtel.layer.pipe(
    Layer.provide(provider),
    Layer.provide(
      Resource.layer({
        serviceName: options.serviceName ?? (process.env.OTEL_SERVICE_NAME?.trim() || "hermes-sandbox")
      })
    ),
    Layer.discard
  )

/** The caller's active OpenTelemetry span (context.active()), as an Effect parent span. */
export const activeParentSpan = (): Tracer.ExternalSpan | undefined => {
  const span = OtelApi.trace.getSpan(OtelApi.context.active())
  if (span === undefined) return undefined
  const c = span.spanContext()
  return OtelApi.isSpanContextValid(c)
    ? EffectOtel.makeExternalSpan({ traceId: c.traceId, spanId: c.spanId, traceFlags: c.traceFlags })
    : undefined
}
