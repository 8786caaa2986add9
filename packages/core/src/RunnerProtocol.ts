/**
 * Runner protocol, version 2: how a program reaches the in-container supervisor
 * (images/runner/*.c) and how the supervisor reports back. Its words, frame types, features and
 * limits are one table, RunnerProtocolTable.ts, from which `pnpm codegen` writes the supervisor's
 * images/runner/protocol.h (whose comment lists them all); this module is the host's codec over it.
 *
 * In, on the container's (or a session exec's) stdin: "HERMES/2\n", then header lines, each
 * variable-length value following its line as exactly that many raw bytes (names may hold any
 * byte, newlines included), then "run\n", then the program's own stdin, untouched. With `tools`
 * the program's stdin travels in the header (`stdin`) and what follows `run` is the host's replies
 * to tool calls, "R <id> <status 0|1|2> <n>\n" + n bytes, until the run ends.
 *
 * Out, on stdout, frames: <16-byte key><type><4-byte big-endian length><payload>. The key is
 * drawn per run and never reaches the program (it is read by the supervisor, which is not
 * dumpable and, in a one-shot sandbox, PID 1; the program's stdout and stderr are pipes to the
 * supervisor, not the container's streams). So the decoder below takes nothing on trust that
 * does not carry the key: a byte that does not parse ends the run as a protocol violation.
 *
 * What an image's supervisor can do beyond the base of protocol 2 is its label
 * RUNNER_FEATURES_LABEL; `missingFeatures` says what a request needs that an image lacks, which the
 * runtimes refuse before anything is created (SandboxSpec.requires, OutputReceiver.requires).
 */
import { randomBytes } from "node:crypto"
import type { Language } from "./Language.js"
import {
  FRAME,
  FRAMES,
  KERNEL_GONE_CAUSES,
  KERNEL_RECORD_SKIPS,
  type KernelCommand,
  LIMIT,
  RUNNER_FEATURE_TABLE,
  RUNNER_FEATURES,
  RUNNER_FEATURES_LABEL,
  RUNNER_MODES,
  RUNNER_PROTOCOL_VERSION,
  type HeaderWord,
  type RunnerFeature
} from "./RunnerProtocolTable.js"

export {
  RUNNER_FEATURES,
  RUNNER_FEATURES_LABEL,
  RUNNER_PROTOCOL_LABEL,
  RUNNER_PROTOCOL_VERSION,
  type RunnerFeature
} from "./RunnerProtocolTable.js"

/** The supervisor's exit code for a malformed header or a failed setup. */
export const RUNNER_PROTOCOL_ERROR_EXIT = LIMIT.protocolErrorExit
/**
 * Where the images keep the supervisor: execute-only (0711), because a process that execs a file it
 * cannot read is non-dumpable from its first instruction (no window before its prctl in which a
 * process of the same uid could open its /proc/<pid>/mem).
 */
export const SUPERVISOR = "/opt/hermes/hermes-run"
/**
 * The same binary, readable (0755): gVisor's loader refuses an execute-only file ("failed to load:
 * permission denied"). Under gVisor the supervisor is non-dumpable from its prctl on.
 */
export const SUPERVISOR_READABLE = "/opt/hermes/hermes-run-readable"

/**
 * A warm-pool sandbox's command: the supervisor starts the interpreter before the request arrives
 * (`--preload python`), so a claim costs no interpreter start, and imports `modules` in it (checked
 * dotted names: Schemas.PythonModules). Python only: node and bash start in a few ms or run
 * unchanged; any other command is returned as is.
 */
export const preloadedCommand = (
  command: ReadonlyArray<string>,
  language: Language,
  modules: ReadonlyArray<string> = []
): ReadonlyArray<string> =>
  language === "python" && command.length === 1 && (command[0] === SUPERVISOR || command[0] === SUPERVISOR_READABLE)
    ? [...command, RUNNER_MODES.preload.arg, "python", ...modules]
    : command

/** The supervisor path for an OCI runtime. */
export const supervisorFor = (runtime: string | undefined): string =>
  runtime === "runsc" ? SUPERVISOR_READABLE : SUPERVISOR

export const KEY_BYTES = LIMIT.keyBytes
const FRAME_HEAD = KEY_BYTES + 1 + 4
/** Largest payload the supervisor writes in one frame. */
export const MAX_FRAME_PAYLOAD = LIMIT.framePayload
/** Control payloads are small (a path of at most PATH_MAX and a few words); anything longer is not the supervisor's. */
const MAX_CONTROL_PAYLOAD = LIMIT.controlPayload
const frameTypes: ReadonlyArray<{ readonly type: string; readonly data?: true }> = Object.values(FRAMES)
/** Frame types whose payload is data, delivered piecewise as it arrives: output, file content, tool arguments. */
const DATA_TYPES = new Set(frameTypes.filter((f) => f.data === true).map((f) => f.type.charCodeAt(0)))
const CONTROL_TYPES = frameTypes
  .filter((f) => f.data !== true)
  .map((f) => f.type)
  .join("")
const STDOUT = FRAME.stdout.charCodeAt(0)
const STDERR = FRAME.stderr.charCodeAt(0)
const FILE_CONTENT = FRAME.fileContent.charCodeAt(0)
const TOOL_ARGUMENTS = FRAME.toolArguments.charCodeAt(0)
const RECORD_CONTENT = FRAME.recordContent.charCodeAt(0)
const LATE_OUTPUT = FRAME.lateOutput.charCodeAt(0)
/** A kernel supervisor's own frames (`--kernel`): in any other run they are a violation. */
const KERNEL_TYPES = new Set(
  [
    FRAME.kernelReady,
    FRAME.cellStarted,
    FRAME.recordBegin,
    FRAME.recordContent,
    FRAME.recordSkipped,
    FRAME.cellEnded,
    FRAME.lateOutput,
    FRAME.kernelGone
  ].map((t) => t.charCodeAt(0))
)

const encoder = new TextEncoder()

