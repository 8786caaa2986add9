/**
 * The upstream MCP servers' configuration (`hermes-sandbox mcp --upstream-config FILE`): JSON or
 * YAML in the shape MCP clients already use — Claude Desktop's `mcpServers` (Cursor, Claude Code's
 * .mcp.json) or the Hermes agent's `mcp_servers` — so an existing entry can be copied as it is:
 *
 *   { "mcpServers": {
 *       "fs":  { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"], "env": { ... } },
 *       "web": { "url": "http://127.0.0.1:3001/mcp", "headers": { "Authorization": "Bearer ..." }, "prefix": "web_", "exclude": ["fetch_raw"] } } }
 *
 * Per server, besides the clients' keys: `prefix` (default `<name>_`), `include`, `exclude`. Keys
 * other clients define and this one has no use for are named in `warnings`, never silently
 * half-applied; an unknown key is an error (a typo such as `exlude` would expose what it meant to hide).
 * Values are taken literally (no variable expansion), as Claude Desktop takes them.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, resolve } from "node:path"
import type * as Yaml from "yaml"
import { describeValue as describe } from "@hermes-sandbox/core/Errors"
import { onFirstUse } from "@hermes-sandbox/core/OnFirstUse"
import { UpstreamConfigError } from "./errors.js"
import type { McpBridgeOptions, McpHttpServer, McpStdioServer } from "./toolsFromMcp.js"

/** One upstream server: where it is (a command, or a Streamable HTTP URL) and which of its tools, under which names. */
export type UpstreamServer = (McpStdioServer | McpHttpServer) & Omit<McpBridgeOptions, "name">

/** Upstream servers by name (the name errors and the journal's tool calls go by, and the default prefix). */
export type UpstreamServers = Readonly<Record<string, UpstreamServer>>

export interface UpstreamConfig {
  readonly servers: UpstreamServers
  /** Keys that were accepted but do nothing here (another client's settings), one line each. */
  readonly warnings: ReadonlyArray<string>
}

const STDIO_KEYS = ["command", "args", "env", "cwd"] as const
const HTTP_KEYS = ["url", "headers"] as const
const BRIDGE_KEYS = ["prefix", "include", "exclude"] as const
/** Other clients' keys: `type` (Claude Code, VS Code) is checked; the Hermes agent's `enabled` and Cline's `disabled` skip a server; `tools` is the Hermes agent's filter. */
const CLIENT_KEYS = ["type", "enabled", "disabled", "tools"] as const
/** The Hermes agent's timeouts: the sandbox's tool limits (callTimeoutMs) decide instead. */
const IGNORED_KEYS = ["timeout", "connect_timeout"] as const
const KEYS: ReadonlyArray<string> = [...STDIO_KEYS, ...HTTP_KEYS, ...BRIDGE_KEYS, ...CLIENT_KEYS, ...IGNORED_KEYS]

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

interface Source {
  /** The file the configuration came from: relative `cwd`s are from its directory. */
  readonly path?: string | undefined
}

/**
 * The servers of a configuration already parsed (an object with `mcpServers` or `mcp_servers`;
 * other top-level keys, such as the rest of a Claude Desktop configuration, are left alone).
 */
