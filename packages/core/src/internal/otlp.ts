/**
 * The OpenTelemetry side of Tracing.ts, loaded by its dynamic import() only when traces are asked
 * for: `@effect/opentelemetry`'s tracer over ONE tracer provider per process (never the global
 * one, which belongs to the application), shared by every layer that installs tracing and counted:
 * made by the first, flushed when any one ends (its spans are out when its close returns), shut
 * down when the last ends. A batch span processor (bounded queue: spans past it are dropped, never
 * held without bound) and the OTLP/HTTP exporter of the protocol asked for (Tracing.exportProtocol),
 * which reads the `OTEL_EXPORTER_OTLP_*` variables itself (endpoint, headers, timeout, compression).
 * The resource: service.name "hermes-sandbox", under what @opentelemetry/resources' envDetector
 * reads (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
 */
import * as OtelApi from "@opentelemetry/api"
import * as Resource from "@effect/opentelemetry/Resource"
import * as EffectOtel from "@effect/opentelemetry/Tracer"
import {
  defaultResource,
  detectResources,
  envDetector,
  type Resource as OtelResource,
  resourceFromAttributes
} from "@opentelemetry/resources"
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions"
import { Effect, Layer, type Tracer } from "effect"
import type { ExportProtocol } from "../Tracing.js"

/** How long a layer's end may take to flush what is pending (and, for the last, shut down). */
const SHUTDOWN_TIMEOUT_MS = 5_000

/** The default service.name; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it. */
const SERVICE_NAME = "hermes-sandbox"

const exporterFor = async (protocol: ExportProtocol): Promise<SpanExporter> =>
  protocol === "http/json"
    ? new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter()
    : new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter()

interface Shared {
  readonly ready: Promise<{ readonly provider: BasicTracerProvider; readonly resource: OtelResource }>
  users: number
}
/** The process's provider while some layer uses it (bookkeeping synchronous: no race between an end and a start). */
let shared: Shared | undefined

const make = (protocol: ExportProtocol): Shared["ready"] =>
  exporterFor(protocol).then((exporter) => {
    const resource = defaultResource()
      .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: SERVICE_NAME }))
      .merge(detectResources({ detectors: [envDetector] }))
    return {
      provider: new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] }),
      resource
    }
  })

const bounded = (f: () => Promise<unknown>) =>
  Effect.promise(f).pipe(Effect.ignoreLogged, Effect.interruptible, Effect.timeoutOption(SHUTDOWN_TIMEOUT_MS))

const use = (protocol: ExportProtocol) =>
  Effect.acquireRelease(
    Effect.flatMap(
      Effect.sync(() => {
        shared ??= { ready: make(protocol), users: 0 }
        shared.users++
        return shared
      }),
      (s) => Effect.promise(() => s.ready).pipe(Effect.map((ready) => ({ s, ...ready })))
    ),
    ({ s, provider }) =>
      Effect.suspend(() => {
        s.users--
        if (s.users > 0) return bounded(() => provider.forceFlush())
        if (shared === s) shared = undefined
        return bounded(() => provider.forceFlush().then(() => provider.shutdown()))
      })
  )

/** Effect's tracer over the process's one provider, exporting over OTLP/HTTP with `protocol`. */
export const layer = (protocol: ExportProtocol): Layer.Layer<never> =>
  Layer.unwrapScoped(
    Effect.map(use(protocol), ({ provider, resource }) =>
      EffectOtel.layer.pipe(
        Layer.provide(Layer.succeed(EffectOtel.OtelTracerProvider, provider)),
        Layer.provide(Layer.succeed(Resource.Resource, resource))
      )
    )
  ).pipe(Layer.discard)

/** The caller's active OpenTelemetry span (context.active()), as an Effect parent span. */
export const activeParentSpan = (): Tracer.ExternalSpan | undefined => {
  const span = OtelApi.trace.getSpan(OtelApi.context.active())
  if (span === undefined) return undefined
  const c = span.spanContext()
  return OtelApi.isSpanContextValid(c)
    ? EffectOtel.makeExternalSpan({ traceId: c.traceId, spanId: c.spanId, traceFlags: c.traceFlags })
    : undefined
}