export interface RunnerPayload {
  /** Framed mode: the per-run key (32 hex digits, makeRunKey). Without it the supervisor execs the program in place. */
  readonly key?: string | undefined
  /** Bytes of each stream the supervisor relays; the rest it counts and drops. */
  readonly capBytes?: number | undefined
  /** Code mode. */
  readonly language?: Language | undefined
  readonly code?: Uint8Array | undefined
  readonly files?: ReadonlyArray<readonly [path: string, content: Uint8Array]> | undefined
  /** Argv mode (session calls). */
  readonly args?: ReadonlyArray<string> | undefined
  /** A lock file the supervisor holds (flock) while the program runs. */
  readonly lock?: string | undefined
  /** End every process left by earlier calls, before and after this one. */
  readonly killLeftovers?: boolean | undefined
  /** After the program: send the workspace's files matching these globs, within the limits. */
  readonly collect?: { readonly patterns: ReadonlyArray<string>; readonly limits: CollectLimits } | undefined
  /** A session's file operation instead of a program. */
  readonly fileOp?: FileOp | undefined
  /** Tool calls: the channel's bounds and the generated modules (paths under the code directory). */
  readonly tools?: ToolChannelHeader | undefined
  readonly stdin: Uint8Array
  /**
   * Send `stdin` in the header (word `stdin`, feature `stdin`), so the program's stdin ends without
   * the supervisor's ending: for a runtime whose stdin cannot be closed (SandboxRuntime.stdinEnds
   * false). With tools it is always there.
   */
  readonly stdinInHeader?: boolean | undefined
}

export interface ToolChannelHeader {
  readonly maxInFlight: number
  /** A request: the name, a newline and the arguments. */
  readonly maxRequestBytes: number
  readonly maxReplyBytes: number
  readonly modules: ReadonlyArray<readonly [path: string, content: Uint8Array]>
}

/** A reply to tool call `id`: '0' its result (JSON), '1' a tool error (message), '2' a refusal (message). */
export const encodeToolReply = (id: number, status: "0" | "1" | "2", payload: Uint8Array): Uint8Array => {
  const head = encoder.encode(`R ${id} ${status} ${payload.byteLength}\n`)
  const out = new Uint8Array(head.byteLength + payload.byteLength)
  out.set(head, 0)
  out.set(payload, head.byteLength)
  return out
}

/** Bounds on what one run sends back (the supervisor keeps them; the host checks them again). */
export interface CollectLimits {
  readonly maxFiles: number
  readonly maxFileBytes: number
  readonly maxTotalBytes: number
}

/**
 * In a `write`'s mode: an existing regular file keeps its permission bits; only a new one gets the
 * low bits (0o777). Without it the file gets exactly the low bits.
 */
export const KEEP_EXISTING_MODE = LIMIT.keepExistingMode

/** A file operation the supervisor does itself (no program, no shell): absolute paths under the writable roots. */
export type FileOp =
  | { readonly op: "read"; readonly path: string; readonly offset: number; readonly limit: number }
  | { readonly op: "write"; readonly path: string; readonly content: Uint8Array; readonly mode: number }
  | { readonly op: "list"; readonly path: string }
  | { readonly op: "remove"; readonly path: string }

/** A fresh key for one run's frames. */
export const makeRunKey = (): string => randomBytes(KEY_BYTES).toString("hex")

/**
 * What the host writes on a supervisor's stdin, built in order: lines of the table's words (a run's
 * header, a kernel's header and its commands), each variable-length value following its line as
 * exactly that many raw bytes. One writer for all of them, so a word is spelled one way.
 */
class StdinWriter {
  private readonly parts: Array<Uint8Array> = []
  raw(bytes: Uint8Array): this {
    this.parts.push(bytes)
    return this
  }
  /** A line: a word of the table (or the version line) and its arguments. */
  line(word: string, ...args: ReadonlyArray<string | number>): this {
    return this.raw(encoder.encode([word, ...args].join(" ") + "\n"))
  }
  /** A word whose one value is `bytes`: `<word> <n>` + the n bytes. */
  blob(word: HeaderWord, bytes: Uint8Array): this {
    return this.line(word, bytes.byteLength).raw(bytes)
  }
  version(): this {
    return this.line(`HERMES/${RUNNER_PROTOCOL_VERSION}`)
  }
  /** `tools A R P`, then each generated module: `module <path bytes> <n>` + path + content. */
  tools(tools: ToolChannelHeader): this {
    this.line("tools", tools.maxInFlight, tools.maxRequestBytes, tools.maxReplyBytes)
    for (const [path, content] of tools.modules) {
      const name = encoder.encode(path)
      this.line("module", name.byteLength, content.byteLength).raw(name).raw(content)
    }
    return this
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.parts.reduce((n, p) => n + p.byteLength, 0))
    let offset = 0
    for (const part of this.parts) {
      out.set(part, offset)
      offset += part.byteLength
    }
    return out
  }
}

export const encodeRunnerPayload = (payload: RunnerPayload): Uint8Array => {
  const w = new StdinWriter().version()
  const head = (word: HeaderWord, ...args: ReadonlyArray<string | number>) => w.line(word, ...args)
  const blob = (word: HeaderWord, bytes: Uint8Array) => w.blob(word, bytes)
  if (payload.key !== undefined) head("key", payload.key)
  if (payload.capBytes !== undefined) head("cap", payload.capBytes)
  if (payload.lock !== undefined) blob("lock", encoder.encode(payload.lock))
  if (payload.killLeftovers === true) head("leftovers", "kill")
  for (const arg of payload.args ?? []) blob("arg", encoder.encode(arg))
  if (payload.language !== undefined) head("lang", payload.language)
  if (payload.code !== undefined) blob("code", payload.code)
  for (const [path, content] of payload.files ?? []) {
    const name = encoder.encode(path)
    head("file", name.byteLength, content.byteLength).raw(name).raw(content)
  }
  if (payload.collect !== undefined) {
    for (const pattern of payload.collect.patterns) blob("collect", encoder.encode(pattern))
    const l = payload.collect.limits
    head("limits", l.maxFiles, l.maxFileBytes, l.maxTotalBytes)
  }
  const op = payload.fileOp
  if (op !== undefined) {
    const name = encoder.encode(op.path)
    if (op.op === "read") head(op.op, name.byteLength, op.offset, op.limit)
    else if (op.op === "write") head(op.op, name.byteLength, op.content.byteLength, op.mode)
    else head(op.op, name.byteLength)
    w.raw(name)
    if (op.op === "write") w.raw(op.content)
  }
  const tools = payload.tools
  if (tools !== undefined) w.tools(tools)
  const inHeader = tools !== undefined || payload.stdinInHeader === true
  if (inHeader) w.blob("stdin", payload.stdin)
  head("run")
  if (!inHeader) w.raw(payload.stdin)
  return w.bytes()
}

