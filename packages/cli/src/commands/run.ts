/**
 * `hermes-sandbox run [FILE|-]`: run a program in a single-use sandbox,
 * streaming its output, and exit with its exit code (124 on timeout, 125 when
 * the sandbox itself failed).
 */
import { readFileSync } from "node:fs"
import { extname } from "node:path"
import { createExecutor, type CreateExecutorOptions, type ExecuteRequest } from "@hermes-sandbox/docker"
import { parseDuration } from "../duration.js"
import { ExitCode } from "../exitCodes.js"
import { formatEvent } from "../formatEvent.js"
import { trapSignals } from "../signals.js"

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
  if (fromStdin && process.stdin.isTTY) throw new UsageError("no program: give a FILE, or pipe the program into standard input ('-')")
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

  const signals = trapSignals()
  const executor = await createExecutor(executorOptions)
  const subscription = options.events ? executor.events$.subscribe((e) => process.stderr.write(`${formatEvent(e)}\n`)) : undefined
  try {
    const result = await executor.executeCode(request, {
      signal: signals.signal,
      ...(options.json ? {} : { onStdout: (chunk) => process.stdout.write(chunk), onStderr: (chunk) => process.stderr.write(chunk) })
    })
    if (options.json) process.stdout.write(`${JSON.stringify(result)}\n`)
    else {
      if (result.timedOut) process.stderr.write(`hermes-sandbox: timed out after ${request.timeoutMs ?? "the default"} ms; the sandbox was killed\n`)
      if (result.oomKilled) process.stderr.write("hermes-sandbox: the program ran out of memory (OOM kill)\n")
      if (result.stdoutTruncated || result.stderrTruncated) process.stderr.write("hermes-sandbox: output past the cap was discarded\n")
    }
    return result.timedOut ? ExitCode.timedOut : result.exitCode
  } catch (error) {
    const signalCode = signals.exitCode()
    if (signalCode !== undefined) return signalCode
    throw error
  } finally {
    await executor.close()
    subscription?.unsubscribe()
    signals.dispose()
  }
}
