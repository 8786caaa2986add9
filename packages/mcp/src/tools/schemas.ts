/**
 * Every tool's contract, as Effect Schemas: the arguments are decoded with them (an error names
 * the field and what is allowed, before any sandbox exists) and the JSON Schemas that
 * `tools/list` advertises are made from them, so what a client is told and what the server
 * accepts cannot drift apart. Field names are snake_case (the Hermes agent's execute_code result
 * is the model); every array has an `items` schema (VS Code refuses one without).
 */
import { JSONSchema, Schema } from "effect"
import { Artifacts, Languages } from "@hermes-sandbox/core"
import { IMAGE_MODES, IMAGES_ARGUMENT } from "./images.js"

// Schema.Int carries an identifier, which JSONSchema.make turns into a $defs reference: some
// clients do not follow references, so integers are declared inline.
const Integer = Schema.Number.pipe(Schema.int())
const Count = Integer.pipe(Schema.nonNegative())
const Seconds = Schema.Number.pipe(Schema.nonNegative())

// Descriptions go on the property, not on its type: a type's description would replace the
// decoder's own message ("Expected a positive number") with the description.
const describe = <S extends Schema.Schema.Any>(schema: S, description: string) =>
  Schema.propertySignature(schema).annotations({ description })
const optional = <S extends Schema.Schema.Any>(schema: S, description: string) =>
  Schema.optional(schema).annotations({ description })

/** A choice among literals, with one message naming them all (instead of one issue per literal). */
const oneOf = <const L extends ReadonlyArray<string>>(...literals: L) =>
  Schema.Literal(...literals).annotations({
    message: () => ({ message: `one of ${literals.map((l) => JSON.stringify(l)).join(", ")}`, override: true })
  })

export const Encoding = oneOf("utf8", "base64")

/** A call's `images` argument (images.ts). */
const ImagesArgument = optional(oneOf(...IMAGE_MODES), IMAGES_ARGUMENT)

/** An image's width and height, as its header claims them (shown only when plausible). */
const Dimension = optional(Count, "Pixels, as the image's own header claims (absent when not readable).")

// --- execute_code ------------------------------------------------------------------------------

export const ExecuteCodeArgs = Schema.Struct({
  code: describe(Schema.String, "The program's source code."),
  language: describe(oneOf(...Languages), "python (python3), javascript (node) or bash."),
  stdin: optional(Schema.String, "Fed to the program's standard input."),
  timeout_s: optional(
    Schema.Number.pipe(Schema.positive()),
    "Seconds before the sandbox is killed (default and maximum: see the tool's description)."
  ),
  files: optional(
    Schema.Array(
      Schema.Struct({
        path: describe(Schema.String, "Relative to /workspace, where the program runs."),
        content: Schema.String,
        encoding: optional(Encoding, "utf8 (default) or base64 for binary content.")
      })
    ),
    "Files written into /workspace before the program starts."
  ),
  collect: optional(
    Schema.Array(Schema.String.pipe(Schema.filter((p) => Artifacts.patternIssue(p) ?? true))).pipe(
      Schema.filter(
        (a) => a.length <= Artifacts.MAX_COLLECT_PATTERNS || `at most ${Artifacts.MAX_COLLECT_PATTERNS} patterns`
      )
    ),
    'Files to bring back after the program ends: glob patterns relative to /workspace, e.g. ["*.png", "out/**", "report.csv"]. ' +
      "`*` and `?` match within a name, `**` any number of directories, a directory brings everything below it; names starting with a dot only match a pattern that does. " +
      "Each file comes back as a resource_link (read it with resources/read; kept for a limited time) and is listed in the result with its size, sha256 and media type; " +
      "small PNG, JPEG, GIF and WebP images also as image content (see images). Symbolic links, FIFOs and files past the limits are not sent but listed in skipped_files with the reason."
  ),
  images: ImagesArgument
})
export type ExecuteCodeArgs = typeof ExecuteCodeArgs.Type

