/**
 * The tools, each a name, its words for the model, honest annotations, its argument and result
 * schemas, and what it does. execute_code runs in a single-use sandbox per call (the executor);
 * terminal, run_python (its Python kernel), read_file, write_file, patch, search_files and reset_session work on the
 * MCP session's sandbox.
 */
import { createHash } from "node:crypto"
import { Effect, type Either, Option, type Schema } from "effect"
import { Executor, type ExecuteRequest, Session } from "@hermes-sandbox/core"
import { FileOperationFailed, InvalidArguments } from "../errors.js"
import type { McpSession } from "../McpSession.js"
import type { Progress } from "../progress.js"
import { cellImageUri, outputOfUri } from "../resources.js"
import { type CallableTools, describeCallable } from "./callable.js"
import { cellResult, TEXT_BUDGET, TRACEBACK_BYTES, type UnsentImage } from "./cellResult.js"
import { collectedResult } from "./collected.js"
import { describeImages, type ImageLimits, type ImageMode } from "./images.js"
import { keepCutOutput, keepOption, keptOutput, keptWords } from "./fullOutput.js"
import { type ExtraContent, NO_OUTPUT, runResult } from "./results.js"
import * as S from "./schemas.js"
import { patchAt, readWindow, searchAt, windowOfBytes, withLineNumbers, writeWhole } from "./sessionFiles.js"

export interface CallContext {
  readonly session: McpSession
  readonly signal: AbortSignal
  readonly progress: Progress
}

export interface ToolResult {
  readonly value: Record<string, unknown>
  readonly isError: boolean
  /** Content blocks after the JSON text one (execute_code's collected files, run_python's images). */
  readonly content?: ReadonlyArray<ExtraContent>
}

export interface ToolDefinition<A = never> {
  readonly name: string
  readonly title: string
  /** Its description for tools/list: from the server's limits and the host tools execute_code's code may call. */
  readonly description: (limits: McpSession["owner"]["limits"], callable: CallableTools) => string
  readonly annotations: {
    readonly readOnlyHint: boolean
    readonly destructiveHint: boolean
    readonly idempotentHint: boolean
    readonly openWorldHint: boolean
  }
  readonly args: Schema.Schema<A, A>
  readonly result: Schema.Schema.Any
  readonly call: (args: A, context: CallContext) => Promise<ToolResult>
}

const define = <A>(tool: ToolDefinition<A>) => tool as unknown as ToolDefinition<unknown>

/** timeout_s, checked against the server's maximum, in ms. */
const timeoutMsOf = (tool: string, given: number | undefined, session: McpSession): number => {
  const { defaultTimeoutS, maxTimeoutS } = session.owner.limits
  const s = given ?? defaultTimeoutS
  if (s > maxTimeoutS) {
    throw new InvalidArguments({
      tool,
      issues: [{ field: "timeout_s", message: `at most ${maxTimeoutS} (this server's maximum), got ${s}` }],
      message: `timeout_s: at most ${maxTimeoutS}`
    })
  }
  return Math.round(s * 1000)
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** Content as bytes (utf8 or base64); a malformed base64 string names its field. */
const bytesOf = (tool: string, field: string, content: string, encoding: "utf8" | "base64" | undefined): Uint8Array => {
  if (encoding !== "base64") return Buffer.from(content, "utf8")
  const compact = content.replace(/\s+/g, "")
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) {
    throw new InvalidArguments({
      tool,
      issues: [{ field, message: "not base64 (A-Z a-z 0-9 + /, padded with = to a multiple of 4)" }],
      message: `${field}: not base64`
    })
  }
  return Buffer.from(compact, "base64")
}