export const upstreamConfigOf = (value: unknown, source: Source = {}): UpstreamConfig => {
  const where = source.path === undefined ? "the upstream configuration" : source.path
  const fail = (message: string, server?: string): never => {
    throw new UpstreamConfigError({
      ...(source.path === undefined ? {} : { path: source.path }),
      ...(server === undefined ? {} : { server }),
      message: `${where}: ${message}`
    })
  }
  if (!isRecord(value)) return fail(`expected an object with "mcpServers" (or "mcp_servers"), got ${describe(value)}`)
  if ("mcpServers" in value && "mcp_servers" in value) return fail(`both "mcpServers" and "mcp_servers": give one`)
  const key = "mcpServers" in value ? "mcpServers" : "mcp_servers" in value ? "mcp_servers" : undefined
  if (key === undefined)
    return fail(
      `no "mcpServers" (or "mcp_servers") key; it has ${
        Object.keys(value)
          .map((k) => JSON.stringify(k))
          .join(", ") || "none"
      }`
    )
  const entries = value[key]
  if (!isRecord(entries))
    return fail(
      `${key}: expected an object { name: { command, args?, env? } | { url, headers? } }, got ${describe(entries)}`
    )

  const servers: Record<string, UpstreamServer> = {}
  const warnings: Array<string> = []
  for (const [name, entry] of Object.entries(entries)) {
    const at = `${key}.${name}`
    const bad = (field: string, expected: string, got: unknown): never =>
      fail(`${at}.${field}: expected ${expected}, got ${describe(got)}`, name)
    if (name.trim() === "") fail(`${key}: a server's name is empty`)
    if (!isRecord(entry)) bad("", "an object { command, args?, env? } or { url, headers? }", entry)
    const e = entry as Record<string, unknown>
    const unknown = Object.keys(e).filter((k) => !KEYS.includes(k))
    if (unknown.length > 0)
      fail(`${at}: unknown key ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${KEYS.join(", ")})`, name)
    if ("command" in e === "url" in e)
      fail(
        `${at}: give either "command" (a server started as a process) or "url" (Streamable HTTP), ${"command" in e ? "not both" : "got neither"}`,
        name
      )

    if (e.enabled === false || e.disabled === true) continue
    if (e.enabled !== undefined && typeof e.enabled !== "boolean") bad("enabled", "true or false", e.enabled)
    if (e.disabled !== undefined && typeof e.disabled !== "boolean") bad("disabled", "true or false", e.disabled)
    for (const k of IGNORED_KEYS)
      if (k in e)
        warnings.push(
          `${at}.${k} is ignored here: the sandbox's tool limits decide how long a call may take (--tool-timeout)`
        )

    const strings = (field: string, v: unknown): ReadonlyArray<string> | undefined => {
      if (v === undefined) return undefined
      // The Hermes agent also takes a single name.
      if (typeof v === "string") return [v]
      if (!Array.isArray(v) || !v.every((s) => typeof s === "string")) return bad(field, "a list of strings", v)
      return v as ReadonlyArray<string>
    }
    const stringMap = (field: string, v: unknown): Readonly<Record<string, string>> | undefined => {
      if (v === undefined) return undefined
      if (!isRecord(v)) return bad(field, "an object of strings", v)
      for (const [k, s] of Object.entries(v)) if (typeof s !== "string") bad(`${field}.${k}`, "a string", s)
      return v as Record<string, string>
    }

    let include = strings("include", e.include)
    let exclude = strings("exclude", e.exclude)
    if (e.tools !== undefined) {
      if (!isRecord(e.tools)) bad("tools", "an object { include?, exclude? }", e.tools)
      const tools = e.tools as Record<string, unknown>
      const other = Object.keys(tools).filter((k) => !["include", "exclude", "resources", "prompts"].includes(k))
      if (other.length > 0)
        fail(
          `${at}.tools: unknown key ${other.map((k) => JSON.stringify(k)).join(", ")} (known: include, exclude)`,
          name
        )
      if (
        (tools.include !== undefined && include !== undefined) ||
        (tools.exclude !== undefined && exclude !== undefined)
      ) {
        fail(`${at}: include/exclude given both at the top and under "tools": give them once`, name)
      }
      include ??= strings("tools.include", tools.include)
      exclude ??= strings("tools.exclude", tools.exclude)
      for (const k of ["resources", "prompts"])
        if (k in tools) warnings.push(`${at}.tools.${k} is ignored here: sandboxed code calls tools only`)
    }
    if (e.prefix !== undefined && typeof e.prefix !== "string") bad("prefix", 'a string ("" for none)', e.prefix)
    const bridge = {
      ...(e.prefix === undefined ? {} : { prefix: e.prefix as string }),
      ...(include === undefined ? {} : { include }),
      ...(exclude === undefined ? {} : { exclude })
    }

    if ("command" in e) {
      if (e.type !== undefined && e.type !== "stdio") bad("type", `"stdio" with "command"`, e.type)
      for (const k of HTTP_KEYS) if (k in e) fail(`${at}.${k}: only with "url"`, name)
      if (typeof e.command !== "string" || e.command.trim() === "") bad("command", "a non-empty string", e.command)
      const args =
        e.args === undefined
          ? undefined
          : Array.isArray(e.args) && e.args.every((a) => typeof a === "string")
            ? (e.args as ReadonlyArray<string>)
            : bad("args", "a list of strings", e.args)
      const env = stringMap("env", e.env)
      if (e.cwd !== undefined && typeof e.cwd !== "string") bad("cwd", "a string", e.cwd)
      const cwd =
        e.cwd === undefined
          ? undefined
          : source.path === undefined
            ? (e.cwd as string)
            : resolve(dirname(source.path), e.cwd as string)
      servers[name] = {
        command: e.command as string,
        ...(args === undefined ? {} : { args }),
        ...(env === undefined ? {} : { env }),
        ...(cwd === undefined ? {} : { cwd }),
        ...bridge
      }
    } else {
      if (e.type === "sse")
        fail(
          `${at}.type: "sse" (the deprecated HTTP+SSE transport) is not supported: give the server's Streamable HTTP endpoint`,
          name
        )
      if (e.type !== undefined && e.type !== "http" && e.type !== "streamable-http" && e.type !== "streamableHttp")
        bad("type", `"http" (Streamable HTTP) with "url"`, e.type)
      for (const k of STDIO_KEYS) if (k in e && k !== "command") fail(`${at}.${k}: only with "command"`, name)
      if (typeof e.url !== "string") bad("url", "an http:// or https:// URL", e.url)
      let url: URL | undefined
      try {
        url = new URL(e.url as string)
      } catch {
        bad("url", "an http:// or https:// URL", e.url)
      }
      if (url !== undefined && url.protocol !== "http:" && url.protocol !== "https:")
        bad("url", "an http:// or https:// URL", e.url)
      const headers = stringMap("headers", e.headers)
      servers[name] = { url: e.url as string, ...(headers === undefined ? {} : { headers }), ...bridge }
    }
  }
  return { servers, warnings }
}

// yaml loads when there is a file to read, not with the package.
const loadYaml = onFirstUse<typeof Yaml>(
  () => require("yaml"),
  () => createRequire(import.meta.url)("yaml")
)

/** A configuration's text (JSON or YAML: YAML 1.2 reads JSON as it is). */
export const parseUpstreamConfig = (text: string, source: Source = {}): UpstreamConfig => {
  const doc = loadYaml().parseDocument(text, { prettyErrors: true, uniqueKeys: true })
  const error = doc.errors[0]
  if (error !== undefined) {
    const line = error.linePos?.[0].line
    throw new UpstreamConfigError({
      ...(source.path === undefined ? {} : { path: source.path }),
      message: `${source.path ?? "the upstream configuration"}${line === undefined ? "" : `:${line}`}: not valid JSON or YAML: ${error.message.split("\n")[0]}`
    })
  }
  return upstreamConfigOf(doc.toJS({ maxAliasCount: 100 }), source)
}

/** The configuration in the file at `path`. */
export const loadUpstreamConfig = (path: string): UpstreamConfig => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new UpstreamConfigError({
      path,
      message: `${path}: ${code === "ENOENT" ? "no such file" : `cannot read it (${code ?? String(error)})`}`
    })
  }
  return parseUpstreamConfig(text, { path })
}
