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
 * - `hermes_sandbox.session_call`: one per session operation, `hermes_sandbox.operation` naming it
 *   (run, run_code, cell, read_file, write_file, list_files, remove_file, patch_file, search_files,
 *   restart_kernel, spawn), with its tool calls (a call's, a cell's) as children. Its outcome: a
 *   call's terminal event's, a cell's status (ok, error, timeout, interrupted, crashed), else ok.
 * - Attributes (all prefixed `hermes_sandbox.`, ATTRIBUTE): execution_id, executor_id, session_id,
 *   container_name, language, outcome (the metrics' outcomes: ok, error, oom, timeout, interrupted,
 *   failed; a tool call's: completed, failed, refused), phase, tool, operation, cell_id. A span whose outcome is not ok
 *   ends with an error status; a request refused before it was recorded (invalid, queue full, the
 *   executor closed) has no outcome and an error status carrying its error.
 *
 * Bounds: nothing the sandboxed code chooses becomes an attribute except a tool's name, and that only
 * when it is one of the run's configured tools ("other" otherwise); every string attribute, the
 * status message and the error's text are cut at MAX_ATTRIBUTE_CHARS.
 *
 * Export: `layer()` installs an OTLP/HTTP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`, and
 * `OTEL_TRACES_EXPORTER`, if set, names otlp), unless a tracer other than Effect's built-in one is
 * already in effect (yours wins). Its encoding is `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`'s:
 * `http/protobuf` (the default, as the specification's) or `http/json`; another (`grpc`) turns
 * traces off with a warning. The resource is @opentelemetry/resources' env detection
 * (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) over service.name "hermes-sandbox". Otherwise
 * it is empty, loads nothing, and no span is made at all: with Effect's built-in tracer (which
 * exports nowhere) the executor skips its spans. The OpenTelemetry packages are loaded with a
 * dynamic import() only when traces are on. One tracer provider and exporter per process, shared
 * by every layer built (counted): each layer's end flushes what is pending, the last one's shuts
 * the exporter down. The executor layers (DockerExecutor, KubernetesExecutor,
 * ExecutorWithSessions), the Promise facades and the CLI's `run` and `mcp` install it.
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
  /** A session_call's operation: run, run_code, cell, read_file, write_file, list_files, remove_file, patch_file, search_files, restart_kernel, spawn. */
  operation: "hermes_sandbox.operation",
  /** A cell's id (its CellExecuted's). */
  cellId: "hermes_sandbox.cell_id",
  phase: "hermes_sandbox.phase",
  tool: "hermes_sandbox.tool"
} as const

/** The longest string attribute (and status message) a span carries; longer ones are cut. */
export const MAX_ATTRIBUTE_CHARS = 256

/** `s` within MAX_ATTRIBUTE_CHARS (cut, with an ellipsis). */
export const boundAttribute = (s: string): string =>
  s.length <= MAX_ATTRIBUTE_CHARS ? s : `${s.slice(0, MAX_ATTRIBUTE_CHARS - 1)}…`

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== ""

/** The OTLP/HTTP encodings this package exports with (`OTEL_EXPORTER_OTLP_PROTOCOL`). */
export type ExportProtocol = "http/protobuf" | "http/json"

/**
 * The protocol the environment asks for: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
 * `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf` (the specification's default for OTLP/HTTP).
 * Anything else (`grpc`, a typo) is unsupported: Left, with what was asked.
 */
export const exportProtocol = (
  env: NodeJS.ProcessEnv = process.env
): { readonly _tag: "Right"; readonly right: ExportProtocol } | { readonly _tag: "Left"; readonly left: string } => {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
  const asked = (set(traces) ? traces : set(env.OTEL_EXPORTER_OTLP_PROTOCOL) ? env.OTEL_EXPORTER_OTLP_PROTOCOL : "")
    .trim()
    .toLowerCase()
  if (asked === "" || asked === "http/protobuf") return { _tag: "Right", right: "http/protobuf" }
  if (asked === "http/json") return { _tag: "Right", right: "http/json" }
  return { _tag: "Left", left: asked }
}

/**
 * Whether the environment asks for traces: an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`
 * or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_SDK_DISABLED` is not `true`, and
 * `OTEL_TRACES_EXPORTER`, when set, names `otlp` (`none` turns traces off).
 */
export const endpointConfigured = (env: NodeJS.ProcessEnv = process.env): boolean => {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false
  const exporters = env.OTEL_TRACES_EXPORTER
  if (
    set(exporters) &&
    !exporters
      .split(",")
      .map((e) => e.trim().toLowerCase())
      .includes("otlp")
  )
    return false
  return set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_ENDPOINT)
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
 * than Effect's built-in one is already in effect, or the protocol asked for is not one of
 * ExportProtocol's: a warning then) nothing. Every layer built in a process shares one tracer
 * provider and exporter (counted): each layer's end flushes what is pending, the last one's shuts
 * the exporter down.
 */
export const layer = (): Layer.Layer<never> =>
  endpointConfigured()
    ? Layer.unwrapScoped(
        Effect.gen(function* () {
          if (!(yield* isBuiltinTracer)) return Layer.empty
          const protocol = exportProtocol()
          if (protocol._tag === "Left") {
            yield* Effect.logWarning(
              `OpenTelemetry traces are off: OTEL_EXPORTER_OTLP_PROTOCOL "${boundAttribute(protocol.left)}" is not supported (http/protobuf or http/json)`
            )
            return Layer.empty
          }
          const otlp = yield* Effect.promise(importOtlp)
          return otlp.layer(protocol.right)
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