/**
 * The payload as `runtime` takes it: the program's stdin in the header where the runtime cannot end
 * the supervisor's stdin (SandboxRuntime.stdinEnds false: Kubernetes' stream protocol v4).
 */
export const encodeRunnerPayloadFor = (
  runtime: { readonly stdinEnds?: boolean | undefined },
  payload: RunnerPayload
): Uint8Array =>
  encodeRunnerPayload({ ...payload, stdinInHeader: payload.stdinInHeader === true || runtime.stdinEnds === false })

/** What the supervisor reported when the program's process exited. */
export interface ReportedExit {
  readonly exitCode: number
  readonly stdoutBytes: number
  readonly stderrBytes: number
  /** The first signal sent to the sandbox from outside it (docker stop/kill), 0 if none. */
  readonly outsideSignal: number
}

const EXIT_PAYLOAD = /^(0|[1-9][0-9]{0,2}) (0|[1-9][0-9]{0,19}) (0|[1-9][0-9]{0,19}) (0|[1-9][0-9]?)$/

/** The 'x' payload; undefined unless it is exactly what the supervisor writes (codes 0-255). */
export const parseExitPayload = (text: string): ReportedExit | undefined => {
  const m = EXIT_PAYLOAD.exec(text)
  if (m === null) return undefined
  const exitCode = Number(m[1])
  if (exitCode > 255) return undefined
  return { exitCode, stdoutBytes: Number(m[2]), stderrBytes: Number(m[3]), outsideSignal: Number(m[4]) }
}

export interface FrameHandlers {
  readonly stdout: (chunk: Uint8Array) => void
  readonly stderr: (chunk: Uint8Array) => void
  /** A control frame ('p', 'w', 'l', 'x', 'E', 'f', 'F', 's', 'n', 'k', 'r') with its payload as text, and as bytes (paths). */
  readonly control: (type: string, payload: string, bytes: Buffer) => void
  /** A piece of the current file's content ('c'); without a handler, a 'c' frame is a violation. */
  readonly content?: ((chunk: Uint8Array) => void) | undefined
  /** A piece of the current tool call's arguments ('a'); without a handler, an 'a' frame is a violation. */
  readonly toolArguments?: ((chunk: Uint8Array) => void) | undefined
  /**
   * Kernel mode (`--kernel python`, KernelFrameDecoder): a piece of a cell's record ('m') and bytes the
   * kernel wrote between cells ('L'). Without it, any kernel frame ('g' 'C' 'M' 'm' 'N' 'Z' 'L' 'G') is
   * a violation; with it, 'G' (the kernel gone) is the end of the stream, as 'x' is of a run's.
   */
  readonly kernel?:
    | { readonly recordContent: (chunk: Uint8Array) => void; readonly lateOutput: (chunk: Uint8Array) => void }
    | undefined
  /** The stream carried something the supervisor did not write; nothing more is decoded. */
  readonly violation: (reason: string) => void
}

const latin1 = new TextDecoder("latin1")
const utf8 = new TextDecoder("utf-8", { fatal: false })

/**
 * Decodes the supervisor's frames from the container's stdout as chunks arrive: linear in the
 * input, and holding at most one frame header and one control payload (output payloads are
 * delivered piecewise as they arrive, never buffered).
 */
export class FrameDecoder {
  private readonly key: Buffer
  private readonly head = Buffer.alloc(FRAME_HEAD)
  private headFill = 0
  private type = 0
  private remaining = 0
  private control: Array<Buffer> = []
  /** Set once the stream carried something that is not a frame of this run. */
  violated: string | undefined
  /** Set once the 'x' frame arrived: nothing after it counts. */
  ended = false

  constructor(
    keyHex: string,
    private readonly handlers: FrameHandlers
  ) {
    this.key = Buffer.from(keyHex, "hex")
    if (this.key.length !== KEY_BYTES) throw new Error("a run key is 16 bytes (32 hex digits)")
  }

  private fail(reason: string): void {
    this.violated = reason
    this.handlers.violation(reason)
  }

  readonly push = (chunk: Uint8Array): void => {
    let at = 0
    const data = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    while (at < data.length && this.violated === undefined) {
      if (this.ended) return this.fail("bytes after the end-of-run frame")
      if (this.remaining === 0 && this.headFill < FRAME_HEAD) {
        const n = Math.min(FRAME_HEAD - this.headFill, data.length - at)
        data.copy(this.head, this.headFill, at, at + n)
        this.headFill += n
        at += n
        if (this.headFill < FRAME_HEAD) return
        if (!this.head.subarray(0, KEY_BYTES).equals(this.key)) return this.fail("a frame without this run's key")
        this.type = this.head[KEY_BYTES]!
        this.remaining = this.head.readUInt32BE(KEY_BYTES + 1)
        const output = DATA_TYPES.has(this.type)
        if (this.type === FILE_CONTENT && this.handlers.content === undefined)
          return this.fail("file content where none was asked for")
        if (this.type === TOOL_ARGUMENTS && this.handlers.toolArguments === undefined)
          return this.fail("tool call arguments where no tools were given")
        if (KERNEL_TYPES.has(this.type) && this.handlers.kernel === undefined)
          return this.fail(`a kernel frame '${String.fromCharCode(this.type)}' where no kernel runs`)
        if (!output && CONTROL_TYPES.indexOf(String.fromCharCode(this.type)) < 0)
          return this.fail(`an unknown frame type ${this.type}`)
        if (this.remaining > (output ? MAX_FRAME_PAYLOAD : MAX_CONTROL_PAYLOAD))
          return this.fail(`a frame of ${this.remaining} bytes`)
        if (this.remaining === 0) {
          this.headFill = 0
          if (!output) this.finishControl()
          continue
        }
      }
      const n = Math.min(this.remaining, data.length - at)
      const piece = data.subarray(at, at + n)
      at += n
      this.remaining -= n
      if (this.type === STDOUT) this.handlers.stdout(piece)
      else if (this.type === STDERR) this.handlers.stderr(piece)
      else if (this.type === FILE_CONTENT) this.handlers.content!(piece)
      else if (this.type === TOOL_ARGUMENTS) this.handlers.toolArguments!(piece)
      else if (this.type === RECORD_CONTENT) this.handlers.kernel!.recordContent(piece)
      else if (this.type === LATE_OUTPUT) this.handlers.kernel!.lateOutput(piece)
      else this.control.push(Buffer.from(piece))
      if (this.remaining === 0) {
        this.headFill = 0
        if (!DATA_TYPES.has(this.type)) this.finishControl()
      }
    }
  }

