/**
 * Layer 1 of the Hermes configuration: the `terminal:` section of the YAML file, each key with
 * its value and its origin (file and line, and the line of each list item), so a bad value fails
 * at file:line. Syntax errors, a section that is not a mapping and unreadable explicit files fail
 * here; unknown keys and YAML warnings only warn.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { describeValue } from "@hermes-sandbox/core/Errors"
import { onFirstUse } from "@hermes-sandbox/core/OnFirstUse"
import type * as Yaml from "yaml"
import type { Document, Pair } from "yaml"
import { describeUnknownKey, isKnownKey } from "./hermesConfigKeys.js"
import { displayPath, HermesConfigError, type RawEntry } from "./hermesOrigin.js"

// yaml loads when there is a file to read, not with the package.
const loadYaml = onFirstUse<typeof Yaml>(
  () => require("yaml"),
  () => createRequire(import.meta.url)("yaml")
)

/** The file's entries; `found` false when the default path has no file. */
export interface FileLayer {
  readonly entries: ReadonlyArray<RawEntry>
  readonly found: boolean
}

export const readConfigFile = (
  path: string,
  explicit: boolean,
  warnings: Array<string>,
  notes: Array<string>
): FileLayer => {
  const shown = displayPath(path)
  let text: string
  try {
    text = fs.readFileSync(path, "utf8")
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" && !explicit) {
      notes.push(`no config file at ${shown}; using defaults`)
      return { entries: [], found: false }
    }
    throw new HermesConfigError({
      source: "file",
      path,
      message:
        code === "ENOENT"
          ? `${shown}: config file not found`
          : `${shown}: cannot read the config file (${code ?? (error instanceof Error ? error.message : String(error))})`
    })
  }

  const { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument } = loadYaml()
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true })
  const firstError = doc.errors[0]
  if (firstError !== undefined) {
    const line = firstError.linePos?.[0].line ?? lineCounter.linePos(firstError.pos[0]).line
    const summary = firstError.message.split("\n")[0]?.replace(/ at line \d+, column \d+:?$/, "") ?? firstError.code
    throw new HermesConfigError({
      source: "file",
      path,
      line,
      message: `${shown}:${line}: YAML syntax error: ${summary}`
    })
  }
  for (const warning of doc.warnings) {
    const line = warning.linePos?.[0].line ?? lineCounter.linePos(warning.pos[0]).line
    warnings.push(`${shown}:${line}: YAML: ${warning.message.split("\n")[0] ?? warning.code}`)
  }

  const lineOf = (node: unknown): number | undefined => {
    const range = isNode(node) ? node.range : undefined
    return range === undefined || range === null ? undefined : lineCounter.linePos(range[0]).line
  }
  const toJS = (node: unknown, line: number | undefined, key: string): unknown => {
    if (!isNode(node)) return node ?? null
    try {
      return node.toJS(doc as Document, { maxAliasCount: 100 })
    } catch (error) {
      throw new HermesConfigError({
        source: "file",
        path,
        ...(line === undefined ? {} : { line }),
        message: `${shown}${line === undefined ? "" : `:${line}`}: ${key}: ${error instanceof Error ? error.message : String(error)}`
      })
    }
  }

  const root = doc.contents
  if (root === null || (isScalar(root) && (root.value === null || root.value === undefined))) {
    notes.push(`${shown} is empty; using defaults`)
    return { entries: [], found: true }
  }
  if (!isMap(root)) {
    const line = lineOf(root) ?? 1
    throw new HermesConfigError({
      source: "file",
      path,
      line,
      message: `${shown}:${line}: expected a mapping at the top level (with a terminal: section)`
    })
  }
  const terminalPair = root.items.find((pair) => isScalar(pair.key) && pair.key.value === "terminal")
  if (terminalPair === undefined) {
    notes.push(`${shown} has no terminal: section; using defaults`)
    return { entries: [], found: true }
  }
  const section = terminalPair.value
  const sectionLine = lineOf(terminalPair.key)
  if (section === null || section === undefined || (isScalar(section) && section.value === null)) {
    notes.push(`${shown}: the terminal: section is empty; using defaults`)
    return { entries: [], found: true }
  }
  if (!isMap(section)) {
    const line = lineOf(section) ?? sectionLine
    throw new HermesConfigError({
      key: "terminal",
      source: "file",
      path,
      ...(line === undefined ? {} : { line }),
      message: `${shown}${line === undefined ? "" : `:${line}`}: terminal: expected a mapping of settings, got ${describeValue(toJS(section, line, "terminal"))}`
    })
  }

  const entries: Array<RawEntry> = []
  for (const pair of section.items as ReadonlyArray<Pair<unknown, unknown>>) {
    const keyLine = lineOf(pair.key)
    const at = `${shown}${keyLine === undefined ? "" : `:${keyLine}`}`
    const keyName = isScalar(pair.key) ? pair.key.value : undefined
    if (typeof keyName !== "string") {
      warnings.push(
        `${at}: terminal: ignoring a key that is not a string (${describeValue(toJS(pair.key, keyLine, "terminal"))})`
      )
      continue
    }
    if (!isKnownKey(keyName)) {
      warnings.push(`${at}: terminal.${keyName} ${describeUnknownKey(keyName)}`)
      continue
    }
    const itemLines = isSeq(pair.value) ? pair.value.items.map((item) => lineOf(item) ?? keyLine ?? 0) : undefined
    entries.push({
      value: toJS(pair.value, keyLine, `terminal.${keyName}`),
      origin: {
        source: "file",
        key: keyName,
        where: at,
        path,
        ...(keyLine === undefined ? {} : { line: keyLine }),
        ...(itemLines === undefined ? {} : { itemLines })
      }
    })
  }
  return { entries, found: true }
}
