/**
 * The host's half of one run's tool calls. The supervisor relays each call the program makes over
 * its in-sandbox socket as keyed frames ('t' + 'a' arguments, 'b' too large, 'q' caller gone; see
 * RunnerProtocol), so a call reaches this module only if the supervisor took it from a caller:
 * nothing the program prints can pass for one, and the ids are the supervisor's. Here each call is
 * journaled (ToolCallRequested, then exactly one of ToolCallCompleted | ToolCallFailed |
 * ToolCallRefused), checked (known tool, arguments against its schema, the budget), served by its
 * handler under the per-call timeout, and answered on the supervisor's stdin.
 *
 * The run's deadline stays the authority: `settle`, run before the terminal event on every path
 * (an end, a timeout, an abort, the executor's close), interrupts every handler still running,
 * aborts its signal and waits for its ToolCallFailed, so the journal holds every call's outcome
 * before the run's end, and the sandbox's removal never waits for a handler.
 */
import { createHash } from "node:crypto"
import { Cause, Clock, Deferred, Effect, Either, Fiber, Runtime, type Scope } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import type { Language } from "../Language.js"
import { encodeToolReply, type ToolChannelHeader } from "../RunnerProtocol.js"
import type { SandboxError } from "../Errors.js"
import type { PlannedTool, ToolPlan } from "../Tools.js"
import { toolModules } from "../tools/stubs.js"
import { type ArgumentsInFlight, hostArgumentsInFlight } from "./ArgumentsInFlight.js"
import { decodeArguments } from "../tools/toolArguments.js"
import { FRAME } from "../RunnerProtocolTable.js"
import { annotate, spanned, type Traced } from "../internal/spans.js"
import { ATTRIBUTE, SpanName } from "../Tracing.js"

/** What SupervisedRun hands over from the frames; a string back is a protocol violation. */
export interface ToolFrames {
  readonly frame: (type: "t" | "b" | "q", bytes: Buffer) => string | undefined
  readonly argumentsChunk: (chunk: Uint8Array) => string | undefined
}

export interface ToolChannel extends ToolFrames {
  /** What the supervisor is told in the header: the bounds and the generated modules. */
  readonly header: ToolChannelHeader
  /** The supervisor's stdin, once the run has it: replies go there. */
  readonly start: (write: (data: Uint8Array) => Effect.Effect<void, SandboxError>) => Effect.Effect<void>
  /** Ends every call still being served (its handler's signal aborted, ToolCallFailed recorded). */
  readonly settle: Effect.Effect<void>
  /** Calls dispatched to a handler so far (refusals do not count). */
  readonly callsMade: () => number
  /**
   * Completed once the code made more refused calls than a run may (MAX_REFUSED_CALLS), or its calls
   * would write more to the journal than the run's budget (maxJournalEvents, maxJournalBytes): the
   * run must end.
   */
  readonly flooded: Deferred.Deferred<Flooded>
}

export interface Flooded {
  readonly reason: "tool-calls" | "journal-budget"
  readonly message: string
}

/**
 * Refusals cost the budget nothing, so without a bound a loop of refused calls would write two
 * journal events per call until the deadline (~1,400 calls/s here). Past this many the run ends.
 */
export const MAX_REFUSED_CALLS = 1000

const encoder = new TextEncoder()
const utf8 = new TextDecoder("utf-8", { fatal: false })
/** A tool error's message as the code sees it: the handler's words, bounded. */
const MAX_MESSAGE_CHARS = 8192
/**
 * What a call's outcome event may take at most (its message is clipped to MAX_MESSAGE_CHARS, up to
 * 3 UTF-8 bytes each, plus the tool's name and a few fields): reserved when the call is recorded,
 * so a call the journal took always gets its outcome.
 */
const OUTCOME_RESERVE_BYTES = 3 * MAX_MESSAGE_CHARS + 1024

/** A tool call span's outcome, by its journal event (the metrics' tool call outcomes). */
const TOOL_CALL_OUTCOME: Partial<Record<JournalEvent["type"], string>> = {
  ToolCallCompleted: "completed",
  ToolCallFailed: "failed",
  ToolCallRefused: "refused"
}
const CALL_HEAD = /^([1-9][0-9]{0,9}) (0|[1-9][0-9]{0,10}) /
/** What a request holds besides its arguments: a tool name of at most 64 bytes and a newline. */
const REQUEST_SLACK = 65

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** A thrown value's message, never its stack. */
export const errorMessage = (error: unknown): string => {
  const text =
    error instanceof Error
      ? error.message
      : typeof error === "string"
        ? error
        : typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string"
          ? (error as { message: string }).message
          : (() => {
              try {
                return JSON.stringify(error) ?? String(error)
              } catch {
                return String(error)
              }
            })()
  return clipMessage(text === "" ? "the tool failed without a message" : text)
}

