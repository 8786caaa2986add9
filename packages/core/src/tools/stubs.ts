/**
 * The modules sandboxed code imports to call host tools, generated per run from the run's tools:
 * Python `hermes_tools` and JavaScript `hermes_tools`; bash has `hermes-tool`, the supervisor's own
 * client, and needs nothing generated.
 *
 * Both modules speak the supervisor's socket protocol (images/runner/hermes-run.c, "tool calls"):
 * one connection per call to $HERMES_TOOLS_SOCKET, so concurrent calls from threads or
 * `Promise.all` share nothing and need no lock; the caller writes "<name>\n<arguments JSON>" and
 * shuts its write side, then reads to EOF: one status byte ('0' result JSON, '1' tool error
 * message, '2' refusal message) and the payload. No status at all means the channel ended. A call
 * is never retried: the host may have run it.
 *
 * Tool names are checked by the caller (TOOL_NAME, RESERVED_TOOL_NAMES) and again here, since
 * they become identifiers. Everything else a tool brings (its description, its schema's property
 * names and texts) is only ever emitted inside string literals or comments, escaped, so no text
 * can end them early and become code.
 *
 * Each module's fixed part, its runtime, is a real file that linters read:
 * tools/runtime/hermes_tools.py and tools/runtime/hermes_tools.js, embedded through the modules
 * `pnpm codegen` generates next to them (scripts/codegen.ts). This file generates the rest: the
 * docs and one function per tool.
 */
import type { Language } from "../Language.js"
import type { JsonSchema } from "../Tools.js"
import { HERMES_TOOLS_JS } from "./runtime/hermes_tools.js.generated.js"
import { HERMES_TOOLS_PY } from "./runtime/hermes_tools.py.generated.js"

/** A name every generated module can bind: an identifier in Python and JavaScript. */
export const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/

/** What the modules are generated from: a tool's name, description and the JSON Schema of its arguments object. */
export interface ToolSpec {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
}

export interface GeneratedModule {
  /** Relative to the code directory. */
  readonly path: string
  readonly content: string
}

/** Python's hard keywords, 3.9 on (`__peg_parser__` was one in 3.9 only). */
const PYTHON_KEYWORDS = [
  "False",
  "None",
  "True",
  "and",
  "as",
  "assert",
  "async",
  "await",
  "break",
  "class",
  "continue",
  "def",
  "del",
  "elif",
  "else",
  "except",
  "finally",
  "for",
  "from",
  "global",
  "if",
  "import",
  "in",
  "is",
  "lambda",
  "nonlocal",
  "not",
  "or",
  "pass",
  "raise",
  "return",
  "try",
  "while",
  "with",
  "yield",
  "__peg_parser__"
]

/** Reserved words of strict-mode JavaScript (modules are strict), and the two names strict mode cannot bind. */
const JAVASCRIPT_RESERVED = [
  "break",
  "case",
  "catch",
  "class",
  "const",
  "continue",
  "debugger",
  "default",
  "delete",
  "do",
  "else",
  "enum",
  "export",
  "extends",
  "false",
  "finally",
  "for",
  "function",
  "if",
  "import",
  "in",
  "instanceof",
  "new",
  "null",
  "return",
  "super",
  "switch",
  "this",
  "throw",
  "true",
  "try",
  "typeof",
  "var",
  "void",
  "while",
  "with",
  "yield",
  "let",
  "static",
  "implements",
  "interface",
  "package",
  "private",
  "protected",
  "public",
  "await",
  "arguments",
  "eval"
]

/** The Python module's private names (its runtime, tools/runtime/hermes_tools.py; all start with `_hermes_`). */
const PYTHON_PRIVATE = [
  "_hermes_builtins",
  "_hermes_json",
  "_hermes_os",
  "_hermes_socket",
  "_hermes_NotGiven",
  "_hermes_not_given",
  "_hermes_call",
  "_hermes_call_with",
  "_hermes_more",
  "_hermes_cjson",
  "_hermes_encode",
  "_hermes_decode",
  "_hermes_not_json",
  "_hermes_JsonContext",
  "_hermes_scan"
]