export const Status = oneOf("success", "error", "timeout", "interrupted", "cancelled", "oom")
export type Status = typeof Status.Type

/** What a run printed to one stream, as returned: capped (head and tail kept), with the byte counts. */
const streamFields = (name: string) => ({
  text: Schema.String,
  truncated: describe(Schema.Boolean, `Part of ${name} is not in this result (see ${name}_bytes_omitted).`),
  total: describe(Count, `Bytes the program wrote to ${name}.`),
  captured: describe(Count, `Bytes of ${name} in this result.`),
  omitted: describe(Count, `Bytes of ${name} not in this result (the sandbox's capture cap, then this result's).`)
})
const stdout = streamFields("stdout")
const stderr = streamFields("stderr")

/** The two streams as a result carries them (results.ts boundStreams), the same in every result that has them. */
const StreamFields = {
  stdout: stdout.text,
  stderr: stderr.text,
  stdout_truncated: stdout.truncated,
  stderr_truncated: stderr.truncated,
  stdout_bytes_total: stdout.total,
  stdout_bytes_captured: stdout.captured,
  stdout_bytes_omitted: stdout.omitted,
  stderr_bytes_total: stderr.total,
  stderr_bytes_captured: stderr.captured,
  stderr_bytes_omitted: stderr.omitted
}
export const Streams = Schema.Struct(StreamFields)
export type Streams = typeof Streams.Type

/** One stream kept whole by the server because the result cut it (tools/fullOutput.ts). */
const KeptStream = Schema.Struct({
  uri: describe(
    Schema.String,
    "Where the whole stream is: read it with read_file (path: this URI; offset and limit are lines) or as a resource (resources/read)."
  ),
  bytes: describe(Count, "Bytes kept."),
  complete: describe(Schema.Boolean, "Every byte the program wrote is kept (false: the server's bound cut it too).")
})

/** The streams a cut result's run kept whole. */
export const FullOutput = Schema.Struct({
  stdout: optional(KeptStream, "stdout as the program wrote it, when this result cut it."),
  stderr: optional(KeptStream, "stderr as the program wrote it, when this result cut it.")
})
export type FullOutput = typeof FullOutput.Type

/** What execute_code and terminal report of a run. */
export const RunResult = Schema.Struct({
  status: describe(
    Status,
    "success: exit code 0; error: another exit code or a failure; timeout; oom; cancelled (by the client); interrupted (the server stopped)."
  ),
  output: describe(
    Schema.String,
    "What to read first: stdout, then stderr after a '--- stderr ---' line, then a note on a timeout or truncation."
  ),
  ...StreamFields,
  exit_code: describe(Schema.NullOr(Integer), "The program's exit code (137 after a kill); null when it never ran."),
  duration_seconds: describe(Seconds, "From the sandbox's start to the program's exit."),
  execution_id: describe(
    Schema.String,
    "The run's id in the journal: its events are the resource sandbox://executions/{execution_id}/events."
  ),
  container_name: Schema.String,
  full_output: optional(
    FullOutput,
    "When output was cut (stdout_truncated or stderr_truncated): where the server keeps the whole of each cut stream, for a limited time."
  )
})
export type RunResult = typeof RunResult.Type

/** A file `collect` brought back. */
export const CollectedFile = Schema.Struct({
  path: describe(Schema.String, "Relative to /workspace, exactly as the program named it."),
  size_bytes: Count,
  sha256: describe(Schema.String, "Of the content, computed by the server as it arrived (hex)."),
  mime_type: describe(
    Schema.String,
    "From the content's signature for images, else the name's extension; application/octet-stream otherwise."
  ),
  uri: optional(
    Schema.String,
    "The resource to read it from (resources/read): sandbox://executions/{execution_id}/files/{path}, each path segment percent-encoded. Absent when the server could not keep it."
  ),
  image: describe(Schema.Boolean, "Also returned inline as an image content block."),
  width: Dimension,
  height: Dimension
})

