/**
 * The runner protocol as one table: the header words, the argv modes, the frame types, the
 * supervisor's features and the limits that both sides enforce. The host reads it from here
 * (RunnerProtocol.ts, Artifacts.ts, Tools.ts, kernel/); the in-container supervisor
 * (images/runner/*.c) reads it from images/runner/protocol.h, which `pnpm codegen`
 * (scripts/codegen.ts) writes from this file, and `pnpm codegen --check` fails while the two differ.
 * So a word, a frame or a bound is added or changed HERE, then `pnpm codegen`, then the C.
 *
 * A request uses only what the image's supervisor can do: the base of protocol 2 (words without a
 * `feature`) always, and each feature only if the image says it has it (its label
 * RUNNER_FEATURES_LABEL, written by scripts/build-images.sh from protocol.h's HERMES_RUNNER_FEATURES);
 * an image without that label predates it and has the base only. A new header word, argv mode or
 * request-side behaviour an older supervisor would refuse gets a new feature here (or a new version).
 *
 * This module imports nothing: the codegen loads it as it is.
 */

/** The protocol's version: the first line of the header is `HERMES/<version>`. */
export const RUNNER_PROTOCOL_VERSION = 2

/**
 * What a supervisor can do beyond protocol 2's base (key cap lang code file arg lock leftovers run,
 * `--hold`, `--kill`: what its first supervisor, 113c09e, understood). `since`: the commit that
 * added it to hermes-run.c.
 */
export const RUNNER_FEATURE_TABLE = {
  collect: { since: "7091581", what: "collecting files after a one-shot run (collectPatterns)" },
  fileops: { since: "7091581", what: "a session's file operations (readFile, writeFile, listFiles, removeFile)" },
  kernel: {
    since: "e984261",
    what: "a session's Python kernel (runCell; --kernel python, the kernel commands, a live kernel frozen by calls)"
  },
  preload: { since: "3580adb", what: "a warm pool's preloaded interpreter (--preload python)" },
  stdin: {
    since: "6cc04f2",
    what: "the program's stdin in the header without tools (a runtime whose stdin cannot end: Kubernetes' attach)"
  },
  tools: { since: "f40d6c0", what: "tool calls from the sandboxed code (tools)" }
} as const satisfies Record<string, { readonly since: string; readonly what: string }>

export type RunnerFeature = keyof typeof RUNNER_FEATURE_TABLE

/** Every feature, in the order the image label lists them. */
export const RUNNER_FEATURES: ReadonlyArray<RunnerFeature> = Object.keys(
  RUNNER_FEATURE_TABLE
).sort() as Array<RunnerFeature>

interface WordSpec {
  /** What follows the word on its line ("+" what follows the line as raw bytes). */
  readonly args: string
  readonly what: string
  /** The feature the word belongs to; none: protocol 2's base. */
  readonly feature?: RunnerFeature
}

/**
 * The header, on the supervisor's stdin: `HERMES/<version>\n`, then lines `<word> [arguments]\n`
 * (each shorter than LIMITS.headerLine), every variable-length value following its line as exactly
 * that many raw bytes, until `run`.
 */
