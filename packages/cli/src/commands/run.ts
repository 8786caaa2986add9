/**
 * `hermes-sandbox run [FILE|-]`: run a program in a single-use sandbox,
 * streaming its output, and exit with its exit code (124 on timeout, 125 when
 * the sandbox itself failed). On a terminal the program's output is sanitized
 * and the CLI's own lines are marked (terminal.ts); elsewhere both are as before.
 * `--collect PATTERN --out DIR` writes the files the run sent back under DIR (collectedFiles.ts)
 * and lists them on standard error, which keeps standard output the program's.
 * `--upstream-config FILE` connects upstream MCP servers (as `mcp` does) whose tools the program
 * calls (`from hermes_tools import ...`); they are closed when the run ends, however it ends.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { isatty } from "node:tty"
import type { ExecuteRequest, ExecutionResult } from "@hermes-sandbox/core"
import type { CreateExecutorOptions, SandboxExecutor } from "@hermes-sandbox/docker"
import type { Upstreams } from "@hermes-sandbox/mcp"
import { checkOutDir, formatBytes, shownPath, sizeOption, type WriteReport, writeCollected } from "../collectedFiles.js"
import { ExitCode } from "../exitCodes.js"
import { formatEvent } from "../formatEvent.js"
import { detectLanguage } from "../language.js"
import { errorJson } from "../reportError.js"
import { type SignalScope, trapSignals } from "../signals.js"
import { TerminalSanitizer, writeCliLine } from "../terminal.js"
import { UsageError } from "../errors.js"
import {
  durationOption,
  executorOptionsOf,
  hermesSource,
  numberOption,
  type SandboxCommandOptions
} from "../sandboxOptions.js"
import {
  connectUpstreamsOf,
  offeredLines,
  readUpstreamConfig,
  toolLimitsOf,
  type UpstreamCommandOptions
} from "../upstreamOptions.js"

export interface RunOptions extends SandboxCommandOptions, UpstreamCommandOptions {
  readonly eval?: string
  readonly language?: string
  readonly timeout?: string
  readonly memory?: string
  readonly cpus?: string
  readonly env?: ReadonlyArray<string>
  readonly file?: ReadonlyArray<string>
  readonly image?: string
  readonly json?: boolean
  readonly events?: boolean
  readonly stdin?: string
  readonly collect?: ReadonlyArray<string>
  readonly out?: string
  readonly collectMaxFiles?: string
  readonly collectMaxFileBytes?: string
  readonly collectMaxBytes?: string
  readonly jsonContent?: boolean
}

const readStdin = (): string => readFileSync(0, "utf8")

/** A file the command line names, read; one that cannot be read is a usage error, not a sandbox failure. */
const readLocal = (path: string, what: string): Buffer => {
  try {
    return readFileSync(path)
  } catch (error) {
    const code = (error as { code?: string }).code
    const why =
      code === "ENOENT"
        ? "no such file"
        : code === "EISDIR"
          ? "is a directory"
          : code === "EACCES"
            ? "permission denied"
            : (error as Error).message
    throw new UsageError(`${what}${path}: ${why}`)
  }
}

/** `--env K=V` (repeatable), later ones winning like in `docker run`. */
const parseEnv = (pairs: ReadonlyArray<string>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const pair of pairs) {
    const at = pair.indexOf("=")
    if (at <= 0) throw new UsageError(`--env: expected NAME=VALUE, got ${JSON.stringify(pair)}`)
    env[pair.slice(0, at)] = pair.slice(at + 1)
  }
  return env
}

/** `--file path=localpath` (repeatable): the local file's bytes at path inside /workspace. */
const parseFiles = (pairs: ReadonlyArray<string>): Record<string, Uint8Array> => {
  const files: Record<string, Uint8Array> = {}
  for (const pair of pairs) {
    const at = pair.indexOf("=")
    if (at <= 0 || at === pair.length - 1)
      throw new UsageError(`--file: expected PATH=LOCALPATH (PATH inside /workspace), got ${JSON.stringify(pair)}`)
    // "/workspace/data.csv" and "data.csv" are the same place; anything else is the request's to refuse.
    const path = pair.slice(0, at).replace(/^\/workspace\/+/, "")
    if (path in files) throw new UsageError(`--file: ${path} is given twice`)
    files[path] = readLocal(pair.slice(at + 1), `--file ${path}: `)
  }
  return files
}

