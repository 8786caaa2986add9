/**
 * `run`'s command line made into the SDK's request, checked before the SDK loads (usage errors
 * stay fast). Shared by the direct path (commands/run.ts) and the daemon's client (daemon/client.ts),
 * so both read the same files, from the same directory, with the same errors.
 *
 * Standard input can be read once: a daemon client that read the program from it and then hands
 * the run back (the daemon does not fit it) leaves what it read here for the direct path.
 */
import { readFileSync } from "node:fs"
import { isatty } from "node:tty"
import type { ExecuteRequest } from "@hermes-sandbox/core"
import type { CreateExecutorOptions, HermesConfigSource } from "@hermes-sandbox/docker"
import { checkOutDir, sizeOption } from "./collectedFiles.js"
import { UsageError } from "./errors.js"
import { detectLanguage } from "./language.js"
import {
  durationOption,
  executorOptionsOf,
  hermesSource,
  numberOption,
  type SandboxCommandOptions
} from "./sandboxOptions.js"
import { toolLimitsOf, type UpstreamCommandOptions } from "./toolLimitOptions.js"

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
  /** --no-daemon: run here even when a daemon answers. */
  readonly daemon?: boolean
}

// Across the CLI's two bundles (the daemon client's and the full one), so a global, not a module variable.
const HANDED_OFF = Symbol.for("hermes-sandbox.cli.stdin")
type WithStdin = { [HANDED_OFF]?: string }

/** Standard input, read once per process: a second read gets what the first one read. */
const readStdin = (): string => {
  const holder = globalThis as WithStdin
  holder[HANDED_OFF] ??= readFileSync(0, "utf8")
  return holder[HANDED_OFF]
}

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

export interface PreparedRun {
  readonly request: ExecuteRequest
  readonly executorOptions: CreateExecutorOptions
  readonly hermes: HermesConfigSource | undefined
  readonly toolLimits: ReturnType<typeof toolLimitsOf>
}

/** The run's request and executor options from its command line; a UsageError for anything wrong in it. */
export const prepareRun = (file: string | undefined, options: RunOptions): PreparedRun => {
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

  return { request, executorOptions, hermes, toolLimits }
}
