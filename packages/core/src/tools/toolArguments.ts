/**
 * A tool call's arguments as the host takes them from sandboxed code: bytes the code chose, up to
 * maxArgumentBytes. Before they are parsed, one pass over the bytes bounds what parsing would
 * build: at most MAX_ARGUMENT_DEPTH nested arrays and objects (deeper, serialising them for the
 * journal overflowed the stack, and the call lost its record and its answer) and at most
 * MAX_ARGUMENT_VALUES values (dense JSON such as `[{},{},…]` grew ~20 bytes of heap per byte, for
 * as long as the handler ran). Parsing drops every `__proto__`, `constructor` and `prototype` key
 * at any depth, so that no handler meets one as an own property (`Object.assign({}, args)` or a deep
 * merge of them would otherwise reach a prototype). docs/tools.md says so.
 */

/** The most nested arrays and objects one call's arguments may have. */
export const MAX_ARGUMENT_DEPTH = 64
/** The most values (objects, arrays, strings, numbers, literals) one call's arguments may hold. */
export const MAX_ARGUMENT_VALUES = 100_000
/** Keys dropped wherever they stand. */
export const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"])

export type DecodedArguments =
  | { readonly _tag: "Decoded"; readonly value: unknown; readonly droppedKeys: number }
  | { readonly _tag: "Refused"; readonly message: string }

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const OPEN_BRACKET = 0x5b
const CLOSE_BRACE = 0x7d
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c

/**
 * Depth and an upper bound of the values, outside strings: every array or object is a value, and
 * every comma starts one more. Stops at the first bound passed.
 */
const measure = (bytes: Uint8Array): { readonly depth: number; readonly values: number } => {
  let depth = 0
  let deepest = 0
  let values = 1
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!
    if (inString) {
      if (b === BACKSLASH) i++
      else if (b === QUOTE) inString = false
      continue
    }
    if (b === QUOTE) inString = true
    else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      depth++
      values++
      if (depth > deepest) deepest = depth
      if (deepest > MAX_ARGUMENT_DEPTH) break
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) depth--
    else if (b === COMMA) values++
    if (values > MAX_ARGUMENT_VALUES) break
  }
  return { depth: deepest, values }
}

const utf8 = new TextDecoder("utf-8", { fatal: false })

/** The arguments' bytes as a value, or why they are refused (the message goes to the code and the journal). */
export const decodeArguments = (bytes: Uint8Array, tool: string): DecodedArguments => {
  const { depth, values } = measure(bytes)
  if (depth > MAX_ARGUMENT_DEPTH) {
    return {
      _tag: "Refused",
      message: `the arguments of ${tool} nest deeper than ${MAX_ARGUMENT_DEPTH} arrays and objects`
    }
  }
  if (values > MAX_ARGUMENT_VALUES) {
    return { _tag: "Refused", message: `the arguments of ${tool} hold more than ${MAX_ARGUMENT_VALUES} values` }
  }
  let droppedKeys = 0
  try {
    const value: unknown = JSON.parse(utf8.decode(bytes), (key, v) => {
      if (!PROTOTYPE_KEYS.has(key)) return v
      droppedKeys++
      return undefined
    })
    return { _tag: "Decoded", value, droppedKeys }
  } catch {
    return { _tag: "Refused", message: `the arguments of ${tool} are not JSON` }
  }
}