export const SkippedFile = Schema.Struct({
  path: Schema.String,
  size_bytes: Count,
  reason: describe(
    Schema.String,
    "too-large, limit (too many files), total-limit, symlink (never followed), not-regular (FIFO, socket, device), unreadable, too-deep, name-too-long, walk-limit, name-not-utf8, not-found (a pattern without wildcards matched nothing)."
  )
})

export const ExecuteCodeResult = Schema.Struct({
  ...RunResult.fields,
  tool_calls_made: optional(
    Count,
    "With host tools (see the description): the calls the code made that a tool served (refused calls do not count)."
  ),
  files: optional(Schema.Array(CollectedFile), "With collect: the files brought back."),
  files_omitted: optional(
    Count,
    "With collect: files brought back but not listed here (a result lists at most 1,000); they are still resources (resources/list)."
  ),
  skipped_files: optional(
    Schema.Array(SkippedFile),
    "With collect: matching entries not brought back, each with the reason (at most 100 listed)."
  ),
  skipped_files_omitted: optional(Count, "With collect: further entries not brought back and not listed."),
  files_truncated: optional(
    Schema.Boolean,
    "With collect: something matching was held back by a limit, or the collection was cut short."
  ),
  collection: optional(
    Schema.Struct({
      status: describe(
        oneOf("complete", "partial", "none"),
        "complete: every matching file was looked at; partial or none: cut short (the files that came back before are kept)."
      ),
      reason: optional(oneOf("timed-out", "sandbox-ended"), "Why it was cut short.")
    }),
    "With collect: whether the collection ended."
  )
})
export type ExecuteCodeResult = typeof ExecuteCodeResult.Type

// --- terminal ------------------------------------------------------------------------------------

export const TerminalArgs = Schema.Struct({
  command: describe(
    Schema.String,
    "A bash command line (cd, export, pipes, &&). The working directory and exported variables carry over to the next call."
  ),
  timeout_s: optional(Schema.Number.pipe(Schema.positive()), "Seconds before the command is killed."),
  workdir: optional(
    Schema.String,
    "Change to this directory first (like typing `cd DIR` before the command; later calls stay there)."
  ),
  background: optional(
    Schema.Boolean,
    "Start it in the background (a server, a watcher, a long job) and return at once with its process_id; manage it with the process tool. It lives until killed or the sandbox ends; its cd/export do not carry over."
  )
})
export type TerminalArgs = typeof TerminalArgs.Type

export const TerminalResult = Schema.Struct({
  ...RunResult.fields,
  session_id: describe(
    Schema.String,
    "The session sandbox's id (journal stream); it changes after reset_session or an idle expiry."
  ),
  process_id: optional(
    Schema.String,
    "With background: the process's id for the process tool (no execution then: execution_id is empty; its events are ProcessStarted/ProcessExited in the session's stream)."
  ),
  pid: optional(Count, "With background: its pid inside the sandbox.")
})
export type TerminalResult = typeof TerminalResult.Type

// --- process -------------------------------------------------------------------------------------

export const ProcessArgs = Schema.Struct({
  action: describe(
    oneOf("list", "poll", "log", "wait", "kill"),
    "list: every background process; poll: its status and the output since the last poll; log: its whole kept output (head and tail); wait: until it ends or timeout_s; kill: end it (and every process it started in its process session)."
  ),
  id: optional(Schema.String, "The process_id terminal returned (every action but list)."),
  timeout_s: optional(Schema.Number.pipe(Schema.positive()), "wait: seconds to wait at most (default 30)."),
  signal: optional(
    oneOf("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"),
    "kill: the signal (default SIGTERM, then SIGKILL if it has not ended within 5 s)."
  )
})
export type ProcessArgs = typeof ProcessArgs.Type

