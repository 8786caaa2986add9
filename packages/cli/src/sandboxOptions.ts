/**
 * The executor options `run` and `mcp` share, from their command lines: the journal, the Hermes
 * agent's configuration, network, runtime, the limits policy. What the command line can get
 * wrong is a UsageError, found before the SDK loads.
 */
import type { CreateExecutorOptions, HermesConfigSource } from "@hermes-sandbox/docker"
import { parseDuration } from "./duration.js"
import { UsageError } from "./errors.js"

export interface SandboxCommandOptions {
  readonly journal?: string | boolean
  readonly network?: boolean
  readonly runtime?: string
  readonly limitsUnsupported?: "fail" | "warn"
  readonly config?: string
  readonly envFile?: string
  readonly hermes?: boolean
}

/** --config PATH / --hermes: the Hermes agent's `terminal:` configuration, as `config show` reads it. */
export const hermesSource = (options: SandboxCommandOptions): HermesConfigSource | undefined => {
  const envFile = options.envFile === undefined ? {} : { envFile: options.envFile }
  if (options.config !== undefined) return { path: options.config, ...envFile }
  if (options.hermes === true) return options.envFile === undefined ? true : envFile
  if (options.envFile !== undefined) throw new UsageError("--env-file: only with --config PATH or --hermes")
  return undefined
}

export const executorOptionsOf = (
  options: SandboxCommandOptions,
  hermes: HermesConfigSource | undefined
): CreateExecutorOptions => ({
  journal:
    options.journal === false ? "memory" : typeof options.journal === "string" ? { path: options.journal } : "default",
  ...(hermes === undefined ? {} : { hermesConfig: hermes }),
  ...(options.network === undefined ? {} : { network: options.network }),
  ...(options.runtime === undefined ? {} : { runtime: options.runtime }),
  ...(options.limitsUnsupported === undefined ? {} : { limitsUnsupported: options.limitsUnsupported })
})

/** A --flag's duration (5s, 500ms, 2m) in ms, or a UsageError naming the flag. */
export const durationOption = (flag: string, given: string | undefined): number | undefined => {
  if (given === undefined) return undefined
  const ms = parseDuration(given)
  if (ms === undefined)
    throw new UsageError(`${flag}: expected a duration like 5s, 500ms or 2m, got ${JSON.stringify(given)}`)
  return ms
}

/** A --flag's number, or a UsageError naming the flag. */
export const numberOption = (flag: string, given: string | undefined, integer = false): number | undefined => {
  if (given === undefined) return undefined
  const n = Number(given)
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n)))
    throw new UsageError(`${flag}: expected a positive ${integer ? "integer" : "number"}, got ${JSON.stringify(given)}`)
  return n
}