  private finishControl(): void {
    const type = String.fromCharCode(this.type)
    const payload = Buffer.concat(this.control)
    this.control = []
    // Messages are UTF-8; anything else (paths, numbers) is bytes.
    const text =
      type === FRAME.setupFailed || type === FRAME.lockWait || type === FRAME.opFailed
        ? utf8.decode(payload)
        : latin1.decode(payload)
    if (type === FRAME.exited || type === FRAME.kernelGone) this.ended = true
    this.handlers.control(type, text, payload)
  }

  /** The stream ended: a frame cut short is a violation only if the run had not ended. */
  get incomplete(): boolean {
    return !this.ended && (this.headFill > 0 || this.remaining > 0)
  }
}

/** Frames as the supervisor writes them (for the fake runtime and tests). */
export const encodeFrame = (keyHex: string, type: string, payload: Uint8Array | string): Uint8Array => {
  const body = typeof payload === "string" ? encoder.encode(payload) : payload
  const out = Buffer.alloc(FRAME_HEAD + body.byteLength)
  Buffer.from(keyHex, "hex").copy(out, 0)
  out[KEY_BYTES] = type.charCodeAt(0)
  out.writeUInt32BE(body.byteLength, KEY_BYTES + 1)
  Buffer.from(body.buffer, body.byteOffset, body.byteLength).copy(out, FRAME_HEAD)
  return out
}

/** A decoded request (the fake runtime plays the supervisor with it). */
export interface DecodedPayload {
  readonly key?: string
  readonly capBytes?: number
  readonly language?: Language
  readonly code?: Uint8Array
  readonly files: ReadonlyArray<readonly [string, Uint8Array]>
  readonly args: ReadonlyArray<string>
  readonly lock?: string
  readonly killLeftovers: boolean
  readonly collect?: { readonly patterns: ReadonlyArray<string>; readonly limits: CollectLimits }
  readonly fileOp?: FileOp
  readonly tools?: ToolChannelHeader
  readonly stdin: Uint8Array
}

/** The inverse of encodeRunnerPayload; undefined for anything else. */
export const decodeRunnerPayload = (bytes: Uint8Array): DecodedPayload | undefined => {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  const readLine = (): string | undefined => {
    const end = data.indexOf(10, at)
    if (end < 0) return undefined
    const text = data.subarray(at, end).toString("latin1")
    at = end + 1
    return text
  }
  const take = (n: number): Uint8Array | undefined => {
    if (!Number.isSafeInteger(n) || n < 0 || at + n > data.length) return undefined
    const out = data.subarray(at, at + n)
    at += n
    return out
  }
  if (readLine() !== `HERMES/${RUNNER_PROTOCOL_VERSION}`) return undefined
  const decoded: {
    key?: string
    capBytes?: number
    language?: Language
    code?: Uint8Array
    lock?: string
    files: Array<readonly [string, Uint8Array]>
    args: Array<string>
    killLeftovers: boolean
    collect?: { patterns: Array<string>; limits: CollectLimits }
    fileOp?: FileOp
    tools?: {
      maxInFlight: number
      maxRequestBytes: number
      maxReplyBytes: number
      modules: Array<readonly [string, Uint8Array]>
    }
  } = { files: [], args: [], killLeftovers: false }
  let headerStdin: Uint8Array | undefined
  const text = (value: Uint8Array) => Buffer.from(value).toString("utf8")
  for (;;) {
    const line = readLine()
    if (line === undefined) return undefined
    const [first, a, b, c] = line.split(" ")
    // Checked against the table: a comparison with a word it lacks does not compile.
    const word = first as HeaderWord
    if (word === "run") break
    if (word === "key") decoded.key = a!
    else if (word === "cap") decoded.capBytes = Number(a)
    else if (word === "lang") decoded.language = a as Language
    else if (word === "leftovers") decoded.killLeftovers = a === "kill"
    else if (word === "code" || word === "arg" || word === "lock") {
      const value = take(Number(a))
      if (value === undefined) return undefined
      if (word === "code") decoded.code = value
      else if (word === "arg") decoded.args.push(Buffer.from(value).toString("utf8"))
      else decoded.lock = Buffer.from(value).toString("utf8")
    } else if (word === "file") {
      const name = take(Number(a))
      const content = take(Number(b))
      if (name === undefined || content === undefined) return undefined
      decoded.files.push([Buffer.from(name).toString("utf8"), content])
    } else if (word === "collect") {
      const pattern = take(Number(a))
      if (pattern === undefined) return undefined
      decoded.collect = {
        patterns: [...(decoded.collect?.patterns ?? []), text(pattern)],
        limits: decoded.collect?.limits ?? { maxFiles: 0, maxFileBytes: 0, maxTotalBytes: 0 }
      }
    } else if (word === "limits") {
      decoded.collect = {
        patterns: decoded.collect?.patterns ?? [],
        limits: { maxFiles: Number(a), maxFileBytes: Number(b), maxTotalBytes: Number(c) }
      }
    } else if (word === "read" || word === "write" || word === "list" || word === "remove") {
      const path = take(Number(a))
      if (path === undefined) return undefined
      if (word === "read") decoded.fileOp = { op: "read", path: text(path), offset: Number(b), limit: Number(c) }
      else if (word === "write") {
        const content = take(Number(b))
        if (content === undefined) return undefined
        decoded.fileOp = { op: "write", path: text(path), content, mode: Number(c) }
      } else decoded.fileOp = { op: word, path: text(path) }
    } else if (word === "tools") {
      decoded.tools = {
        maxInFlight: Number(a),
        maxRequestBytes: Number(b),
        maxReplyBytes: Number(c),
        modules: decoded.tools?.modules ?? []
      }
    } else if (word === "module") {
      const name = take(Number(a))
      const content = take(Number(b))
      if (name === undefined || content === undefined || decoded.tools === undefined) return undefined
      decoded.tools.modules.push([text(name), content])
    } else if (word === "stdin") {
      headerStdin = take(Number(a))
      if (headerStdin === undefined) return undefined
    } else {
      return undefined
    }
  }
  return { ...decoded, stdin: headerStdin ?? data.subarray(at) }
}