export const HEADER_WORDS = {
  key: {
    args: "<32 hex>",
    what: "framed mode: the per-run key (without it: plain mode, the program is exec'd in place)"
  },
  cap: { args: "<n>", what: "relay at most n bytes of each stream; the rest is counted and dropped" },
  lang: { args: "python|javascript|bash", what: "code mode: run the code with that interpreter" },
  code: { args: "<n> + n bytes", what: "the program" },
  file: { args: "<path length> <n> + path + n bytes", what: "a file, at a path relative to the workspace" },
  arg: { args: "<n> + n bytes", what: "one argv element (argv mode: session calls)" },
  lock: { args: "<n> + n bytes", what: "a lock file to flock before running (sessions)" },
  leftovers: { args: "kill", what: "end every process left by earlier calls, before and after (sessions)" },
  collect: {
    args: "<n> + pattern",
    what: "after the program, send the workspace's files matching this glob",
    feature: "collect"
  },
  limits: {
    args: "<files> <bytes per file> <bytes in all>",
    what: "the bounds of what is collected",
    feature: "collect"
  },
  read: {
    args: "<path length> <offset> <limit> + path",
    what: "a session's file operation: send a file's bytes",
    feature: "fileops"
  },
  write: {
    args: "<path length> <n> <mode> + path + n bytes",
    what: "a session's file operation: write a file",
    feature: "fileops"
  },
  list: { args: "<path length> + path", what: "a session's file operation: list a directory", feature: "fileops" },
  remove: {
    args: "<path length> + path",
    what: "a session's file operation: remove a file or an empty directory",
    feature: "fileops"
  },
  tools: {
    args: "<calls at once> <request bytes> <reply bytes>",
    what: "tool calls: the program's stdin comes in the header, the rest of stdin is the host's replies",
    feature: "tools"
  },
  stdin: {
    args: "<n> + n bytes",
    what: "the program's stdin, fed from memory and then ended (with tools always; without, feature `stdin`: the rest of stdin is not read)",
    feature: "tools"
  },
  module: {
    args: "<path length> <n> + path + n bytes",
    what: "with tools: a generated module under the code directory",
    feature: "tools"
  },
  display: {
    args: "<bundle bytes> <count> <total bytes>",
    what: "kernel: the bounds of a cell's records (one record's bytes, records per cell, record bytes per cell)",
    feature: "kernel"
  },
  grace: {
    args: "<ms>",
    what: "kernel: after an interrupt's SIGINT, how long the kernel has to end the cell and answer a ping before the domain is killed",
    feature: "kernel"
  },
  preload: {
    args: "<n> + n bytes",
    what: "kernel: modules to import when the kernel starts, space-separated dotted names",
    feature: "kernel"
  },
  run: {
    args: "",
    what: "the header's end; what follows is the program's stdin (with tools: the replies, \"R <id> <status> <n>\\n\" + n bytes)"
  }
} as const satisfies Record<string, WordSpec>

export type HeaderWord = keyof typeof HEADER_WORDS

interface ModeSpec {
  readonly arg: string
  readonly args: string
  readonly what: string
  readonly feature?: RunnerFeature
}

/** The supervisor's other invocations (argv[1]). */
export const RUNNER_MODES = {
  hold: { arg: "--hold", args: "", what: "a session sandbox's PID 1: reap orphans, exit on SIGTERM" },
  kill: {
    arg: "--kill",
    args: "PID START all|since",
    what: "end a timed-out session call: PID (if its start time is START), then every other process (all) or every one started since START"
  },
  preload: {
    arg: "--preload",
    args: "python [MODULE...]",
    what: "start the interpreter before the request arrives (warm pool), and import those modules in it (a supervisor from before 'MODULE...' ignores them)",
    feature: "preload"
  },
  kernel: {
    arg: "--kernel",
    args: "python",
    what: "a session's kernel: the header once, then KERNEL_COMMANDS on stdin; lives until stdin ends, `restart` or the kernel's death",
    feature: "kernel"
  },
  tool: {
    arg: "--tool",
    args: "NAME [JSON|-]",
    what: "one tool call from a shell (also as `hermes-tool`, a link to the supervisor)",
    feature: "tools"
  }
} as const satisfies Record<string, ModeSpec>

/** The name under which the supervisor is the tool-call client (a symlink in the code directory). */
export const TOOL_CLIENT_NAME = "hermes-tool"

interface KernelCommandSpec {
  readonly args: string
  readonly what: string
}

/**
 * Kernel mode (`--kernel python`): after the header's `run`, stdin is these line commands, each
 * shorter than LIMITS.headerLine. A cell's own lines follow its `cell` line and use the header's
 * words (HEADER_WORDS: `code`, and with tools `tools` and `module`) up to `run`.
 */
export const KERNEL_COMMANDS = {
  cell: {
    args: "<cell id> <execution count>",
    what: "run a cell: then `code <n>` + n bytes, with tools `tools A R P` and `module …`, then `run`; cell id [A-Za-z0-9_-]{1,64}"
  },
  interrupt: {
    args: "<cell id>",
    what: "the cell's deadline or abort: SIGINT to the kernel's process group, then `grace` ms for its end and a ping, else the domain is killed ('Z' none, 'G' interrupt-timeout); ignored for a cell that is not running"
  },
  restart: { args: "", what: "end the kernel (kill the domain, 'G' requested) and exit; stdin's end means the same" },
  R: { args: "<id> <status> <n> + n bytes", what: "a tool call's reply, as after a tools run's header" }
} as const satisfies Record<string, KernelCommandSpec>

