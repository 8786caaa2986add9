/**
 * `hermes-sandbox run [FILE|-]`: run a program in a single-use sandbox,
 * streaming its output, and exit with its exit code (124 on timeout, 125 when
 * the sandbox itself failed). On a terminal the program's output is sanitized
 * and the CLI's own lines are marked (terminal.ts); elsewhere both are as before.
 */
import { readFileSync } from "node:fs"
import { isatty } from "node:tty"
import { extname } from "node:path"
import type { ExecuteRequest } from "@hermes-sandbox/core"
import { createExecutor, type CreateExecutorOptions } from "@hermes-sandbox/docker"
import { parseDuration } from "../duration.js"
import { ExitCode } from "../exitCodes.js"
import { formatEvent } from "../formatEvent.js"
import { trapSignals } from "../signals.js"
import { TerminalSanitizer, writeCliLine } from "../terminal.js"

export interface RunOptions {
  readonly language?: string
  readonly timeout?: string
  readonly memory?: string
  readonly cpus?: string
  readonly json?: boolean
  readonly journal?: string | boolean
  readonly runtime?: string
  readonly limitsUnsupported?: "fail" | "warn"
  readonly events?: boolean
  readonly stdin?: string
}

const byExtension: Record<string, string> = { ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".sh": "bash", ".bash": "bash" }

const readStdin = (): string => readFileSync(0, "utf8")

export class UsageError extends Error {}

export const run = async (file: string | undefined, options: RunOptions): Promise<number> => {
  const fromStdin = file === undefined || file === "-"
  // isatty(0), not process.stdin.isTTY: touching process.stdin makes fd 0 non-blocking when it is a
  // pipe, and the synchronous read then fails with EAGAIN for programs over ~64 KiB.
  if (fromStdin && isatty(0)) throw new UsageError("no program: give a FILE, or pipe the program into standard input ('-')")
  const code = fromStdin ? readStdin() : readFileSync(file, "utf8")
  const language = options.language ?? (fromStdin ? "python" : byExtension[extname(file).toLowerCase()] ?? "python")
  const timeoutMs = options.timeout === undefined ? undefined : parseDuration(options.timeout)
  if (options.timeout !== undefined && timeoutMs === undefined) throw new UsageError(`--timeout: expected a duration like 5s, 500ms or 2m, got ${JSON.stringify(options.timeout)}`)
  const cpus = options.cpus === undefined ? undefined : Number(options.cpus)
  if (options.cpus !== undefined && !Number.isFinite(cpus)) throw new UsageError(`--cpus: expected a number, got ${JSON.stringify(options.cpus)}`)

  const executorOptions: CreateExecutorOptions = {
    journal: options.journal === false ? "memory" : typeof options.journal === "string" ? { path: options.journal } : "default",
    awaitRemoval: true,
    ...(options.runtime === undefined ? {} : { runtime: options.runtime }),
    ...(options.limitsUnsupported === undefined ? {} : { limitsUnsupported: options.limitsUnsupported })
  }
  const request: ExecuteRequest = {
    language,
    code,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
    ...(cpus === undefined ? {} : { cpus }),
    ...(options.stdin === undefined ? {} : { stdin: readFileSync(options.stdin, "utf8") })
  }

  // The program's output, sanitized on a terminal; whether the terminal's cursor is at a line's
  // start, so that the CLI's own lines (marked there) begin one.
  const program = programOutput()
  const signals = trapSignals()
  const executor = await createExecutor(executorOptions)
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
    const result = await executor.executeCode(request, {
      signal: signals.signal,
      ...(options.json ? {} : { onStdout: program.stdout, onStderr: program.stderr })
    }).finally(program.end)
    if (options.json) process.stdout.write(`${JSON.stringify(result)}\n`)
    else {
      const say = (message: string) => {
        writeCliLine(message, program.atLineStart())
        program.lineStarted()
      }
      if (result.timedOut) say(`timed out after ${request.timeoutMs ?? "the default"} ms; the sandbox was killed`)
      if (result.oomKilled) say("the program ran out of memory (OOM kill)")
      if (result.stdoutTruncated || result.stderrTruncated) say("output past the cap was discarded")
    }
    return result.timedOut ? ExitCode.timedOut : result.exitCode
  } catch (error) {
    const signalCode = signals.exitCode()
    if (signalCode !== undefined) return signalCode
    // main prints the error as a line of its own.
    if (!program.atLineStart() && process.stderr.isTTY === true) process.stderr.write("\n")
    throw error
  } finally {
    await executor.close()
    subscription?.unsubscribe()
    signals.dispose()
  }
}

/**
 * Where the program's output goes: each stream's bytes as they are where it is not a terminal;
 * sanitized where it is. The terminal's line state follows what was written to it.
 */
const programOutput = () => {
  const streams = [process.stdout, process.stderr] as const
  const sanitizers = streams.map((s) => s.isTTY === true ? new TerminalSanitizer() : undefined)
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
