/**
 * The fake runtime's programs: a test writes what the program does as its code's first line,
 * `#!fake {json}` (fakeProgram), and the fake reads it back from the code of a runner payload
 * (one-shot sandboxes, a session's runner mode) or from an exec's argv. One parser for
 * FakeRuntime and internal/fakeExec, which both depend on this module and not on each other.
 */
import { decodeRunnerPayload, encodeFrame, MAX_FRAME_PAYLOAD, RUNNER_PROTOCOL_ERROR_EXIT } from "../RunnerProtocol.js"

export interface FakeProgram {
  readonly stdout?: string
  readonly stderr?: string
  readonly exitCode?: number
  readonly sleepMs?: number
  /** Never exits by itself (only a kill ends it). */
  readonly hang?: boolean
  /** Exits 137 with oomKilled set, as the kernel's OOM killer would. */
  readonly oom?: boolean
  /** Copies the program's stdin to stdout. */
  readonly echoStdin?: boolean
  /** one-shot only: prints this file of the request's files (under /workspace, or relative to it); missing: exit 1. */
  readonly printFile?: string
  /** exec only: change the working directory (kept by a session's shell). */
  readonly cd?: string
  /** exec only: export variables (kept by a session's shell). */
  readonly export?: Readonly<Record<string, string>>
  /** exec only: print the working directory and a newline. */
  readonly printCwd?: boolean
  /** exec only: print this variable's value (empty when unset) and a newline. */
  readonly printEnv?: string
  /** exec only, after sleepMs: write this file (absolute, or relative to the working directory; parents made). */
  readonly writeFile?: { readonly path: string; readonly content: string }
  /** exec only, after writeFile: print this file's content; missing: a message on stderr, exit 1. */
  readonly cat?: string
}

const PREFIX = "#!fake "

/** The code a test sends to make the fake behave as `program`. */
export const fakeProgram = (program: FakeProgram): string => `${PREFIX}${JSON.stringify(program)}\n`

/** The program a text's first line describes, if it is a `#!fake` line. */
export const programFrom = (text: string): FakeProgram | undefined => {
  const first = text.split("\n", 1)[0] ?? ""
  return first.startsWith(PREFIX) ? JSON.parse(first.slice(PREFIX.length)) as FakeProgram : undefined
}

/** The program of an exec's argv: the last argument that is a `#!fake` line; none does nothing. */
export const lastProgramArg = (args: ReadonlyArray<string>): FakeProgram => {
  for (let i = args.length - 1; i >= 0; i--) {
    const p = programFrom(args[i]!)
    if (p !== undefined) return p
  }
  return {}
}

/** What the supervisor writes to stderr (and exits RUNNER_PROTOCOL_ERROR_EXIT with) for a payload that is not its protocol's. */
export const MALFORMED_PAYLOAD_MESSAGE = "hermes-run: stdin does not start with 'HERMES/2'\n"

const decoder = new TextDecoder()

/**
 * The program in a runner payload's code, the program's stdin after it, and the run's frame key
 * (framed mode). A payload the supervisor would refuse becomes a program that fails as it does.
 */
export const fromRunnerPayload = (payload: Uint8Array): {
  readonly program: FakeProgram
  readonly stdin: Uint8Array
  readonly files: ReadonlyArray<readonly [string, Uint8Array]>
  readonly key?: string
  readonly collect?: ReadonlyArray<string>
} => {
  const decoded = decodeRunnerPayload(payload)
  if (decoded === undefined) return { program: { stderr: MALFORMED_PAYLOAD_MESSAGE, exitCode: RUNNER_PROTOCOL_ERROR_EXIT }, stdin: new Uint8Array(0), files: [] }
  const program = programFrom(decoder.decode(decoded.code ?? new Uint8Array(0))) ?? {}
  const parsed = { program, stdin: decoded.stdin, files: decoded.files, ...(decoded.collect === undefined ? {} : { collect: decoded.collect.patterns }) }
  return decoded.key === undefined ? parsed : { ...parsed, key: decoded.key }
}

/**
 * The fake's model of the supervisor's collection: its only files are the request's, matched by
 * a simplified glob (`*`/`?` within a name, `**` across directories, a directory bringing its
 * subtree; `[...]` is taken literally; dotfile rules and the limits are the real supervisor's
 * business, tested on the engine).
 */
export const fakeCollect = (files: ReadonlyArray<readonly [string, Uint8Array]>, patterns: ReadonlyArray<string>) => {
  const toRegExp = (pattern: string) => {
    const body = pattern.split("/").filter((s) => s !== "" && s !== ".").map((seg) =>
      seg === "**" ? "(?:[^/]+/)*" : `${seg.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]")}/`
    ).join("")
    return new RegExp(`^${body}`)
  }
  const res = patterns.map(toRegExp)
  return [...files].filter(([path]) => res.some((re) => re.test(`${path}/`))).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Output in frames of the run's key, as the supervisor sends it: none longer than the protocol allows. */
export const outputFrames = (key: string, type: "o" | "e", bytes: Uint8Array): Array<Uint8Array> => {
  const frames: Array<Uint8Array> = []
  for (let at = 0; at < bytes.byteLength; at += MAX_FRAME_PAYLOAD) frames.push(encodeFrame(key, type, bytes.subarray(at, at + MAX_FRAME_PAYLOAD)))
  return frames
}
