#!/usr/bin/env node
// hermes-sandbox in-container runner, protocol version 1 (Node 18+, stdlib only, CommonJS).
//
// The SDK writes to the container's attached stdin:
//
//   HERMES/1 <json-header>\n
//   <code bytes><file 1 bytes><file 2 bytes>...<the program's own stdin, untouched>
//
// header: {"language": "python"|"javascript"|"bash", "code": <bytes>,
//          "files": [["relative/path", <bytes>], ...]}          ("files" may be omitted)
//
// The header is read one byte at a time with fs.readSync(0, ...) and the payload with
// exact-length reads, so not one byte of the program's stdin is consumed (process.stdin is
// never touched here). Files go under $HERMES_WORKSPACE (default /workspace), the code to
// $HERMES_CODE_DIR/main.<ext> (default /tmp/.hermes, dir 0700, file 0600).
//
// CommonJS on purpose: in the image /opt/hermes/package.json pins "type": "commonjs".
//
// How the program runs: Node cannot exec-replace itself, so JavaScript runs IN THIS PROCESS:
// process.argv becomes [node, main.js], cwd the workspace, and Module.runMain() loads main.js as
// the main module exactly as `node main.js` would (require.main === module holds). fd 0 is still
// positioned at the program's stdin, so process.stdin sees exactly the bytes after the payload.
// This avoids a second Node process (startup time, memory, a parent that must forward signals).
// Python and bash (if the image has them) run as a child via spawnSync with inherited stdio; its
// exit code or signal is propagated.
//
// Exit status: the program's own; 126 = protocol or setup error (one line on stderr starting
// with "hermes-runner: "); 127 = the interpreter is not installed in this image.
"use strict"

const fs = require("fs")
const path = require("path")

const PROTOCOL_ERROR = 126
const INTERPRETER_MISSING = 127
const PREFIX = Buffer.from("HERMES/1 ", "latin1")
const MAX_HEADER_BYTES = 1 << 20
const CHUNK = 1 << 16
const LANGUAGES = {
  python: { file: "main.py", interpreter: "python3" },
  javascript: { file: "main.js", interpreter: "node" },
  bash: { file: "main.sh", interpreter: "bash" }
}
const O_NOFOLLOW = fs.constants.O_NOFOLLOW || 0
const O_DIRECTORY = fs.constants.O_DIRECTORY || 0

class RunnerError extends Error {
  constructor(message, code = PROTOCOL_ERROR) {
    super(message)
    this.code = code
  }
}

function fail(message, code = PROTOCOL_ERROR) {
  try {
    fs.writeSync(2, "hermes-runner: " + String(message).replace(/\n/g, " ") + "\n")
  } catch {
    // nothing more to say
  }
  process.exit(code)
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4))

// readSync on fd 0 that survives a non-blocking pipe (EAGAIN) and signals (EINTR).
function readStdin(buffer, offset, length) {
  for (;;) {
    try {
      return fs.readSync(0, buffer, offset, length, null)
    } catch (e) {
      if (e && e.code === "EAGAIN") {
        Atomics.wait(sleepCell, 0, 0, 2)
        continue
      }
      if (e && e.code === "EINTR") continue
      if (e && e.code === "EOF") return 0
      throw e
    }
  }
}

function readHeader() {
  const line = Buffer.alloc(MAX_HEADER_BYTES + 1)
  const one = Buffer.alloc(1)
  let n = 0
  for (;;) {
    if (readStdin(one, 0, 1) === 0) {
      throw new RunnerError(`stdin ended before the end of the header line (${n} bytes read)`)
    }
    if (one[0] === 0x0a) break
    if (n >= MAX_HEADER_BYTES) throw new RunnerError(`header line longer than ${MAX_HEADER_BYTES} bytes`)
    line[n++] = one[0]
    if (n <= PREFIX.length && line[n - 1] !== PREFIX[n - 1]) {
      throw new RunnerError("stdin does not start with 'HERMES/1 ' (protocol version 1 header expected)")
    }
  }
  if (n < PREFIX.length) {
    throw new RunnerError("stdin does not start with 'HERMES/1 ' (protocol version 1 header expected)")
  }
  let text
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(line.subarray(PREFIX.length, n))
  } catch (e) {
    throw new RunnerError(`header is not valid JSON: ${e.message}`)
  }
  let header
  try {
    header = JSON.parse(text)
  } catch (e) {
    throw new RunnerError(`header is not valid JSON: ${e.message}`)
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) {
    throw new RunnerError("header must be a JSON object")
  }
  return header
}