/** The images of one call: its `images` argument, else the server's, within the server's limits (images.ts). */
const imagesOf = (
  given: ImageMode | undefined,
  session: McpSession
): { images: ImageMode; imageLimits: ImageLimits } => {
  const l = session.owner.limits
  return { images: given ?? l.images, imageLimits: l }
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

export const executeCode = define<S.ExecuteCodeArgs>({
  name: "execute_code",
  title: "Run code in a fresh sandbox",
  description: (l, callable) =>
    `Run a python, javascript (node) or bash program in a fresh, single-use Docker sandbox (no network, read-only root, non-root user, memory/CPU/pid limits) that is removed afterwards; nothing carries over between calls (use terminal for that). ` +
    `Files can be written into /workspace (the working directory) first. Timeout: ${l.defaultTimeoutS} s by default, timeout_s up to ${l.maxTimeoutS}. ` +
    `Output: stdout over ${l.resultCaps.stdoutBytes} bytes and stderr over ${l.resultCaps.stderrBytes} bytes keep their head and tail${keptWords(l)}. ` +
    `collect (globs relative to /workspace, e.g. ["*.png", "out/**"]) brings files back after the program ends: each as a resource_link (resources/read; kept ${Math.round(l.fileRetentionS / 60)} min) and listed in the result, ` +
    `${describeImages(l, "PNG/JPEG/GIF/WebP images")}; images: inline|link|none per call; at most ${l.collectLimits.maxFiles} files, ${l.collectLimits.maxFileBytes} bytes each, ${l.collectLimits.maxTotalBytes} bytes in all.` +
    describeCallable(callable),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  args: S.ExecuteCodeArgs,
  result: S.ExecuteCodeResult,
  call: async (args, { session, signal, progress }) => {
    const limits = session.owner.limits
    const timeoutMs = timeoutMsOf("execute_code", args.timeout_s, session)
    const files: Record<string, Uint8Array> = {}
    for (const [i, f] of (args.files ?? []).entries()) {
      if (f.path in files)
        throw new InvalidArguments({
          tool: "execute_code",
          issues: [{ field: `files[${i}].path`, message: `${f.path} is given twice` }],
          message: `files[${i}].path: given twice`
        })
      files[f.path] = bytesOf("execute_code", `files[${i}].content`, f.content, f.encoding)
    }
    const tools = session.owner.tools
    const withTools = session.owner.toolSpecs.length > 0
    const request: ExecuteRequest = {
      language: args.language,
      code: args.code,
      timeoutMs,
      ...(args.stdin === undefined ? {} : { stdin: args.stdin }),
      ...(args.files === undefined ? {} : { files }),
      ...(args.collect === undefined || args.collect.length === 0
        ? {}
        : { collect: args.collect, collectLimits: limits.collectLimits }),
      ...(withTools ? { tools } : {})
    }
    const result = await session.run(
      "execute_code",
      (hooks) => Effect.flatMap(Executor.Executor, (e) => e.executeCode(request, { ...hooks, ...keepOption(session) })),
      signal,
      {
        onExecutionId: progress.follow
      }
    )
    // Kept before the result is returned, so a client may read them as soon as it has it.
    const kept = result.files !== undefined && session.owner.files.put(result.executionId, session.id, result.files)
    const collected = collectedResult(result, { ...imagesOf(args.images, session), kept })
    const value = {
      ...runResult(
        result,
        limits.resultCaps,
        { timeoutS: timeoutMs / 1000, maxTimeoutS: limits.maxTimeoutS, killedOnTimeout: "sandbox" },
        collected?.notes,
        (streams) => keepCutOutput(session, result, streams)
      ),
      // As the Hermes agent's execute_code result: 0 says the code called nothing (or every call was refused).
      ...(withTools ? { tool_calls_made: result.toolCallsMade ?? 0 } : {}),
      ...collected?.fields
    }
    return {
      value,
      isError: value.status !== "success",
      ...(collected === undefined ? {} : { content: collected.content })
    }
  }
})

export const terminal = define<S.TerminalArgs>({
  name: "terminal",
  title: "Run a shell command in this session's sandbox",
  description: (l) =>
    `Run a bash command in a sandbox that belongs to this MCP session: created on the first call, it keeps the working directory, exported variables and files (/workspace, /tmp) between calls, ` +
    `and is removed when the session ends, by reset_session, or after ${l.sessionIdleS} s without a call. No network. Processes a command leaves behind end with it: to keep a server or watcher running, pass background: true (then manage it with the process tool). ` +
    `Output: stdout over ${l.resultCaps.stdoutBytes} bytes and stderr over ${l.resultCaps.stderrBytes} bytes keep their head and tail${keptWords(l)}. ` +
    `Timeout: ${l.defaultTimeoutS} s by default, timeout_s up to ${l.maxTimeoutS}.`,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  args: S.TerminalArgs,
  result: S.TerminalResult,
  call: async (args, { session, signal, progress }) => {
    if (args.background === true) return startInBackground(args, session)
    const timeoutMs = timeoutMsOf("terminal", args.timeout_s, session)
    const command =
      args.workdir === undefined ? args.command : `cd -- ${shellQuote(args.workdir)} || exit 1\n${args.command}`
    const result = await session.run(
      "terminal",
      (hooks) =>
        Effect.flatMap(session.useSandbox, (sandbox) =>
          sandbox.run(command, { ...hooks, ...keepOption(session), timeoutMs })
        ),
      signal,
      { onExecutionId: progress.follow }
    )
    const value = {
      ...runResult(
        result,
        session.owner.limits.resultCaps,
        { timeoutS: timeoutMs / 1000, maxTimeoutS: session.owner.limits.maxTimeoutS, killedOnTimeout: "command" },
        [],
        (streams) => keepCutOutput(session, result, streams)
      ),
      session_id: result.sessionId
    }
    return { value, isError: value.status !== "success" }
  }
})

/** terminal with background: spawn in the session's sandbox, return at once. */
const startInBackground = async (args: S.TerminalArgs, session: McpSession) => {
  const sandbox = await session.owner.runtime.runPromise(session.useSandbox)
  const p = await runEither(
    session,
    sandbox.spawn(args.command, args.workdir === undefined ? {} : { cwd: args.workdir })
  )
  const value: S.TerminalResult = {
    status: "success",
    output: `Started in the background: process_id ${p.id}, pid ${p.pid}. Use the process tool (poll, log, wait, kill) with this id.`,
    ...NO_OUTPUT,
    execution_id: "",
    container_name: sandbox.containerName,
    session_id: sandbox.sessionId,
    process_id: p.id,
    pid: p.pid
  }
  return { value, isError: false }
}

/** An Effect run to a value, its typed failure thrown as itself (the server maps it to a tool error). */
const runEither = async <A, E>(session: McpSession, effect: Effect.Effect<A, E>): Promise<A> => {
  const e: Either.Either<A, E> = await session.owner.runtime.runPromise(Effect.either(effect))
  if (e._tag === "Left") throw e.left
  return e.right
}

/** poll's offsets: where each process's next poll starts, per MCP session. */
const pollOffsets = new WeakMap<McpSession, Map<string, number>>()

const processInfo = (p: Session.ProcessStatus) => ({
  process_id: p.id,
  pid: p.pid,
  command: p.command.length > 200 ? `${p.command.slice(0, 200)}…` : p.command,
  running: p.running,
  exit_code: p.exitCode ?? null,
  ...(p.signal === undefined ? {} : { signal: p.signal }),
  ...(p.endReason === undefined ? {} : { end_reason: p.endReason }),
  duration_seconds: p.durationMs / 1000,
  output_bytes: p.outputBytes
})

/** A process's output as text within the result's cap: head, an omission line, tail (its last part when over the cap). */
const outputText = (o: Session.ProcessOutput, capBytes: number): { text: string; omitted: number } => {
  let omitted = o.omittedBytes
  let tail = o.omittedBytes > 0 ? o.tail : ""
  let head = o.omittedBytes > 0 ? o.head : o.head + o.tail
  const size = (t: string) => Buffer.byteLength(t, "utf8")
  const headCap = Math.floor(capBytes / 4)
  if (o.omittedBytes > 0 && size(head) > headCap) {
    const cut = Buffer.from(head, "utf8").subarray(0, headCap).toString("utf8")
    omitted += size(head) - size(cut)
    head = cut
  }
  const room = o.omittedBytes > 0 ? Math.max(0, capBytes - size(head)) : capBytes
  const last = o.omittedBytes > 0 ? tail : head
  if (size(last) > room) {
    const bytes = Buffer.from(last, "utf8")
    const cut = bytes.subarray(bytes.length - room).toString("utf8")
    omitted += size(last) - size(cut)
    if (o.omittedBytes > 0) tail = cut
    else {
      tail = cut
      head = ""
    }
  }
  const gap = omitted > 0 ? `${head === "" || head.endsWith("\n") ? "" : "\n"}[... ${omitted} bytes omitted ...]\n` : ""
  return { text: `${head}${gap}${tail}`, omitted }
}

export const processTool = define<S.ProcessArgs>({
  name: "process",
  title: "Manage background processes in this session's sandbox",
  description: () =>
    "Manage the background processes terminal started with background: true (servers, watchers, long jobs) in this MCP session's sandbox. " +
    "list: all of them; poll: status and new output since the last poll; log: the kept output (the first and the last part; the middle of a flood is counted, not kept); " +
    "wait: until it ends (timeout_s, default 30); kill: SIGTERM, then SIGKILL after 5 s (or the given signal), to it and every process it started. " +
    "They end with the sandbox (reset_session, the session's end, its idle expiry).",
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  args: S.ProcessArgs,
  result: S.ProcessResult,
  call: async (args, { session }) => {
    const sandbox = await session.owner.runtime.runPromise(session.useSandbox)
    if (args.action === "list") {
      const all = await session.owner.runtime.runPromise(sandbox.processes)
      return { value: { action: "list", processes: all.map(processInfo) } satisfies S.ProcessResult, isError: false }
    }
    const found =
      args.id === undefined
        ? undefined
        : Option.getOrUndefined(await session.owner.runtime.runPromise(sandbox.process(args.id)))
    if (found === undefined) {
      throw new InvalidArguments({
        tool: "process",
        issues: [
          {
            field: "id",
            message:
              args.id === undefined
                ? "required for this action"
                : "no such process in this session's sandbox (see action list)"
          }
        ],
        message: args.id === undefined ? "id: required" : `id: no process ${args.id}`
      })
    }
    const cap = session.owner.limits.resultCaps.stdoutBytes
    const info = async () => processInfo(await session.owner.runtime.runPromise(found.status))
    if (args.action === "poll" || args.action === "log") {
      let offsets = pollOffsets.get(session)
      if (offsets === undefined) pollOffsets.set(session, (offsets = new Map()))
      const since = args.action === "poll" ? (offsets.get(found.id) ?? 0) : 0
      const o = await runEither(session, found.output({ since }))
      if (args.action === "poll") offsets.set(found.id, o.next)
      const { text, omitted } = outputText(o, cap)
      return {
        value: {
          action: args.action,
          process: await info(),
          output: text,
          output_bytes_omitted: omitted
        } satisfies S.ProcessResult,
        isError: false
      }
    }
    if (args.action === "wait") {
      const timeoutMs = timeoutMsOf("process", args.timeout_s ?? 30, session)
      const st = await runEither(session, found.wait({ timeoutMs }))
      return {
        value: { action: "wait", process: processInfo(st), timed_out: st.running } satisfies S.ProcessResult,
        isError: false
      }
    }
    // kill
    await runEither(session, found.kill(args.signal ?? "SIGTERM"))
    let st = await runEither(session, found.wait({ timeoutMs: 5000 }))
    if (st.running && args.signal === undefined) {
      await runEither(session, found.kill("SIGKILL"))
      st = await runEither(session, found.wait({ timeoutMs: 5000 }))
    }
    return {
      value: { action: "kill", process: processInfo(st), timed_out: st.running } satisfies S.ProcessResult,
      isError: false
    }
  }
})

/** An AbortSignal that never aborts: run_python's cancellation goes to the cell (runCell's signal), not to the call. */
const NEVER = new AbortController().signal

export const runPython = define<S.RunPythonArgs>({
  name: "run_python",
  title: "Run Python in this session's kernel",
  description: (l, callable) =>
    `Run Python code as a cell of a persistent IPython kernel in this MCP session's sandbox (the one terminal, read_file and write_file use: files are shared, e.g. a chart saved with plt.savefig is readable with read_file). ` +
    `State persists between calls: variables, imports, loaded data, open files. The value of the last expression is returned (like Jupyter's Out[n]); display() outputs and matplotlib figures come back too, ` +
    `${describeImages(l, "PNG/JPEG images")} (images: inline|link|none per call); HTML and SVG are not sent, only their text/plain. No network. ` +
    `Timeout: ${l.defaultTimeoutS} s by default, timeout_s up to ${l.maxTimeoutS}; at the deadline the cell gets a KeyboardInterrupt and the kernel keeps its state if it stops; if it does not, the kernel is killed and state_lost: true says earlier variables are gone (also after a crash or out of memory). ` +
    `reset: true restarts the kernel first. The sandbox is removed by reset_session, the MCP session's end, or after ${l.sessionIdleS} s without a call. ` +
    `Output: stdout over ${l.resultCaps.stdoutBytes} bytes and stderr over ${l.resultCaps.stderrBytes} bytes keep their head and tail; the text/plain of the value and displays ${TEXT_BUDGET} bytes in all; a traceback ${TRACEBACK_BYTES} bytes (head and tail).` +
    // A cell is a run for the tools: the same modules, limits and budget, per cell.
    describeCallable(callable),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  args: S.RunPythonArgs,
  result: S.RunPythonResult,
  call: async (args, { session, signal }) => {
    const limits = session.owner.limits
    const timeoutMs = timeoutMsOf("run_python", args.timeout_s, session)
    const reset = args.reset === true
    // The host tools execute_code's code may call, for the cell's code too (hermes_tools in cells).
    const withTools = session.owner.toolSpecs.length > 0
    const tools = withTools ? { tools: session.owner.tools, toolLimits: session.owner.toolLimits } : {}
    // The client's cancel interrupts the cell as its deadline would (the kernel keeps its state if
    // it stops); only the MCP session's end interrupts the call itself (and removes the sandbox).
    const { result, sandboxReplaced } = await session.run(
      "run_python",
      () =>
        Effect.gen(function* () {
          const sandbox = yield* session.useSandbox
          if (reset) yield* session.cells.restartKernel(sandbox)
          // For the words only: the result's stateLost (and its journal) already say the loss.
          const sandboxReplaced = session.cells.replaced(sandbox.sessionId)
          const result = yield* session.cells.runCell(sandbox, { code: args.code, timeoutMs, ...tools }, { signal })
          return { result, sandboxReplaced }
        }),
      NEVER
    )
    const { value, content } = cellResult(result, {
      caps: limits.resultCaps,
      ...imagesOf(args.images, session),
      keepImages: (cellId, images) => keepCellImages(session, cellId, images),
      timeoutS: timeoutMs / 1000,
      maxTimeoutS: limits.maxTimeoutS,
      reset,
      sandboxReplaced,
      sessionIdleS: limits.sessionIdleS
    })
    return {
      value: withTools ? { ...value, tool_calls_made: result.toolCallsMade } : value,
      isError: value.status !== "ok",
      content
    }
  }
})

/** A cell's images kept as resources (sandbox://cells/{id}/{name}), in the server's file store, bounded with the collected files. */
const keepCellImages = (
  session: McpSession,
  cellId: string,
  images: ReadonlyArray<UnsentImage>
): ((name: string) => string) | undefined => {
  const files = images.map((i) => ({
    path: i.name,
    size: i.bytes.length,
    sha256: createHash("sha256").update(i.bytes).digest("hex"),
    mime: i.mime,
    mode: 0o644,
    content: i.bytes
  }))
  return session.owner.files.put(cellId, session.id, files, "cell") ? (name) => cellImageUri(cellId, name) : undefined
}

/** One file operation of the session sandbox, abortable like a call (the client's cancel, the MCP session's end). */
const fileCall = <A>(
  tool: string,
  { session, signal }: CallContext,
  op: (sandbox: Session.Session) => Effect.Effect<A, unknown>
): Promise<A> => session.run(tool, () => Effect.flatMap(session.useSandbox, op), signal)

export const readFile = define<S.ReadFileArgs>({
  name: "read_file",
  title: "Read a file from this session's sandbox",
  description: (l) =>
    `Read a file in this MCP session's sandbox (the one terminal uses), under /workspace or /tmp; a relative path is from the terminal's current directory. ` +
    `Also reads a run's whole output that a result cut (its full_output: path sandbox://executions/ID/output/stdout or stderr). ` +
    `Text: offset/limit are lines (1-based; default the first 2000 lines); line_numbers: true prefixes each with its number and '|' ("     7|content", as the Hermes agent prints it; what patch needs is the text after the '|'). A file with NUL bytes is binary: content is base64 and offset/limit are bytes. At most ${l.maxReadBytes} bytes per call (truncated: true says more follows).`,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  args: S.ReadFileArgs,
  result: S.ReadFileResult,
  call: async (args, context) => {
    const max = context.session.owner.limits.maxReadBytes
    const offset = args.offset ?? 1
    const limit = args.limit ?? 2000
    // A run's kept output (full_output), held by the server, not the sandbox.
    const kept = outputOfUri(args.path)
    const { path, size, binary, bytes, totalLines } =
      kept === undefined
        ? await fileCall("read_file", context, (sandbox) => readWindow(sandbox, args.path, offset, limit, max))
        : await Effect.runPromise(windowOfBytes(args.path, keptOutput(context.session, kept), offset, limit, max))
    if (binary) {
      const value: S.ReadFileResult = {
        path,
        content: bytes.toString("base64"),
        encoding: "base64",
        size_bytes: size,
        offset,
        truncated: offset - 1 + bytes.length < size
      }
      return { value, isError: false }
    }
    // Cut at the byte cap on a line boundary when one exists, so a line is never half-returned unless it alone is over the cap.
    let window = bytes
    let cut = false
    if (bytes.length > max) {
      const lastNewline = bytes.subarray(0, max).lastIndexOf(0x0a)
      window = bytes.subarray(0, lastNewline >= 0 ? lastNewline + 1 : max)
      cut = true
    }
    let text = window.toString("utf8")
    const utf8 = Buffer.from(text, "utf8").equals(window)
    let returnedLines = text === "" ? 0 : text.split("\n").length - (text.endsWith("\n") ? 1 : 0)
    if (utf8 && args.line_numbers === true) {
      const numbered = withLineNumbers(text, offset, max)
      text = numbered.text
      returnedLines = numbered.lines
      cut ||= numbered.cut
    }
    const value: S.ReadFileResult = {
      path,
      content: utf8 ? text : window.toString("base64"),
      encoding: utf8 ? "utf8" : "base64",
      size_bytes: size,
      total_lines: totalLines,
      offset,
      truncated: cut || offset - 1 + returnedLines < totalLines
    }
    return { value, isError: false }
  }
})

export const writeFile = define<S.WriteFileArgs>({
  name: "write_file",
  title: "Write a file in this session's sandbox",
  description: (l) =>
    `Write (create or replace) a file in this MCP session's sandbox, under /workspace or /tmp, creating parent directories; a relative path is from the terminal's current directory. ` +
    `encoding base64 for binary content. At most ${l.maxWriteBytes} bytes.`,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  args: S.WriteFileArgs,
  result: S.WriteFileResult,
  call: async (args, context) => {
    const bytes = bytesOf("write_file", "content", args.content, args.encoding)
    const max = context.session.owner.limits.maxWriteBytes
    if (bytes.byteLength > max) {
      throw new FileOperationFailed({
        path: args.path,
        reason: "too-large",
        message: `${args.path}: ${bytes.byteLength} bytes, at most ${max} (this server's maxWriteBytes)`
      })
    }
    const { path, bytesWritten } = await fileCall("write_file", context, (sandbox) =>
      writeWhole(sandbox, args.path, bytes)
    )
    return { value: { path, bytes_written: bytesWritten } satisfies S.WriteFileResult, isError: false }
  }
})

const patchSpecOf = (args: S.PatchArgs): Session.PatchSpec => {
  const bad = (field: string, message: string) =>
    new InvalidArguments({ tool: "patch", issues: [{ field, message }], message: `${field}: ${message}` })
  if (args.diff !== undefined) {
    if (args.old_string !== undefined || args.new_string !== undefined || args.replace_all !== undefined)
      throw bad("diff", "either diff, or old_string and new_string (with replace_all): not both")
    return { diff: args.diff }
  }
  if (args.old_string === undefined) throw bad("old_string", "required (with new_string), unless diff is given")
  if (args.new_string === undefined) throw bad("new_string", "required with old_string (an empty string deletes it)")
  return {
    oldString: args.old_string,
    newString: args.new_string,
    ...(args.replace_all === undefined ? {} : { replaceAll: args.replace_all })
  }
}

export const patch = define<S.PatchArgs>({
  name: "patch",
  title: "Edit a file in this session's sandbox",
  description: () =>
    `Edit a text file in this MCP session's sandbox (the one terminal uses) in place, under /workspace or /tmp; a relative path is from the terminal's current directory. ` +
    `Give old_string and new_string: old_string (exact: whitespace and indentation included) is replaced by new_string, and must occur exactly once unless replace_all is true; ` +
    `otherwise nothing is changed and the error says how many times and on which lines it occurs, or where its first line is (read_file with line_numbers: true shows the lines). ` +
    `Or give diff: a unified diff of this one file (@@ -l,n +l,n @@ hunks; ---/+++ headers optional), each hunk applied where its lines match; a hunk that matches nowhere changes nothing. ` +
    `The file keeps its permission bits; files up to ${Session.MAX_PATCH_BYTES} bytes. Symbolic links are not followed.`,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  args: S.PatchArgs,
  result: S.PatchResult,
  call: async (args, context) => {
    const spec = patchSpecOf(args)
    const r = await fileCall("patch", context, (sandbox) => patchAt(sandbox, args.path, spec))
    const value: S.PatchResult = {
      path: r.path,
      replacements: r.replacements,
      lines: r.lines,
      bytes_written: r.bytesWritten
    }
    return { value, isError: false }
  }
})

export const searchFiles = define<S.SearchFilesArgs>({
  name: "search_files",
  title: "Search files in this session's sandbox",
  description: () =>
    `Search files in this MCP session's sandbox (the one terminal uses), under /workspace or /tmp. ` +
    `target "content" (default): the lines matching pattern, a POSIX extended regular expression (GNU grep -E: | + ? {n,m} () [] ^ $ \\b \\w \\s; not \\d, lookarounds or lazy quantifiers), ` +
    `in the files under path (a directory, searched recursively, or one file; default the terminal's current directory), only in files whose name matches glob if given ("*.py"); each with its path, line number and text (at most ${Session.MAX_MATCH_TEXT_BYTES} bytes of a line). ` +
    `target "files": the files and directories whose name matches pattern as a glob ("*.py", "test_*"). ` +
    `Symbolic links are not followed; binary files, FIFOs and devices are skipped. At most max_results results (default ${Session.DEFAULT_SEARCH_RESULTS}, at most ${Session.MAX_SEARCH_RESULTS}); truncated: true says more existed.`,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  args: S.SearchFilesArgs,
  result: S.SearchFilesResult,
  call: async (args, context) => {
    const r = await fileCall("search_files", context, (sandbox) =>
      searchAt(sandbox, args.path, {
        pattern: args.pattern,
        ...(args.glob === undefined ? {} : { glob: args.glob }),
        ...(args.max_results === undefined ? {} : { maxResults: args.max_results }),
        ...(args.target === undefined ? {} : { target: args.target })
      })
    )
    const value: S.SearchFilesResult = {
      path: r.path,
      target: r.target,
      matches: r.matches.map((m) =>
        r.target === "files" ? { path: m.path } : { path: m.path, line: m.line, text: m.text }
      ),
      count: r.matches.length,
      truncated: r.truncated || r.omitted > 0,
      incomplete: r.incomplete
    }
    return { value, isError: false }
  }
})

export const resetSession = define<Record<string, never>>({
  name: "reset_session",
  title: "Destroy this session's sandbox",
  description: () =>
    "Destroy this MCP session's sandbox (terminal, run_python and the file tools): its files, working directory, variables and Python kernel are gone; the next call gets a fresh one.",
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  args: S.ResetSessionArgs as unknown as Schema.Schema<Record<string, never>, Record<string, never>>,
  result: S.ResetSessionResult,
  call: async (_args, { session }) => {
    const sessionId = await session.owner.runtime.runPromise(session.reset)
    return {
      value: { reset: sessionId !== undefined, session_id: sessionId ?? null } satisfies S.ResetSessionResult,
      isError: false
    }
  }
})

export const tools: ReadonlyArray<ToolDefinition<unknown>> = [
  executeCode,
  terminal,
  processTool,
  runPython,
  readFile,
  writeFile,
  patch,
  searchFiles,
  resetSession
]
