/**
 * The fake runtime's programs: a test writes what the program does as its code's first line,
 * `#!fake {json}` (fakeProgram), and the fake reads it back from the code of a runner payload
 * (one-shot sandboxes, a session's runner mode) or from an exec's argv. One parser for
 * FakeRuntime and internal/fakeExec, which both depend on this module and not on each other;
 * so are the fake's stdin (FakeStdin) and its model of the supervisor's tool calls (fakeToolCalls).
 */
import { Data, Deferred, Effect, FiberId } from "effect"
import {
  type DecodedPayload,
  decodeRunnerPayload,
  encodeFrame,
  encodeRunnerPayload,
  MAX_FRAME_PAYLOAD,
  RUNNER_PROTOCOL_ERROR_EXIT,
  type ToolChannelHeader
} from "../RunnerProtocol.js"
import { LIMIT } from "../RunnerProtocolTable.js"

export interface FakeProgram {
  readonly stdout?: string
  /** Bytes for stdout after `stdout`, as base64 (any bytes: invalid UTF-8, NUL, binary). */
  readonly stdoutBase64?: string
  readonly stderr?: string
  readonly exitCode?: number
  readonly sleepMs?: number
  /** Never exits by itself (only a kill ends it). */
  readonly hang?: boolean
  /** Exits 137 with oomKilled set, as the kernel's OOM killer would. */
  readonly oom?: boolean
  /** Copies the program's stdin to stdout. */
  readonly echoStdin?: boolean
  /** one-shot only: prints this file of the request's files (under /workspace, or relative to it); missing: exit 1. */
  readonly printFile?: string
  /** exec only: change the working directory (kept by a session's shell). */
  readonly cd?: string
  /** exec only: export variables (kept by a session's shell). */
  readonly export?: Readonly<Record<string, string>>
  /** exec only: print the working directory and a newline. */
  readonly printCwd?: boolean
  /** exec only: print this variable's value (empty when unset) and a newline. */
  readonly printEnv?: string
  /** exec only, after sleepMs: write this file (absolute, or relative to the working directory; parents made). */
  readonly writeFile?: { readonly path: string; readonly content: string }
  /** exec only, after writeFile: print this file's content; missing: a message on stderr, exit 1. */
  readonly cat?: string
  /**
   * After the output above (one-shot, or a session's runner mode): call host tools through the
   * run's tool channel, as the supervisor relays a call, and print one stdout line per call in call
   * order, `<status> <payload>`: 0 and the result's JSON, 1 and a tool error's message, 2 and a
   * refusal's (without a tool channel: `1 this run has no tool channel …`, as the modules raise).
   */
  readonly toolCalls?: ReadonlyArray<FakeToolCall>
  /** The calls all at once (at most the header's calls at once in flight, as the supervisor takes them), not one after another. */
  readonly toolCallsConcurrently?: boolean
}

export interface FakeToolCall {
  readonly tool: string
  /** Sent as JSON text (JSON.stringify); `{}` without args or rawArgs. */
  readonly args?: unknown
  /** The argument bytes as they are (UTF-8), instead of args: e.g. text that is not JSON. */
  readonly rawArgs?: string
  /**
   * The whole request ("<tool>\n<arguments>") this many bytes: larger than the header's request
   * bytes it is relayed as too large ('b'); otherwise the arguments are padded with spaces.
   */
  readonly size?: number
}

const PREFIX = "#!fake "

/** The code a test sends to make the fake behave as `program`. */
export const fakeProgram = (program: FakeProgram): string => `${PREFIX}${JSON.stringify(program)}\n`

/** The program a text's first line describes, if it is a `#!fake` line. */
export const programFrom = (text: string): FakeProgram | undefined => {
  const first = text.split("\n", 1)[0] ?? ""
  return first.startsWith(PREFIX) ? (JSON.parse(first.slice(PREFIX.length)) as FakeProgram) : undefined
}

/** The program of an exec's argv: the last argument that is a `#!fake` line; none does nothing. */
export const lastProgramArg = (args: ReadonlyArray<string>): FakeProgram => {
  for (let i = args.length - 1; i >= 0; i--) {
    const p = programFrom(args[i]!)
    if (p !== undefined) return p
  }
  return {}
}