/**
 * Module attributes the interpreters give meaning to: a function by one of these names would
 * replace the module's builtins or `__all__`, or (JavaScript) set the exports' prototype, make the
 * module look transpiled ESM (`__esModule`), or make the namespace a thenable that `await
 * import("hermes_tools")` would call (`then`).
 */
const MODULE_SPECIAL = [
  "__all__",
  "__builtins__",
  "__doc__",
  "__file__",
  "__name__",
  "__loader__",
  "__package__",
  "__spec__",
  "__path__",
  "__cached__",
  "__getattr__",
  "__dir__",
  "__annotations__",
  "__dict__",
  "__proto__",
  "__esModule",
  "then"
]

/** What every module binds besides the tools. */
const API_NAMES = ["call_tool", "callTool", "ToolError", "ToolRefused"]

/** Names a tool may not have: the modules' own names, keywords and reserved words of either language, and special module attributes. */
export const RESERVED_TOOL_NAMES: ReadonlySet<string> = new Set([
  ...API_NAMES,
  ...PYTHON_KEYWORDS,
  ...JAVASCRIPT_RESERVED,
  ...PYTHON_PRIVATE,
  ...MODULE_SPECIAL
])

/** The modules to write under the code directory for a run in `language` with these tools. */
export const toolModules = (language: Language, tools: ReadonlyArray<ToolSpec>): ReadonlyArray<GeneratedModule> => {
  const seen = new Set<string>()
  for (const tool of tools) {
    // A guard, not the check users see (the caller refuses such tools with a typed error first):
    // a name is emitted as an identifier, so nothing else may get this far.
    if (!TOOL_NAME.test(tool.name) || RESERVED_TOOL_NAMES.has(tool.name) || seen.has(tool.name)) {
      throw new Error(`toolModules: the tool name ${JSON.stringify(tool.name)} is invalid, reserved or repeated`)
    }
    seen.add(tool.name)
  }
  switch (language) {
    case "python":
      return [{ path: "hermes_tools.py", content: pythonModule(tools) }]
    case "javascript":
      return [
        { path: "node_modules/hermes_tools/package.json", content: JAVASCRIPT_PACKAGE_JSON },
        { path: "node_modules/hermes_tools/index.js", content: javascriptModule(tools) }
      ]
    case "bash":
      return []
  }
}

// ---- what both modules say about a tool -------------------------------------------------------

interface Parameter {
  readonly name: string
  readonly required: boolean
  readonly schema: JsonSchema
}

const isObject = (u: unknown): u is JsonSchema => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The arguments a schema names, required ones first in the order of `required`, then the other
 * properties in the order of `properties` (the order the Python functions take them positionally).
 */
const parametersOf = (schema: JsonSchema): ReadonlyArray<Parameter> => {
  const properties = isObject(schema.properties) ? schema.properties : {}
  const required = Array.isArray(schema.required)
    ? schema.required.filter((r): r is string => typeof r === "string")
    : []
  const names = [...new Set([...required, ...Object.keys(properties)])]
  const requiredSet = new Set(required)
  return names.map((name) => {
    const property = Object.hasOwn(properties, name) ? properties[name] : undefined
    return { name, required: requiredSet.has(name), schema: isObject(property) ? property : {} }
  })
}

/** A short type for the docs: "string", "integer | null", "array of string", "one of "a", "b"". */
const typeOf = (schema: JsonSchema): string => {
  if (Object.hasOwn(schema, "const")) return `= ${JSON.stringify(schema.const)}`
  if (Array.isArray(schema.enum)) return `one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`
  const types =
    typeof schema.type === "string"
      ? [schema.type]
      : Array.isArray(schema.type)
        ? schema.type.filter((t) => typeof t === "string")
        : []
  if (types.length > 0) {
    return types
      .map((t) => (t === "array" && isObject(schema.items) ? `array of ${typeOf(schema.items)}` : t))
      .join(" | ")
  }
  for (const key of ["anyOf", "oneOf"] as const) {
    const alternatives = schema[key]
    if (Array.isArray(alternatives) && alternatives.length > 0) {
      return alternatives.map((a) => (isObject(a) ? typeOf(a) : "any")).join(" | ")
    }
  }
  return "any"
}

