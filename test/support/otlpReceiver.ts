/**
 * A loopback OTLP/HTTP traces receiver for the tracing tests: a node:http server on 127.0.0.1 that
 * decodes each POST /v1/traces as the official packages define it — protobuf (`application/x-protobuf`,
 * the specification's default) with the OTLP message types @opentelemetry/otlp-transformer 0.216
 * ships (its generated `ExportTraceServiceRequest`, the last release that carries them), JSON
 * (`application/json`) as the exporter's JSON protocol — into one flat shape per span.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
// The generated module (protobufjs static code): the message types, decode and toObject.
import * as generated from "@opentelemetry/otlp-transformer/build/src/generated/root.js"

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  /** "" when it has none. */
  readonly parentSpanId: string
  readonly name: string
  readonly attributes: Readonly<Record<string, unknown>>
  readonly status: { readonly code: number; readonly message: string }
  /** The resource's attributes (service.name, ...). */
  readonly resource: Readonly<Record<string, unknown>>
}

export interface ReceivedRequest {
  readonly contentType: string
  readonly path: string
  readonly spans: ReadonlyArray<ReceivedSpan>
}

export interface OtlpReceiver {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string
  readonly requests: Array<ReceivedRequest>
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** Resolves once `ready` holds on what was received (checked at each request), or rejects after `timeoutMs`. */
  readonly until: (ready: (spans: ReadonlyArray<ReceivedSpan>) => boolean, timeoutMs?: number) => Promise<void>
  readonly close: () => Promise<void>
}

interface KeyValue {
  readonly key: string
  readonly value?: Readonly<Record<string, unknown>>
}
interface OtlpRequest {
  readonly resourceSpans?: ReadonlyArray<{
    readonly resource?: { readonly attributes?: ReadonlyArray<KeyValue> }
    readonly scopeSpans?: ReadonlyArray<{
      readonly spans?: ReadonlyArray<{
        readonly traceId?: string
        readonly spanId?: string
        readonly parentSpanId?: string
        readonly name?: string
        readonly attributes?: ReadonlyArray<KeyValue>
        readonly status?: { readonly code?: number; readonly message?: string }
      }>
    }>
  }>
}

const ExportTraceServiceRequest = (
  generated as unknown as {
    readonly opentelemetry: {
      readonly proto: {
        readonly collector: {
          readonly trace: {
            readonly v1: {
              readonly ExportTraceServiceRequest: {
                decode(bytes: Uint8Array): unknown
                toObject(message: unknown, options: Record<string, unknown>): OtlpRequest
              }
            }
          }
        }
      }
    }
  }
).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest

const attributes = (kvs: ReadonlyArray<KeyValue> | undefined): Record<string, unknown> =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, kv.value === undefined ? undefined : Object.values(kv.value)[0]]))

/** Protobuf ids come as base64 (toObject's bytes: String), JSON ids as hex: hex for both. */
const flatten = (request: OtlpRequest, id: (s: string | undefined) => string): Array<ReceivedSpan> =>
  (request.resourceSpans ?? []).flatMap((r) =>
    (r.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((s) => ({
        traceId: id(s.traceId),
        spanId: id(s.spanId),
        parentSpanId: id(s.parentSpanId),
        name: s.name ?? "",
        attributes: attributes(s.attributes),
        status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
        resource: attributes(r.resource?.attributes)
      }))
    )
  )

const decode = (contentType: string, body: Buffer): Array<ReceivedSpan> => {
  if (contentType.startsWith("application/x-protobuf")) {
    const message = ExportTraceServiceRequest.decode(body)
    const plain = ExportTraceServiceRequest.toObject(message, { longs: String, enums: Number, bytes: String })
    return flatten(plain, (b64) => Buffer.from(b64 ?? "", "base64").toString("hex"))
  }
  if (contentType.startsWith("application/json"))
    return flatten(JSON.parse(body.toString("utf8")) as OtlpRequest, (hex) => hex ?? "")
  throw new Error(`an OTLP request of an unexpected content type: ${contentType}`)
}

export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const requests: Array<ReceivedRequest> = []
  const waiters = new Set<() => void>()
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const contentType = req.headers["content-type"] ?? ""
      try {
        requests.push({
          contentType,
          path: `${req.method} ${req.url}`,
          spans: decode(contentType, Buffer.concat(chunks))
        })
        res.writeHead(200, { "content-type": contentType }).end()
      } catch (e) {
        res.writeHead(400).end(String(e))
      }
      for (const w of waiters) w()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const spans = () => requests.flatMap((r) => r.spans)
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    spans,
    until: (ready, timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!ready(spans())) return
          waiters.delete(check)
          clearTimeout(timer)
          resolve()
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`the OTLP receiver did not get the spans awaited within ${timeoutMs} ms`))
        }, timeoutMs)
        waiters.add(check)
        check()
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** Set `vars` (undefined: unset) for the length of `f`, then put the environment back as it was. */
export const withEnv = async <A>(
  vars: Readonly<Record<string, string | undefined>>,
  f: () => Promise<A>
): Promise<A> => {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]))
  const put = (values: Readonly<Record<string, string | undefined>>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
  put(vars)
  try {
    return await f()
  } finally {
    put(saved)
  }
}