/** --collect, --out, --collect-max-* and --json-content: the request's part, checked before anything runs. */
const collectOptions = (options: RunOptions): Pick<ExecuteRequest, "collect" | "collectLimits"> => {
  const collect = options.collect ?? []
  const maxFiles = numberOption("--collect-max-files", options.collectMaxFiles, true)
  const maxFileBytes = sizeOption("--collect-max-file-bytes", options.collectMaxFileBytes)
  const maxTotalBytes = sizeOption("--collect-max-bytes", options.collectMaxBytes)
  const limits = {
    ...(maxFiles === undefined ? {} : { maxFiles }),
    ...(maxFileBytes === undefined ? {} : { maxFileBytes }),
    ...(maxTotalBytes === undefined ? {} : { maxTotalBytes })
  }
  if (options.jsonContent === true && options.json !== true) throw new UsageError("--json-content: only with --json")
  if (collect.length === 0) {
    if (options.out !== undefined)
      throw new UsageError("--out: only with --collect PATTERN (which files to write there)")
    if (Object.keys(limits).length > 0)
      throw new UsageError("--collect-max-files, --collect-max-file-bytes and --collect-max-bytes: only with --collect")
    if (options.jsonContent === true) throw new UsageError("--json-content: only with --collect")
    return {}
  }
  if (options.out === undefined && options.json !== true)
    throw new UsageError("--collect: give --out DIR to write the files into (or --json to get them in the result)")
  if (options.out !== undefined) checkOutDir(options.out)
  return { collect, ...(Object.keys(limits).length === 0 ? {} : { collectLimits: limits }) }
}

/** The result as --json prints it: the files' metadata, their content (base64) only with --json-content, and where --out wrote them. */
const resultJson = (result: ExecutionResult, options: RunOptions, report: WriteReport | undefined) => ({
  ...result,
  ...(result.files === undefined
    ? {}
    : {
        files: result.files.map(({ content, ...metadata }) => ({
          ...metadata,
          ...(options.jsonContent === true ? { content: Buffer.from(content).toString("base64") } : {})
        }))
      }),
  ...(report === undefined ? {} : { out: report })
})

/** What --collect brought back, one line each on standard error: written, not written (and why), skipped (and why). */
const collectedLines = (result: ExecutionResult, out: string, report: WriteReport): Array<string> => {
  const lines: Array<string> = []
  const refused = new Map(report.notWritten.map((n) => [n.path, n.reason]))
  for (const f of result.files ?? []) {
    const why = refused.get(f.path)
    lines.push(
      why === undefined
        ? `wrote ${shownPath(join(out, f.path))} (${formatBytes(f.size)}, sha256 ${f.sha256.slice(0, 12)})`
        : `not written ${shownPath(join(out, f.path))}: ${why}`
    )
  }
  for (const s of result.skippedFiles ?? [])
    lines.push(
      `not collected ${shownPath(s.path)}${s.skipped === "not-found" ? "" : ` (${formatBytes(s.size)})`}: ${s.skipped}`
    )
  const collection = result.collection
  if (collection !== undefined && collection.status !== "complete") {
    lines.push(
      `collection cut short (${collection.reason ?? "unknown"}): ${collection.status === "none" ? "no file came back" : "only the files above came back"}`
    )
  } else if ((result.files ?? []).length === 0 && (result.skippedFiles ?? []).length === 0) {
    lines.push("--collect: no file matched")
  }
  if (
    result.skippedFiles?.some((s) => s.skipped === "too-large" || s.skipped === "limit" || s.skipped === "total-limit")
  ) {
    lines.push(
      "some files were held back by the limits (--collect-max-files, --collect-max-file-bytes, --collect-max-bytes)"
    )
  }
  return lines
}

export const run = async (file: string | undefined, options: RunOptions): Promise<number> => {
  // Everything the command line can get wrong is found before the SDK loads (usage errors stay fast).
  if (options.eval !== undefined && file !== undefined)
    throw new UsageError("give the program as FILE or as -e CODE, not both")
  const fromStdin = options.eval === undefined && (file === undefined || file === "-")
  // isatty(0), not process.stdin.isTTY: touching process.stdin makes fd 0 non-blocking when it is a
  // pipe, and the synchronous read then fails with EAGAIN for programs over ~64 KiB.
  if (fromStdin && isatty(0))
    throw new UsageError("no program: give a FILE, -e CODE, or pipe the program into standard input ('-')")
  const programFile = fromStdin || options.eval !== undefined ? undefined : file
  const code = options.eval ?? (programFile === undefined ? readStdin() : readLocal(programFile, "").toString("utf8"))
  const language = detectLanguage(code, programFile === undefined ? {} : { file: programFile }, options.language)
  const timeoutMs = durationOption("--timeout", options.timeout)
  const cpus = options.cpus === undefined ? undefined : Number(options.cpus)
  if (options.cpus !== undefined && !Number.isFinite(cpus))
    throw new UsageError(`--cpus: expected a number, got ${JSON.stringify(options.cpus)}`)
  const env = parseEnv(options.env ?? [])
  const files = parseFiles(options.file ?? [])
  const collected = collectOptions(options)
  const hermes = hermesSource(options)
  const toolLimits = toolLimitsOf(options)

  const executorOptions: CreateExecutorOptions = { ...executorOptionsOf(options, hermes), awaitRemoval: true }
  const request: ExecuteRequest = {
    language,
    code,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
    ...(cpus === undefined ? {} : { cpus }),
    ...(options.stdin === undefined ? {} : { stdin: readLocal(options.stdin, "--stdin ").toString("utf8") }),
    ...(Object.keys(env).length === 0 ? {} : { env }),
    ...(Object.keys(files).length === 0 ? {} : { files }),
    ...(options.image === undefined ? {} : { image: options.image }),
    ...collected
  }

  const { createExecutor, fromHermesConfig } = await import("@hermes-sandbox/docker")
  // The configuration's warnings, once (createExecutor applies the same file and says nothing).
  if (hermes !== undefined)
    for (const warning of fromHermesConfig(hermes).loaded.warnings) writeCliLine(`warning: ${warning}`)

  // The program's output, sanitized on a terminal; whether the terminal's cursor is at a line's
  // start, so that the CLI's own lines (marked there) begin one.
  const program = programOutput()
  const signals = trapSignals()
  let upstreams: Upstreams.Upstreams | undefined
  try {
    upstreams = await upstreamsOf(options)
    const tools =
      upstreams === undefined || upstreams.servers.length === 0
        ? {}
        : { tools: upstreams.tools, ...(toolLimits === undefined ? {} : { toolLimits }) }
    return await runIn(await createExecutor(executorOptions), { ...request, ...tools }, options, program, signals)
  } finally {
    // After the executor (runIn closes it, ending the run's tool calls), so no call finds its
    // upstream gone; each process started for one ends here, also after SIGINT/SIGTERM.
    await upstreams?.close()
    signals.dispose()
  }
}