function asLength(value, what) {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RunnerError(`${what} must be a non-negative integer`)
  }
  return value
}

function splitRelativePath(p) {
  if (typeof p !== "string" || p === "") throw new RunnerError("file path must be a non-empty string")
  if (p.includes("\0")) throw new RunnerError(`file path contains a NUL byte: ${JSON.stringify(p)}`)
  if (p.startsWith("/")) throw new RunnerError(`file path must be relative to the workspace: ${JSON.stringify(p)}`)
  const segments = p.split("/")
  if (segments.includes("..")) throw new RunnerError(`file path must not contain '..': ${JSON.stringify(p)}`)
  const parts = segments.filter((s) => s !== "" && s !== ".")
  if (parts.length === 0) throw new RunnerError(`file path names no file: ${JSON.stringify(p)}`)
  return parts
}

function parseHeader(header) {
  const language = header.language
  if (typeof language !== "string" || !Object.prototype.hasOwnProperty.call(LANGUAGES, language)) {
    throw new RunnerError(
      `unknown language ${JSON.stringify(language)} (expected one of: ${Object.keys(LANGUAGES).sort().join(", ")})`
    )
  }
  const code = asLength(header.code, "code")
  const files = header.files === undefined ? [] : header.files
  if (!Array.isArray(files)) throw new RunnerError("files must be a list of [path, length] pairs")
  const parsed = files.map((entry) => {
    if (!Array.isArray(entry) || entry.length !== 2) throw new RunnerError("files must be a list of [path, length] pairs")
    return { display: entry[0], parts: splitRelativePath(entry[0]), length: asLength(entry[1], `length of ${JSON.stringify(entry[0])}`) }
  })
  return { language, code, files: parsed, report: parseReport(header.report) }
}

// Completion report (optional header key "report": a hex nonce). When asked, the runner writes
// "\x1eHERMES-DONE <nonce> <exit code>\n" on stdout AND stderr once the program has ended and its
// output is flushed, so the SDK can return without waiting for the engine to report the exit.
// The nonce only identifies this run's marker; the container serves exactly one execution, so a
// program that prints it can only end its own run early, never forge another's result.
function parseReport(report) {
  if (report === undefined) return undefined
  if (typeof report !== "string" || !/^[0-9a-f]{16,64}$/.test(report)) throw new RunnerError("report must be a hex nonce of 16 to 64 characters")
  return report
}

function writeMarkers(report, code) {
  const marker = Buffer.from(`\x1eHERMES-DONE ${report} ${code}\n`, "latin1")
  for (const fd of [1, 2]) {
    try {
      writeAll(fd, marker, marker.length)
    } catch {
      // the reader is gone: nothing to report to
    }
  }
}

function writeAll(fd, buffer, length) {
  let off = 0
  while (off < length) off += fs.writeSync(fd, buffer, off, length - off)
}

const chunk = Buffer.alloc(CHUNK)
function copyExact(length, outFd, what) {
  let remaining = length
  while (remaining > 0) {
    const n = readStdin(chunk, 0, Math.min(remaining, CHUNK))
    if (n === 0) throw new RunnerError(`stdin ended after ${length - remaining} of ${length} bytes of ${what}`)
    writeAll(outFd, chunk, n)
    remaining -= n
  }
}