export type KernelCommand = keyof typeof KERNEL_COMMANDS

/** The kinds of a cell's records ('M' and 'N' frames): Jupyter's message types, by one letter. */
export const KERNEL_RECORD_KINDS = {
  R: "execute_result: the last expression's value, {data, metadata}",
  D: "display_data: a display, {data, metadata}",
  X: "error: the cell's exception, {ename, evalue, traceback}"
} as const

/** Why a record was not forwarded ('N' frames). */
export const KERNEL_RECORD_SKIPS = ["too-large", "count", "total", "malformed", "late"] as const

/** Why a kernel ended ('G' frames). */
export const KERNEL_GONE_CAUSES = ["requested", "interrupt-timeout", "crashed", "supervisor"] as const

interface FrameSpec {
  readonly type: string
  /** Data: delivered piecewise as it arrives (at most LIMITS.framePayload per frame); otherwise a control payload. */
  readonly data?: true
  readonly payload: string
}

/**
 * The frames on the supervisor's stdout (framed mode): <key><type><4-byte big-endian length><payload>.
 * The host decodes only these types (RunnerProtocol.FrameDecoder).
 */
export const FRAMES = {
  stdout: { type: "o", data: true, payload: "the program's stdout bytes" },
  stderr: { type: "e", data: true, payload: "the program's stderr bytes" },
  started: { type: "p", payload: '"<pid> <start>": the program\'s pid and start time (clock ticks since boot)' },
  lockWait: { type: "w", payload: '"<pid> <command>": waiting for the lock, held by that process' },
  locked: { type: "l", payload: "(empty): the lock is held" },
  exited: {
    type: "x",
    payload:
      '"<exit code 0-255> <stdout bytes> <stderr bytes> <signal>": the program\'s process exited (its pipes drained); <signal> is the first signal sent to the sandbox from outside, 0 if none; nothing follows'
  },
  dropped: {
    type: "d",
    payload: '"<o|e> <bytes written so far>": the stream passed the cap (then again at most every LIMITS.tellDroppedMs)'
  },
  setupFailed: {
    type: "E",
    payload: '"<message>": setup failed (bad header, a file that cannot be written); exit LIMITS.protocolErrorExit'
  },
  fileBegin: {
    type: "f",
    payload: "\"<mode octal> <size> \" + path: a file's content follows in 'c' frames (collect, read)"
  },
  fileContent: { type: "c", data: true, payload: "a piece of that file's content" },
  fileEnd: { type: "F", payload: '"<bytes sent>": the file is complete' },
  skipped: {
    type: "s",
    payload:
      '"<reason> <size> " + path: a matching entry not sent (at most LIMITS.skippedListed, LIMITS.skippedNameBytes of paths)'
  },
  skippedCount: {
    type: "S",
    payload: '"<reason> <count>": after the walk, how many more were skipped for that reason'
  },
  listEntry: {
    type: "n",
    payload: '"<kind f|d|l|o> <size> <mode octal> <mtime seconds> " + name: one entry of a listing'
  },
  opDone: { type: "k", payload: '"<words>": a file operation succeeded' },
  opFailed: { type: "r", payload: '"<ERRNO NAME> <message>": a file operation failed' },
  toolCall: {
    type: "t",
    payload: "\"<id> <argument bytes> \" + name: a tool call, its arguments in exactly that many bytes of 'a' frames"
  },
  toolArguments: { type: "a", data: true, payload: "a piece of the current call's arguments" },
  toolTooLarge: {
    type: "b",
    payload: '"<id> <argument bytes seen> " + name: a call larger than allowed (never forwarded)'
  },
  toolCallerGone: { type: "q", payload: '"<id>": the call\'s caller went away' },
  kernelReady: {
    type: "g",
    payload:
      '"<pid> <start>" + " <name>" per preload module that failed to import: kernel mode, the kernel is up and idle'
  },
  cellStarted: {
    type: "C",
    payload:
      "\"<cell id> <idle bytes>\": the lock is held and the cell handed over; idle bytes: what the kernel wrote between cells ('L' frames carry at most LIMITS.kernelLateBytes of it)"
  },
  recordBegin: {
    type: "M",
    payload: "\"<kind R|D|X> <bytes>\": a cell's record, its JSON in exactly that many bytes of 'm' frames"
  },
  recordContent: { type: "m", data: true, payload: "a piece of the current record" },
  recordSkipped: {
    type: "N",
    payload:
      "\"<kind> <bytes> <reason>\": a record not forwarded (KERNEL_RECORD_SKIPS); its bytes never are. malformed: kind '?' when none could be read (garbage: the rest of the cell's records, bytes counted)"
  },
  cellEnded: {
    type: "Z",
    payload:
      "\"<cell id> <ok|error|none> <stdout bytes> <stderr bytes> <records> <skipped>\": the cell's pipes are drained and closed, the lock released; none: the kernel did not end it (killed: a 'G' follows)"
  },
  lateOutput: {
    type: "L",
    data: true,
    payload:
      "bytes the kernel wrote to its stdout or stderr between cells (at most LIMITS.kernelLateBytes per idle time)"
  },
  kernelGone: {
    type: "G",
    payload:
      "\"<exit code> <signal> <oom 0|1|?> <cause>\": the kernel's domain is dead (KERNEL_GONE_CAUSES); exit code 128 + signal when killed, signal 0 when it exited; oom: the memory cgroup's oom_kill count rose (? unreadable); nothing follows, the supervisor exits"
  }
} as const satisfies Record<string, FrameSpec>