/** Every message the host sends the code and records (a handler's, a refusal's): at most MAX_MESSAGE_CHARS. */
export const clipMessage = (message: string): string =>
  message.length > MAX_MESSAGE_CHARS
    ? `${message.slice(0, MAX_MESSAGE_CHARS)}… (message cut at ${MAX_MESSAGE_CHARS} characters)`
    : message

/** The handler's outcome as an Effect, whatever it returned: a value, a Promise or an Effect. */
const invoke = (
  planned: PlannedTool,
  args: unknown,
  context: Parameters<PlannedTool["tool"]["handler"]>[1]
): Effect.Effect<unknown, unknown> =>
  Effect.suspend(() => {
    let out: unknown
    try {
      out = planned.tool.handler(args, context)
    } catch (error) {
      return Effect.fail(error)
    }
    if (Effect.isEffect(out)) return out as Effect.Effect<unknown, unknown>
    if (typeof out === "object" && out !== null && typeof (out as PromiseLike<unknown>).then === "function") {
      return Effect.tryPromise({ try: () => Promise.resolve(out), catch: (error) => error })
    }
    return Effect.succeed(out)
  })

type Outcome =
  | { readonly _tag: "Result"; readonly json: Uint8Array }
  | { readonly _tag: "Failed"; readonly reason: "error" | "timed-out" | "result-too-large"; readonly message: string }