/** What an image's supervisor can do, from its labels: an image without RUNNER_FEATURES_LABEL predates the label, and has protocol 2's base only. */
export const supervisorFeatures = (
  labels: Readonly<Record<string, string>> | undefined
): ReadonlySet<RunnerFeature> => {
  const listed = labels?.[RUNNER_FEATURES_LABEL]
  if (listed === undefined) return new Set()
  const said = new Set(listed.split(",").map((f) => f.trim()))
  return new Set(RUNNER_FEATURES.filter((f) => said.has(f)))
}

/** The features in `requires` that an image with these labels lacks, in the table's order. */
export const missingFeatures = (
  labels: Readonly<Record<string, string>> | undefined,
  requires: ReadonlyArray<RunnerFeature> | undefined
): ReadonlyArray<RunnerFeature> => {
  if (requires === undefined || requires.length === 0) return []
  const has = supervisorFeatures(labels)
  return RUNNER_FEATURES.filter((f) => requires.includes(f) && !has.has(f))
}

/** What a supervisor invoked with this command must be able to do ("--preload": preload). */
export const commandFeatures = (command: ReadonlyArray<string>): ReadonlyArray<RunnerFeature> =>
  command.includes(RUNNER_MODES.preload.arg) ? ["preload"] : []

/** `a` and `b` together, each feature once, in the table's order. */
export const withFeatures = (
  a: ReadonlyArray<RunnerFeature> | undefined,
  b: ReadonlyArray<RunnerFeature> | undefined
): ReadonlyArray<RunnerFeature> => RUNNER_FEATURES.filter((f) => a?.includes(f) === true || b?.includes(f) === true)

/**
 * Why a request is refused before anything is created: the image's supervisor lacks `missing`. Names
 * the image, each missing feature, what its label says, and the command that rebuilds the images.
 */
export const missingFeaturesMessage = (
  image: string,
  labels: Readonly<Record<string, string>> | undefined,
  missing: ReadonlyArray<RunnerFeature>,
  buildCommand: string
): string => {
  const listed = labels?.[RUNNER_FEATURES_LABEL]
  const label =
    listed === undefined
      ? `has no label ${RUNNER_FEATURES_LABEL} (it was built before images said what their supervisor can do, so it is taken to have runner protocol ${RUNNER_PROTOCOL_VERSION}'s base only)`
      : `says ${RUNNER_FEATURES_LABEL}=${JSON.stringify(listed)}`
  const what = missing.map((f) => `${f} (${RUNNER_FEATURE_TABLE[f].what})`).join(", ")
  return (
    `image ${image} has a supervisor without ${missing.length === 1 ? "the feature" : "the features"} this request needs: ${what}. The image ${label}. ` +
    `Rebuild the SDK's images: ${buildCommand} (an image of your own: build it again FROM a current hermes-sandbox image, docs/custom-images.md)`
  )
}

// --- kernel mode (`--kernel python`, docs/design/kernel.md §3) ----------------------------------

/** A kernel's header, once per kernel (its exec): the run's words, then the kernel's own. */
export interface KernelHeader {
  readonly key: string
  /** Bytes of each of a cell's streams the supervisor relays. */
  readonly capBytes: number
  readonly lock: string
  readonly killLeftovers: boolean
  /** Record bounds: one record's bytes, records per cell, record bytes per cell. */
  readonly display: { readonly bundleBytes: number; readonly count: number; readonly totalBytes: number }
  /** After an interrupt's SIGINT, how long the kernel has to end the cell and answer a ping. */
  readonly graceMs: number
  /** Modules imported when the kernel starts (dotted names). */
  readonly preload: ReadonlyArray<string>
}

/** The kernel's header: `HERMES/2`, key, cap, lock, leftovers, display, grace, preload, run. */
export const encodeKernelHeader = (h: KernelHeader): Uint8Array => {
  const w = new StdinWriter().version()
  w.line("key", h.key).line("cap", h.capBytes).blob("lock", encoder.encode(h.lock))
  if (h.killLeftovers) w.line("leftovers", "kill")
  w.line("display", h.display.bundleBytes, h.display.count, h.display.totalBytes).line("grace", h.graceMs)
  if (h.preload.length > 0) w.blob("preload", encoder.encode(h.preload.join(" ")))
  return w.line("run").bytes()
}

/** A cell id: what the supervisor accepts ([A-Za-z0-9_-], at most LIMIT.kernelCellIdBytes). */
export const CELL_ID = new RegExp(`^[A-Za-z0-9_-]{1,${LIMIT.kernelCellIdBytes}}$`)

/** One of the kernel's line commands (KERNEL_COMMANDS), alone. */
const command = (c: KernelCommand, ...args: ReadonlyArray<string | number>) =>
  new StdinWriter().line(c, ...args).bytes()

/**
 * `cell <id> <count>`, `code <n>` + the code, with tools `tools A R P` and each `module <n> <m>` +
 * path + content (the driver then drops its `hermes_tools`), `run`.
 */
export const encodeCellCommand = (
  cellId: string,
  executionCount: number,
  code: Uint8Array,
  tools?: ToolChannelHeader
): Uint8Array => {
  const w = new StdinWriter().line("cell" satisfies KernelCommand, cellId, executionCount).blob("code", code)
  if (tools !== undefined) w.tools(tools)
  return w.line("run").bytes()
}

/** `interrupt <cell id>`: the cell's deadline or abort. */
export const encodeInterruptCommand = (cellId: string): Uint8Array => command("interrupt", cellId)

/** `restart`: end the kernel (the supervisor kills the domain, frames 'G' requested, exits). */
export const encodeRestartCommand = (): Uint8Array => command("restart")

/** A decoded kernel header (the fake runtime plays the kernel's supervisor with it). */
export interface DecodedKernelHeader extends KernelHeader {}