export const ProcessInfo = Schema.Struct({
  process_id: Schema.String,
  pid: Count,
  command: describe(Schema.String, "As given to terminal (at most 200 characters here)."),
  running: Schema.Boolean,
  exit_code: describe(
    Schema.NullOr(Integer),
    "Once ended: its exit code (128 + n after signal n); null while running or when unknown."
  ),
  signal: optional(Schema.String, "The signal kill sent."),
  end_reason: optional(Schema.String, "Why it is no longer followed when there is no exit code."),
  duration_seconds: Seconds,
  output_bytes: describe(Count, "Bytes it wrote (stdout and stderr), kept or not.")
})

export const ProcessResult = Schema.Struct({
  action: Schema.String,
  processes: optional(Schema.Array(ProcessInfo), "list: every tracked process (running, and the latest ended ones)."),
  process: optional(ProcessInfo, "The process the action was about."),
  output: optional(
    Schema.String,
    "poll: its output since the last poll; log: its kept output. stdout and stderr as they arrived; a '[... N bytes omitted ...]' line where the middle was not kept."
  ),
  output_bytes_omitted: optional(Count, "Bytes of that output that are not in this result."),
  timed_out: optional(Schema.Boolean, "wait: it was still running when timeout_s passed.")
})
export type ProcessResult = typeof ProcessResult.Type

// --- run_python ----------------------------------------------------------------------------------

export const RunPythonArgs = Schema.Struct({
  code: describe(
    Schema.String,
    "Python source, run as one cell (IPython): the value of its last expression is returned, like Jupyter's Out[n]."
  ),
  timeout_s: optional(
    Schema.Number.pipe(Schema.positive()),
    "Seconds before the cell is interrupted (KeyboardInterrupt); default and maximum: see the tool's description."
  ),
  reset: optional(
    Schema.Boolean,
    "Restart the Python kernel first: every variable and import of earlier cells is discarded (files stay)."
  ),
  images: ImagesArgument
})
export type RunPythonArgs = typeof RunPythonArgs.Type

export const CellStatus = oneOf("ok", "error", "timeout", "interrupted", "crashed")

/** One output of a cell (its last expression's value, or a display), as the result describes it. */
export const CellOutputInfo = Schema.Struct({
  mime_types: describe(
    Schema.Array(Schema.String),
    "The MIME types the output came in (text/plain, text/html, image/png, ...), at most 16 listed. Only text/plain and PNG/JPEG images are sent."
  ),
  bytes: describe(Count, "Bytes of its data as the kernel sent it (images as base64)."),
  text: optional(Schema.String, "Its text/plain, within the result's budget for such text."),
  text_truncated: optional(Schema.Boolean, "Its text/plain is cut (head and tail kept) or left out by the budget."),
  image: describe(Schema.Boolean, "Also sent as an image content block."),
  width: Dimension,
  height: Dimension,
  uri: optional(
    Schema.String,
    "Its image's resource (sandbox://cells/{id}/{name}, resources/read) when it was not sent inline and the server keeps it."
  )
})
export type CellOutputInfo = typeof CellOutputInfo.Type

export const RunPythonResult = Schema.Struct({
  status: describe(
    CellStatus,
    "ok; error: the cell raised (see error); timeout: interrupted at its deadline; interrupted: cancelled by the client; crashed: the kernel died (out of memory, a signal)."
  ),
  output: describe(
    Schema.String,
    "What to read first: stdout, stderr after '--- stderr ---', each display, 'Out[n]: ' and the last expression's value, the traceback, then notes (a timeout, lost state, cut output)."
  ),
  execution_count: describe(Count, "The cell's number in this kernel (1, 2, ...; a restarted kernel counts from 1)."),
  ...StreamFields,
  result: optional(CellOutputInfo, "The last expression's value, when it had one (not None)."),
  displays: describe(
    Schema.Array(CellOutputInfo),
    "display() calls and matplotlib figures, in order (at most 100 listed)."
  ),
  displays_omitted: optional(
    Schema.Struct({
      count: Count,
      bytes: Count,
      reasons: Schema.Record({ key: Schema.String, value: Count })
    }),
    "Outputs the kernel produced that did not come back (too large, too many, invalid), counted by reason; also displays past the 100 listed."
  ),
  error: optional(
    Schema.Struct({
      name: Schema.String,
      value: Schema.String,
      traceback: describe(Schema.String, "As IPython formats it, without colour; head and tail kept past the limit."),
      truncated: Schema.Boolean
    }),
    "The exception the cell raised."
  ),
  state_lost: describe(
    Schema.Boolean,
    "True when variables and imports from earlier cells are gone: the kernel was killed (a timeout it did not stop for, a crash) or the session sandbox was replaced. Run the setup again."
  ),
  oom_killed: describe(Schema.Boolean, "The kernel was killed by the memory limit."),
  late_output: optional(
    Schema.String,
    "What a thread or process left running by an earlier cell printed between cells (never this cell's stdout)."
  ),
  tool_calls_made: optional(
    Count,
    "With host tools (see the description): the calls the cell's code made that a tool served (refused calls do not count)."
  ),
  duration_seconds: describe(Seconds, "From the cell's hand-over to its end (a kernel's start not included)."),
  session_id: describe(
    Schema.String,
    "The session sandbox's id (the one terminal, read_file and write_file use); it changes after reset_session or an idle expiry."
  )
})
export type RunPythonResult = typeof RunPythonResult.Type

