/**
 * `hermes-sandbox dashboard`: a web page that follows the journal live (dashboard/server.ts), on
 * loopback by default, behind a bearer token (--token-file, else one generated and printed once, in
 * the page's address), with the MCP HTTP server's Host and Origin checks. Runs until a signal.
 */
import { randomBytes } from "node:crypto"
import { JournalLocation } from "@hermes-sandbox/events"
import { isLoopback } from "@hermes-sandbox/mcp/loopback"
import { UsageError } from "../errors.js"
import { ExitCode } from "../exitCodes.js"
import { trapSignals } from "../signals.js"
import { type HttpCommandOptions, readTokenFile } from "../httpOptions.js"
import { openExisting } from "./events.js"

export interface DashboardOptions extends HttpCommandOptions {
  readonly journal?: string
}

const say = (line: string) => process.stderr.write(`hermes-sandbox dashboard: ${line}\n`)

export const dashboard = async (options: DashboardOptions): Promise<number> => {
  const port = options.port === undefined ? 0 : Number(options.port)
  if (!/^[0-9]{1,5}$/.test(options.port ?? "0") || port > 65535)
    throw new UsageError(`--port: expected 0 (a free port) to 65535, got ${JSON.stringify(options.port)}`)
  if (options.host !== undefined && !isLoopback(options.host) && options.allowRemote !== true)
    throw new UsageError(
      `--host ${options.host}: not a loopback address; pass --allow-remote to listen on it anyway (behind TLS)`
    )
  const fromFile = options.tokenFile === undefined ? undefined : readTokenFile(options.tokenFile)
  const generated = fromFile === undefined ? randomBytes(32).toString("base64url") : undefined
  const credentials =
    fromFile === undefined
      ? { default: generated! }
      : { ...fromFile.clients, ...(fromFile.token === undefined ? {} : { default: fromFile.token }) }

  const journal = await openExisting(options.journal)
  const signals = trapSignals()
  const { serveDashboard } = await import("../dashboard/server.js")
  try {
    const serving = await serveDashboard({
      journal,
      journalName: JournalLocation.describe(JournalLocation.resolve(options.journal)),
      credentials,
      port,
      ...(options.host === undefined ? {} : { host: options.host }),
      ...(options.allowRemote === true ? { allowRemote: true } : {}),
      ...(options.allowedHost === undefined ? {} : { allowedHosts: options.allowedHost }),
      ...(options.allowedOrigin === undefined ? {} : { allowedOrigins: options.allowedOrigin })
    })
    say(`serving at ${serving.url} (journal ${JournalLocation.describe(JournalLocation.resolve(options.journal))})`)
    if (generated !== undefined)
      say(`open ${serving.url}#token=${generated} (a generated token; pass --token-file to choose one)`)
    else say(`open ${serving.url}#token=<the token in ${options.tokenFile}>`)
    await new Promise<void>((resolve) => {
      if (signals.signal.aborted) resolve()
      signals.signal.addEventListener("abort", () => resolve(), { once: true })
    })
    await serving.close()
  } finally {
    await journal.close()
    signals.dispose()
  }
  return signals.exitCode() ?? ExitCode.ok
}