/** A kernel command as the supervisor reads it from stdin (for the fake runtime). */
export type DecodedKernelCommand =
  | {
      readonly command: "cell"
      readonly cellId: string
      readonly executionCount: number
      readonly code: Uint8Array
      readonly tools?: ToolChannelHeader
    }
  | { readonly command: "R"; readonly id: number; readonly status: "0" | "1" | "2"; readonly payload: Uint8Array }
  | { readonly command: "interrupt"; readonly cellId: string }
  | { readonly command: "restart" }

const lineAt = (data: Buffer, at: number): { readonly text: string; readonly next: number } | undefined => {
  const end = data.indexOf(10, at)
  return end < 0 ? undefined : { text: data.subarray(at, end).toString("latin1"), next: end + 1 }
}

/**
 * The kernel's header at the start of `bytes`: the header and where the commands begin; "incomplete"
 * until its `run` line arrived; undefined if it is not one.
 */
export const decodeKernelHeader = (
  bytes: Uint8Array
): { readonly header: DecodedKernelHeader; readonly next: number } | "incomplete" | undefined => {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  const first = lineAt(data, at)
  if (first === undefined) return data.length < 16 ? "incomplete" : undefined
  if (first.text !== `HERMES/${RUNNER_PROTOCOL_VERSION}`) return undefined
  at = first.next
  const h: {
    key?: string
    capBytes?: number
    lock?: string
    killLeftovers: boolean
    display: { bundleBytes: number; count: number; totalBytes: number }
    graceMs: number
    preload: Array<string>
  } = {
    killLeftovers: false,
    display: { bundleBytes: LIMIT.kernelBundleBytes, count: LIMIT.kernelRecords, totalBytes: LIMIT.kernelRecordBytes },
    graceMs: LIMIT.kernelGraceMs,
    preload: []
  }
  for (;;) {
    const line = lineAt(data, at)
    if (line === undefined) return "incomplete"
    at = line.next
    const [word, a, b, c] = line.text.split(" ") as [HeaderWord, string?, string?, string?]
    if (word === "run") break
    if (word === "key") h.key = a ?? ""
    else if (word === "cap") h.capBytes = Number(a)
    else if (word === "leftovers") h.killLeftovers = a === "kill"
    else if (word === "display") h.display = { bundleBytes: Number(a), count: Number(b), totalBytes: Number(c) }
    else if (word === "grace") h.graceMs = Number(a)
    else if (word === "lock" || word === "preload") {
      const n = Number(a)
      if (!Number.isSafeInteger(n) || n < 0) return undefined
      if (at + n > data.length) return "incomplete"
      const value = data.subarray(at, at + n).toString("utf8")
      at += n
      if (word === "lock") h.lock = value
      else h.preload = value.split(" ").filter((x) => x !== "")
    } else return undefined
  }
  if (h.key === undefined || h.capBytes === undefined || h.lock === undefined) return undefined
  return { header: { ...h, key: h.key, capBytes: h.capBytes, lock: h.lock }, next: at }
}

/** The command at `at` of the supervisor's stdin: it and where the next begins; "incomplete"; undefined if none. */
export const decodeKernelCommand = (
  bytes: Uint8Array,
  at: number
): { readonly command: DecodedKernelCommand; readonly next: number } | "incomplete" | undefined => {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const line = lineAt(data, at)
  if (line === undefined) return "incomplete"
  const [word, a, b] = line.text.split(" ") as [KernelCommand, string?, string?]
  if (word === "restart") return { command: { command: "restart" }, next: line.next }
  if (word === "interrupt" && a !== undefined) return { command: { command: "interrupt", cellId: a }, next: line.next }
  if (word === "R") {
    const m = /^R ([0-9]{1,10}) ([012]) ([0-9]{1,20})$/.exec(line.text)
    if (m === null) return undefined
    const end = line.next + Number(m[3])
    if (end > data.length) return "incomplete"
    return {
      command: {
        command: "R",
        id: Number(m[1]),
        status: m[2] as "0" | "1" | "2",
        payload: data.subarray(line.next, end)
      },
      next: end
    }
  }
  if (word !== "cell" || a === undefined || b === undefined) return undefined
  // The cell's own lines, up to `run`.
  let pos = line.next
  let code: Uint8Array | undefined
  let tools:
    | {
        maxInFlight: number
        maxRequestBytes: number
        maxReplyBytes: number
        modules: Array<readonly [string, Uint8Array]>
      }
    | undefined
  for (;;) {
    const next = lineAt(data, pos)
    if (next === undefined) return "incomplete"
    pos = next.next
    const [w, x, y, z] = next.text.split(" ")
    if (w === "run") break
    if (w === "code") {
      const n = Number(x)
      if (!Number.isSafeInteger(n) || n < 0) return undefined
      if (pos + n > data.length) return "incomplete"
      code = data.subarray(pos, pos + n)
      pos += n
    } else if (w === "tools") {
      tools = { maxInFlight: Number(x), maxRequestBytes: Number(y), maxReplyBytes: Number(z), modules: [] }
    } else if (w === "module" && tools !== undefined) {
      const n = Number(x)
      const m = Number(y)
      if (!Number.isSafeInteger(n) || !Number.isSafeInteger(m) || n < 0 || m < 0) return undefined
      if (pos + n + m > data.length) return "incomplete"
      tools.modules.push([data.subarray(pos, pos + n).toString("utf8"), data.subarray(pos + n, pos + n + m)])
      pos += n + m
    } else return undefined
  }
  if (code === undefined) return undefined
  return {
    command: {
      command: "cell",
      cellId: a,
      executionCount: Number(b),
      code,
      ...(tools === undefined ? {} : { tools })
    },
    next: pos
  }
}

export type KernelRecordSkip = (typeof KERNEL_RECORD_SKIPS)[number]
export type KernelGoneCause = (typeof KERNEL_GONE_CAUSES)[number]
export type KernelRecordKind = "R" | "D" | "X"

/** 'g': the kernel is up and idle. */
export interface KernelReady {
  readonly pid: number
  readonly start: string
  readonly preloadFailed: ReadonlyArray<string>
}

/** 'Z': the cell's pipes are drained and closed. `none`: the kernel did not end it (it was killed). */
export interface CellEnded {
  readonly cellId: string
  readonly status: "ok" | "error" | "none"
  readonly stdoutBytes: number
  readonly stderrBytes: number
  readonly records: number
  readonly skipped: number
}

