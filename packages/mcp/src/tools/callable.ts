/**
 * What execute_code's description tells a model about the host tools its code may call (the
 * upstream MCP servers' and any given in code): one line per tool — its name with its arguments
 * and the first line of its description — and how Python, JavaScript and bash call them. Rebuilt
 * from the tools the server has, as the Hermes agent rebuilds execute_code's schema per session:
 * a tool the model is not told about is never called, one it is told about that is missing is
 * tried again and again.
 */
import type { ToolLimits, ToolSpec } from "@hermes-sandbox/core"

export interface CallableTools {
  readonly specs: ReadonlyArray<ToolSpec>
  readonly limits: ToolLimits
}

/** Tools listed one per line at most; past them only names (a description is sent with every tools/list). */
const MAX_LISTED = 200
/** Characters of one tool's line at most. */
const MAX_LINE = 200
/** Names listed after the lines at most. */
const MAX_NAMES = 500

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Required arguments (in `required`'s order), then the others, as the generated Python functions take them. */
const argumentsOf = (
  spec: ToolSpec
): { readonly required: ReadonlyArray<string>; readonly optional: ReadonlyArray<string> } => {
  const properties = isObject(spec.parameters.properties) ? spec.parameters.properties : {}
  const required = Array.isArray(spec.parameters.required)
    ? spec.parameters.required.filter((r): r is string => typeof r === "string")
    : []
  return { required, optional: Object.keys(properties).filter((n) => !required.includes(n)) }
}

/** Controls and format characters (bidirectional overrides among them) out, whitespace runs made one space. */
const oneLine = (text: string): string =>
  text
    .replace(/[\p{C}\p{Zl}\p{Zp}]/gu, " ")
    .replace(/\s+/g, " ")
    .trim()

const cut = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/** `name(a, b, limit=…): First line of its description.` */
export const toolLine = (spec: ToolSpec): string => {
  const { required, optional } = argumentsOf(spec)
  const signature = `${spec.name}(${[...required, ...optional.map((n) => `${n}=…`)].join(", ")})`
  const first = oneLine(
    spec.description
      .replace(/\r\n?/g, "\n")
      .split("\n")
      .find((l) => l.trim() !== "") ?? ""
  )
  return cut(first === "" ? signature : `${signature}: ${first}`, MAX_LINE)
}

/** A placeholder value of a property's type, for the examples. */
const exampleOf = (property: unknown): unknown => {
  const type = isObject(property) ? (Array.isArray(property.type) ? property.type[0] : property.type) : undefined
  switch (type) {
    case "string":
      return "..."
    case "integer":
    case "number":
      return 1
    case "boolean":
      return true
    case "array":
      return []
    case "object":
      return {}
    default:
      return "..."
  }
}

/** The tools section of execute_code's description; "" when there are none. */
export const describeCallable = ({ specs, limits }: CallableTools): string => {
  if (specs.length === 0) return ""
  const listed = specs.slice(0, MAX_LISTED)
  const rest = specs.slice(MAX_LISTED)
  const more =
    rest.length === 0
      ? ""
      : `\n… and ${rest.length} more, called the same way: ${rest
          .slice(0, MAX_NAMES)
          .map((s) => s.name)
          .join(", ")}${rest.length > MAX_NAMES ? ", …" : ""}`
  // The example calls the first tool with its required arguments.
  const example = specs[0]!
  const properties = isObject(example.parameters.properties) ? example.parameters.properties : {}
  const args = argumentsOf(example).required.map((n) => [n, exampleOf(properties[n])] as const)
  const python = `${example.name}(${args.map(([n, v]) => `${n}=${JSON.stringify(v)}`).join(", ")})`
  const javascript =
    `await ${example.name}({ ${args.map(([n, v]) => `${/^[A-Za-z_$][\w$]*$/.test(n) ? n : JSON.stringify(n)}: ${JSON.stringify(v)}`).join(", ")} })`.replace(
      "({  })",
      "({})"
    )
  const bash = `hermes-tool ${example.name} '${JSON.stringify(Object.fromEntries(args)).replaceAll("'", `'\\''`)}'`
  return (
    `\n\nThe code can call these ${specs.length} host tools (they run outside the sandbox, on the server; at most ${limits.maxCalls} calls per run, ` +
    `${limits.callTimeoutMs / 1000} s per call; the time they take counts against timeout_s):\n` +
    listed.map((s) => `- ${toolLine(s)}`).join("\n") +
    more +
    `\nPython: \`from hermes_tools import ${example.name}\`, then \`result = ${python}\` (keyword arguments; it returns the parsed result; ` +
    "a tool that fails raises hermes_tools.ToolError with its message, a refused call (unknown tool, invalid arguments, no calls left) ToolRefused; call_tool(name, args) calls one by name; threads may call at once). " +
    `JavaScript: \`const { ${example.name} } = require("hermes_tools")\`, then \`${javascript}\` (also by import; callTool, ToolError, ToolRefused). ` +
    `bash: \`${bash}\` prints the result as JSON (exit 1 on a tool error, 2 on a refusal, the message on stderr).`
  )
}