/**
 * --upstream-config's servers, connected (only then is the MCP client code loaded): the file's
 * warnings on standard error; what they offer only with --events, standard error staying the program's.
 */
const upstreamsOf = async (options: RunOptions): Promise<Upstreams.Upstreams | undefined> => {
  const config = await readUpstreamConfig(options)
  if (config === undefined) return undefined
  for (const warning of config.warnings) writeCliLine(`warning: ${warning}`)
  const upstreams = await connectUpstreamsOf(options, config)
  if (upstreams.servers.length === 0 || options.events === true)
    for (const line of offeredLines(options, upstreams.servers, "the program")) writeCliLine(line)
  return upstreams
}

/** The run on `executor`, which it closes: the program's output streamed (or the result as JSON), its exit code. */
const runIn = async (
  executor: SandboxExecutor,
  request: ExecuteRequest,
  options: RunOptions,
  program: ProgramOutput,
  signals: SignalScope
): Promise<number> => {
  const subscription = options.events
    ? executor.events$.subscribe((e) => {
        if (process.stderr.isTTY !== true) {
          process.stderr.write(`${formatEvent(e)}\n`)
          return
        }
        writeCliLine(formatEvent(e), program.atLineStart())
        program.lineStarted()
      })
    : undefined
  try {
    const result = await executor
      .executeCode(request, {
        signal: signals.signal,
        ...(options.json ? {} : { onStdout: program.stdout, onStderr: program.stderr })
      })
      .finally(program.end)
    // Written also when the run timed out: what came back before the deadline is the result's.
    const report =
      options.out === undefined || result.files === undefined ? undefined : writeCollected(options.out, result.files)
    if (options.json) process.stdout.write(`${JSON.stringify(resultJson(result, options, report))}\n`)
    else {
      const say = (message: string) => {
        writeCliLine(message, program.atLineStart())
        program.lineStarted()
      }
      if (report !== undefined) for (const line of collectedLines(result, options.out!, report)) say(line)
      if (result.timedOut) say(`timed out after ${request.timeoutMs ?? "the default"} ms; the sandbox was killed`)
      if (result.oomKilled) say("the program ran out of memory (OOM kill)")
      if (result.stdoutTruncated || result.stderrTruncated) say("output past the cap was discarded")
    }
    return result.timedOut ? ExitCode.timedOut : result.exitCode
  } catch (error) {
    const signalCode = signals.exitCode()
    if (signalCode !== undefined) {
      if (options.json && !signals.stdoutClosed()) process.stdout.write(`${JSON.stringify(errorJson(error))}\n`)
      return signalCode
    }
    // main prints the error as a line of its own.
    if (!program.atLineStart() && process.stderr.isTTY === true) process.stderr.write("\n")
    throw error
  } finally {
    await executor.close()
    subscription?.unsubscribe()
  }
}

/**
 * Where the program's output goes: each stream's bytes as they are where it is not a terminal;
 * sanitized where it is. The terminal's line state follows what was written to it.
 */
const programOutput = () => {
  const streams = [process.stdout, process.stderr] as const
  const sanitizers = streams.map((s) => (s.isTTY === true ? new TerminalSanitizer() : undefined))
  let atLineStart = true
  const write = (i: 0 | 1, text: string) => {
    if (text === "") return
    streams[i].write(text)
    atLineStart = text.endsWith("\n")
  }
  const sink = (i: 0 | 1) => (chunk: Uint8Array) => {
    const sanitizer = sanitizers[i]
    if (sanitizer === undefined) streams[i].write(chunk)
    else write(i, sanitizer.push(chunk))
  }
  return {
    stdout: sink(0),
    stderr: sink(1),
    /** The program's output ended: what the sanitizers held back. */
    end: () => {
      for (const i of [0, 1] as const) {
        const rest = sanitizers[i]?.end()
        if (rest !== undefined) write(i, rest)
      }
    },
    atLineStart: () => atLineStart,
    lineStarted: () => {
      atLineStart = true
    }
  }
}

type ProgramOutput = ReturnType<typeof programOutput>