/** 'G': the kernel's domain is dead; nothing follows. `oomKilled` undefined: the supervisor could not tell. */
export interface KernelGone {
  readonly exitCode: number
  readonly signal: number
  readonly oomKilled: boolean | undefined
  readonly cause: KernelGoneCause
}

export interface KernelFrameHandlers {
  readonly ready: (ready: KernelReady) => void
  readonly cellStarted: (cellId: string, idleBytes: number) => void
  readonly stdout: (chunk: Uint8Array) => void
  readonly stderr: (chunk: Uint8Array) => void
  /** 'd': a stream passed the cap; the cell wrote at least `total` bytes to it. */
  readonly dropped: (stream: "o" | "e", total: number) => void
  /** A whole record ('M' and exactly its bytes in 'm' frames). */
  readonly record: (kind: KernelRecordKind, json: Uint8Array) => void
  readonly skipped: (kind: KernelRecordKind | "?", bytes: number, reason: KernelRecordSkip) => void
  readonly cellEnded: (end: CellEnded) => void
  readonly late: (chunk: Uint8Array) => void
  readonly gone: (gone: KernelGone) => void
  readonly lockWait: (holder: string) => void
  readonly locked: () => void
  /** 'E': the supervisor could not set the kernel up (before 'g': no IPython, a bad header). */
  readonly setupFailed: (message: string) => void
  /** A cell's tool call frame ('t', 'b', 'q'); a string is why it is not this cell's (a violation). */
  readonly toolFrame: (type: "t" | "b" | "q", bytes: Buffer) => string | undefined
  /** A piece of the current call's arguments ('a'); a string: a violation. */
  readonly toolArguments: (chunk: Uint8Array) => string | undefined
  /** The stream carried something the kernel's supervisor did not write, or out of its grammar. */
  readonly violation: (reason: string) => void
}