// --- files -----------------------------------------------------------------------------------------

export const ReadFileArgs = Schema.Struct({
  path: describe(
    Schema.String,
    "Absolute, or relative to the terminal's current directory; inside /workspace or /tmp."
  ),
  offset: optional(
    Integer.pipe(Schema.positive()),
    "Text: first line (1-based, default 1). Binary: first byte (1-based)."
  ),
  limit: optional(Integer.pipe(Schema.positive()), "Text: lines (default 2000). Binary: bytes."),
  line_numbers: optional(
    Schema.Boolean,
    "Text: each line prefixed with its number and '|' (`     7|content`, as the Hermes agent's read_file prints it). Default false."
  )
})
export type ReadFileArgs = typeof ReadFileArgs.Type

export const ReadFileResult = Schema.Struct({
  path: describe(Schema.String, "The file's resolved absolute path."),
  content: Schema.String,
  encoding: describe(Encoding, "utf8 for text; base64 for a file that is not UTF-8 text."),
  size_bytes: describe(Count, "The file's size."),
  total_lines: optional(Count, "Text: lines in the file."),
  offset: describe(Count, "Where content starts (line for text, byte for binary; 1-based)."),
  truncated: describe(Schema.Boolean, "More follows: read again with a larger offset.")
})
export type ReadFileResult = typeof ReadFileResult.Type

export const WriteFileArgs = Schema.Struct({
  path: describe(
    Schema.String,
    "Absolute, or relative to the terminal's current directory; inside /workspace or /tmp. Parent directories are created."
  ),
  content: Schema.String,
  encoding: optional(Encoding, "utf8 (default) or base64 for binary content.")
})
export type WriteFileArgs = typeof WriteFileArgs.Type

export const WriteFileResult = Schema.Struct({
  path: describe(Schema.String, "The file's resolved absolute path."),
  bytes_written: Count
})
export type WriteFileResult = typeof WriteFileResult.Type

// --- patch -----------------------------------------------------------------------------------------

export const PatchArgs = Schema.Struct({
  path: describe(
    Schema.String,
    "Absolute, or relative to the terminal's current directory; inside /workspace or /tmp. A text file."
  ),
  old_string: optional(
    Schema.String,
    "The exact text to replace, whitespace and indentation included; it must occur exactly once unless replace_all."
  ),
  new_string: optional(Schema.String, "What replaces old_string (may be empty, to delete it)."),
  replace_all: optional(Schema.Boolean, "Replace every occurrence of old_string (default false)."),
  diff: optional(
    Schema.String,
    "Instead of old_string/new_string: a unified diff of this one file (@@ -l,n +l,n @@ hunks; ---/+++ headers optional)."
  )
})
export type PatchArgs = typeof PatchArgs.Type

