/** The options the CLI's HTTP servers share (`mcp --http`, `dashboard`), and --token-file: what it holds and how it is read. */
import { readFileSync } from "node:fs"
import { UsageError } from "./errors.js"

/** --host, --port, --token-file, --allow-remote, --allowed-host and --allowed-origin, as commander gives them. */
export interface HttpCommandOptions {
  readonly host?: string
  readonly port?: string
  readonly tokenFile?: string
  readonly allowRemote?: boolean
  readonly allowedHost?: ReadonlyArray<string>
  readonly allowedOrigin?: ReadonlyArray<string>
}

/**
 * --token-file holds one token, or one credential per line, "NAME TOKEN" (a bare token is the
 * credential "default"): each credential has its own share of the sessions (--client-sessions).
 */
export const tokensOf = (
  text: string,
  source: string
): { readonly token?: string; readonly clients: Record<string, string> } => {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
  if (lines.length === 0) throw new UsageError(`${source}: no token in it`)
  let token: string | undefined
  const clients: Record<string, string> = {}
  for (const line of lines) {
    const words = line.split(/\s+/)
    if (words.length > 2) throw new UsageError(`${source}: a line is a token, or "NAME TOKEN"`)
    const [name, value] = words.length === 2 ? [words[0]!, words[1]!] : ["default", words[0]!]
    if (value.length < 16)
      throw new UsageError(
        `${source}: the token${name === "default" ? "" : ` of ${name}`} must be at least 16 characters`
      )
    if (name === "default" ? token !== undefined : name in clients)
      throw new UsageError(`${source}: ${name === "default" ? "more than one bare token" : `${name} named twice`}`)
    if (name === "default") token = value
    else clients[name] = value
  }
  return { ...(token === undefined ? {} : { token }), clients }
}

/** The credentials of --token-file PATH (a missing or unreadable file is a usage error). */
export const readTokenFile = (path: string): { readonly token?: string; readonly clients: Record<string, string> } => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (error) {
    throw new UsageError(
      `--token-file ${path}: ${(error as { code?: string }).code === "ENOENT" ? "no such file" : (error as Error).message}`
    )
  }
  return tokensOf(text, `--token-file ${path}`)
}
