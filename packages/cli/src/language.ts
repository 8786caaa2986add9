/**
 * Which language a program file is: its extension, else its `#!` line. A file that says neither
 * is refused (the user names it with --language) rather than guessed: running a shell script or
 * TypeScript as Python only produces a confusing SyntaxError from inside the sandbox.
 */
import { extname } from "node:path"
import { type Language, LanguageAliases } from "@hermes-sandbox/core/Language"
import { UsageError } from "./errors.js"

const byExtension: Record<string, Language> = {
  ".py": "python",
  ".js": "javascript",
  ".mjs": "javascript",
  ".cjs": "javascript",
  ".sh": "bash",
  ".bash": "bash"
}

/** The interpreter a `#!` line names (`#!/usr/bin/env -S python3 -u` -> "python3"), if it names one. */
export const shebangInterpreter = (code: string): string | undefined => {
  if (!code.startsWith("#!")) return undefined
  const end = code.indexOf("\n")
  const words = code
    .slice(2, end === -1 ? undefined : end)
    .trim()
    .split(/\s+/)
    .filter((w) => w !== "")
  const base = (word: string) => word.slice(word.lastIndexOf("/") + 1)
  let i = 0
  if (words[0] !== undefined && base(words[0]) === "env") {
    // env's own options (-S, -i, -u NAME is rare enough to ignore) and NAME=value assignments.
    i = 1
    while (i < words.length && (words[i]!.startsWith("-") || words[i]!.includes("="))) i++
  }
  const word = words[i]
  return word === undefined ? undefined : base(word)
}

/** The language an interpreter name means: python3.11 -> python, node -> javascript, sh -> bash. */
const languageOfInterpreter = (name: string): Language | undefined =>
  LanguageAliases[name] ?? LanguageAliases[name.replace(/[\d.]+$/, "")]

/**
 * The language of a program: `--language` when given (validated by the executor), else for a
 * file its extension, else its `#!` line; standard input and `-e` code default to Python when
 * they have no `#!` line. Throws UsageError when a file says neither, or its `#!` line names an
 * interpreter the sandbox does not have.
 */
export const detectLanguage = (code: string, source: { readonly file?: string }, given?: string): string => {
  if (given !== undefined) return given
  if (source.file !== undefined) {
    const ext = extname(source.file).toLowerCase()
    const fromExtension = byExtension[ext]
    if (fromExtension !== undefined) return fromExtension
  }
  const interpreter = shebangInterpreter(code)
  if (interpreter !== undefined) {
    const language = languageOfInterpreter(interpreter)
    if (language !== undefined) return language
    throw new UsageError(
      `${source.file ?? "the program"}: its #! line names ${interpreter}; the sandboxes run python, javascript or bash (give --language to override)`
    )
  }
  if (source.file === undefined) return "python"
  const ext = extname(source.file)
  throw new UsageError(
    `${source.file}: cannot tell the language from ${ext === "" ? "a file without an extension" : `the extension ${ext}`} and it has no #! line; ` +
      "give --language python|javascript|bash (known extensions: .py, .js, .mjs, .cjs, .sh, .bash)"
  )
}