export const PatchResult = Schema.Struct({
  path: describe(Schema.String, "The file's resolved absolute path."),
  replacements: describe(Count, "Occurrences replaced, or hunks applied."),
  lines: describe(
    Schema.Array(Count),
    "1-based lines (in the new file) where each replacement or hunk starts; the first 20."
  ),
  bytes_written: Count
})
export type PatchResult = typeof PatchResult.Type

// --- search_files ----------------------------------------------------------------------------------

export const SearchFilesArgs = Schema.Struct({
  pattern: describe(
    Schema.String,
    'content: a POSIX extended regular expression (GNU grep -E). files: a glob of file names ("*.py").'
  ),
  path: optional(
    Schema.String,
    "A directory (searched recursively) or one file; absolute or relative to the terminal's current directory. Default: that directory (or /workspace)."
  ),
  glob: optional(Schema.String, 'content only: search only files whose name matches this glob ("*.ts").'),
  max_results: optional(
    Integer.pipe(Schema.between(1, 1000)),
    "At most this many results (default 100, at most 1000)."
  ),
  target: optional(oneOf("content", "files"), '"content" (default): matching lines. "files": matching file names.')
})
export type SearchFilesArgs = typeof SearchFilesArgs.Type

export const SearchFilesResult = Schema.Struct({
  path: describe(Schema.String, "What was searched (absolute)."),
  target: oneOf("content", "files"),
  matches: Schema.Array(
    Schema.Struct({
      path: Schema.String,
      line: optional(Count, "content: the line's number (1-based)."),
      text: optional(Schema.String, "content: the line (at most 1000 bytes of it).")
    })
  ),
  count: describe(Count, "Results returned."),
  truncated: describe(Schema.Boolean, "More results existed: narrow path, pattern or glob, or raise max_results."),
  incomplete: describe(Schema.Boolean, "Some files could not be read (permissions); the rest were searched.")
})
export type SearchFilesResult = typeof SearchFilesResult.Type

// --- reset_session ---------------------------------------------------------------------------------

export const ResetSessionArgs = Schema.Struct({})

export const ResetSessionResult = Schema.Struct({
  reset: describe(Schema.Boolean, "A session sandbox existed and was destroyed."),
  session_id: Schema.NullOr(Schema.String)
})
export type ResetSessionResult = typeof ResetSessionResult.Type

/** The keywords whose value is a map from names (of properties, of definitions) to schemas. */
const SCHEMA_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions"])
/** The keywords whose value is data, not a schema: kept as they are. */
const DATA = new Set(["const", "enum", "default", "examples"])

/**
 * `node` without any `title` keyword. JSONSchema.make writes each refinement's name as the
 * schema's title (`"title": "positive"`, `"nonNegative"`, `"int"`), which a model reads as what the
 * field is called; these schemas give no titles of their own. A property or definition NAMED
 * `title` stays, and so does data (`const`, `enum`, `default`, `examples`): only the keyword goes.
 */
const withoutTitles = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(withoutTitles)
  if (typeof node !== "object" || node === null) return node
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) {
    if (key === "title") continue
    out[key] = DATA.has(key)
      ? value
      : SCHEMA_MAPS.has(key) && typeof value === "object" && value !== null && !Array.isArray(value)
        ? Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, withoutTitles(schema)]))
        : withoutTitles(value)
  }
  return out
}

/**
 * A tool's advertised JSON Schema: an object schema, without the draft marker some clients choke
 * on, and without the titles Effect's refinements leave (see withoutTitles).
 */
export const jsonSchemaOf = (schema: Schema.Schema.Any): { type: "object"; [key: string]: unknown } => {
  // An empty Struct is "any object or array" to Effect; a tool without arguments takes an empty object.
  if (Schema.isSchema(schema) && "fields" in schema && Object.keys(schema.fields as object).length === 0) {
    return { type: "object", properties: {}, additionalProperties: false }
  }
  const { $schema: _, ...rest } = withoutTitles(JSONSchema.make(schema)) as Record<string, unknown>
  return { ...rest, type: "object" }
}