/** What the supervisor writes to stderr (and exits RUNNER_PROTOCOL_ERROR_EXIT with) for a payload that is not its protocol's. */
export const MALFORMED_PAYLOAD_MESSAGE = "hermes-run: stdin does not start with 'HERMES/2'\n"

const decoder = new TextDecoder()

/** Where the supervisor writes the generated tool modules (HERMES_CODE_DIR's default). */
export const FAKE_CODE_DIR = "/tmp/.hermes"

/** The header of a run with tools, and where the host's replies begin on the supervisor's stdin. */
export interface FakeToolHeader {
  readonly header: ToolChannelHeader
  readonly repliesAt: number
}

/**
 * A decoded payload's tool channel, if it has one; a string is what the supervisor would refuse it
 * with (on stderr, exit RUNNER_PROTOCOL_ERROR_EXIT).
 */
export const toolHeaderOf = (payload: Uint8Array, decoded: DecodedPayload): FakeToolHeader | undefined | string => {
  if (decoded.tools === undefined) return undefined
  if (decoded.key === undefined) return "hermes-run: tool calls need framed mode\n"
  // The header's length: decoding does not say where it ended, and the host writes it as
  // encodeRunnerPayload does (with tools, nothing of the program's follows `run`).
  const header = encodeRunnerPayload(decoded)
  if (Buffer.compare(header, payload.subarray(0, header.byteLength)) !== 0)
    return "fake: the header with tools is not as encodeRunnerPayload writes it\n"
  return { header: decoded.tools, repliesAt: header.byteLength }
}

/**
 * The supervisor's stdin holds a whole header with `tools`: it starts the program then, its stdin
 * staying open for the replies (without tools it reads to the end first).
 */
export const headerWithTools = (bytes: Uint8Array): boolean => decodeRunnerPayload(bytes)?.tools !== undefined

/**
 * The program in a runner payload's code, the program's stdin after it (or, with tools, in the
 * header), the run's frame key (framed mode) and its tool channel. A payload the supervisor would
 * refuse becomes a program that fails as it does.
 */
export const fromRunnerPayload = (
  payload: Uint8Array
): {
  readonly program: FakeProgram
  readonly stdin: Uint8Array
  readonly files: ReadonlyArray<readonly [string, Uint8Array]>
  readonly key?: string
  readonly collect?: ReadonlyArray<string>
  readonly tools?: FakeToolHeader
} => {
  const decoded = decodeRunnerPayload(payload)
  if (decoded === undefined)
    return {
      program: { stderr: MALFORMED_PAYLOAD_MESSAGE, exitCode: RUNNER_PROTOCOL_ERROR_EXIT },
      stdin: new Uint8Array(0),
      files: []
    }
  const tools = toolHeaderOf(payload, decoded)
  if (typeof tools === "string")
    return { program: { stderr: tools, exitCode: RUNNER_PROTOCOL_ERROR_EXIT }, stdin: new Uint8Array(0), files: [] }
  const program = programFrom(decoder.decode(decoded.code ?? new Uint8Array(0))) ?? {}
  const parsed = {
    program,
    stdin: decoded.stdin,
    files: decoded.files,
    ...(decoded.collect === undefined ? {} : { collect: decoded.collect.patterns }),
    ...(tools === undefined ? {} : { tools })
  }
  return decoded.key === undefined ? parsed : { ...parsed, key: decoded.key }
}

/**
 * The fake's model of the supervisor's collection: its only files are the request's, matched by
 * a simplified glob (`*`/`?` within a name, `**` across directories, a directory bringing its
 * subtree; `[...]` is taken literally; dotfile rules and the limits are the real supervisor's
 * business, tested on the engine).
 */
