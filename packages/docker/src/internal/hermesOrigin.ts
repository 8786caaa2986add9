/**
 * Where a Hermes configuration value came from (file and line, environment variable, override),
 * and the one error every problem with it becomes, naming that place.
 */
import * as os from "node:os"
import * as nodePath from "node:path"
import { Schema } from "effect"
import type { HermesKey } from "./hermesConfigKeys.js"

/** The configuration is invalid (or an explicitly named file cannot be read). Public as HermesConfig.HermesConfigError. */
export class HermesConfigError extends Schema.TaggedError<HermesConfigError>()("HermesConfigError", {
  /** The `terminal:` key at fault, when there is one. */
  key: Schema.optional(Schema.String),
  /** Where the bad value came from; "config" = the normalized values given to `toExecutorOptions`. */
  source: Schema.Literal("file", "env", "option", "config"),
  /** The config (or .env) file, when the problem is in one. */
  path: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Number),
  envVar: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** Read at each use, so tests (and callers) that change HOME are honoured. */
export const home = (): string => os.homedir()

export const expandHome = (p: string): string =>
  p === "~" ? home() : p.startsWith("~/") ? nodePath.join(home(), p.slice(2)) : p

/** `/home/me/.hermes/config.yaml` → `~/.hermes/config.yaml` for messages. */
export const displayPath = (p: string): string => {
  const h = home()
  return h !== "/" && (p === h || p.startsWith(`${h}/`)) ? `~${p.slice(h.length)}` : p
}

// ---------------------------------------------------------------------------------------
// Raw entries and their origins
// ---------------------------------------------------------------------------------------

export interface Origin {
  readonly source: "file" | "env" | "option"
  readonly key: HermesKey
  /** "path:line", "TERMINAL_X" or "overrides.key". */
  readonly where: string
  readonly path?: string
  readonly line?: number
  /** Line of each list item (file lists only). */
  readonly itemLines?: ReadonlyArray<number>
}

export interface RawEntry {
  readonly value: unknown
  readonly origin: Origin
}

/** Thrown inside the synchronous core, turned into a failure at its edge. */
export const failAt = (origin: Origin, problem: string, item?: number): never => {
  const suffix = item === undefined ? "" : `[${item}]`
  switch (origin.source) {
    case "file": {
      const line = (item === undefined ? undefined : origin.itemLines?.[item]) ?? origin.line
      const fileRef = `${displayPath(origin.path ?? "")}${line === undefined ? "" : `:${line}`}`
      throw new HermesConfigError({
        key: origin.key,
        source: "file",
        ...(origin.path === undefined ? {} : { path: origin.path }),
        ...(line === undefined ? {} : { line }),
        message: `${fileRef}: terminal.${origin.key}${suffix}: ${problem}`
      })
    }
    case "env":
      throw new HermesConfigError({
        key: origin.key,
        source: "env",
        envVar: origin.where,
        message: `environment variable ${origin.where}${suffix}: ${problem}`
      })
    case "option":
      throw new HermesConfigError({
        key: origin.key,
        source: "option",
        message: `${origin.where}${suffix}: ${problem}`
      })
  }
}

/** How a warning names its place. */
export const placeOf = (origin: Origin): string => {
  switch (origin.source) {
    case "file":
      return `${origin.where}: terminal.${origin.key}`
    case "env":
      return `environment variable ${origin.where}`
    case "option":
      return origin.where
  }
}
