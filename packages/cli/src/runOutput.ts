/**
 * A run's output and outcome as the user sees them, whoever runs it (commands/run.ts's executor,
 * or the daemon through daemon/client.ts): the program's output streamed (sanitized on a terminal),
 * the CLI's own lines after it, --json's result or error, and the exit code; SIGINT/SIGTERM and a
 * closed standard output as signals.ts says.
 */
import { join } from "node:path"
import type { ExecuteRequest, ExecutionResult } from "@hermes-sandbox/core"
import type { ExecuteCallOptions } from "@hermes-sandbox/docker"
import { formatBytes, shownPath, type WriteReport, writeCollected } from "./collectedFiles.js"
import { ExitCode } from "./exitCodes.js"
import { errorJson } from "./reportError.js"
import type { RunOptions } from "./runRequest.js"
import type { SignalScope } from "./signals.js"
import { TerminalSanitizer, writeCliLine } from "./terminal.js"

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

/**
 * The run `execute` performs (with the signal and output hooks it is given): the program's output
 * streamed (or the result as JSON), its exit code. A failure after a signal is that signal's exit
 * code; any other is rethrown for the caller to report (main.ts's describeError).
 */
export const runAndReport = async (
  execute: (hooks: ExecuteCallOptions) => Promise<ExecutionResult>,
  request: ExecuteRequest,
  options: RunOptions,
  program: ProgramOutput,
  signals: SignalScope
): Promise<number> => {
  try {
    const result = await execute({
      signal: signals.signal,
      ...(options.json ? {} : { onStdout: program.stdout, onStderr: program.stderr })
    }).finally(program.end)
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
  }
}

/**
 * Where the program's output goes: each stream's bytes as they are where it is not a terminal;
 * sanitized where it is. The terminal's line state follows what was written to it.
 */
export const programOutput = () => {
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

export type ProgramOutput = ReturnType<typeof programOutput>