// Node has no openat(2): walk the path with lstat, refusing any symlink or non-directory
// component, create missing directories, and open the file itself with O_NOFOLLOW. Nothing else
// runs in the container yet, so nothing can swap a component between the check and the use.
function openInWorkspace(workspace, display, parts) {
  let dir = workspace
  for (const name of parts.slice(0, -1)) {
    dir = path.join(dir, name)
    let st
    try {
      st = fs.lstatSync(dir)
    } catch (e) {
      if (e.code !== "ENOENT") throw e
      fs.mkdirSync(dir, 0o755)
      st = fs.lstatSync(dir)
    }
    if (!st.isDirectory()) {
      throw new RunnerError(`file path ${JSON.stringify(display)}: ${JSON.stringify(name)} is a symlink or not a directory`)
    }
  }
  const target = path.join(dir, parts[parts.length - 1])
  try {
    return fs.openSync(target, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | O_NOFOLLOW, 0o644)
  } catch (e) {
    if (e.code === "ELOOP") throw new RunnerError(`file path ${JSON.stringify(display)} is a symlink`)
    throw e
  }
}

function prepareCodeDir(codeDir) {
  fs.mkdirSync(path.dirname(codeDir), { recursive: true, mode: 0o755 })
  try {
    fs.mkdirSync(codeDir, 0o700)
  } catch (e) {
    if (e.code !== "EEXIST") throw e
  }
  const st = fs.lstatSync(codeDir)
  if (!st.isDirectory() || (typeof process.getuid === "function" && st.uid !== process.getuid())) {
    throw new RunnerError(`${codeDir} is not a directory owned by this user`)
  }
  fs.chmodSync(codeDir, 0o700)
}

function setup() {
  const workspace = process.env.HERMES_WORKSPACE || "/workspace"
  const codeDir = process.env.HERMES_CODE_DIR || "/tmp/.hermes"
  const { language, code, files, report } = parseHeader(readHeader())
  const spec = LANGUAGES[language]
  prepareCodeDir(codeDir)
  const mainPath = path.join(codeDir, spec.file)
  let fd = fs.openSync(mainPath, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | O_NOFOLLOW, 0o600)
  try {
    fs.fchmodSync(fd, 0o600)
    copyExact(code, fd, "code")
  } finally {
    fs.closeSync(fd)
  }
  if (files.length > 0) {
    const wsFd = fs.openSync(workspace, fs.constants.O_RDONLY | O_DIRECTORY) // fails early if missing
    fs.closeSync(wsFd)
    for (const f of files) {
      fd = openInWorkspace(workspace, f.display, f.parts)
      try {
        copyExact(f.length, fd, `file ${JSON.stringify(f.display)}`)
      } finally {
        fs.closeSync(fd)
      }
    }
  }
  process.chdir(workspace)
  return { language, spec, mainPath, report }
}

function runChild(spec, mainPath, report) {
  const { spawnSync } = require("child_process")
  const env = Object.assign({}, process.env)
  if (spec.interpreter === "python3") env.PYTHONUNBUFFERED = "1"
  const r = spawnSync(spec.interpreter, [mainPath], { stdio: "inherit", env })
  if (r.error) {
    if (r.error.code === "ENOENT") fail(`${spec.interpreter} is not installed in this image`, INTERPRETER_MISSING)
    fail(`cannot run ${spec.interpreter}: ${r.error.message}`)
  }
  if (r.signal) {
    const signo = require("os").constants.signals[r.signal] || 0
    if (report !== undefined) writeMarkers(report, 128 + signo)
    try {
      process.kill(process.pid, r.signal)
    } catch {
      // fall through
    }
    process.exit(128 + signo)
  }
  const status = r.status === null ? PROTOCOL_ERROR : r.status
  if (report !== undefined) writeMarkers(report, status)
  process.exit(status)
}

let prepared
try {
  prepared = setup()
} catch (e) {
  if (e instanceof RunnerError) fail(e.message, e.code)
  fail(`setup failed: ${e && e.message ? e.message : String(e)}`)
}

if (prepared.language === "javascript") {
  process.argv = [process.argv[0], prepared.mainPath]
  // Registered before the program's own handlers; stdout/stderr are synchronous for pipes on Linux,
  // so everything the program wrote before exiting precedes the marker.
  if (prepared.report !== undefined) process.on("exit", (code) => writeMarkers(prepared.report, code))
  const Module = require("module")
  if (typeof Module.runMain === "function") {
    Module.runMain(prepared.mainPath)
  } else {
    require(prepared.mainPath)
  }
} else {
  runChild(prepared.spec, prepared.mainPath, prepared.report)
}
