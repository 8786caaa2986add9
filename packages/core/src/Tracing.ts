/**
 * OpenTelemetry traces of an executor and its sessions service, through Effect's tracing: every
 * span is an Effect span (`Effect.makeSpan` and the tracer in effect), so an Effect program that
 * provides its own tracer (`@effect/opentelemetry`'s `NodeSdk.layer`, or any `Layer.setTracer`)
 * gets them, under its own spans.
 *
 * - `hermes_sandbox.execute`: one per `executeCode`, from the call to its result (or error).
 *   Children: one span per phase, `hermes_sandbox.phase.<phase>` (queue, create or claim, start,
 *   run, collect, removal: the phases of `hermes_sandbox_execution_phase_seconds`, from the same
 *   projection, Metrics.ts, with the journal's timestamps; removal usually ends after the result was
 *   returned), and `hermes_sandbox.tool_call` per tool call of the sandboxed code.
 * - `hermes_sandbox.session_call`: one per session call (run, runCode, a cell), with its tool calls.
 * - Attributes (all prefixed `hermes_sandbox.`, ATTRIBUTE): execution_id, executor_id, session_id,
 *   container_name, language, outcome (the metrics' outcomes: ok, error, oom, timeout, interrupted,
 *   failed; a tool call's: completed, failed, refused), phase, tool. A span whose outcome is not ok
 *   ends with an error status; a request refused before it was recorded (invalid, queue full, the
 *   executor closed) has no outcome and an error status carrying its error.
 *
 * Bounds: nothing the sandboxed code chooses becomes an attribute except a tool's name, and that only
 * when it is one of the run's configured tools ("other" otherwise); every string attribute, the
 * status message and the error's text are cut at MAX_ATTRIBUTE_CHARS.
 *
 * Export: `layer()` installs an OTLP/HTTP (JSON) exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`), unless a
 * tracer other than Effect's built-in one is already in effect (yours wins). Otherwise it is empty,
 * loads nothing, and no span is made at all: with Effect's built-in tracer (which exports nowhere)
 * the executor skips its spans. The OpenTelemetry packages are loaded with a dynamic import() only
 * when the endpoint is set. The layer's end flushes what is pending and shuts the exporter down.
 * The executor layers (DockerExecutor, KubernetesExecutor, ExecutorWithSessions), the Promise
 * facades and the CLI's `run` and `mcp` install it.
 *
 * Parenting: the caller's span is the parent, in Effect (the parent span in the caller's context)
 * and through the Promise facades (the active `@opentelemetry/api` span at the call:
 * `activeParentSpan`).
 */
import { Effect, Layer, type Tracer } from "effect"

/** Every attribute's prefix. */
export const ATTRIBUTE_PREFIX = "hermes_sandbox."

/** The spans' names. */
export const SpanName = {
  execute: "hermes_sandbox.execute",
  sessionCall: "hermes_sandbox.session_call",
  toolCall: "hermes_sandbox.tool_call",
  /** `hermes_sandbox.phase.queue`, `.create`, `.claim`, `.start`, `.run`, `.collect`, `.removal`. */
  phasePrefix: "hermes_sandbox.phase."
} as const

/** The attributes' names. */
export const ATTRIBUTE = {
  executionId: "hermes_sandbox.execution_id",
  executorId: "hermes_sandbox.executor_id",
  sessionId: "hermes_sandbox.session_id",
  containerName: "hermes_sandbox.container_name",
  language: "hermes_sandbox.language",
  outcome: "hermes_sandbox.outcome",
  phase: "hermes_sandbox.phase",
  tool: "hermes_sandbox.tool"
} as const

/** The longest string attribute (and status message) a span carries; longer ones are cut. */
export const MAX_ATTRIBUTE_CHARS = 256

/** `s` within MAX_ATTRIBUTE_CHARS (cut, with an ellipsis). */
export const boundAttribute = (s: string): string =>
  s.length <= MAX_ATTRIBUTE_CHARS ? s : `${s.slice(0, MAX_ATTRIBUTE_CHARS - 1)}…`

const set = (v: string | undefined): boolean => v !== undefined && v.trim() !== ""

/** Whether the environment asks for traces: an OTLP endpoint is set and the SDK is not disabled. */
export const endpointConfigured = (env: NodeJS.ProcessEnv = process.env): boolean =>
  env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== "true" &&
  (set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_ENDPOINT))

export interface TracingOptions {
  /** The resource's `service.name` (default: `OTEL_SERVICE_NAME`, else "hermes-sandbox"). */
  readonly serviceName?: string
}

type Otlp = typeof import("./internal/otlp.js")
let loaded: Otlp | undefined
/**
 * The OpenTelemetry side, imported on first need only. import() of a module of this package's own:
 * in the CLI's CommonJS bundle esbuild turns it into a call that evaluates the bundled module
 * (the bundle's vm.Script has no import() on Node 20), in the packages' bundles it is a chunk of its
 * own whose imports of the OpenTelemetry packages load with it.
 */
const importOtlp = (): Promise<Otlp> =>
  loaded === undefined ? import("./internal/otlp.js").then((m) => (loaded = m)) : Promise.resolve(loaded)

/**
 * The OTLP/HTTP exporter as a tracer, when `endpointConfigured()`; else (or when a tracer other
 * than Effect's built-in one is already in effect) nothing. Built per call: one exporter per layer
 * built, flushed and shut down when its scope closes.
 */
export const layer = (options: TracingOptions = {}): Layer.Layer<never> =>
  endpointConfigured()
    ? Layer.unwrapScoped(
        Effect.gen(function* () {
          if (!(yield* isBuiltinTracer)) return Layer.empty
          const otlp = yield* Effect.promise(importOtlp)
          return otlp.layer(options)
        })
      )
    : Layer.empty

let builtin: Tracer.Tracer | undefined
/** Whether the tracer in effect is Effect's built-in one (it exports nowhere: spans would be wasted). */
export const isBuiltinTracer: Effect.Effect<boolean> = Effect.tracerWith((tracer) =>
  Effect.sync(() => {
    builtin ??= Effect.runSync(Effect.tracer)
    return tracer === builtin
  })
)

/**
 * The active `@opentelemetry/api` span of the caller, as an Effect parent span: what the Promise
 * facades give each call (read synchronously at the call). Undefined when no tracing layer loaded
 * the OpenTelemetry API in this process (nothing is loaded for it), or when no span is active.
 */
export const activeParentSpan = (): Tracer.ExternalSpan | undefined => loaded?.activeParentSpan()
