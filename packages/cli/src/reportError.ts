/**
 * How a failed command is reported: its exit code and one line on standard error for people and,
 * under --json, `{"error": {"_tag": ..., ...fields}}` on standard output for programs, so a
 * wrapper tells an InvalidRequest from a ContainerFailed by its tag, not by parsing prose.
 */
import { ExitCode } from "./exitCodes.js"
import { NotFound, UsageError } from "./errors.js"
import { writeCliLine } from "./terminal.js"

interface Described {
  readonly code: number
  readonly message: string
}

export const describeError = (error: unknown): Described => {
  const e = error as { _tag?: string; message?: string; hint?: string; buildCommand?: string }
  if (error instanceof UsageError) return { code: ExitCode.usage, message: error.message }
  if (error instanceof NotFound) return { code: ExitCode.notFound, message: error.message }
  switch (e?._tag) {
    case "InvalidRequest":
    case "HermesConfigError":
      return { code: ExitCode.usage, message: e.message ?? String(error) }
    case "DockerUnavailable":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.hint}` }
    case "ImageNotFound":
      return { code: ExitCode.sandboxFailed, message: `${e.message}\n  fix: ${e.buildCommand}` }
    default:
      return { code: ExitCode.sandboxFailed, message: e?.message ?? String(error) }
  }
}

/** `{"error": {"_tag", "message", ...fields}}` (core's errorJson: the MCP server reports errors the same way). */
// The module itself, not the core barrel: help and usage errors must not load the SDK.
import { errorJson } from "@hermes-sandbox/core/ErrorJson"

export { errorJson }

/** A failed command reported: its line on standard error, under --json its error object on standard output; the exit code. */
export const reportFailure = (error: unknown, json: boolean): number => {
  const { code, message } = describeError(error)
  writeCliLine(message)
  if (json) process.stdout.write(`${JSON.stringify(errorJson(error))}\n`)
  return code
}