export const fakeCollect = (files: ReadonlyArray<readonly [string, Uint8Array]>, patterns: ReadonlyArray<string>) => {
  const toRegExp = (pattern: string) => {
    const body = pattern
      .split("/")
      .filter((s) => s !== "" && s !== ".")
      .map((seg) =>
        seg === "**"
          ? "(?:[^/]+/)*"
          : `${seg
              .replace(/[.+^${}()|[\]\\]/g, "\\$&")
              .replace(/\*/g, "[^/]*")
              .replace(/\?/g, "[^/]")}/`
      )
      .join("")
    return new RegExp(`^${body}`)
  }
  const res = patterns.map(toRegExp)
  return [...files]
    .filter(([path]) => res.some((re) => re.test(`${path}/`)))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Output in frames of the run's key, as the supervisor sends it: none longer than the protocol allows. */
export const outputFrames = (key: string, type: "o" | "e", bytes: Uint8Array): Array<Uint8Array> => {
  const frames: Array<Uint8Array> = []
  for (let at = 0; at < bytes.byteLength; at += MAX_FRAME_PAYLOAD)
    frames.push(encodeFrame(key, type, bytes.subarray(at, at + MAX_FRAME_PAYLOAD)))
  return frames
}

/**
 * A fake process's stdin: what was written so far and whether it ended. Each write or the end
 * completes the Deferred of the moment and puts a fresh one in its place, so a reader waits for
 * the next change, never polling with sleeps (which the TestClock would never advance).
 */
export interface FakeStdin {
  readonly write: (data: Uint8Array) => Effect.Effect<void>
  readonly end: Effect.Effect<void>
  /** Waits until `ready` makes something of the bytes written so far (and whether stdin ended). */
  readonly until: <A>(ready: (bytes: Uint8Array, ended: boolean) => A | undefined) => Effect.Effect<A>
}

export const makeFakeStdin = (): FakeStdin => {
  const chunks: Array<Uint8Array> = []
  let joined: Uint8Array | undefined
  let ended = false
  let changed = Deferred.unsafeMake<void>(FiberId.none)
  const signal = () => {
    const before = changed
    changed = Deferred.unsafeMake<void>(FiberId.none)
    return Deferred.succeed(before, undefined)
  }
  const bytes = () => (joined ??= Buffer.concat(chunks))
  return {
    write: (data) =>
      Effect.suspend(() => {
        if (ended) return Effect.void
        chunks.push(Uint8Array.from(data))
        joined = undefined
        return signal()
      }),
    end: Effect.suspend(() => {
      if (ended) return Effect.void
      ended = true
      return signal()
    }),
    until: <A>(ready: (bytes: Uint8Array, ended: boolean) => A | undefined) =>
      Effect.gen(function* () {
        for (;;) {
          // The Deferred is taken before looking: a change after the look completes it.
          const next = changed
          const value = ready(bytes(), ended)
          if (value !== undefined) return value
          yield* Deferred.await(next)
        }
      })
  }
}

/** The supervisor gave up on the host's replies (a malformed one, or stdin ending inside one): 'E', exit 126. */
export class FakeToolChannelBroken extends Data.TaggedError("FakeToolChannelBroken")<{ readonly message: string }> {}

/** What the supervisor's tool channel needs in the fake: the run's key and header, its stdin, its stdout. */
export interface FakeToolChannel {
  readonly key: string
  readonly tools: FakeToolHeader
  readonly stdin: FakeStdin
  /** The container's (or exec's) stdout: frames. */
  readonly send: (frame: Uint8Array) => void
}

/** What the modules raise when a run has no tool channel (the supervisor sets no HERMES_TOOLS_SOCKET). */
const NO_CHANNEL = "this run has no tool channel (no tools were given to it)"
/** How much of a name the supervisor puts in a call's frame. */
const NAME_SENT_MAX = LIMIT.toolNameSent
/** The longest reply line the supervisor reads. */
const REPLY_LINE_MAX = LIMIT.headerLine
const REPLY_HEAD = /^R ([0-9]{1,10}) ([012]) ([0-9]{1,20})$/

const toolEncoder = new TextEncoder()
const concat = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => Buffer.concat(parts)

/** A call's request as the stubs write it: "<tool>\n<arguments>", padded to `size`. */
const requestOf = (
  call: FakeToolCall
): { readonly name: Uint8Array; readonly args: Uint8Array; readonly bytes: number } => {
  const name = toolEncoder.encode(call.tool)
  const text = call.rawArgs ?? JSON.stringify(call.args ?? {})
  const base = toolEncoder.encode(text)
  const padding = call.size === undefined ? 0 : Math.max(0, call.size - name.byteLength - 1 - base.byteLength)
  return {
    name,
    args: padding === 0 ? base : concat(base, new Uint8Array(padding).fill(0x20)),
    bytes: Math.max(call.size ?? 0, name.byteLength + 1 + base.byteLength)
  }
}

/**
 * The program's tool calls, relayed as the supervisor relays them (images/runner/hermes-run.c,
 * "tool calls"): ids 1, 2, … in the order the calls are forwarded; 't' "<id> <argument bytes>
 * <name>" then the arguments in 'a' frames of at most MAX_FRAME_PAYLOAD, or 'b' "<id> <request
 * bytes> <name>" for a request over the header's request bytes (its arguments never sent); at
 * most the header's calls at once. Each waits for its reply ("R <id> <status> <n>\n" + n bytes)
 * on stdin after the header; a reply for no call in flight is dropped. `print` gets each call's
 * line in call order (a concurrent program prints them once all are answered). Interrupted (the
 * run is killed), it writes nothing more.
 */
export const fakeToolCalls = (
  calls: ReadonlyArray<FakeToolCall>,
  concurrently: boolean,
  channel: FakeToolChannel | undefined,
  print: (line: Uint8Array) => void
): Effect.Effect<void, FakeToolChannelBroken> => {
  const line = (status: string, payload: Uint8Array) =>
    concat(toolEncoder.encode(`${status} `), payload, toolEncoder.encode("\n"))
  if (channel === undefined) {
    return Effect.sync(() => {
      for (let i = 0; i < calls.length; i++) print(line("1", toolEncoder.encode(NO_CHANNEL)))
    })
  }
  const { header, repliesAt } = channel.tools
  let nextId = 1
  const waiting = new Set<number>()
  const replies = new Map<number, { readonly status: string; readonly payload: Uint8Array }>()
  let read = repliesAt
  let broken: string | undefined

  // Takes every whole reply written since the last look (any waiter may look: it is idempotent).
  const absorb = (bytes: Uint8Array, ended: boolean) => {
    while (broken === undefined && read < bytes.byteLength) {
      const newline = bytes.indexOf(0x0a, read)
      if (newline < 0) {
        if (bytes.byteLength - read >= REPLY_LINE_MAX) broken = `a tool reply line longer than ${REPLY_LINE_MAX} bytes`
        else if (ended) broken = "stdin ended inside a tool reply"
        return
      }
      const text = Buffer.from(bytes.subarray(read, newline)).toString("latin1")
      const m = REPLY_HEAD.exec(text)
      if (m === null || Number(m[3]) > header.maxReplyBytes) {
        broken = `a malformed tool reply '${text.slice(0, 64)}'`
        return
      }
      const end = newline + 1 + Number(m[3])
      if (end > bytes.byteLength) {
        if (ended) broken = "stdin ended inside a tool reply"
        return
      }
      const id = Number(m[1])
      if (waiting.has(id))
        replies.set(id, { status: m[2]!, payload: Uint8Array.from(bytes.subarray(newline + 1, end)) })
      read = end
    }
  }

  const call = (c: FakeToolCall) =>
    Effect.gen(function* () {
      const request = requestOf(c)
      const id = nextId++
      waiting.add(id)
      const name = request.name.subarray(0, NAME_SENT_MAX)
      if (request.bytes > header.maxRequestBytes) {
        // Like the supervisor: the arguments' bytes (the request's, less the name and its newline).
        channel.send(
          encodeFrame(channel.key, "b", concat(toolEncoder.encode(`${id} ${request.args.byteLength} `), name))
        )
      } else {
        channel.send(
          encodeFrame(channel.key, "t", concat(toolEncoder.encode(`${id} ${request.args.byteLength} `), name))
        )
        for (let at = 0; at < request.args.byteLength; at += MAX_FRAME_PAYLOAD) {
          channel.send(encodeFrame(channel.key, "a", request.args.subarray(at, at + MAX_FRAME_PAYLOAD)))
        }
      }
      const reply = yield* channel.stdin.until((bytes, ended) => {
        absorb(bytes, ended)
        // A reply that came before the bytes that broke the channel is still delivered.
        return replies.get(id) ?? (broken === undefined ? undefined : { broken })
      })
      waiting.delete(id)
      replies.delete(id)
      if ("broken" in reply) return yield* new FakeToolChannelBroken({ message: reply.broken })
      return line(reply.status, reply.payload)
    })

  return concurrently
    ? Effect.forEach(calls, call, { concurrency: Math.max(1, header.maxInFlight) }).pipe(
        Effect.map((lines) => lines.forEach(print))
      )
    : Effect.forEach(calls, (c) => Effect.map(call(c), print), { discard: true })
}