export type FrameName = keyof typeof FRAMES

/** Each frame type's byte, by name: FRAME.exited === "x". */
export const FRAME = Object.fromEntries(Object.entries(FRAMES).map(([name, f]) => [name, f.type])) as {
  readonly [N in FrameName]: (typeof FRAMES)[N]["type"]
}

/** The reasons the supervisor gives in 's' and 'S' frames for an entry it did not send. */
export const SKIP_REASONS = [
  "too-large",
  "limit",
  "total-limit",
  "symlink",
  "not-regular",
  "unreadable",
  "too-deep",
  "name-too-long",
  "walk-limit"
] as const

interface LimitSpec {
  /** The name protocol.h gives it. */
  readonly c: string
  readonly value: number
  readonly what: string
  /** Written in octal in protocol.h. */
  readonly octal?: true
}

/** The bounds and constants both sides hold. */
export const LIMITS = {
  keyBytes: { c: "KEY_BYTES", value: 16, what: "bytes of a run's key (32 hex digits in the header)" },
  framePayload: {
    c: "CHUNK",
    value: 65_536,
    what: "the largest payload of a data frame (o, e, c, a); also the supervisor's read size"
  },
  controlPayload: {
    c: "MAX_CONTROL_PAYLOAD",
    value: 8192,
    what: "the largest payload of a control frame the host accepts (a path of PATH_MAX and a few words)"
  },
  headerLine: {
    c: "LINE_MAX_BYTES",
    value: 4096,
    what: "a header line, or a tool reply's line, newline included, is shorter"
  },
  args: { c: "MAX_ARGS", value: 4096, what: "arg lines at most" },
  files: { c: "MAX_FILES", value: 100_000, what: "file lines at most" },
  collectPatterns: { c: "MAX_PATTERNS", value: 64, what: "collect patterns at most" },
  globstars: { c: "MAX_GLOBSTARS", value: 4, what: "'**' at most in one pattern (matching cost)" },
  collectDepth: { c: "COLLECT_MAX_DEPTH", value: 32, what: "directory levels the collection walks at most" },
  collectEntries: { c: "COLLECT_MAX_ENTRIES", value: 100_000, what: "entries the collection visits at most" },
  collectDefaultFiles: { c: "COLLECT_DEFAULT_FILES", value: 100, what: "files sent at most, without a limits line" },
  collectDefaultFileBytes: {
    c: "COLLECT_DEFAULT_FILE_BYTES",
    value: 10 * 1024 * 1024,
    what: "bytes of one file at most, without a limits line"
  },
  collectDefaultTotalBytes: {
    c: "COLLECT_DEFAULT_TOTAL_BYTES",
    value: 32 * 1024 * 1024,
    what: "bytes of files and names in all at most, without a limits line"
  },
  skippedListed: {
    c: "SKIPPED_MAX_FRAMES",
    value: 1000,
    what: "skipped entries listed ('s') at most; the rest are counted ('S')"
  },
  skippedNameBytes: {
    c: "SKIPPED_MAX_NAME_BYTES",
    value: 256 * 1024,
    what: "bytes of listed skipped entries' paths at most"
  },
  listEntries: { c: "LIST_MAX_ENTRIES", value: 10_000, what: "entries of one listing at most" },
  toolCallsInFlight: {
    c: "TOOL_CALLS_MAX",
    value: 64,
    what: "tool calls taken at once at most (the tools line's first number)"
  },
  toolLimitBytes: {
    c: "TOOL_BYTES_MAX",
    value: 1024 * 1024 * 1024,
    what: "a tools line's request or reply bytes at most"
  },
  toolNameSent: {
    c: "TOOL_NAME_SENT_MAX",
    value: 256,
    what: "bytes of a call's name sent in its 't' or 'b' frame at most"
  },
  tellDroppedMs: { c: "TELL_DROPPED_MS", value: 200, what: "ms between two 'd' frames of one stream at least" },
  kernelBundleBytes: {
    c: "KERNEL_BUNDLE_BYTES",
    value: 4 * 1024 * 1024,
    what: "kernel: one record's JSON bytes at most, without a display line (SECURITY.md, maxBundleBytes)"
  },
  kernelRecords: {
    c: "KERNEL_RECORDS",
    value: 100,
    what: "kernel: records per cell at most, without a display line (maxDisplays)"
  },
  kernelRecordBytes: {
    c: "KERNEL_RECORD_BYTES",
    value: 32 * 1024 * 1024,
    what: "kernel: record bytes per cell at most, without a display line (maxDisplayBytes)"
  },
  kernelRecordBytesMax: {
    c: "KERNEL_RECORD_BYTES_MAX",
    value: 256 * 1024 * 1024,
    what: "kernel: the largest value a display line may give (any of its numbers)"
  },
  kernelGraceMs: { c: "KERNEL_GRACE_MS", value: 2000, what: "kernel: the interrupt's grace, without a grace line" },
  kernelGraceMaxMs: {
    c: "KERNEL_GRACE_MAX_MS",
    value: 30_000,
    what: "kernel: the longest grace a grace line may give"
  },
  kernelLateBytes: {
    c: "KERNEL_LATE_BYTES",
    value: 64 * 1024,
    what: "kernel: bytes written between two cells forwarded ('L') at most; the rest are counted in the next 'C'"
  },
  kernelPreloadBytes: { c: "KERNEL_PRELOAD_BYTES", value: 4096, what: "kernel: a preload line's bytes at most" },
  kernelCellIdBytes: { c: "KERNEL_CELL_ID_BYTES", value: 64, what: "kernel: a cell id's bytes at most" },
  keepExistingMode: {
    c: "KEEP_EXISTING_MODE",
    value: 0o100000,
    octal: true,
    what: "in a write's mode: an existing regular file keeps its permission bits"
  },
  protocolErrorExit: {
    c: "PROTOCOL_ERROR",
    value: 126,
    what: "the supervisor's exit code for a bad header or a failed setup"
  },
  interpreterMissingExit: {
    c: "INTERPRETER_MISSING",
    value: 127,
    what: "the supervisor's exit code when the interpreter or program is missing"
  }
} as const satisfies Record<string, LimitSpec>

/** Each limit's value, by name: LIMIT.collectPatterns === 64. */
export const LIMIT = Object.fromEntries(Object.entries(LIMITS).map(([name, l]) => [name, l.value])) as {
  readonly [N in keyof typeof LIMITS]: number
}

/** The label every runner image carries, with the protocol version its supervisor speaks. */
export const RUNNER_PROTOCOL_LABEL = "org.hermes-sandbox.runner-protocol"
/** The label with the features of an image's supervisor, comma-separated (scripts/build-images.sh). */
export const RUNNER_FEATURES_LABEL = "org.hermes-sandbox.runner-features"