const CELL_STARTED = /^([A-Za-z0-9_-]{1,64}) (0|[1-9][0-9]{0,19})$/
const READY = /^([1-9][0-9]{0,9}) ([0-9]{1,20})((?: [A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)*)$/
const RECORD_BEGIN = /^([RDX]) (0|[1-9][0-9]{0,9})$/
// "?": a record whose kind could not be read (garbage on the records pipe, a header cut short).
const RECORD_SKIPPED = new RegExp(`^([RDX?]) (0|[1-9][0-9]{0,19}) (${KERNEL_RECORD_SKIPS.join("|")})$`)
const CELL_END =
  /^([A-Za-z0-9_-]{1,64}) (ok|error|none) (0|[1-9][0-9]{0,19}) (0|[1-9][0-9]{0,19}) (0|[1-9][0-9]{0,9}) (0|[1-9][0-9]{0,9})$/
const GONE = new RegExp(`^(0|[1-9][0-9]{0,2}) (0|[1-9][0-9]?) ([01?]) (${KERNEL_GONE_CAUSES.join("|")})$`)
const DROPPED = /^([oe]) (0|[1-9][0-9]{0,19})$/

/**
 * Decodes a kernel supervisor's frames (FrameDecoder's keyed frames) and holds them to the kernel's
 * grammar: 'g' once, first; then cells, each 'C' (for the cell the host sent: `expectCell`) … 'Z',
 * inside which come 'o' 'e' 'd', records ('M' then exactly its bytes in 'm' frames) and 'N'; outside
 * a cell only 'L', 'N' (late) and the lock's 'w'/'l' (a sent cell waiting for it, or the supervisor
 * ending the kernel). The supervisor's failure 'E' and the kernel's end 'G' may come anywhere; 'G'
 * ends the stream. Anything else is a violation: nothing after it is decoded.
 */
export class KernelFrameDecoder {
  private readonly frames: FrameDecoder
  private phase: "starting" | "idle" | "cell" | "gone" = "starting"
  /** The cell the host sent and whose 'C' has not come yet. */
  private expected: string | undefined
  /** The expected cell's lock frames so far: 'w' at most once, then 'l' once, then its 'C'. */
  private lock: "none" | "waiting" | "held" = "none"
  private cellId: string | undefined
  private record: { kind: KernelRecordKind; size: number; parts: Array<Buffer>; fill: number } | undefined
  private recordsSeen = 0
  private skippedSeen = 0

  constructor(
    keyHex: string,
    /** The header's bound on one record (`display`'s first number): a larger 'M' is not the supervisor's. */
    private readonly bundleBytes: number,
    private readonly handlers: KernelFrameHandlers
  ) {
    this.frames = new FrameDecoder(keyHex, {
      stdout: (c) => this.inCell("o") && handlers.stdout(c),
      stderr: (c) => this.inCell("e") && handlers.stderr(c),
      kernel: {
        recordContent: (c) => this.recordContent(c),
        lateOutput: (c) => {
          if (this.phase === "cell") return this.fail("late output ('L') inside a cell")
          handlers.late(c)
        }
      },
      toolArguments: (c) => {
        if (!this.inCell("a")) return
        const bad = handlers.toolArguments(c)
        if (bad !== undefined) this.fail(bad)
      },
      control: (type, payload, bytes) => this.control(type, payload, bytes),
      violation: (reason) => this.violated(reason)
    })
  }

  readonly push = (chunk: Uint8Array): void => this.frames.push(chunk)

  /** The host wrote `cell <id> …`: its 'C' may come now. */
  expectCell(cellId: string): void {
    this.expected = cellId
    this.lock = "none"
  }

  get violation(): string | undefined {
    return this.frames.violated
  }

  /** 'G' arrived: the stream is over. */
  get ended(): boolean {
    return this.phase === "gone"
  }

  /** The stream ended mid-frame (the supervisor killed while writing). */
  get incomplete(): boolean {
    return this.frames.incomplete
  }

  private violated(reason: string): void {
    this.handlers.violation(reason)
  }

  private fail(reason: string): void {
    if (this.frames.violated !== undefined) return
    this.frames.violated = reason
    this.handlers.violation(reason)
  }

  private inCell(what: string): boolean {
    if (this.phase === "cell" && this.record === undefined) return true
    this.fail(`a frame '${what}' outside a cell's window`)
    return false
  }

  private recordContent(chunk: Uint8Array): void {
    const r = this.record
    if (r === undefined) return this.fail("record content ('m') outside a record")
    if (r.fill + chunk.byteLength > r.size) return this.fail(`a record longer than its ${r.size} bytes`)
    r.parts.push(Buffer.from(chunk))
    r.fill += chunk.byteLength
    if (r.fill === r.size) this.endRecord()
  }

  private endRecord(): void {
    const r = this.record!
    this.record = undefined
    this.recordsSeen++
    this.handlers.record(r.kind, Buffer.concat(r.parts, r.size))
  }

  private control(type: string, payload: string, bytes: Buffer): void {
    const quoted = JSON.stringify(payload.slice(0, 80))
    // The supervisor's own failure ('E', then 'G') may cut anything short.
    if (this.record !== undefined && type !== FRAME.kernelGone && type !== FRAME.setupFailed)
      return this.fail(`a frame '${type}' inside a record of ${this.record.size} bytes`)
    switch (type) {
      case FRAME.kernelReady: {
        if (this.phase !== "starting") return this.fail("a second kernel-ready frame ('g')")
        const m = READY.exec(payload)
        if (m === null) return this.fail(`a kernel-ready frame that is not the supervisor's (${quoted})`)
        this.phase = "idle"
        return this.handlers.ready({
          pid: Number(m[1]),
          start: m[2]!,
          preloadFailed: m[3]!.split(" ").filter((x) => x !== "")
        })
      }
      case FRAME.cellStarted: {
        const m = CELL_STARTED.exec(payload)
        if (this.phase !== "idle" || this.expected === undefined || m === null || m[1] !== this.expected)
          return this.fail(`a cell-start frame ('C' ${quoted}) for no cell the host sent`)
        this.phase = "cell"
        this.cellId = m[1]
        this.expected = undefined
        this.recordsSeen = 0
        this.skippedSeen = 0
        return this.handlers.cellStarted(m[1]!, Number(m[2]))
      }
      case FRAME.dropped: {
        if (!this.inCell("d")) return
        const m = DROPPED.exec(payload)
        if (m === null) return this.fail(`a dropped-bytes frame that is not the supervisor's (${quoted})`)
        return this.handlers.dropped(m[1] as "o" | "e", Number(m[2]))
      }
      case FRAME.recordBegin: {
        if (!this.inCell("M")) return
        const m = RECORD_BEGIN.exec(payload)
        if (m === null) return this.fail(`a record frame that is not the supervisor's (${quoted})`)
        const size = Number(m[2])
        if (size > this.bundleBytes)
          return this.fail(`a record of ${size} bytes, over the header's ${this.bundleBytes}`)
        this.record = { kind: m[1] as KernelRecordKind, size, parts: [], fill: 0 }
        if (size === 0) this.endRecord()
        return
      }
      case FRAME.recordSkipped: {
        const m = RECORD_SKIPPED.exec(payload)
        if (m === null) return this.fail(`a skipped-record frame that is not the supervisor's (${quoted})`)
        const late = m[3] === "late"
        if (late !== (this.phase !== "cell"))
          return this.fail(`a skipped-record frame ('N' ${quoted}) ${late ? "inside" : "outside"} a cell`)
        if (this.phase === "gone") return this.fail("a frame after the kernel's end")
        if (!late) this.skippedSeen++
        return this.handlers.skipped(m[1] as KernelRecordKind | "?", Number(m[2]), m[3] as KernelRecordSkip)
      }
      case FRAME.cellEnded: {
        if (!this.inCell("Z")) return
        const m = CELL_END.exec(payload)
        if (m === null || m[1] !== this.cellId)
          return this.fail(`a cell-end frame that is not the supervisor's (${quoted})`)
        const records = Number(m[5])
        const skipped = Number(m[6])
        if (records !== this.recordsSeen || skipped < this.skippedSeen)
          return this.fail(
            `a cell-end frame counting ${records} records and ${skipped} skipped, after ${this.recordsSeen} and ${this.skippedSeen}`
          )
        this.phase = "idle"
        this.cellId = undefined
        return this.handlers.cellEnded({
          cellId: m[1]!,
          status: m[2] as CellEnded["status"],
          stdoutBytes: Number(m[3]),
          stderrBytes: Number(m[4]),
          records,
          skipped
        })
      }
      case FRAME.kernelGone: {
        const m = GONE.exec(payload)
        if (m === null || Number(m[1]) > 255 || Number(m[2]) > 64)
          return this.fail(`a kernel-gone frame that is not the supervisor's (${quoted})`)
        this.phase = "gone"
        this.record = undefined
        return this.handlers.gone({
          exitCode: Number(m[1]),
          signal: Number(m[2]),
          oomKilled: m[3] === "?" ? undefined : m[3] === "1",
          cause: m[4] as KernelGoneCause
        })
      }
      case FRAME.lockWait:
      case FRAME.locked: {
        // The supervisor takes the session lock for a cell the host sent, before its 'C': 'w' (once,
        // while another holds it), then 'l'. Anywhere else a lock frame is not the supervisor's.
        if (this.phase === "cell" || this.phase === "gone")
          return this.fail(`a lock frame ('${type}') ${this.phase === "cell" ? "inside a cell" : "after the end"}`)
        if (this.phase !== "idle" || this.expected === undefined)
          return this.fail(`a lock frame ('${type}') for no cell the host sent`)
        if (this.lock === "held" || (type === FRAME.lockWait && this.lock === "waiting"))
          return this.fail(`a lock frame ('${type}') after the cell's ${this.lock === "held" ? "'l'" : "'w'"}`)
        this.lock = type === FRAME.lockWait ? "waiting" : "held"
        return type === FRAME.lockWait ? this.handlers.lockWait(payload) : this.handlers.locked()
      }
      case FRAME.toolCall:
      case FRAME.toolTooLarge:
      case FRAME.toolCallerGone: {
        if (!this.inCell(type)) return
        const bad = this.handlers.toolFrame(type, bytes)
        if (bad !== undefined) this.fail(bad)
        return
      }
      case FRAME.setupFailed:
        // The supervisor gave up (before 'g': the kernel could not start); after 'g', its 'G' follows.
        return this.handlers.setupFailed(payload)
      default:
        return this.fail(`a frame '${type}' that a kernel's supervisor does not write`)
    }
  }
}