export const make = (input: {
  readonly plan: ToolPlan
  readonly language: Language
  readonly executionId: string
  readonly append: (event: JournalEvent) => Effect.Effect<unknown, JournalError>
  /** The bound on arguments held across runs (default: the process's, ArgumentsInFlight.ts). */
  readonly inFlight?: ArgumentsInFlight
  /** What the run's audit trail takes of its journal budget first (recordCode: internal/auditTrail.ts). */
  readonly reserve?: { readonly events: number; readonly bytes: number } | undefined
}): Effect.Effect<ToolChannel, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { plan, executionId } = input
    const limits = plan.limits
    const runtime = yield* Effect.runtime<never>()
    const serving = new Map<number, Fiber.RuntimeFiber<void, never>>()
    const callers = new Map<number, AbortController>()
    let write: ((data: Uint8Array) => Effect.Effect<void, SandboxError>) | undefined
    let lastId = 0
    let made = 0
    let refused = 0
    let settled = false
    const flooded = yield* Deferred.make<Flooded>()
    const endRun = (why: Flooded) => Deferred.succeed(flooded, why)
    // The run's journal budget: what its calls have written (an outcome's reserve counted at the
    // request), after the audit trail's share.
    let journalEvents = input.reserve?.events ?? 0
    let journalBytes = input.reserve?.bytes ?? 0
    const dataBytes = (event: JournalEvent): number => {
      try {
        return Buffer.byteLength(JSON.stringify(event.data) ?? "", "utf8")
      } catch {
        return Number.POSITIVE_INFINITY // not encodable: it could not be written anyway
      }
    }
    const inFlight = input.inFlight ?? hostArgumentsInFlight
    // A call whose arguments are arriving; over maxArgumentBytes, or past the host's bound on what
    // it holds (busy), they are counted, not kept.
    let pending:
      | {
          id: number
          tool: string
          expected: number
          chunks: Array<Uint8Array> | undefined
          got: number
          busy: boolean
        }
      | undefined

    // A record that cannot be written (a journal error, or a defect while encoding it) never takes
    // the call's answer or its other records with it.
    const append = (event: JournalEvent) =>
      input.append(event).pipe(
        Effect.ignore,
        Effect.catchAllDefect(() => Effect.void)
      )
    // Each call's span while it is served (only with a tracer: internal/spans.ts).
    const traces = new Map<number, Traced>()
    /** A call's outcome: within what its request reserved; the budget then counts what it took. */
    const appendOutcome = (event: JournalEvent) =>
      Effect.suspend(() => {
        if (traces.size > 0 && "callId" in event.data && typeof event.data.callId === "number")
          annotate(traces.get(event.data.callId), ATTRIBUTE.outcome, TOOL_CALL_OUTCOME[event.type] ?? "failed")
        journalBytes += Math.min(dataBytes(event), OUTCOME_RESERVE_BYTES) - OUTCOME_RESERVE_BYTES
        return append(event)
      })
    /**
     * A call's request, if the budget has room for it and its outcome (reserved now); else the run
     * ends (journal-budget) and the call is not served: false.
     */
    const appendRequest = (event: JournalEvent) =>
      Effect.suspend(() => {
        const bytes = dataBytes(event) + OUTCOME_RESERVE_BYTES
        if (journalEvents + 2 > limits.maxJournalEvents || journalBytes + bytes > limits.maxJournalBytes) {
          settled = true
          return endRun({
            reason: "journal-budget",
            message: `the code's tool calls would write more to the journal than a run may (${limits.maxJournalEvents} events, ${limits.maxJournalBytes} bytes: maxJournalEvents, maxJournalBytes; ${journalEvents} events and ${journalBytes} bytes so far); the run was ended`
          }).pipe(Effect.as(false))
        }
        journalEvents += 2
        journalBytes += bytes
        return append(event).pipe(Effect.as(true))
      })
    const reply = (id: number, status: "0" | "1" | "2", payload: Uint8Array) =>
      Effect.suspend(() => (write === undefined ? Effect.void : write(encodeToolReply(id, status, payload)))).pipe(
        Effect.ignore
      )

    // Interruptible only while the handler runs: every call that was requested gets its outcome.
    const serve = (
      id: number,
      tool: string,
      args: Uint8Array | undefined,
      argumentBytes: number,
      busy: boolean
    ): Effect.Effect<void> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const startedAt = yield* Clock.currentTimeMillis
          // Bounded in depth and values before it is parsed; prototype keys dropped (toolArguments.ts).
          const decoded = args === undefined ? undefined : decodeArguments(args, tool)
          const recorded = yield* appendRequest({
            type: "ToolCallRequested",
            data: {
              callId: id,
              tool,
              argumentBytes,
              ...(args === undefined ? {} : { argumentsSha256: sha256(args) }),
              ...(plan.recordArguments && args !== undefined
                ? { arguments: decoded?._tag === "Decoded" ? decoded.value : utf8.decode(args) }
                : {})
            }
          })
          // Over the journal's budget: the run is ending; the call gets no answer but the run's end.
          if (!recorded) return
          const refuse = (
            reason: "unknown-tool" | "invalid-arguments" | "budget-exhausted" | "arguments-too-large" | "host-busy",
            text: string
          ) => {
            // A validator's words can carry the code's own keys: bounded like every other message.
            const message = clipMessage(text)
            return appendOutcome({ type: "ToolCallRefused", data: { callId: id, tool, reason, message } }).pipe(
              Effect.zipRight(reply(id, "2", encoder.encode(message))),
              Effect.zipRight(
                Effect.suspend(() =>
                  ++refused >= MAX_REFUSED_CALLS
                    ? endRun({
                        reason: "tool-calls",
                        message: `the code made ${refused} refused tool calls (at most ${MAX_REFUSED_CALLS} per run); the run was ended`
                      }).pipe(Effect.zipRight(Effect.sync(() => void (settled = true))))
                    : Effect.void
                )
              )
            )
          }
          if (busy) {
            return yield* refuse(
              "host-busy",
              `the host holds ${inFlight.bytes} bytes of tool arguments in flight over all its runs (at most ${inFlight.maxBytes}); this call of ${argumentBytes} bytes was not taken: try again`
            )
          }
          if (args === undefined) {
            return yield* refuse(
              "arguments-too-large",
              `the arguments of ${argumentBytes} bytes exceed the limit of ${limits.maxArgumentBytes} bytes (maxArgumentBytes)`
            )
          }
          const planned = plan.tools.get(tool)
          if (planned === undefined) {
            const known = [...plan.tools.keys()].join(", ")
            return yield* refuse(
              "unknown-tool",
              `no tool named ${JSON.stringify(tool.slice(0, 80))} is available to this run (tools: ${known})`
            )
          }
          if (decoded === undefined || decoded._tag === "Refused")
            return yield* refuse("invalid-arguments", decoded?.message ?? `the arguments of ${tool} are missing`)
          const value = decoded.value
          if (typeof value !== "object" || value === null || Array.isArray(value)) {
            return yield* refuse("invalid-arguments", `the arguments of ${tool} must be one JSON object`)
          }
          const checked = planned.check(value)
          if (Either.isLeft(checked))
            return yield* refuse("invalid-arguments", `invalid arguments for ${tool}: ${checked.left}`)
          if (made >= limits.maxCalls) {
            return yield* refuse(
              "budget-exhausted",
              `tool call limit reached (${limits.maxCalls} calls per execution); no more tool calls are served in this run`
            )
          }
          made++
          const controller = new AbortController()
          callers.set(id, controller)
          // The whole serving is interruptible (an interruption that came during the uninterruptible
          // steps before takes effect here, before the handler starts); its outcome is recorded either way.
          const outcome: Outcome = yield* restore(
            invoke(planned, checked.right, { signal: controller.signal, executionId, callId: id, tool }).pipe(
              Effect.map((result): Outcome => {
                let text: string | undefined
                try {
                  text = JSON.stringify(result === undefined ? null : result)
                } catch (error) {
                  return {
                    _tag: "Failed",
                    reason: "error",
                    message: `the result of ${tool} is not JSON (${errorMessage(error)})`
                  }
                }
                const json = encoder.encode(text ?? "null")
                return json.byteLength > limits.maxResultBytes
                  ? {
                      _tag: "Failed",
                      reason: "result-too-large",
                      message: `the result of ${tool} (${json.byteLength} bytes) exceeds the limit of ${limits.maxResultBytes} bytes (maxResultBytes)`
                    }
                  : { _tag: "Result", json }
              }),
              // Any cause, a handler's own interruption (Effect.interrupt) included, is a tool error; an
              // interruption from outside (settle, a caller gone) is not caught here and ends the fiber.
              Effect.catchAllCause((cause) =>
                Effect.succeed<Outcome>({
                  _tag: "Failed",
                  reason: "error",
                  message: Cause.isInterruptedOnly(cause)
                    ? `${tool} was interrupted`
                    : errorMessage(Cause.squash(cause))
                })
              ),
              Effect.timeoutTo({
                duration: limits.callTimeoutMs,
                onSuccess: (o) => o,
                onTimeout: (): Outcome => ({
                  _tag: "Failed",
                  reason: "timed-out",
                  message: `${tool} did not answer within ${limits.callTimeoutMs} ms (callTimeoutMs)`
                })
              })
            )
          ).pipe(
            Effect.onInterrupt(() =>
              Effect.gen(function* () {
                const reason = controller.signal.aborted
                  ? String(controller.signal.reason)
                  : "the run ended before the call was answered"
                controller.abort(reason)
                callers.delete(id)
                const now = yield* Clock.currentTimeMillis
                yield* appendOutcome({
                  type: "ToolCallFailed",
                  data: { callId: id, tool, durationMs: now - startedAt, reason: "cancelled", message: reason }
                })
              })
            )
          )
          callers.delete(id)
          if (outcome._tag === "Failed" && outcome.reason === "timed-out") controller.abort(outcome.message)
          const durationMs = (yield* Clock.currentTimeMillis) - startedAt
          if (outcome._tag === "Result") {
            // The answer first: the code waits for it; the journal's record follows at once.
            yield* reply(id, "0", outcome.json)
            yield* appendOutcome({
              type: "ToolCallCompleted",
              data: { callId: id, tool, durationMs, resultBytes: outcome.json.byteLength }
            })
          } else {
            yield* reply(id, "1", encoder.encode(outcome.message))
            yield* appendOutcome({
              type: "ToolCallFailed",
              data: { callId: id, tool, durationMs, reason: outcome.reason, message: outcome.message }
            })
          }
        })
      )

    /** `held`: bytes this call holds of the host's bound, released when its serving ends. */
    const dispatch = (
      id: number,
      tool: string,
      args: Uint8Array | undefined,
      argumentBytes: number,
      held = 0,
      busy = false
    ) => {
      if (settled) return inFlight.release(held)
      const traced = spanned(
        SpanName.toolCall,
        // A name the code chose is an attribute only when it is one of the run's tools (Tracing.ts).
        { [ATTRIBUTE.executionId]: executionId, [ATTRIBUTE.tool]: plan.tools.has(tool) ? tool : "other" },
        (t) => {
          if (t !== undefined) traces.set(id, t)
          return serve(id, tool, args, argumentBytes, busy).pipe(Effect.ensuring(Effect.sync(() => traces.delete(id))))
        },
        (span) => span.attributes.get(ATTRIBUTE.outcome) as string | undefined
      )
      const fiber = Runtime.runFork(runtime)(traced)
      serving.set(id, fiber)
      fiber.addObserver(() => {
        serving.delete(id)
        inFlight.release(held)
      })
    }

    const frame: ToolFrames["frame"] = (type, bytes) => {
      const text = bytes.toString("latin1")
      if (type === FRAME.toolCallerGone) {
        // The caller went away (its process ended): its handler is cancelled; the supervisor drops the reply.
        if (!/^[1-9][0-9]{0,9}$/.test(text) || Number(text) > lastId)
          return `a 'q' frame for no call (${JSON.stringify(text.slice(0, 40))})`
        const id = Number(text)
        const fiber = serving.get(id)
        if (fiber !== undefined) {
          callers.get(id)?.abort("the caller went away before the call was answered")
          Runtime.runFork(runtime)(Fiber.interrupt(fiber))
        }
        return undefined
      }
      if (pending !== undefined) return `a tool call frame '${type}' inside call ${pending.id}'s arguments`
      const m = CALL_HEAD.exec(text)
      if (m === null) return `a tool call frame '${type}' that is not the supervisor's`
      const id = Number(m[1])
      const size = Number(m[2])
      if (id !== lastId + 1) return `tool call ${id} after call ${lastId}`
      lastId = id
      const tool = utf8.decode(bytes.subarray(m[0].length))
      if (type === FRAME.toolTooLarge) {
        if (size <= limits.maxArgumentBytes) return `call ${id} refused as too large at ${size} bytes`
        dispatch(id, tool, undefined, size)
        return undefined
      }
      if (size > limits.maxArgumentBytes + REQUEST_SLACK) return `call ${id} announces ${size} bytes of arguments`
      if (size === 0) {
        dispatch(id, tool, new Uint8Array(0), 0)
        return undefined
      }
      // The supervisor's bound is the whole request (name, newline, arguments): the arguments' own is here.
      const tooLarge = size > limits.maxArgumentBytes
      const busy = !tooLarge && !inFlight.tryHold(size)
      pending = { id, tool, expected: size, chunks: tooLarge || busy ? undefined : [], got: 0, busy }
      return undefined
    }

    const argumentsChunk: ToolFrames["argumentsChunk"] = (chunk) => {
      if (pending === undefined) return "tool call arguments outside a call"
      pending.got += chunk.byteLength
      if (pending.got > pending.expected)
        return `call ${pending.id}'s arguments run past the ${pending.expected} bytes announced`
      pending.chunks?.push(Uint8Array.from(chunk))
      if (pending.got === pending.expected) {
        const { id, tool, chunks, expected, busy } = pending
        pending = undefined
        dispatch(
          id,
          tool,
          chunks === undefined ? undefined : Buffer.concat(chunks),
          expected,
          chunks === undefined ? 0 : expected,
          busy
        )
      }
      return undefined
    }

    const settle = Effect.suspend(() => {
      settled = true
      // A call whose arguments were still arriving gives its share back; the rest of its bytes are
      // counted, not kept (it will not be served).
      if (pending?.chunks !== undefined) {
        inFlight.release(pending.expected)
        pending.chunks = undefined
      }
      return Fiber.interruptAll([...serving.values()])
    })
    yield* Effect.addFinalizer(() => settle)

    const modules = toolModules(
      input.language,
      [...plan.tools.values()].map((t) => t.spec)
    )
    return {
      header: {
        maxInFlight: limits.maxInFlight,
        // The name (at most 64 bytes, or longer: refused as unknown), the newline, the arguments.
        maxRequestBytes: limits.maxArgumentBytes + REQUEST_SLACK,
        // The payload is a result within maxResultBytes or a message.
        maxReplyBytes: Math.max(limits.maxResultBytes, 4 * MAX_MESSAGE_CHARS + 1024),
        modules: modules.map(({ path, content }) => [path, encoder.encode(content)] as const)
      },
      start: (w) => Effect.sync(() => void (write = w)),
      settle,
      callsMade: () => made,
      flooded,
      frame,
      argumentsChunk
    }
  })