/** One line per argument: its type, whether it is required, its default, its description and a note. */
const parameterLine = (p: Parameter, shownName: string, note = ""): string => {
  const facts = [
    typeOf(p.schema),
    ...(p.required ? ["required"] : []),
    ...(Object.hasOwn(p.schema, "default") ? [`default ${JSON.stringify(p.schema.default)}`] : [])
  ]
  const description =
    typeof p.schema.description === "string" && p.schema.description !== "" ? `: ${p.schema.description}` : ""
  return `${shownName} (${facts.join(", ")})${description}${note}`
}

const descriptionLines = (tool: ToolSpec): ReadonlyArray<string> =>
  splitLines(tool.description.trim() === "" ? `The host tool ${tool.name}.` : tool.description)

const splitLines = (text: string): ReadonlyArray<string> => text.replace(/\r\n?/g, "\n").split("\n")

/**
 * Characters that are not visible text: controls, format characters (bidirectional overrides
 * among them, which could make the source read differently from what it is), surrogates without
 * a pair, unassigned and private-use code points, and the Unicode line and paragraph separators.
 */
const INVISIBLE = /[\p{C}\p{Zl}\p{Zp}]/gu

// ---- Python -------------------------------------------------------------------------------------

/** A Python string literal of `s`: only printable text stays as it is. */
const pyString = (s: string): string =>
  `"${s
    .replace(/[\\"]/g, (c) => `\\${c}`)
    .replace(INVISIBLE, (c) => {
      if (c === "\n") return "\\n"
      if (c === "\t") return "\\t"
      if (c === "\r") return "\\r"
      const code = c.codePointAt(0)!
      return code > 0xffff ? `\\U${code.toString(16).padStart(8, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
    })}"`

/** A docstring (or any text) as implicitly joined literals, one per line, indented. */
const pyText = (lines: ReadonlyArray<string>, indent: string): string =>
  `${indent}(\n${lines.map((line, i) => `${indent}    ${pyString(i < lines.length - 1 ? `${line}\n` : line)}\n`).join("")}${indent})\n`

const PYTHON_KEYWORD_SET = new Set(PYTHON_KEYWORDS)

/**
 * An argument the generated function can take by name: an ASCII identifier (Python would fold
 * other spellings by NFKC, so two names could become one), not a keyword, not one of the names the
 * function's body uses. Any other argument is passed through **kwargs or call_tool.
 */
const pyBindable = (name: string): boolean =>
  /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !PYTHON_KEYWORD_SET.has(name) && !name.startsWith("_hermes_")

const pythonFunction = (tool: ToolSpec): string => {
  const parameters = parametersOf(tool.parameters)
  // Positional in order up to the first argument Python cannot name; the names after it are
  // keyword-only, so a position always means the same argument as in the docs.
  const firstUnbindable = parameters.findIndex((p) => !pyBindable(p.name))
  const positional = firstUnbindable < 0 ? parameters : parameters.slice(0, firstUnbindable)
  const keywordOnly = parameters.slice(positional.length).filter((p) => pyBindable(p.name))
  const bound = [...positional, ...keywordOnly]
  const signature = [
    ...positional.map((p) => `${p.name}=_hermes_not_given`),
    ...(keywordOnly.length > 0 ? ["*"] : []),
    ...keywordOnly.map((p) => `${p.name}=_hermes_not_given`),
    "**_hermes_more"
  ].join(", ")
  const doc = [
    ...descriptionLines(tool),
    ...(parameters.length > 0
      ? [
          "",
          positional.length > 0
            ? `Arguments (by keyword, or by position in this order: ${positional.map((p) => p.name).join(", ")}):`
            : "Arguments (by keyword):",
          ...parameters.map((p) =>
            pyBindable(p.name)
              ? `    ${parameterLine(p, p.name)}`
              : `    ${parameterLine(p, JSON.stringify(p.name), ` [not a Python name: pass it as **{${JSON.stringify(p.name)}: ...}]`)}`
          )
        ]
      : []),
    "",
    "Arguments not given are not sent (the tool's defaults apply); other keyword arguments are",
    "sent as they are. Returns the tool's result (parsed JSON); raises ToolError if the tool",
    "fails and ToolRefused if the host refuses the call."
  ]
  const given = bound.map((p) => `(${pyString(p.name)}, ${p.name}), `).join("")
  return `\n\ndef ${tool.name}(${signature}):\n${pyText(doc, "    ")}    return _hermes_call_with(${pyString(tool.name)}, (${given}), _hermes_more)\n`
}

const pythonModule = (tools: ReadonlyArray<ToolSpec>): string => {
  const names = tools.map((t) => t.name)
  const doc = [
    "Host tools for this run (generated by hermes-sandbox).",
    "",
    'Call a tool as a function: web_search(query="x") returns its result (parsed JSON);',
    'call_tool("web_search", {"query": "x"}) does the same by name. A tool that fails',
    "raises ToolError with its message; a refused call (unknown tool, invalid arguments, budget",
    "exhausted, arguments too large) raises ToolRefused. Calls may run from several threads at once.",
    "",
    `Tools: ${names.length > 0 ? names.join(", ") : "(none)"}`
  ]
  const all = [...names, "call_tool", "ToolError", "ToolRefused"].map(pyString).join(", ")
  return `# Generated by hermes-sandbox for this run: the host tools this code may call.\n${pyText(doc, "")}\n${HERMES_TOOLS_PY}\n__all__ = [${all}]\n${tools
    .map(pythonFunction)
    .join("")}`
}

// ---- JavaScript ---------------------------------------------------------------------------------

/** Text for a block comment: it cannot end the comment, and invisible characters are shown as escapes. */
const jsCommentText = (s: string): string =>
  s.replace(INVISIBLE, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`).replace(/\*\//g, "*\\/")

const jsDoc = (lines: ReadonlyArray<string>): string =>
  `/**\n${lines.map((line) => (line === "" ? " *\n" : ` * ${jsCommentText(line)}\n`)).join("")} */\n`

/** How the docs name an argument property: args.x, or args["x-y"] for a name that is not an identifier. */
const jsArgument = (name: string): string =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `args.${name}` : `args[${JSON.stringify(name)}]`

const javascriptFunction = (tool: ToolSpec): string => {
  const parameters = parametersOf(tool.parameters)
  const doc = [
    ...descriptionLines(tool),
    "",
    ...(parameters.length > 0
      ? ["Arguments, as one object:", ...parameters.map((p) => `  ${parameterLine(p, jsArgument(p.name))}`), ""]
      : []),
    `Resolves to the tool's result (parsed JSON); rejects with ToolError if the tool fails and`,
    `ToolRefused if the host refuses the call.`
  ]
  return `\n${jsDoc(doc)}exports.${tool.name} = async function ${tool.name}(args) {\n  return callTool(${JSON.stringify(tool.name)}, args);\n};\n`
}

const javascriptModule = (tools: ReadonlyArray<ToolSpec>): string =>
  `// Generated by hermes-sandbox for this run: the host tools this code may call.\n// Tools: ${
    tools.length > 0 ? tools.map((t) => t.name).join(", ") : "(none)"
  }. Each takes one object of arguments, as in web_search({ query: "x" }).\n${HERMES_TOOLS_JS}${tools.map(javascriptFunction).join("")}`

/** CommonJS whatever the code directory's own package.json says. */
const JAVASCRIPT_PACKAGE_JSON = `${JSON.stringify(
  { name: "hermes_tools", version: "0.0.0", private: true, type: "commonjs", main: "index.js" },
  null,
  2
)}\n`
