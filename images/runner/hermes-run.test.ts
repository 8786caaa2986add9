// Runs the in-container supervisor (images/runner/*.c, runner protocol 2) directly on the host — no
// Docker — with HERMES_WORKSPACE / HERMES_CODE_DIR pointing at temporary directories, in both
// modes: framed (a `key`: everything comes back as frames, decoded with RunnerProtocol.FrameDecoder)
// and plain (no key: the supervisor sets up the files and execs the interpreter in place).
//
// `lock`, `leftovers kill`, `--kill` and `--hold` run ONLY in a pid namespace of their own
// (unshare --pid --mount-proc, entered with nsenter --pid --mount): kill_others SIGKILLs every
// process whose parent pid is not 0, which in the host's namespace is everything of this user,
// this test runner included. start() refuses such a request without a namespace.
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as RunnerProtocol from "@hermes-sandbox/core/RunnerProtocol"
import * as Table from "@hermes-sandbox/core/RunnerProtocolTable"
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"

const here = path.dirname(fileURLToPath(import.meta.url))
// HERMES_RUN_UNDER_TEST: another build of it (a modified copy, the sanitized build), used as is.
const SUPERVISOR = process.env.HERMES_RUN_UNDER_TEST ?? path.join(here, "build", "hermes-run")

// The image's build (images/runner/Makefile, as scripts/build-images.sh runs it): make rebuilds it
// when a source file is newer, and does nothing otherwise.
beforeAll(() => {
  if (process.env.HERMES_RUN_UNDER_TEST !== undefined) return
  execFileSync("make", ["-s", "--no-print-directory", "-C", here], { stdio: "inherit" })
})

type Mode = "framed" | "plain"
type Language = "python" | "javascript" | "bash"
const MODES: ReadonlyArray<Mode> = ["framed", "plain"]
const LANGUAGES: ReadonlyArray<Language> = ["python", "javascript", "bash"]

type Bytes = string | Uint8Array
const bytes = (b: Bytes): Buffer => (typeof b === "string" ? Buffer.from(b, "utf8") : Buffer.from(b))
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

interface Request {
  readonly language?: Language
  readonly code?: Bytes
  readonly files?: ReadonlyArray<readonly [string, Bytes]>
  readonly args?: ReadonlyArray<string>
  readonly stdin?: Bytes
  readonly capBytes?: number
  readonly lock?: string
  readonly killLeftovers?: boolean
  /** The program's stdin in the header (feature `stdin`: a runtime whose stdin cannot end). */
  readonly stdinInHeader?: boolean
}

/** What the SDK writes (RunnerProtocol.encodeRunnerPayload), with the key only in framed mode. */
const encode = (mode: Mode, key: string, r: Request): Buffer =>
  Buffer.from(
    RunnerProtocol.encodeRunnerPayload({
      key: mode === "framed" ? key : undefined,
      capBytes: r.capBytes,
      language: r.language,
      code: r.code === undefined ? undefined : bytes(r.code),
      files: (r.files ?? []).map(([name, content]) => [name, bytes(content)] as const),
      args: r.args,
      lock: r.lock,
      killLeftovers: r.killLeftovers,
      stdin: bytes(r.stdin ?? ""),
      stdinInHeader: r.stdinInHeader
    })
  )

/** The start of a hand-made header: the version line, and the key in framed mode. */
const prefix = (mode: Mode, key: string) => `HERMES/2\n${mode === "framed" ? `key ${key}\n` : ""}`

/** A frame as decoded: output pieces ('o', 'e') as they arrived, control frames whole. */
interface Frame {
  readonly type: string
  readonly data: Buffer
  readonly text: string
  readonly at: number
}

interface Result {
  readonly mode: Mode
  /** The supervisor process's own exit (plain: the program's, it is the same process). */
  readonly exitCode: number | null
  readonly signal: NodeJS.Signals | null
  /** The program's status: framed, the 'x' report; plain, the exit code or 128 + the signal. */
  readonly status: number
  /** The program's stdout and stderr: the 'o' / 'e' payloads (framed) or the raw streams (plain). */
  readonly stdout: Buffer
  readonly stderr: Buffer
  /** Framed: every frame, in order. */
  readonly frames: ReadonlyArray<Frame>
  readonly report: RunnerProtocol.ReportedExit | undefined
  /** Framed: what the supervisor itself wrote on its stderr (nothing, once the key is known). */
  readonly supervisorStderr: string
}

interface Running {
  readonly child: ChildProcess
  readonly key: string
  readonly frames: Array<Frame>
  readonly stdoutSoFar: () => Buffer
  readonly types: () => Array<string>
  readonly end: (more?: Bytes) => void
  readonly until: (what: string, test: () => boolean, ms?: number) => Promise<void>
  readonly done: Promise<Result>
}

interface Options {
  readonly env?: Record<string, string>
  /** Words before the supervisor: unshare / nsenter (the only way lock and leftovers may run). */
  readonly via?: ReadonlyArray<string>
  /** Prefix the supervisor with these words instead of running it as is (setpriv). */
  readonly wrap?: ReadonlyArray<string>
  /** Arguments after the supervisor's path (e.g. --preload python). */
  readonly args?: ReadonlyArray<string>
  readonly stdinFd?: number
  /** Write the payload but leave stdin open (end() closes it). */
  readonly keepOpen?: boolean
  readonly timeoutMs?: number
  /** The run's key (default: a fresh one). */
  readonly key?: string
}

let tmp = ""
let workspace = ""
let codeDir = ""
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-run-test-"))
  workspace = path.join(tmp, "workspace")
  codeDir = path.join(tmp, "code")
  fs.mkdirSync(workspace)
})
afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true })
})

/** Collapse consecutive output pieces of one stream: ['p', 'o', 'o', 'x'] -> ['p', 'o', 'x']. */
const typesOf = (frames: ReadonlyArray<Frame>): Array<string> =>
  frames.map((f) => f.type).filter((t, i, all) => !((t === "o" || t === "e") && all[i - 1] === t))

const start = (mode: Mode, input: Request | ((key: string) => Bytes), opts: Options = {}): Running => {
  const key = opts.key ?? RunnerProtocol.makeRunKey()
  if (
    typeof input !== "function" &&
    (input.lock !== undefined || input.killLeftovers === true) &&
    opts.via === undefined
  ) {
    throw new Error(
      "lock / leftovers kill only in a pid namespace of its own: kill_others would end every process of this user"
    )
  }
  const payload = typeof input === "function" ? bytes(input(key)) : encode(mode, key, input)
  const cap = typeof input === "function" ? Infinity : (input.capBytes ?? Infinity)
  const argv = [...(opts.via ?? []), ...(opts.wrap ?? []), SUPERVISOR, ...(opts.args ?? [])]
  const child = spawn(argv[0]!, argv.slice(1), {
    // The container sets PYTHONUNBUFFERED=1 (packages/docker/src/ContainerSpec.ts); so does the host here.
    env: { ...process.env, PYTHONUNBUFFERED: "1", HERMES_WORKSPACE: workspace, HERMES_CODE_DIR: codeDir, ...opts.env },
    stdio: [opts.stdinFd ?? "pipe", "pipe", "pipe"],
    timeout: opts.timeoutMs ?? 60_000,
    killSignal: "SIGKILL"
  })
  const frames: Array<Frame> = []
  const out: Array<Buffer> = []
  const err: Array<Buffer> = []
  const own: Array<Buffer> = []
  const violations: Array<string> = []
  const decoder = new RunnerProtocol.FrameDecoder(key, {
    stdout: (c) => {
      out.push(Buffer.from(c))
      frames.push({ type: "o", data: Buffer.from(c), text: "", at: Date.now() })
    },
    stderr: (c) => {
      err.push(Buffer.from(c))
      frames.push({ type: "e", data: Buffer.from(c), text: "", at: Date.now() })
    },
    control: (type, text) => frames.push({ type, data: Buffer.alloc(0), text, at: Date.now() }),
    violation: (reason) => violations.push(reason)
  })
  child.stdout!.on("data", (c: Buffer) => {
    if (mode === "framed") decoder.push(c)
    else out.push(c)
  })
  child.stderr!.on("data", (c: Buffer) => (mode === "framed" ? own : err).push(c))
  if (child.stdin) {
    child.stdin.on("error", () => {}) // the supervisor may exit before reading everything (EPIPE)
    child.stdin.write(payload)
    if (opts.keepOpen !== true) child.stdin.end()
  }
  const done = new Promise<Result>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (exitCode, signal) => {
      try {
        resolve(finish(exitCode, signal))
      } catch (e) {
        reject(e)
      }
    })
    const finish = (exitCode: number | null, signal: NodeJS.Signals | null): Result => {
      const supervisorStderr = Buffer.concat(own).toString("utf8")
      let report: RunnerProtocol.ReportedExit | undefined
      if (mode === "framed") {
        // Whatever the program did: every byte on stdout is a frame of this run, and the report
        // (or the setup error) is the last one.
        expect(violations, "frame violations").toEqual([])
        expect(decoder.incomplete, "a frame cut short").toBe(false)
        const types = frames.map((f) => f.type)
        const x = types.indexOf("x")
        const e = types.indexOf("E")
        if (frames.length > 0) expect(supervisorStderr, "the supervisor's own stderr").toBe("")
        if (x >= 0) {
          expect(x, "the report is the last frame").toBe(frames.length - 1)
          report = RunnerProtocol.parseExitPayload(frames[x]!.text)
          expect(report, frames[x]!.text).toBeDefined()
          expect(exitCode, "the supervisor exits with the program's code").toBe(report!.exitCode)
          expect(Buffer.concat(out).length, "stdout relayed").toBe(Math.min(report!.stdoutBytes, cap))
          expect(Buffer.concat(err).length, "stderr relayed").toBe(Math.min(report!.stderrBytes, cap))
        }
        if (e >= 0) {
          expect(e, "the setup error is the last frame").toBe(frames.length - 1)
          expect([126, 127]).toContain(exitCode)
        }
      }
      const status = report?.exitCode ?? exitCode ?? 128 + (signal ? os.constants.signals[signal] : 0)
      return {
        mode,
        exitCode,
        signal,
        status,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
        frames,
        report,
        supervisorStderr
      }
    }
  })
  const until = async (what: string, test: () => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms
    while (!test()) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${what}; frames so far: ${JSON.stringify(typesOf(frames))}`)
      await sleep(10)
    }
  }
  return {
    child,
    key,
    frames,
    stdoutSoFar: () => Buffer.concat(out),
    types: () => typesOf(frames),
    end: (more) => child.stdin!.end(more === undefined ? undefined : bytes(more)),
    until,
    done
  }
}

const run = (mode: Mode, input: Request | ((key: string) => Bytes), opts: Options = {}): Promise<Result> =>
  start(mode, input, opts).done

const expectRan = (r: Result, status = 0) => {
  expect(r.status, r.stderr.toString() + r.supervisorStderr).toBe(status)
  if (r.mode === "framed") {
    expect(r.report, "an 'x' report").toBeDefined()
    expect(typesOf(r.frames).filter((t) => t !== "w" && t !== "l")[0], "'p' first (after the lock's)").toBe("p")
  }
}

/**
 * Refused before any program ran: framed, one 'E' frame and nothing else (no 'p'); plain, one
 * "hermes-run: " line on stderr and nothing on stdout. Returns the message.
 */
const expectRefused = (r: Result, code: 126 | 127, pattern?: RegExp): string => {
  expect(r.exitCode, r.stderr.toString() + r.supervisorStderr).toBe(code)
  let message: string
  if (r.mode === "framed") {
    expect(typesOf(r.frames)).toEqual(["E"])
    expect(r.supervisorStderr).toBe("")
    message = r.frames[0]!.text
  } else {
    expect(r.stdout.length).toBe(0)
    const text = r.stderr.toString("utf8")
    expect(text).toMatch(/^hermes-run: [^\n]+\n$/)
    message = text.slice("hermes-run: ".length, -1)
  }
  if (pattern) expect(message).toMatch(pattern)
  return message
}

// Programs that copy their stdin to stdout, byte for byte.
const CAT: Record<Language, string> = {
  python: "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n",
  javascript:
    "const c = []\nprocess.stdin.on('data', (d) => c.push(d)).on('end', () => process.stdout.write(Buffer.concat(c)))\n",
  bash: "exec cat\n"
}
const EXIT_42: Record<Language, string> = {
  python: "import sys\nsys.exit(42)\n",
  javascript: "process.exit(42)\n",
  bash: "exit 42\n"
}
const SELF_KILL: Record<Language, (signal: "SIGKILL" | "SIGTERM") => string> = {
  python: (s) => `import os, signal, time\nos.kill(os.getpid(), signal.${s})\ntime.sleep(10)\n`,
  javascript: (s) => `process.kill(process.pid, '${s}')\nsetTimeout(() => {}, 10000)\n`,
  bash: (s) => `kill -${s.slice(3)} $$\nsleep 10\n`
}
const EXT: Record<Language, string> = { python: "py", javascript: "js", bash: "sh" }

const binaryStdin = (): Buffer => {
  const all = Buffer.alloc(256 * 64)
  for (let i = 0; i < all.length; i++) all[i] = i % 256 // includes NUL, \n, \r, 0xff ...
  return Buffer.concat([
    Buffer.from("HERMES/2\nkey 00000000000000000000000000000000\nrun\n\0\0"),
    all,
    Buffer.from([0, 10, 0])
  ])
}

/** A python program printing its pid and its start time (field 22 of /proc/self/stat). */
const PRINT_PID_AND_START =
  "import os\nstat = open('/proc/self/stat').read()\nprint(os.getpid(), stat[stat.rindex(')') + 2:].split()[19])\n"

describe.each(MODES)("%s mode", (mode) => {
  describe.each(LANGUAGES)("running %s", (language) => {
    it("passes the program's binary stdin through exactly (NUL bytes, a header look-alike)", async () => {
      const stdin = binaryStdin()
      const r = await run(mode, { language, code: CAT[language], stdin })
      expect(r.stderr.toString()).toBe("")
      expectRan(r)
      expect(r.stdout.equals(stdin)).toBe(true)
    })

    it("passes empty stdin through as an immediate EOF", async () => {
      const r = await run(mode, { language, code: CAT[language] })
      expectRan(r)
      expect(r.stdout.length).toBe(0)
    })

    it("propagates the exit code", async () => {
      const r = await run(mode, { language, code: EXIT_42[language] })
      expectRan(r, 42)
    })

    it.each([
      ["SIGKILL", 9],
      ["SIGTERM", 15]
    ] as const)("reports death by %s as 128 + %d", async (signal, n) => {
      const r = await run(mode, { language, code: SELF_KILL[language](signal) })
      expectRan(r, 128 + n)
      // Plain mode: the supervisor became the program, so the process itself died by the signal;
      // framed: the supervisor reports it and exits with 128 + n.
      if (mode === "plain") expect(r.signal).toBe(signal)
      else expect(r.exitCode).toBe(128 + n)
    })

    it("writes the supplied files under the workspace (truncating what was there) and runs there", async () => {
      const blob = Buffer.from([0, 1, 2, 255, 10, 13, 0])
      fs.writeFileSync(path.join(workspace, "data.txt"), "an older, longer content\n")
      const files = [
        ["data.txt", "hello\n"],
        ["nested/deeper/blob.bin", blob],
        ["./dot/./ok.txt", "dots"],
        ["a//double/slash.txt", "slashes"],
        ["empty", ""]
      ] as const
      const code: Record<Language, string> = {
        python: "import os\nprint(os.getcwd())\nprint(open('data.txt').read(), end='')\n",
        javascript: "console.log(process.cwd())\nprocess.stdout.write(require('fs').readFileSync('data.txt'))\n",
        bash: "pwd\ncat data.txt\n"
      }
      const r = await run(mode, { language, code: code[language], files })
      expect(r.stderr.toString()).toBe("")
      expectRan(r)
      expect(r.stdout.toString()).toBe(`${fs.realpathSync(workspace)}\nhello\n`)
      expect(fs.readFileSync(path.join(workspace, "nested/deeper/blob.bin")).equals(blob)).toBe(true)
      expect(fs.readFileSync(path.join(workspace, "dot/ok.txt"), "utf8")).toBe("dots")
      expect(fs.readFileSync(path.join(workspace, "a/double/slash.txt"), "utf8")).toBe("slashes")
      expect(fs.statSync(path.join(workspace, "empty")).size).toBe(0)
    })

    it("writes the code 0600 in a 0700 code directory, also over a looser one left before", async () => {
      const main = path.join(codeDir, `main.${EXT[language]}`)
      const r = await run(mode, { language, code: CAT[language] })
      expectRan(r)
      expect(fs.statSync(codeDir).mode & 0o777).toBe(0o700)
      expect(fs.statSync(main).mode & 0o777).toBe(0o600)
      expect(fs.readFileSync(main, "utf8")).toBe(CAT[language])
      fs.chmodSync(codeDir, 0o755)
      fs.writeFileSync(main, "# ".repeat(10_000), { mode: 0o644 })
      fs.chmodSync(main, 0o644)
      expectRan(await run(mode, { language, code: EXIT_42[language] }), 42)
      expect(fs.statSync(codeDir).mode & 0o777).toBe(0o700)
      expect(fs.statSync(main).mode & 0o777).toBe(0o600)
      expect(fs.readFileSync(main, "utf8")).toBe(EXIT_42[language])
    })

    it("streams: the program starts before stdin ends and answers line by line", async () => {
      const echo: Record<Language, string> = {
        python: "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip())\n",
        javascript:
          "require('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log('got ' + l))\n",
        bash: 'while IFS= read -r line; do echo "got $line"; done\n'
      }
      const p = start(mode, { language, code: echo[language], stdin: "first\n" }, { keepOpen: true })
      await p.until("the first answer", () => p.stdoutSoFar().toString().includes("got first\n")) // stdin still open here
      p.end("second\n")
      const r = await p.done
      expectRan(r)
      expect(r.stdout.toString()).toBe("got first\ngot second\n")
    }, 30_000)

    if (language === "javascript") {
      it("runs JavaScript as the main module with argv [node, main.js]", async () => {
        const code = "console.log(require.main === module, JSON.stringify(process.argv.slice(1)), __filename)\n"
        const r = await run(mode, { language, code })
        const main = path.join(codeDir, "main.js")
        expectRan(r)
        expect(r.stdout.toString()).toBe(`true ${JSON.stringify([main])} ${main}\n`)
      })

      it("reports an uncaught exception like node does (exit 1, stack on stderr)", async () => {
        const r = await run(mode, { language, code: "throw new Error('boom')\n" })
        expectRan(r, 1)
        expect(r.stderr.toString()).toContain("Error: boom")
      })
    }

    if (language === "bash") {
      it("restores SIGPIPE for the program (`yes | head -1` ends quietly)", async () => {
        // The supervisor itself ignores SIGPIPE; the program must not inherit that.
        const r = await run(mode, { language, code: "set -o pipefail\nyes | head -1\necho status=$?\n" })
        expect(r.stderr.toString()).toBe("")
        expectRan(r)
        expect(r.stdout.toString()).toBe("y\nstatus=141\n")
      })
    }
  })

  it.each(["python", "javascript"] as const)("runs 1 MiB of %s code and reads exactly its length", async (language) => {
    const filler = "x".repeat(1024 * 1024)
    const code =
      language === "python"
        ? `s = "${filler}"\nimport sys\nprint(len(s), sys.stdin.read())\n`
        : `const s = "${filler}"\nlet d = ""\nprocess.stdin.on("data", (c) => (d += c)).on("end", () => console.log(s.length, d))\n`
    expect(Buffer.byteLength(code)).toBeGreaterThan(1024 * 1024)
    const r = await run(mode, { language, code, stdin: "after-the-code" })
    expect(r.stderr.toString()).toBe("")
    expectRan(r)
    expect(r.stdout.toString()).toBe(`${1024 * 1024} after-the-code\n`)
  })

  it("leaves a big binary stdin (2 MiB) intact after a big file", async () => {
    const big = Buffer.alloc(2 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff
    const file = Buffer.alloc(3 * 65536 + 17, 0xab)
    const r = await run(mode, { language: "python", code: CAT.python, files: [["big.bin", file]], stdin: big })
    expectRan(r)
    expect(createHash("sha256").update(r.stdout).digest("hex")).toBe(createHash("sha256").update(big).digest("hex"))
    expect(fs.readFileSync(path.join(workspace, "big.bin")).equals(file)).toBe(true)
  })

  it("reads the header from a regular file on stdin without consuming the program's bytes", async () => {
    const input = path.join(tmp, "stdin.bin")
    const stdin = binaryStdin()
    const key = RunnerProtocol.makeRunKey()
    fs.writeFileSync(input, encode(mode, key, { language: "python", code: CAT.python, stdin }))
    const fd = fs.openSync(input, "r")
    try {
      const r = await run(mode, () => "", { stdinFd: fd, key })
      expectRan(r)
      expect(r.stdout.equals(stdin)).toBe(true)
    } finally {
      fs.closeSync(fd)
    }
  })

  it("writes and reads back names with any bytes (newline, unicode, spaces, a leading '-')", async () => {
    const names = [
      "line\nbreak.txt",
      "ünïcødé 名前 🙂.txt",
      " with  spaces .txt",
      "-leading-dash",
      "--",
      "dir with space/-x\r\n.bin",
      "tab\there"
    ]
    const r = await run(mode, {
      language: "bash",
      code: "true\n",
      files: names.map((n) => [n, `content of ${n}`] as const)
    })
    expectRan(r)
    for (const n of names)
      expect(fs.readFileSync(path.join(workspace, n), "utf8"), JSON.stringify(n)).toBe(`content of ${n}`)
    // A name that is not even UTF-8: the path is bytes.
    const raw = Buffer.from([0x6e, 0xff, 0x0a, 0x2d, 0xfe])
    const r2 = await run(mode, (key) =>
      Buffer.concat([
        Buffer.from(`${prefix(mode, key)}lang bash\ncode 5\ntrue\nfile ${raw.length} 3\n`),
        raw,
        Buffer.from("rawrun\n")
      ])
    )
    expectRan(r2)
    const listed = fs.readdirSync(workspace, { encoding: "buffer" })
    expect(listed.some((n) => n.equals(raw))).toBe(true)
    // And through argv: every element arrives as it was sent.
    const args = [...names, "", "-n", "--help", "a\u0001b"]
    const r3 = await run(mode, { args: ["bash", "-c", 'printf "%s\\0" "$@"', "argv0", ...args] })
    expectRan(r3)
    expect(r3.stdout.toString("utf8")).toBe(args.map((a) => `${a}\0`).join(""))
  })

  it("argv mode (`arg` lines) runs the argv, with the program's stdin", async () => {
    const r = await run(mode, {
      args: ["sh", "-c", 'echo "argv: $0 $1"; cat; exit 7', "zero", "one"],
      stdin: "from stdin\n"
    })
    expectRan(r, 7)
    expect(r.stdout.toString()).toBe("argv: zero one\nfrom stdin\n")
  })

  it(
    mode === "framed"
      ? "reports the program's pid and start time in the 'p' frame"
      : "execs the program in place (its pid is the supervisor's)",
    async () => {
      const p = start(mode, { language: "python", code: PRINT_PID_AND_START })
      const r = await p.done
      expectRan(r)
      const [pid, startTime] = r.stdout.toString().trim().split(" ")
      if (mode === "framed") {
        expect(r.frames[0]).toMatchObject({ type: "p", text: `${pid} ${startTime}` })
        expect(Number(pid)).not.toBe(p.child.pid)
      } else {
        expect(Number(pid)).toBe(p.child.pid)
      }
    }
  )

  it("a missing interpreter or command is 127; a command that cannot be executed is 126", async () => {
    const empty = path.join(tmp, "empty-bin")
    fs.mkdirSync(empty)
    expectRefused(
      await run(mode, { language: "python", code: "print(1)" }, { env: { PATH: empty } }),
      127,
      /cannot run python3: No such file/
    )
    expectRefused(await run(mode, { args: ["hermes-no-such-command", "x"] }), 127, /cannot run hermes-no-such-command/)
    const notExecutable = path.join(tmp, "not-executable.sh")
    fs.writeFileSync(notExecutable, "#!/bin/sh\necho ran\n", { mode: 0o644 })
    fs.chmodSync(notExecutable, 0o644)
    // As root, EACCES still holds for a file with no execute bit at all.
    expectRefused(await run(mode, { args: [notExecutable] }), 126, /Permission denied/)
  })

  describe("path escapes are refused with 126, before the program runs", () => {
    const outside = () => path.join(tmp, "outside")
    const marker = () => path.join(tmp, "the-program-ran")
    const program = (): Request => ({ language: "bash", code: `touch '${marker()}'\n` })

    it.each([
      ["an absolute path", "/etc/hermes-escape"],
      ["a '..' segment", "../escape.txt"],
      ["a '..' in the middle", "a/../../escape.txt"],
      ["a trailing '..'", "a/.."],
      ["an empty path", ""],
      ["only dots and slashes", "./."],
      ["a NUL byte", "a\u0000b"]
    ])("%s", async (_what, name) => {
      const r = await run(mode, { ...program(), files: [[name, "x"]] })
      expectRefused(r, 126, /file path/)
      expect(fs.existsSync(path.join(tmp, "escape.txt"))).toBe(false)
      expect(fs.existsSync(marker())).toBe(false)
    })

    it("a symlinked directory pointing outside the workspace", async () => {
      fs.mkdirSync(outside())
      fs.symlinkSync(outside(), path.join(workspace, "link"))
      const r = await run(mode, { ...program(), files: [["link/pwned.txt", "x"]] })
      expectRefused(r, 126, /link is a symlink/)
      expect(fs.readdirSync(outside())).toEqual([])
      expect(fs.existsSync(marker())).toBe(false)
    })

    it("a symlinked directory deeper down, and one pointing inside the workspace (any symlink)", async () => {
      fs.mkdirSync(outside())
      fs.mkdirSync(path.join(workspace, "a/b"), { recursive: true })
      fs.symlinkSync(outside(), path.join(workspace, "a/b/deep"))
      expectRefused(await run(mode, { ...program(), files: [["a/b/deep/c/pwned.txt", "x"]] }), 126, /deep is a symlink/)
      fs.mkdirSync(path.join(workspace, "real"))
      fs.symlinkSync("real", path.join(workspace, "inside"))
      expectRefused(await run(mode, { ...program(), files: [["inside/f.txt", "x"]] }), 126, /inside is a symlink/)
      expect(fs.readdirSync(outside())).toEqual([])
      expect(fs.readdirSync(path.join(workspace, "real"))).toEqual([])
      expect(fs.existsSync(marker())).toBe(false)
    })

    it("a symlink as the file itself", async () => {
      fs.mkdirSync(outside())
      const target = path.join(outside(), "target.txt")
      fs.writeFileSync(target, "original")
      fs.symlinkSync(target, path.join(workspace, "file.txt"))
      const r = await run(mode, { ...program(), files: [["file.txt", "overwritten"]] })
      expectRefused(r, 126, /file\.txt: Too many levels of symbolic links/)
      expect(fs.readFileSync(target, "utf8")).toBe("original")
      expect(fs.existsSync(marker())).toBe(false)
    })

    it("a FIFO (or any non-regular file) planted where a file goes: refused at once, never blocking the setup", async () => {
      execFileSync("mkfifo", [path.join(workspace, "pipe.txt")])
      const r = await run(mode, { ...program(), files: [["pipe.txt", "data"]] })
      expectRefused(r, 126, /pipe\.txt: (No such device or address|.*not a regular file)/)
      expect(fs.existsSync(marker())).toBe(false)
    })

    it("a symlinked code directory", async () => {
      fs.mkdirSync(outside())
      fs.symlinkSync(outside(), codeDir)
      const r = await run(mode, program())
      expectRefused(r, 126, /not a directory owned by this user/)
      expect(fs.readdirSync(outside())).toEqual([])
      expect(fs.existsSync(marker())).toBe(false)
    })
  })

  describe("malformed input is refused with 126", () => {
    it.each([
      ["an unknown header word", "frobnicate 1\nrun\n", /unknown header line 'frobnicate'/],
      ["an unknown language", "lang ruby\ncode 0\nrun\n", /unknown language 'ruby'/],
      ["a header line over 4096 bytes", `lang ${"x".repeat(5000)}\nrun\n`, /longer than 4096/],
      ["stdin ending between header lines", "lang python\ncode 0\n", /stdin ended inside the header/],
      ["stdin ending inside a header line", "lang pyt", /stdin ended inside the header/],
      ["stdin ending inside the code", "lang python\ncode 100\nprint(1)", /stdin ended after 8 of 100 bytes of code/],
      [
        "stdin ending inside a file",
        "lang python\ncode 0\nfile 1 10\naabc",
        /stdin ended after 3 of 10 bytes of a file/
      ],
      ["stdin ending inside a file path", "lang python\ncode 0\nfile 10 1\nabc", /of file path/],
      ["stdin ending inside an argument", "arg 10\nabc", /of an argument/],
      ["a negative length", "lang python\ncode -1\nrun\n", /code: not a number/],
      ["a fractional length", "lang python\ncode 1.5\nrun\n", /code: bad number/],
      ["a length with trailing garbage", "lang python\ncode 3x\nrun\n", /code: bad number/],
      ["a length with a sign", "lang python\ncode +3\nrun\n", /code: not a number/],
      ["an empty length", "lang python\ncode \nrun\n", /code: not a number/],
      ["a missing length", "lang python\ncode\nrun\n", /code: not a number/],
      ["a length that overflows", "lang python\ncode 99999999999999999999999\nrun\n", /code: bad number/],
      ["a cap that is not a number", "cap lots\nlang python\ncode 0\nrun\n", /cap: not a number/],
      ["a file line with one number", "file 3\nabcrun\n", /file: expected/],
      ["a file line with three numbers", "file 1 1 1\nabrun\n", /file length: bad number/],
      ["an argument with a NUL byte", "arg 3\na\u0000brun\n", /argument contains a NUL byte/],
      ["a header line with a NUL byte", "lang python\u0000 ignored\ncode 0\nrun\n", /header line contains a NUL byte/],
      ["a key that is too short", "key 0123abcd\nlang python\ncode 0\nrun\n", /key must be 32 hex digits/],
      ["a key in upper case", `key ${"AB".repeat(16)}\nlang python\ncode 0\nrun\n`, /key must be lowercase hex/],
      ["code without a language", "code 8\nprint(1)run\n", /code without a language/],
      ["nothing to run", "run\n", /nothing to run/],
      ["an empty lock path", "lock 0\nlang python\ncode 0\nrun\n", /lock path length/]
    ])("%s", async (_what, rest, pattern) => {
      expectRefused(await run(mode, (key) => prefix(mode, key) + rest), 126, pattern)
    })

    it("a long header line under the limit is fine (4000 bytes)", async () => {
      const r = await run(mode, (key) => `${prefix(mode, key)}lang bash\ncode ${"0".repeat(3990)}8\necho ok\nrun\n`)
      expectRan(r)
      expect(r.stdout.toString()).toBe("ok\n")
    })
  })
})

describe("a first line that is not 'HERMES/2' is refused with 126 (no key yet: one stderr line)", () => {
  it.each([
    ["empty stdin", ""],
    ["a bare program", "print('hi')\n"],
    ["version 1", 'HERMES/1 {"language":"python","code":0}\n'],
    ["version 3", "HERMES/3\nrun\n"],
    ["no newline after the version", "HERMES/2"],
    ["a trailing space", "HERMES/2 \nrun\n"],
    ["lower case", "hermes/2\nrun\n"],
    ["an empty first line", "\nHERMES/2\nrun\n"],
    ["a first line over 4096 bytes", `HERMES/2${" ".repeat(5000)}\n`]
  ])("%s", async (_what, input) => {
    const r = await run("plain", () => input)
    expect(r.exitCode).toBe(126)
    expect(r.stdout.length).toBe(0)
    expect(r.stderr.toString()).toMatch(/^hermes-run: [^\n]+\n$/)
  })
})

describe("framed mode: the report", () => {
  it("relays at most `cap` bytes of each stream and counts the rest", async () => {
    const digits = Array.from({ length: 100_000 }, (_, i) => String(i % 10)).join("")
    const code = `import sys\nd = ${JSON.stringify(digits)}\nfor i in range(0, len(d), 7000):\n    sys.stdout.write(d[i:i + 7000]); sys.stdout.flush()\nsys.stderr.write("b" * 2999 + "c")\n`
    for (const cap of [0, 1000, 65_537, 200_000]) {
      const r = await run("framed", { language: "python", code, capBytes: cap })
      expectRan(r)
      expect(r.report, `cap ${cap}`).toEqual({ exitCode: 0, stdoutBytes: 100_000, stderrBytes: 3000, outsideSignal: 0 })
      expect(r.stdout.toString(), `cap ${cap}`).toBe(digits.slice(0, cap))
      expect(r.stderr.toString(), `cap ${cap}`).toBe(("b".repeat(2999) + "c").slice(0, cap))
    }
  })

  it("a forked child (os.fork()) reaching the end of its script does not end the run", async () => {
    const code = [
      "import os, sys, time",
      "if os.fork() == 0:",
      "    print('the child reaches the end of the script', flush=True)",
      "else:",
      "    time.sleep(0.8)",
      "    print('the parent, later', flush=True)",
      "    sys.exit(3)",
      ""
    ].join("\n")
    for (const mode of MODES) {
      const r = await run(mode, { language: "python", code })
      expectRan(r, 3)
      expect(r.stdout.toString(), mode).toBe("the child reaches the end of the script\nthe parent, later\n")
    }
  })

  it("a JavaScript exit handler that spins keeps the report back until the process exits", async () => {
    const code = [
      "process.on('exit', () => {",
      "  const until = Date.now() + 800",
      "  while (Date.now() < until) {}",
      "  require('fs').writeSync(1, 'after the spin\\n')",
      "  process.exitCode = 9",
      "})",
      "console.log('before')",
      ""
    ].join("\n")
    const r = await run("framed", { language: "javascript", code })
    expectRan(r, 9)
    expect(r.stdout.toString()).toBe("before\nafter the spin\n")
    const p = r.frames.find((f) => f.type === "p")!
    const x = r.frames.find((f) => f.type === "x")!
    expect(x.at - p.at).toBeGreaterThanOrEqual(700)
  })

  it("output that looks like frames (another key) stays inside 'o' / 'e' frames", async () => {
    const other = RunnerProtocol.makeRunKey()
    const forged = Buffer.concat([
      Buffer.from(RunnerProtocol.encodeFrame(other, "x", "0 0 0")),
      Buffer.from(RunnerProtocol.encodeFrame(other, "E", "forged setup error")),
      Buffer.from(RunnerProtocol.encodeFrame("00".repeat(16), "o", "forged output")),
      Buffer.from(RunnerProtocol.encodeFrame(other, "p", "1 1"))
    ])
    const code =
      "import sys\nd = sys.stdin.buffer.read()\nsys.stdout.buffer.write(d); sys.stdout.flush()\nsys.stderr.buffer.write(d)\nsys.exit(5)\n"
    const r = await run("framed", { language: "python", code, stdin: forged })
    expectRan(r, 5)
    expect(r.stdout.equals(forged)).toBe(true)
    expect(r.stderr.equals(forged)).toBe(true)
    expect(r.frames.filter((f) => f.type !== "o" && f.type !== "e").map((f) => f.type)).toEqual(["p", "x"])
    expect(r.report).toEqual({ exitCode: 5, stdoutBytes: forged.length, stderrBytes: forged.length, outsideSignal: 0 })
  })

  it("the key never reaches the program (environment, argv, its own or its parent's command line, fds)", async () => {
    const code = [
      "import os, sys",
      "print(repr(dict(os.environ)))",
      "print(repr(sys.argv))",
      "print(repr(open('/proc/self/cmdline', 'rb').read()))",
      "print(repr(open('/proc/%d/cmdline' % os.getppid(), 'rb').read()))",
      "for fd in os.listdir('/proc/self/fd'):",
      "    print(fd, os.readlink('/proc/self/fd/' + fd) if os.path.exists('/proc/self/fd/' + fd) else '-')",
      "print(repr(sys.stdin.buffer.read()))",
      ""
    ].join("\n")
    const p = start("framed", { language: "python", code, stdin: "the program's own stdin" })
    const r = await p.done
    expectRan(r)
    const seen = r.stdout.toString("latin1")
    expect(seen).toContain("the program's own stdin")
    expect(seen).not.toContain(p.key)
    expect(r.stdout.includes(Buffer.from(p.key, "hex"))).toBe(false)
  })

  it.skipIf(process.getuid?.() !== 0)(
    "the program (same uid) cannot open the supervisor's /proc entries: it is not dumpable",
    async () => {
      // Both as nobody: uid alone would allow it; PR_SET_DUMPABLE 0 is what stops it.
      fs.chmodSync(tmp, 0o755)
      fs.chownSync(workspace, 65534, 65534)
      fs.mkdirSync(codeDir, { mode: 0o700 })
      fs.chownSync(codeDir, 65534, 65534)
      const code = [
        "p=$PPID",
        'if (exec 3>"/proc/$p/fd/1") 2>/dev/null; then echo "supervisor fd: opened"; else echo "supervisor fd: denied"; fi',
        'if cat "/proc/$p/environ" >/dev/null 2>&1; then echo "supervisor environ: read"; else echo "supervisor environ: denied"; fi',
        // The control: the program's own child reads the program's (dumpable, same uid) entries.
        'sh -c \'if cat "/proc/$PPID/environ" >/dev/null 2>&1 && (exec 3>"/proc/$PPID/fd/1"); then echo "own child: read"; else echo "own child: denied"; fi\'',
        ""
      ].join("\n")
      const r = await run(
        "framed",
        { language: "bash", code },
        { wrap: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] }
      )
      expectRan(r)
      expect(r.stdout.toString()).toBe("supervisor fd: denied\nsupervisor environ: denied\nown child: read\n")
    }
  )
})

// ---- in a pid namespace of its own (never the host's: kill_others) -----------------------------

const canUnshare = (() => {
  if (process.getuid?.() !== 0) return false
  try {
    execFileSync("unshare", ["--fork", "--pid", "--mount-proc", "--kill-child", "true"], {
      stdio: "ignore",
      timeout: 10_000
    })
    return true
  } catch {
    return false
  }
})()

/** Host pids whose parent is `pid`. */
const childrenOf = (pid: number): Array<number> =>
  fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, "latin1")
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid
      } catch {
        return false
      }
    })
    .map(Number)

interface Exec {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A pid namespace whose PID 1 is `hermes-run --hold`, as in a session sandbox. */
class PidNamespace {
  private constructor(
    private readonly holder: ChildProcess,
    /** PID 1 of the namespace, as the host sees it. */
    readonly init: number,
    private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  ) {}

  /** Entered from outside, like `docker exec`: whatever runs has parent pid 0 in the namespace. */
  get via(): ReadonlyArray<string> {
    return ["nsenter", `--target=${this.init}`, "--pid", "--mount", "--"]
  }

  static async open(): Promise<PidNamespace> {
    const holder = spawn("unshare", ["--fork", "--pid", "--mount-proc", "--kill-child", SUPERVISOR, "--hold"], {
      stdio: "ignore"
    })
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      holder.on("exit", (code, signal) => resolve({ code, signal }))
    )
    const deadline = Date.now() + 10_000
    let init: number | undefined
    while (init === undefined) {
      if (Date.now() > deadline) {
        holder.kill("SIGKILL")
        throw new Error("the namespace's PID 1 did not start")
      }
      // The supervisor itself, not unshare's child before its exec (whose argv has "--hold" too, and
      // whose /proc is not mounted yet): argv[0] is the supervisor only after the exec.
      init = childrenOf(holder.pid!).find((pid) => {
        try {
          const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0")
          return argv[0] === SUPERVISOR && argv.includes("--hold")
        } catch {
          return false
        }
      })
      if (init === undefined) await sleep(10)
    }
    const ns = new PidNamespace(holder, init, exited)
    opened.push(ns)
    // Everything that kills runs with the namespace's own /proc: make sure it is.
    const pid1 = await ns.exec(["cat", "/proc/1/cmdline"])
    const runnerVisible = (await ns.exec(["test", "-e", `/proc/${process.pid}`])).code === 0
    if (!pid1.stdout.includes("--hold") || runnerVisible) {
      await ns.close()
      throw new Error("nsenter did not give the namespace's own /proc")
    }
    return ns
  }

  exec(argv: ReadonlyArray<string>): Promise<Exec> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.via[0]!, [...this.via.slice(1), ...argv], {
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 30_000
      })
      const out: Array<Buffer> = []
      const err: Array<Buffer> = []
      child.stdout.on("data", (c: Buffer) => out.push(c))
      child.stderr.on("data", (c: Buffer) => err.push(c))
      child.on("error", reject)
      child.on("close", (code) =>
        resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() })
      )
    })
  }

  start(mode: Mode, req: Request, opts: Options = {}): Running {
    return start(mode, req, { ...opts, via: this.via })
  }

  /** The state letter of a process in the namespace (R, S, Z, ...), or undefined if there is none. */
  async state(pid: number): Promise<string | undefined> {
    const r = await this.exec(["cat", `/proc/${pid}/stat`])
    if (r.code !== 0) return undefined
    return r.stdout.slice(r.stdout.lastIndexOf(")") + 2).split(" ")[0]
  }

  async alive(pid: number): Promise<boolean> {
    const s = await this.state(pid)
    return s !== undefined && s !== "Z" && s !== "X"
  }

  /** SIGTERM to its PID 1 (the supervisor in --hold), which ends the namespace; its exit. */
  async close(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const i = opened.indexOf(this)
    if (i >= 0) opened.splice(i, 1)
    try {
      process.kill(this.init, "SIGTERM")
    } catch {
      // already gone
    }
    const timeout = sleep(10_000).then(() => undefined)
    const ended = await Promise.race([this.exited, timeout])
    if (ended !== undefined) return ended
    this.holder.kill("SIGKILL") // --kill-child: its PID 1, and with it the namespace, goes too
    return this.exited
  }
}

const opened: Array<PidNamespace> = []
afterEach(async () => {
  for (const ns of [...opened]) await ns.close()
})

/** A one-shot sandbox's shape: the supervisor itself is PID 1 of a namespace of its own. */
const ONE_SHOT = ["unshare", "--fork", "--pid", "--mount-proc", "--kill-child"]

describe.skipIf(!canUnshare)("in a pid namespace of its own", () => {
  it("as PID 1 (one-shot), an orphan it reaps does not end the run", async () => {
    const code = [
      "pidfile=orphan.pid",
      '( sleep 0.3 </dev/null >/dev/null 2>&1 & echo $! > "$pidfile" )',
      "sleep 0.1",
      'echo "the orphan\'s parent: $(cut -d" " -f4 /proc/$(cat "$pidfile")/stat)"',
      "sleep 0.8",
      "echo later",
      "exit 3",
      ""
    ].join("\n")
    const r = await run("framed", { language: "bash", code }, { via: ONE_SHOT })
    expectRan(r, 3)
    expect(r.stdout.toString()).toBe("the orphan's parent: 1\nlater\n")
  })

  it("a background process that never stops writing does not hold the report back", async () => {
    // The host reads slowly, through a pipe (64 KiB every 50 ms): the supervisor's relay blocks, the
    // writer refills the program's pipe meanwhile, so a final drain "until the pipe is empty" never ends.
    const slowReader =
      "import os, sys, time\nwhile True:\n    b = os.read(0, 65536)\n    if not b: break\n    sys.stdout.buffer.write(b); sys.stdout.buffer.flush(); time.sleep(0.05)\n"
    const via = ["bash", "-c", 'set -o pipefail; r=$1; shift; "$@" | python3 -c "$r"', "bash", slowReader, ...ONE_SHOT]
    const p = start("framed", { language: "bash", code: "yes &\nsleep 0.3\nexit 4\n" }, { via, timeoutMs: 30_000 })
    await sleep(200)
    const helpers = childrenOf(p.child.pid!) // unshare (and with it the namespace) and the reader
    try {
      await p.until("the report", () => p.frames.some((f) => f.type === "x"), 15_000)
      const r = await p.done
      expect(r.report?.exitCode).toBe(4)
      expect(r.report!.stdoutBytes).toBeGreaterThan(0)
    } finally {
      for (const pid of helpers) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // ended with the run
        }
      }
    }
  }, 40_000)

  it("a signal from outside is forwarded to the program and reported; one the program sends its supervisor is not 'outside'", async () => {
    const code =
      "import os, sys, time\nif sys.stdin.read() == 'self':\n    os.kill(os.getppid(), 15)\nprint('ready', flush=True)\ntime.sleep(30)\n"
    const outside = start("framed", { language: "python", code, stdin: "outside" }, { via: ONE_SHOT })
    await outside.until("the program", () => outside.stdoutSoFar().toString() === "ready\n")
    const supervisor = childrenOf(outside.child.pid!) // PID 1 of its namespace, as the host sees it
    expect(supervisor).toHaveLength(1)
    process.kill(supervisor[0]!, "SIGTERM")
    const r = await outside.done
    expectRan(r, 143)
    expect(r.report?.outsideSignal).toBe(15)

    const inside = await run("framed", { language: "python", code, stdin: "self" }, { via: ONE_SHOT })
    expectRan(inside, 143)
    expect(inside.report?.outsideSignal).toBe(0)
  }, 30_000)

  it("`lock`: a second supervisor sends 'w' naming the holder, waits, then 'l' once the first exits", async () => {
    const ns = await PidNamespace.open()
    const lock = path.join(tmp, "locks", "session.lock")
    // The first call also ends leftovers: a supervisor waiting for the lock (parent pid 0) is spared.
    const first = ns.start(
      "framed",
      {
        lock,
        killLeftovers: true,
        language: "python",
        code: "import os, sys\nprint(os.getppid(), flush=True)\nsys.stdin.readline()\nprint('first done')\n"
      },
      { keepOpen: true }
    )
    await first.until("the first call's output", () => first.stdoutSoFar().toString().includes("\n"))
    const holder = Number(first.stdoutSoFar().toString().trim()) // the first supervisor, in the namespace
    expect(first.types().slice(0, 2)).toEqual(["l", "p"])

    const second = ns.start("framed", { lock, language: "bash", code: "echo second ran\n" })
    await second.until("the 'w' frame", () => second.types().includes("w"))
    const w = second.frames.find((f) => f.type === "w")!
    const [pid, ...command] = w.text.split(" ")
    expect(Number(pid)).toBe(holder)
    expect(command.join(" ")).toContain("hermes-run")
    await sleep(500)
    expect(second.types(), "the second call waits").toEqual(["w"])

    first.end("go\n")
    const a = await first.done
    expectRan(a)
    expect(a.stdout.toString()).toBe(`${holder}\nfirst done\n`)
    const b = await second.done
    expectRan(b)
    expect(typesOf(b.frames)).toEqual(["w", "l", "p", "o", "x"])
    expect(b.stdout.toString()).toBe("second ran\n")
    expect(await ns.close()).toEqual({ code: 0, signal: null })
  }, 60_000)

  it("`leftovers kill` ends a background process left by an earlier run, before and after its own", async () => {
    const ns = await PidNamespace.open()
    const leave = "setsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $!\n"
    const r1 = await ns.start("framed", { language: "bash", code: leave }).done
    expectRan(r1)
    const left = Number(r1.stdout.toString())
    expect(await ns.alive(left), "without `leftovers kill` it stays").toBe(true)
    // `$!` is the forked shell, which execs sleep a moment later (on a loaded host, after bash's echo).
    let cmdline = ""
    for (let i = 0; i < 100 && cmdline !== "sleep\u00001000\u0000"; i++) {
      cmdline = (await ns.exec(["cat", `/proc/${left}/cmdline`])).stdout
      if (cmdline !== "sleep\u00001000\u0000") await sleep(50)
    }
    expect(cmdline).toBe("sleep\u00001000\u0000")
    // The second run ends it before its program starts, and what this program leaves after.
    // One read of the state: between a `[ -d ]` and a later read PID 1 may reap the zombie, and
    // an empty state would read as alive.
    const code = `s=$(cut -d' ' -f3 /proc/${left}/stat 2>/dev/null)\nif [ -n "$s" ] && [ "$s" != Z ]; then echo "first: alive $s"; else echo "first: gone"; fi\n${leave}`
    const r2 = await ns.start("framed", { killLeftovers: true, language: "bash", code }).done
    expectRan(r2)
    const [seen, second] = r2.stdout.toString().trim().split("\n")
    expect(seen).toBe("first: gone")
    expect(await ns.alive(left)).toBe(false)
    expect(await ns.alive(Number(second))).toBe(false)
    // And PID 1 (--hold) reaps them.
    const deadline = Date.now() + 5_000
    while ((await ns.state(left)) !== undefined || (await ns.state(Number(second))) !== undefined) {
      expect(Date.now() < deadline, "reaped by PID 1").toBe(true)
      await sleep(50)
    }
  }, 60_000)

  it("`--hold` as PID 1 reaps orphans, survives other signals and exits 0 on SIGTERM", async () => {
    const ns = await PidNamespace.open()
    const r = await ns.exec(["sh", "-c", "sleep 0.3 </dev/null >/dev/null 2>&1 & echo $!"])
    const orphan = Number(r.stdout)
    expect(await ns.alive(orphan)).toBe(true)
    await sleep(1_000)
    expect(await ns.state(orphan), "a zombie would still be listed").toBeUndefined()
    process.kill(ns.init, "SIGUSR1") // would end a process that does not block it
    process.kill(ns.init, "SIGHUP")
    await sleep(200)
    expect(await ns.alive(1)).toBe(true)
    expect(await ns.close()).toEqual({ code: 0, signal: null })
  }, 30_000)

  it("`--kill PID START since` spares PID when START is not its start time, and kills it when it is", async () => {
    const ns = await PidNamespace.open()
    const target = Number((await ns.exec(["sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!"])).stdout)
    const stat = (await ns.exec(["cat", `/proc/${target}/stat`])).stdout
    const started = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
    expect(await ns.alive(target)).toBe(true)
    // A later start time: a different process than the one the caller meant (pid reused).
    expect((await ns.exec([SUPERVISOR, "--kill", String(target), String(started + 1_000_000), "since"])).code).toBe(0)
    await sleep(200)
    expect(await ns.alive(target), "spared: wrong start time").toBe(true)
    expect((await ns.exec([SUPERVISOR, "--kill", String(target), String(started), "since"])).code).toBe(0)
    // Gone once init has reaped it, which a loaded host may take a while to get to.
    expect(await stateWithin(ns, target, (s) => s === undefined), "killed: its start time").toBeUndefined()
    expect(await ns.alive(1), "PID 1 is spared").toBe(true)
  }, 30_000)

  it("`--kill` resumes a supervisor its program stopped (SIGSTOP, same uid): it reports the program's end and exits", async () => {
    const ns = await PidNamespace.open()
    // The supervisor reports the program's pid ('p') just after starting it: a program that stops it
    // at once can win that race on a loaded host, and then there is no pid to name. (The host's own
    // path for that case kills the exec: session/call.ts.) The second lets the report out first.
    const call = ns.start("framed", { language: "bash", code: "sleep 1\nkill -STOP $PPID\nsleep 1000\n" })
    await call.until("the 'p' frame", () => call.frames.some((f) => f.type === "p"))
    const [pid, start] = call.frames.find((f) => f.type === "p")!.text.split(" ")
    const supervisor = await parentIn(ns, Number(pid))
    expect(await stateWithin(ns, supervisor, (s) => s === "T"), "stopped by its program").toBe("T")
    // Left stopped, it would hold its exec (and a session's lock) for ever.
    expect((await ns.exec([SUPERVISOR, "--kill", pid!, start!, "all"])).code).toBe(0)
    expect(await stateWithin(ns, supervisor, (s) => s === "Z" || s === undefined), "resumed, it ended").toBeOneOf([
      "Z",
      undefined
    ])
    // nsenter stopped itself with its child (job control; an engine's shim does not): resumed, it reaps.
    call.child.kill("SIGCONT")
    const r = await call.done
    expect(r.frames.map((f) => f.type)).toContain("x")
  }, 30_000)
})

/** The parent pid of `pid`, as the namespace sees it. */
const parentIn = async (ns: PidNamespace, pid: number): Promise<number> => {
  const stat = (await ns.exec(["cat", `/proc/${pid}/stat`])).stdout
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
}

/** The state letter of `pid` once `test` holds for it, or the last one seen after 10 s (a loaded host is slow). */
const stateWithin = async (ns: PidNamespace, pid: number, test: (state: string | undefined) => boolean) => {
  let state = await ns.state(pid)
  for (let i = 0; i < 500 && !test(state); i++) {
    await sleep(20)
    state = await ns.state(pid)
  }
  return state
}

/**
 * Feature `stdin`: Kubernetes' attach cannot end the supervisor's stdin, so the program's stdin comes
 * in the header and the supervisor ends it; what the host's stdin carries after `run` (it stays open
 * for ever there) never reaches the program.
 */
describe("`stdin` in the header without tools (a runtime whose stdin never ends)", () => {
  const big = Buffer.alloc(1024 * 1024)
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex")

  for (const language of ["python", "javascript", "bash"] as const) {
    it(`${language}: the program reads 1 MiB to its end and the run ends while the host's stdin stays open`, async () => {
      const r = start("framed", { language, code: CAT[language], stdin: big, stdinInHeader: true }, { keepOpen: true })
      r.child.stdin!.write("bytes after run, never the program's") // stays open: no end() until the run is over
      const done = await r.done
      expectRan(done)
      expect(sha(done.stdout)).toBe(sha(big))
    })
  }

  it("plain mode (no key): the program still reads it to its end", async () => {
    const r = start(
      "plain",
      { language: "python", code: CAT.python, stdin: big, stdinInHeader: true },
      { keepOpen: true }
    )
    r.child.stdin!.write("after run")
    const done = await r.done
    expect(done.status).toBe(0)
    expect(sha(done.stdout)).toBe(sha(big))
  })

  it("empty: the program sees an immediate end of file", async () => {
    const r = start(
      "framed",
      { language: "python", code: "import sys\nprint(repr(sys.stdin.read()))\n", stdinInHeader: true },
      { keepOpen: true }
    )
    const done = await r.done
    expectRan(done)
    expect(done.stdout.toString()).toBe("''\n")
  })

  it("a preloaded interpreter gets it the same way", async () => {
    const r = start(
      "framed",
      { language: "python", code: CAT.python, stdin: "in the header", stdinInHeader: true },
      { keepOpen: true, args: ["--preload", "python"] }
    )
    r.child.stdin!.write("after run")
    const done = await r.done
    expectRan(done)
    expect(done.stdout.toString()).toBe("in the header")
  })

  it("a header cut short is never run: the supervisor waits for the rest (the deadline ends it)", async () => {
    const payload = RunnerProtocol.encodeRunnerPayload({
      key: "0".repeat(32),
      language: "python",
      code: bytes("print(1)"),
      stdin: big,
      stdinInHeader: true
    })
    const r = start("framed", () => Buffer.from(payload).subarray(0, payload.length - 100), {
      keepOpen: true,
      key: "0".repeat(32)
    })
    await sleep(500)
    expect(r.types()).toEqual([])
    r.end()
    const done = await r.done
    expectRefused(done, 126, /stdin ended after/)
  })
})

describe("--hold outside PID 1", () => {
  it("exits 0 on SIGTERM and on SIGINT, not on other signals", async () => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      const child = spawn(SUPERVISOR, ["--hold"], { stdio: "ignore", timeout: 20_000 })
      const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.on("exit", (c, s) => resolve([c, s]))
      )
      await sleep(200)
      child.kill("SIGUSR1")
      child.kill("SIGHUP")
      await sleep(200)
      expect(child.exitCode, "still holding").toBeNull()
      child.kill(signal)
      expect(await exited).toEqual([0, null])
    }
  })
})

describe("--preload python (a warm pool's sandbox: the interpreter starts before the request)", () => {
  it("runs a Python request as python3 main.py would: argv, sys.path[0], __main__, cwd, stdin, a traceback that starts in the program, exit 1", async () => {
    const code =
      "import os, sys\nprint(sys.argv == [__file__], sys.path[0] == os.path.dirname(__file__), __name__, os.getcwd() == os.environ['HERMES_WORKSPACE'], sys.stdin.read())\nraise ValueError('boom')\n"
    const r = await run("framed", { language: "python", code, stdin: "in" }, { args: ["--preload", "python"] })
    expect(r.stdout.toString()).toBe("True True __main__ True in\n")
    expect(r.stderr.toString()).toMatch(
      /^Traceback \(most recent call last\):\n {2}File "[^"]*main\.py", line 3, in <module>\n.*\nValueError: boom\n$/s
    )
    expect(r.report?.exitCode).toBe(1)
  })

  it("SystemExit codes and atexit handlers behave as in a fresh interpreter", async () => {
    const r = await run(
      "framed",
      { language: "python", code: "import atexit, sys\natexit.register(lambda: print('atexit ran'))\nsys.exit(7)\n" },
      { args: ["--preload", "python"] }
    )
    expect(r.stdout.toString()).toBe("atexit ran\n")
    expect(r.report?.exitCode).toBe(7)
  })

  it("a request in another language runs as without the preload (the preloaded interpreter is discarded)", async () => {
    const r = await run("framed", { language: "bash", code: "echo bash; exit 4\n" }, { args: ["--preload", "python"] })
    expect(r.stdout.toString()).toBe("bash\n")
    expect(r.report?.exitCode).toBe(4)
  })
})

/**
 * Tool calls (`tools`): the supervisor listens on $HERMES_TOOLS_SOCKET, relays each call as 't' +
 * 'a' frames (or 'b' too large, 'q' caller gone) and hands the replies it reads on stdin
 * ("R <id> <status> <n>\n" + n bytes) to the callers. The program here speaks the socket protocol
 * with Python's socket module; the generated modules are tested in packages/core/test/ToolStubs.test.ts.
 */
describe("framed mode: tool calls", () => {
  const PY_CALL = String.raw`
import os, socket
def call(name, args, close_early=False):
    s = socket.socket(socket.AF_UNIX); s.connect(os.environ["HERMES_TOOLS_SOCKET"])
    s.sendall(name.encode() + b"\n" + args); s.shutdown(socket.SHUT_WR)
    if close_early:
        s.close(); return None
    b = b""
    while True:
        x = s.recv(65536)
        if not x: return b
        b += x
`
  interface Call {
    readonly id: number
    readonly name: string
    readonly args: Buffer
    readonly tooLarge: boolean
  }
  const toolRun = (
    code: string,
    opts: {
      tools?: string
      stdin?: string
      answer?: (c: Call, reply: (status: string, payload: string) => void) => void
      header?: string
    } = {}
  ) => {
    const key = RunnerProtocol.makeRunKey()
    const calls: Array<Call> = []
    const gone: Array<number> = []
    const types: Array<string> = []
    let out = ""
    const violations: Array<string> = []
    let current: { id: number; name: string; want: number; chunks: Array<Buffer> } | undefined
    const child = spawn(SUPERVISOR, [], {
      env: { ...process.env, PYTHONUNBUFFERED: "1", HERMES_WORKSPACE: workspace, HERMES_CODE_DIR: codeDir },
      stdio: ["pipe", "pipe", "pipe"],
      timeout: 30_000,
      killSignal: "SIGKILL"
    })
    const reply = (id: number) => (status: string, payload: string) => {
      const body = Buffer.from(payload)
      child.stdin!.write(Buffer.concat([Buffer.from(`R ${id} ${status} ${body.length}\n`), body]))
    }
    const got = (c: Call) => {
      calls.push(c)
      ;(opts.answer ?? ((c, r) => r("0", JSON.stringify(c.name))))(c, reply(c.id))
    }
    const decoder = new RunnerProtocol.FrameDecoder(key, {
      stdout: (c) => (out += Buffer.from(c).toString()),
      stderr: (c) => (out += Buffer.from(c).toString()),
      toolArguments: (c) => {
        current!.chunks.push(Buffer.from(c))
        if (Buffer.concat(current!.chunks).length === current!.want) {
          got({ id: current!.id, name: current!.name, args: Buffer.concat(current!.chunks), tooLarge: false })
          current = undefined
        }
      },
      control: (type, text, raw) => {
        types.push(type)
        if (type === "t" || type === "b") {
          const [id, size] = text.split(" ")
          const name = raw.subarray(id!.length + size!.length + 2).toString()
          if (type === "b") got({ id: Number(id), name, args: Buffer.alloc(Number(size)), tooLarge: true })
          else if (Number(size) === 0) got({ id: Number(id), name, args: Buffer.alloc(0), tooLarge: false })
          else current = { id: Number(id), name, want: Number(size), chunks: [] }
        } else if (type === "q") gone.push(Number(text))
        else if (type === "E") out += `E:${text}`
      },
      violation: (reason) => violations.push(reason)
    })
    child.stdout!.on("data", (c: Buffer) => decoder.push(c))
    child.stdin!.on("error", () => {})
    const program = Buffer.from(PY_CALL + code)
    const stdin = Buffer.from(opts.stdin ?? "")
    child.stdin!.write(
      Buffer.concat([
        Buffer.from(
          `HERMES/2\nkey ${key}\n${opts.header ?? ""}${opts.tools ?? "tools 8 1000 100000"}\nstdin ${stdin.length}\n`
        ),
        stdin,
        Buffer.from(`lang python\ncode ${program.length}\n`),
        program,
        Buffer.from("run\n")
      ])
    )
    const done = new Promise<{ exitCode: number | null }>((resolve) =>
      child.on("close", (exitCode) => resolve({ exitCode }))
    )
    return { calls, gone, types, out: () => out, violations, done, reply }
  }

  it("relays each call with the supervisor's own ids; the program's stdin comes from the header; replies reach the caller that made the call", async () => {
    const t = toolRun(
      `import sys, threading
print(sys.stdin.read().strip())
print(call("add", b'{"a":1}'))
rs = {}
ts = [threading.Thread(target=lambda i=i: rs.__setitem__(i, call("t%d" % i, b"{}"))) for i in range(4)]
[x.start() for x in ts]; [x.join() for x in ts]
print(sorted(rs.items()))
`,
      { stdin: "from the header\n" }
    )
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    expect(t.violations).toEqual([])
    expect(t.calls.map((c) => c.id)).toEqual([1, 2, 3, 4, 5])
    expect(t.calls[0]).toMatchObject({ name: "add", tooLarge: false })
    expect(t.calls[0]!.args.toString()).toBe('{"a":1}')
    const lines = t.out().trim().split("\n")
    expect(lines[0]).toBe("from the header")
    expect(lines[1]).toBe(`b'0"add"'`)
    // Each thread got the answer to its own call (the reply names the call's tool).
    expect(lines[2]).toBe(`[(0, b'0"t0"'), (1, b'0"t1"'), (2, b'0"t2"'), (3, b'0"t3"')]`)
    expect(t.types.at(-1)).toBe("x")
  })

  it("a request over the limit: its bytes are read and counted, 'b' names the size, and the caller gets the refusal (not a reset)", async () => {
    const t = toolRun(`print(call("big", b"x" * 200000))\nprint(call("small", b"{}"))`, {
      answer: (c, reply) => reply(c.tooLarge ? "2" : "0", c.tooLarge ? "too large" : "1")
    })
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    expect(t.calls[0]).toMatchObject({ id: 1, name: "big", tooLarge: true })
    expect(t.calls[0]!.args.length).toBe(200000) // the arguments' bytes, counted though dropped
    expect(t.out().trim().split("\n")).toEqual(["b'2too large'", "b'01'"])
  })

  it("at most <calls at once> are taken: the next connection waits until a reply frees a slot", async () => {
    let first!: (status: string, payload: string) => void
    const t = toolRun(
      `import threading, time
a = threading.Thread(target=lambda: print(call("first", b"{}"), flush=True)); a.start()
time.sleep(0.3)
print(call("second", b"{}"))
a.join()
`,
      {
        tools: "tools 1 1000 1000",
        answer: (c, reply) => {
          if (c.name === "first") first = reply
          else reply("0", "2")
        }
      }
    )
    const deadline = Date.now() + 10_000
    while (t.calls.length === 0 && Date.now() < deadline) await sleep(20)
    await sleep(600)
    // The second caller is connected (it waits in the backlog) but not taken while the slot is held.
    expect(t.calls.map((c) => c.name)).toEqual(["first"])
    first("0", "1")
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    expect(t.calls.map((c) => c.name)).toEqual(["first", "second"])
    // Two threads print: in either order.
    expect(t.out().trim().split("\n").sort()).toEqual(["b'01'", "b'02'"])
  })

  it("a caller gone while its call is served is reported ('q'), its slot freed at once, and the host's late reply dropped", async () => {
    const answers: Array<(status: string, payload: string) => void> = []
    const t = toolRun(
      `import threading, time
threading.Thread(target=lambda: call("left", b"{}", close_early=True)).start()
time.sleep(0.5)
print(call("second", b"{}"))
`,
      {
        tools: "tools 1 1000 1000",
        answer: (c, reply) => {
          if (c.name === "left") answers.push(reply)
          else reply("0", "2")
        }
      }
    )
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    expect(t.gone).toEqual([1])
    // Taken without any reply to the first: the slot was freed when its caller went away.
    expect(t.calls.map((c) => c.name)).toEqual(["left", "second"])
    expect(t.out().trim()).toBe("b'02'")
  })

  it("a late reply to a call whose caller went away is dropped; the next call is answered correctly", async () => {
    let late!: (status: string, payload: string) => void
    const t = toolRun(
      `import threading, time
threading.Thread(target=lambda: call("left", b"{}", close_early=True)).start()
time.sleep(0.5)
print(call("second", b"{}"))
`,
      {
        tools: "tools 2 1000 1000",
        answer: (c, reply) => {
          if (c.name === "left") late = reply
          else {
            late("0", "late") // written first: for call 1, gone
            reply("0", "2")
          }
        }
      }
    )
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    expect(t.out().trim()).toBe("b'02'")
  })

  it("after the program's end no call is taken: a leftover caller finds the socket gone", async () => {
    const t = toolRun(`import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os, socket, time\\ntime.sleep(0.5)\\ns = socket.socket(socket.AF_UNIX)\\ntry:\\n    s.connect(os.environ['HERMES_TOOLS_SOCKET']); open(os.environ['HERMES_WORKSPACE'] + '/leftover', 'w').write('connected')\\nexcept OSError as e:\\n    open(os.environ['HERMES_WORKSPACE'] + '/leftover', 'w').write('refused %d' % e.errno)"], start_new_session=True)
print("main ends")
`)
    const r = await t.done
    expect(r.exitCode, t.out()).toBe(0)
    const deadline = Date.now() + 10_000
    while (!fs.existsSync(path.join(workspace, "leftover")) && Date.now() < deadline) await sleep(50)
    expect(fs.readFileSync(path.join(workspace, "leftover"), "utf8")).toMatch(/^refused (2|111)$/) // ENOENT or ECONNREFUSED
    expect(t.calls).toEqual([])
  })

  it("a reply that is not 'R <id> <status> <n>' ends the run as a setup failure (126, 'E')", async () => {
    const t = toolRun(`print(call("x", b"{}"))`, { answer: (c) => void t2.push(c) })
    const t2: Array<Call> = []
    const deadline = Date.now() + 10_000
    while (t.calls.length === 0 && Date.now() < deadline) await sleep(20)
    // Written by hand: not a reply.
    t.reply(1)("7", "")
    const r = await t.done
    expect(r.exitCode).toBe(126)
    expect(t.out()).toContain("E:a malformed tool reply")
  })

  it("`tools` needs framed mode; modules land under the code directory without following a symlink", async () => {
    const plain = await run("plain", () => "HERMES/2\ntools 8 10 10\nrun\n")
    expectRefused(plain, 126, /tool calls need framed mode/)
    fs.mkdirSync(codeDir, { mode: 0o700 })
    fs.symlinkSync(tmp, path.join(codeDir, "node_modules"))
    const mod = Buffer.from("x")
    const refused = await run("framed", (key) =>
      Buffer.concat([
        Buffer.from(`${prefix("framed", key)}tools 8 10 10\nmodule 24 1\nnode_modules/evil/index.js`),
        mod,
        Buffer.from("run\n")
      ])
    )
    expectRefused(refused, 126, /symlink or not a directory/)
    expect(fs.existsSync(path.join(tmp, "evil"))).toBe(false)
  })
})

describe("--preload python with tools (a warm pool's sandbox serving a run with tools)", () => {
  it("the preloaded interpreter runs it: the channel's environment arrives with the program, its stdin is the header's, and a call works", async () => {
    const key = RunnerProtocol.makeRunKey()
    const code = String.raw`
import os, socket, sys
print(open("/proc/self/cmdline", "rb").read().split(b"\0")[1].decode())  # -c: the preloaded interpreter
print(sys.stdin.read().strip(), os.environ["HERMES_TOOLS_SOCKET"].endswith(".sock"), os.environ["PATH"].split(":")[0].endswith("/bin"))
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["HERMES_TOOLS_SOCKET"])
s.sendall(b"add\n{}"); s.shutdown(socket.SHUT_WR); print(s.recv(100))
`
    const payload = Buffer.from(
      RunnerProtocol.encodeRunnerPayload({
        key,
        language: "python",
        code: Buffer.from(code),
        tools: { maxInFlight: 2, maxRequestBytes: 1000, maxReplyBytes: 1000, modules: [] },
        stdin: Buffer.from("from the header\n")
      })
    )
    const child = spawn(SUPERVISOR, ["--preload", "python"], {
      env: { ...process.env, PYTHONUNBUFFERED: "1", HERMES_WORKSPACE: workspace, HERMES_CODE_DIR: codeDir },
      stdio: ["pipe", "pipe", "pipe"],
      timeout: 30_000
    })
    let out = ""
    const decoder = new RunnerProtocol.FrameDecoder(key, {
      stdout: (c) => (out += Buffer.from(c).toString()),
      stderr: (c) => (out += Buffer.from(c).toString()),
      toolArguments: () => {},
      control: (type, text) => {
        if (type === "t") child.stdin!.write(`R ${text.split(" ")[0]} 0 2\n42`)
      },
      violation: (reason) => (out += `VIOLATION ${reason}`)
    })
    child.stdout!.on("data", (c: Buffer) => decoder.push(c))
    // The request arrives after the interpreter started, as in a warm sandbox.
    await sleep(300)
    child.stdin!.write(payload)
    const exitCode = await new Promise<number | null>((resolve) => child.on("close", resolve))
    expect(exitCode, out).toBe(0)
    expect(out.trim().split("\n")).toEqual(["-c", "from the header True True", "b'042'"])
  })

  it("without tools the program's stdin (what follows `run`) is relayed to the preloaded interpreter, to its end", async () => {
    const big = "x".repeat(300_000)
    const r = await run(
      "framed",
      { language: "python", code: "import sys\nd = sys.stdin.read()\nprint(len(d), d[:3])", stdin: big },
      { args: ["--preload", "python"] }
    )
    expect(r.stdout.toString()).toBe("300000 xxx\n")
  })
})

// ---- kernel mode (--kernel python): a session's Python kernel ------------------------------------
//
// Always in a pid namespace of its own (PidNamespace): every end of a kernel kills its domain, which
// is everything started since the kernel (kill_others … since). The frames are decoded by the host's
// own RunnerProtocol.KernelFrameDecoder, so every kernel here also checks that decoder's grammar
// against the real supervisor: a violation is a failed test. The list of frames below is what the
// decoder delivered, in order (a record arrives whole, as 'M' with its bytes).

const hasIPython = (() => {
  try {
    execFileSync("python3", ["-c", "import IPython"], { stdio: "ignore", timeout: 20_000 })
    return true
  } catch {
    return false
  }
})()

/** One frame as the host's decoder delivered it: its type, and its payload (a record: its whole JSON). */
interface KFrame {
  readonly type: string
  readonly data: Buffer
  readonly text: string
}

const kframe = (type: string, payload: string | Uint8Array = ""): KFrame => {
  const data = Buffer.from(payload)
  return { type, data, text: data.toString("latin1") }
}

/** A record's JSON as the driver writes it: R/D {data, metadata}, X {ename, evalue, traceback}. */
interface RecordJson {
  readonly data: Record<string, string>
  readonly metadata: unknown
  readonly ename: string
  readonly evalue: string
  readonly traceback: ReadonlyArray<string>
}

interface CellOut {
  readonly frames: ReadonlyArray<KFrame>
  /** 'C' payload's idle bytes. */
  readonly idleBytes: number
  readonly status: string | undefined
  readonly stdout: string
  readonly stderr: string
  readonly records: ReadonlyArray<{ readonly kind: string; readonly json: RecordJson }>
  readonly skipped: ReadonlyArray<string>
  /** 'Z' payload's words after the id and status: stdout bytes, stderr bytes, records, skipped. */
  readonly counts: ReadonlyArray<number>
  /** 'G' payload, when the kernel ended with this cell. */
  readonly gone: string | undefined
}

class Kernel {
  readonly frames: Array<KFrame> = []
  readonly violations: Array<string> = []
  readonly exited: Promise<number | null>
  private readonly decoder: RunnerProtocol.KernelFrameDecoder
  private cursor = 0
  private nextId = 1
  private constructor(
    readonly child: ChildProcess,
    readonly key: string,
    /** The header's `display` bound on one record (the supervisor's default without one). */
    bundleBytes: number
  ) {
    this.exited = new Promise((resolve) => child.on("close", (code) => resolve(code)))
    const push = (type: string, payload?: string | Uint8Array) => void this.frames.push(kframe(type, payload))
    this.decoder = new RunnerProtocol.KernelFrameDecoder(key, bundleBytes, {
      ready: (r) => push("g", [r.pid, r.start, ...r.preloadFailed].join(" ")),
      cellStarted: (id, idleBytes) => push("C", `${id} ${idleBytes}`),
      stdout: (c) => push("o", c),
      stderr: (c) => push("e", c),
      dropped: (stream, total) => push("d", `${stream} ${total}`),
      record: (kind, json) => void this.frames.push({ ...kframe("M", json), text: `${kind} ${json.byteLength}` }),
      skipped: (kind, bytes, reason) => push("N", `${kind} ${bytes} ${reason}`),
      cellEnded: (e) =>
        push("Z", `${e.cellId} ${e.status} ${e.stdoutBytes} ${e.stderrBytes} ${e.records} ${e.skipped}`),
      late: (c) => push("L", c),
      gone: (g) =>
        push("G", `${g.exitCode} ${g.signal} ${g.oomKilled === undefined ? "?" : g.oomKilled ? 1 : 0} ${g.cause}`),
      lockWait: (holder) => push("w", holder),
      locked: () => push("l"),
      setupFailed: (message) => push("E", message),
      toolFrame: (type, bytes) => push(type, bytes),
      toolArguments: (c) => push("a", c),
      violation: (reason) => void this.violations.push(reason)
    })
    child.stdout!.on("data", (c: Buffer) => this.decoder.push(c))
    child.stderr!.on("data", (c: Buffer) => this.violations.push(`stderr: ${c.toString()}`))
    child.stdin!.on("error", () => {})
  }

  /** Start `--kernel python` in the namespace with this header (between the key and `run`); wait for 'g' (or 'E'). */
  static async start(
    ns: PidNamespace,
    /** `wd`: the kernel's working directory (else nsenter's: the root, as entering a mount namespace sets it). */
    opts: { header?: string; env?: Record<string, string>; args?: ReadonlyArray<string>; wd?: string } = {}
  ): Promise<Kernel> {
    const key = RunnerProtocol.makeRunKey()
    const via = opts.wd === undefined ? ns.via : [...ns.via.slice(0, -1), `--wd=${opts.wd}`, "--"]
    const argv = [...via, SUPERVISOR, ...(opts.args ?? ["--kernel", "python"])]
    const child = spawn(argv[0]!, argv.slice(1), {
      env: { ...process.env, HERMES_WORKSPACE: workspace, HERMES_CODE_DIR: codeDir, ...opts.env },
      cwd: workspace,
      stdio: ["pipe", "pipe", "pipe"],
      timeout: 120_000,
      killSignal: "SIGKILL"
    })
    const display = /^display (\d+) /m.exec(opts.header ?? "")
    const k = new Kernel(child, key, display === null ? Table.LIMITS.kernelBundleBytes.value : Number(display[1]))
    k.write(`HERMES/2\nkey ${key}\n${opts.header ?? ""}run\n`)
    await k.next("gE", 30_000)
    return k
  }

  write(s: Bytes): void {
    this.child.stdin!.write(bytes(s))
  }

  /** The frames from the cursor up to and including the first of one of `types`; the cursor moves past it. */
  async next(types: string, ms = 30_000): Promise<Array<KFrame>> {
    const deadline = Date.now() + ms
    for (;;) {
      const i = this.frames.findIndex((f, n) => n >= this.cursor && types.includes(f.type))
      if (i >= 0) {
        const got = this.frames.slice(this.cursor, i + 1)
        this.cursor = i + 1
        return got
      }
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${types}: ${this.frames.map((f) => f.type).join("")}`)
      await sleep(10)
    }
  }

  async until(what: string, test: () => boolean, ms = 20_000): Promise<void> {
    const deadline = Date.now() + ms
    while (!test()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await sleep(10)
    }
  }

  get ready(): KFrame | undefined {
    return this.frames.find((f) => f.type === "g")
  }

  /** The kernel's pid in the namespace ('g'). */
  get pid(): number {
    return Number(this.ready!.text.split(" ")[0])
  }

  send(code: string, opts: { id?: string; count?: number; extra?: string } = {}): string {
    const id = opts.id ?? `c${this.nextId}`
    const count = opts.count ?? this.nextId
    this.nextId++
    const c = Buffer.from(code)
    this.decoder.expectCell(id)
    this.write(
      Buffer.concat([
        Buffer.from(`cell ${id} ${count}\ncode ${c.length}\n`),
        c,
        Buffer.from(`${opts.extra ?? ""}run\n`)
      ])
    )
    return id
  }

  /** The frames of a cell up to its 'Z' (and the 'G' after it, if the kernel ended), decoded. */
  async result(ms = 30_000): Promise<CellOut> {
    const frames = await this.next("ZG", ms)
    if (frames.at(-1)!.type === "Z" && frames.at(-1)!.text.split(" ")[1] === "none")
      frames.push(...(await this.next("G", ms)))
    return decodeCell(frames)
  }

  /** A cell that prints, then blocks: interrupted once it printed. */
  async interrupted(code: string): Promise<CellOut> {
    const id = this.send(code)
    await this.next("o")
    this.write(`interrupt ${id}\n`)
    return this.result()
  }

  async cell(code: string, opts: { id?: string; count?: number; extra?: string } = {}): Promise<CellOut> {
    this.send(code, opts)
    return this.result()
  }

  /** Close stdin and wait for the supervisor's exit: 'G' requested. */
  async close(): Promise<number | null> {
    this.child.stdin!.end()
    return this.exited
  }
}

const decodeCell = (frames: ReadonlyArray<KFrame>): CellOut => {
  const records = frames
    .filter((f) => f.type === "M")
    .map((f) => ({ kind: f.text.split(" ")[0]!, json: JSON.parse(f.data.toString("utf8")) as RecordJson }))
  const c = frames.find((f) => f.type === "C")
  const z = frames.find((f) => f.type === "Z")
  const words = z?.text.split(" ") ?? []
  return {
    frames,
    idleBytes: c === undefined ? -1 : Number(c.text.split(" ")[1]),
    status: words[1],
    stdout: Buffer.concat(frames.filter((f) => f.type === "o").map((f) => f.data)).toString("utf8"),
    stderr: Buffer.concat(frames.filter((f) => f.type === "e").map((f) => f.data)).toString("utf8"),
    records,
    skipped: frames.filter((f) => f.type === "N").map((f) => f.text),
    counts: words.slice(2).map(Number),
    gone: frames.find((f) => f.type === "G")?.text
  }
}

/** A python expression: the cell's records pipe (the last pipe the kernel opened; a cell can find it). */
const RECORDS_FD =
  "[f for f in sorted(int(x) for x in os.listdir('/proc/self/fd')) if os.path.exists(f'/proc/self/fd/{f}') and os.readlink(f'/proc/self/fd/{f}').startswith('pipe:')][-1]"

/** A 1x1 PNG, made without any imaging library. */
const TINY_PNG = [
  "import zlib, struct",
  "def _chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))",
  "png = b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0)) + _chunk(b'IDAT', zlib.compress(b'\\x00\\xff\\x00\\x00')) + _chunk(b'IEND', b'')"
].join("\n")

// Off only on a developer's host without IPython for python3 (the images have Debian's): never in CI
// (CI=true), where a missing IPython must fail these tests rather than skip them.
describe.skipIf(!canUnshare || (!hasIPython && process.env["CI"] !== "true"))("kernel mode (--kernel python)", () => {
  let ns: PidNamespace
  let kernel: Kernel | undefined
  beforeEach(async () => {
    ns = await PidNamespace.open()
    kernel = undefined
  })
  afterEach(async () => {
    if (kernel !== undefined) {
      kernel.child.kill("SIGKILL")
      expect(kernel.violations, "frame violations").toEqual([])
    }
  })
  const open = async (opts: Parameters<typeof Kernel.start>[1] = {}) => {
    kernel = await Kernel.start(ns, opts)
    expect(kernel.ready, kernel.frames.map((f) => `${f.type} ${f.text}`).join("\n")).toBeDefined()
    return kernel
  }

  it("keeps state across cells; the last expression is an R record, display() a D record, an exception an X record (no colour)", async () => {
    const k = await open()
    expect(k.ready!.text).toMatch(/^\d+ \d+$/)
    // First in line for the OOM killer (the supervisor's child wrote it before exec).
    expect((await k.cell("open('/proc/self/oom_score_adj').read()")).records[0]!.json.data["text/plain"]).toBe(
      "'1000\\n'"
    )
    // PR_GET_DUMPABLE: the driver made the kernel non-dumpable (calls of the same uid cannot read it).
    expect(
      (await k.cell("import ctypes\nctypes.CDLL(None).prctl(3, 0, 0, 0, 0)")).records[0]!.json.data["text/plain"]
    ).toBe("0")
    const a = await k.cell("import os\nx = 41\nprint('hi')\n")
    expect([a.status, a.stdout, a.records, a.counts]).toEqual(["ok", "hi\n", [], [3, 0, 0, 0]])
    const b = await k.cell("x + 1", { count: 7 })
    expect(b.status).toBe("ok")
    expect(b.records).toEqual([{ kind: "R", json: { data: { "text/plain": "42" }, metadata: {} } }])
    // The execution count is the host's.
    expect((await k.cell("get_ipython().execution_count", { count: 12 })).records[0]!.json.data["text/plain"]).toBe(
      "12"
    )
    const d = await k.cell(
      `${TINY_PNG}\nfrom IPython.display import display, HTML, Image\ndisplay(HTML('<b>bold</b>'))\ndisplay(Image(data=png))\n`
    )
    expect(d.records.map((r) => r.kind)).toEqual(["D", "D"])
    expect(d.records[0]!.json.data["text/html"]).toBe("<b>bold</b>")
    const png = Buffer.from(d.records[1]!.json.data["image/png"], "base64")
    expect(png.subarray(0, 8).toString("latin1")).toBe("\x89PNG\r\n\x1a\n")
    // Strict JSON whatever the bundle holds: NaN, infinities, bytes, objects JSON has no type for.
    const j = await k.cell(
      "from IPython.display import display\ndisplay({'application/json': {'nan': float('nan'), 'inf': float('-inf'), 'b': b'\\x00', 'o': object}}, raw=True)\n"
    )
    expect(j.records[0]!.json.data["application/json"]).toEqual({
      nan: "nan",
      inf: "-inf",
      b: "AA==",
      o: "<class 'object'>"
    })
    const e = await k.cell("def f():\n    return 1 / 0\nf()\n")
    expect(e.status).toBe("error")
    expect(e.records.map((r) => r.kind)).toEqual(["X"])
    const err = e.records[0]!.json
    expect([err.ename, err.evalue]).toEqual(["ZeroDivisionError", "division by zero"])
    expect(err.traceback.join("\n")).toContain("return 1 / 0")
    expect(err.traceback.join("\n")).not.toContain("\u001b[")
    const s = await k.cell("def (:\n")
    expect([s.status, s.records[0]?.json.ename]).toEqual(["error", "SyntaxError"])
    expect(await k.close()).toBe(0)
    expect(k.frames.at(-1)!.type).toBe("G")
    expect(k.frames.at(-1)!.text).toMatch(/^137 9 [01?] requested$/)
    expect(await ns.alive(k.pid), "the kernel is gone").toBe(false)
  }, 60_000)

  // A matplotlib figure as an image/png display without choosing a backend needs matplotlib, which
  // the images have and a host need not: test/mcp-run-python.test.ts checks it on the real engine
  // (hermes-sandbox/python-data), through runCell and the MCP tool.

  it("stdout and stderr are capped per cell like a run's, the rest counted", async () => {
    const k = await open({ header: "cap 1000\n" })
    const r = await k.cell("import sys\nsys.stdout.write('x' * 100000)\n_ = sys.stderr.write('y' * 10)\n")
    expect(r.stdout).toBe("x".repeat(1000))
    expect(r.stderr).toBe("y".repeat(10))
    expect(r.counts).toEqual([100000, 10, 0, 0])
    expect(r.frames.some((f) => f.type === "d")).toBe(true)
    // The next cell starts from zero.
    expect((await k.cell("print('again')")).stdout).toBe("again\n")
  }, 60_000)

  it("an interrupt the kernel answers keeps its state: KeyboardInterrupt, then done and a pong within the grace", async () => {
    const k = await open()
    await k.cell("x = 5\n")
    const id = k.send("import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n")
    await k.next("o")
    k.write(`interrupt ${id}\n`)
    const r = await k.result()
    expect(r.status).toBe("error")
    expect(r.records.map((x) => x.json.ename)).toEqual(["KeyboardInterrupt"])
    expect(r.gone).toBeUndefined()
    expect((await k.cell("print(x)")).stdout).toBe("5\n")
    // An interrupt for a cell that has ended is ignored.
    k.write(`interrupt ${id}\n`)
    expect((await k.cell("x")).records[0]!.json.data["text/plain"]).toBe("5")
  }, 60_000)

  it("an interrupted cell's traceback is the cell's frames alone, as IPython shows any exception: none of the driver's", async () => {
    const k = await open()
    const r = await k.interrupted(
      "import time\ndef wait():\n    time.sleep(60)\nprint('sleeping', flush=True)\nwait()\n"
    )
    expect(r.records.map((x) => x.json.ename)).toEqual(["KeyboardInterrupt"])
    const tb = r.records[0]!.json.traceback.join("\n")
    // The cell's two frames, innermost last (time.sleep is C: no frame of its own), as IPython 8.6+
    // ("Cell In[1], line 3, in wait()") and 8.0–8.5 ("Input In [1], in wait()") head them...
    const frames = tb.split("\n").filter((l) => /^(Cell In ?\[|Input In \[|File )/.test(l))
    expect(frames).toHaveLength(2)
    expect(frames[0]).toMatch(/^(Cell|Input) In ?\[1\]/)
    expect(frames[1]).toMatch(/^(Cell|Input) In ?\[1\].*, in wait/)
    // ...and nothing of the driver (`python3 -c`: its frames are "<string>"), whose handler used to raise it.
    expect(tb).not.toMatch(/<string>|on_sigint/)
  }, 60_000)

  it("a SIGINT handler a cell installs lasts until its end: the next cell is interrupted and the state kept", async () => {
    const k = await open()
    await k.cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nx = 5\n")
    const r = await k.interrupted("import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n")
    expect(r.records.map((x) => x.json.ename)).toEqual(["KeyboardInterrupt"])
    expect(r.gone).toBeUndefined()
    expect((await k.cell("print(x)")).stdout).toBe("5\n")
  }, 60_000)

  it("a cell that ignores SIGINT is killed with its domain after the grace: 'Z' none, 'G' interrupt-timeout", async () => {
    const k = await open({ header: "grace 300\n" })
    const id = k.send(
      "import os, signal, time, subprocess\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nchild = subprocess.Popen(['sleep', '1000'], start_new_session=True)\nprint(child.pid, flush=True)\ntime.sleep(60)\n"
    )
    const out = await k.next("o")
    const child = Number(out.at(-1)!.text.trim())
    k.write(`interrupt ${id}\n`)
    const r = await k.result()
    expect(r.status).toBe("none")
    expect(r.gone).toMatch(/^137 9 [01?] interrupt-timeout$/)
    expect(await k.exited).toBe(0)
    expect(await ns.alive(k.pid)).toBe(false)
    expect(await ns.alive(child), "a setsid child of the cell is killed too").toBe(false)
  }, 60_000)

  it("a cell busy in C (sum over a huge range: no bytecode, so no signal handler runs) is killed after the grace: 'G' interrupt-timeout", async () => {
    const k = await open({ header: "grace 300\n" })
    // The interrupt can land between the print and the call into C on a loaded host: the
    // KeyboardInterrupt then ends that cell as an error (the kernel lives), and it is sent again.
    for (let attempt = 1; ; attempt++) {
      const id = k.send("print('in C', flush=True)\nsum(range(10 ** 13))\n")
      await k.next("o")
      await sleep(50)
      k.write(`interrupt ${id}\n`)
      const r = await k.result()
      if (r.status === "error" && attempt < 5) continue
      expect(r.status).toBe("none")
      expect(r.gone).toMatch(/interrupt-timeout$/)
      break
    }
  }, 60_000)

  it("a cell that catches KeyboardInterrupt and says done but keeps the driver busy gets no pong: killed", async () => {
    const k = await open({ header: "grace 500\n" })
    // The cell sends the driver's "done" itself, then stays busy: done alone proves nothing.
    const id = k.send(
      "import socket, time\nctl = socket.socket(fileno=3)\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    ctl.send(b'done ok')\n    while True:\n        try:\n            time.sleep(60)\n        except KeyboardInterrupt:\n            pass\n"
    )
    await sleep(300)
    k.write(`interrupt ${id}\n`)
    const r = await k.result()
    expect(r.status).toBe("none")
    expect(r.gone).toMatch(/interrupt-timeout$/)
  }, 60_000)

  it("the kernel's death ends the cell 'Z' none and 'G' crashed, with its exit; at idle 'G' crashed alone", async () => {
    const k = await open()
    const r = await k.cell("import os\nos._exit(3)\n")
    expect(r.status).toBe("none")
    expect(r.gone).toMatch(/^3 0 [01?] crashed$/)
    expect(await k.exited).toBe(0)

    const k2 = await open()
    await k2.cell(
      "import os, signal, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os.kill(os.getpid(), signal.SIGKILL))).start()\n"
    )
    const g = await k2.next("G")
    expect(g.at(-1)!.text).toMatch(/^137 9 [01?] crashed$/)
    expect(await k2.exited).toBe(0)
  }, 60_000)

  it("`restart` and stdin's end kill the whole domain: 'G' requested", async () => {
    const k = await open()
    const r = await k.cell(
      "import subprocess\nprint(subprocess.Popen(['sleep', '1000'], start_new_session=True).pid)\n"
    )
    const left = Number(r.stdout.trim())
    expect(await ns.alive(left)).toBe(true)
    k.write("restart\n")
    expect((await k.next("G")).at(-1)!.text).toMatch(/ requested$/)
    expect(await k.exited).toBe(0)
    expect(await ns.alive(left)).toBe(false)
  }, 60_000)

  it("a driver that cannot start (no IPython) is an 'E' alone, exit 126", async () => {
    const fake = path.join(tmp, "fake")
    fs.mkdirSync(path.join(fake, "IPython"), { recursive: true })
    fs.writeFileSync(path.join(fake, "IPython", "__init__.py"), "raise ImportError('not here')\n")
    const k = await Kernel.start(ns, { env: { PYTHONPATH: fake } })
    expect(await k.exited).toBe(126)
    expect(k.frames.map((f) => f.type)).toEqual(["E"])
    expect(k.frames[0]!.text).toMatch(/^the kernel cannot start: no IPython/)
  }, 60_000)

  it("files in the kernel's working directory named like modules the driver imports do not stop it; cells import from there", async () => {
    const shadows = ["struct", "signal", "json", "tempfile", "traitlets"]
    for (const name of shadows) fs.writeFileSync(path.join(workspace, `${name}.py`), "raise SystemExit('shadowed')\n")
    fs.writeFileSync(path.join(workspace, "mine.py"), "VALUE = 7\n")
    try {
      const k = await open({ wd: workspace })
      expect((await k.cell("import mine\nmine.VALUE")).records[0]!.json.data["text/plain"]).toBe("7")
    } finally {
      for (const name of [...shadows, "mine"]) fs.rmSync(path.join(workspace, `${name}.py`), { force: true })
    }
  }, 60_000)

  it("one kernel per sandbox: a second --kernel supervisor fails 'E' kernel-held", async () => {
    await open()
    const second = await Kernel.start(ns)
    expect(await second.exited).toBe(126)
    expect(second.frames.map((f) => `${f.type} ${f.text}`)).toEqual([expect.stringMatching(/^E kernel-held: /)])
  }, 60_000)

  it("preload imports modules before 'g', naming those that failed", async () => {
    const k = await open({ header: "preload 26\njson nosuch.module os.path" })
    expect(k.ready!.text).toMatch(/^\d+ \d+ nosuch\.module$/)
    expect((await k.cell("import sys\n'json' in sys.modules")).records[0]!.json.data["text/plain"]).toBe("True")
  }, 60_000)

  // ---- SECURITY.md, Kernels: the attack rows the supervisor answers ----

  it("printed end markers, frames and a forged result record stay the cell's stdout", async () => {
    const k = await open()
    const r = await k.cell(
      `import sys, struct\nsys.stdout.buffer.write(bytes.fromhex('${"00".repeat(16)}') + b'Z' + struct.pack('>I', 8) + b'c1 ok 0 ')\nprint('done ok')\nrec = b'{"data": {"text/plain": "999"}, "metadata": {}}'\nsys.stdout.buffer.write(b'R' + struct.pack('>I', len(rec)) + rec)\nsys.stdout.flush()\n`
    )
    expect(r.status).toBe("ok")
    expect(r.records, "nothing printed becomes a record").toEqual([])
    expect(r.stdout).toContain("done ok\n")
    expect(r.stdout).toContain('"999"')
    expect(r.frames.filter((f) => f.type === "Z")).toHaveLength(1)
    expect((await k.cell("1")).records[0]!.json.data["text/plain"]).toBe("1")
  }, 60_000)

  it("10,000 displays: the first <count> are forwarded, the rest skipped unread with 'N' count; a bundle too large and the total bound too", async () => {
    const k = await open({ header: "display 2000 100 50000\n" })
    const r = await k.cell("from IPython.display import display\nfor i in range(10000):\n    display(i)\n")
    expect(r.records).toHaveLength(100)
    expect(r.records[99]!.json.data["text/plain"]).toBe("99")
    expect(r.skipped).toHaveLength(9900)
    expect(new Set(r.skipped.map((s) => s.replace(/ \d+ /, " _ ")))).toEqual(new Set(["D _ count"]))
    expect(r.counts).toEqual([0, 0, 100, 9900])
    const big = await k.cell("from IPython.display import display, HTML\ndisplay(HTML('x' * 5000))\n'y' * 10")
    expect(big.skipped).toHaveLength(1)
    expect(big.skipped[0]).toMatch(/^D \d+ too-large$/)
    expect(big.records.map((x) => x.kind)).toEqual(["R"])
    const total = await k.cell(
      "from IPython.display import display, HTML\nfor i in range(40):\n    display(HTML('x' * 1900))\n"
    )
    expect(total.records.length).toBeLessThan(40)
    expect(total.records.length).toBeGreaterThan(20)
    expect(total.skipped.every((s) => s.endsWith(" total"))).toBe(true)
    expect(total.records.length + total.skipped.length).toBe(40)
  }, 60_000)

  it("one 20 MB bundle is skipped unread under the default bounds ('N' too-large); the records after it still arrive", async () => {
    const k = await open()
    const r = await k.cell(
      "from IPython.display import display, HTML\ndisplay(HTML('x' * (20 << 20)))\ndisplay(HTML('after'))\n"
    )
    expect(r.skipped).toHaveLength(1)
    expect(r.skipped[0]).toMatch(/^D \d+ too-large$/)
    expect(Number(r.skipped[0]!.split(" ")[1])).toBeGreaterThan(20 << 20)
    expect(r.records.map((x) => x.json.data["text/html"])).toEqual(["after"])
    expect(r.frames.filter((f) => f.type === "M").reduce((n, f) => n + f.data.length, 0)).toBeLessThan(1000)
  }, 60_000)

  it("malformed records: garbage ends the cell's records ('N' ? malformed) and the cell ends normally; the next cell's records are fine", async () => {
    const k = await open()
    const r = await k.cell(
      `import os\nfrom IPython.display import display\ndisplay(1)\nos.write(${RECORDS_FD}, b'garbage that is not a record')\ndisplay(2)\n`
    )
    expect(r.status).toBe("ok")
    expect(r.records.map((x) => x.json.data["text/plain"])).toEqual(["1"])
    expect(r.skipped).toHaveLength(1)
    expect(r.skipped[0]).toMatch(/^\? \d+ malformed$/)
    // A record cut short: its header promises more than comes.
    const cut = await k.cell(
      `import os, struct\n_ = os.write(${RECORDS_FD}, b'D' + struct.pack('>I', 100) + b'{"da')\n`
    )
    expect(cut.skipped).toEqual(["D 4 malformed"])
    expect((await k.cell("2 + 2")).records[0]!.json.data["text/plain"]).toBe("4")
  }, 60_000)

  it("late output from a thread comes back as 'L' between cells and is counted in the next 'C', never as a cell's stdout", async () => {
    const k = await open()
    await k.cell(
      "import threading, time\ndef tick():\n    for i in range(5):\n        time.sleep(0.1)\n        print('tick', i, flush=True)\nthreading.Thread(target=tick).start()\n"
    )
    await k.until(
      "five ticks",
      () => k.frames.filter((f) => f.type === "L").reduce((n, f) => n + f.data.length, 0) >= "tick 0\n".length * 5
    )
    const late = Buffer.concat(k.frames.filter((f) => f.type === "L").map((f) => f.data)).toString()
    expect(late).toBe("tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n")
    const next = await k.cell("print('next')")
    expect(next.idleBytes).toBe(late.length)
    expect(next.stdout).toBe("next\n")
  }, 60_000)

  it("a cell's forked process that writes after the cell ended writes into nothing (EPIPE), not into the next cell", async () => {
    const k = await open()
    const marker = path.join(tmp, "epipe")
    await k.cell(
      `import os, sys, time\nif os.fork() == 0:\n    try:\n        for i in range(100):\n            os.write(1, b'tick\\n')\n            time.sleep(0.03)\n        open(${JSON.stringify(marker)}, 'w').write('wrote on')\n    except BrokenPipeError:\n        open(${JSON.stringify(marker)}, 'w').write('EPIPE')\n    os._exit(0)\nprint('parent done')\n`
    )
    const next = await k.cell("import time\ntime.sleep(1)\nprint('second')\n")
    expect(next.stdout).toBe("second\n")
    await k.until("the child's verdict", () => fs.existsSync(marker))
    expect(fs.readFileSync(marker, "utf8")).toBe("EPIPE")
    expect(
      k.frames
        .filter((f) => f.type === "L")
        .map((f) => f.text)
        .join("")
    ).not.toContain("tick")
  }, 60_000)

  it("tool calls from a cell: the channel listens only while the cell is open", async () => {
    const k = await open()
    const id = k.send(
      "import subprocess\nr = subprocess.run(['hermes-tool', 'echo', '{}'], capture_output=True)\nprint(r.returncode, r.stdout)\n",
      { extra: "tools 1 1000 1000\n" }
    )
    const t = (await k.next("t")).at(-1)!
    expect(t.text).toMatch(/^1 2 echo$/)
    k.write("R 1 0 2\n42")
    const r = await k.result()
    expect(r.stdout).toBe("0 b'42\\n'\n")
    expect(id).toBe("c1")
    const after = await k.cell(
      "import subprocess\nr = subprocess.run(['hermes-tool', 'echo', '{}'], capture_output=True)\nprint(r.returncode)\n"
    )
    expect(after.stdout, "no channel between cells or for a cell without tools").toBe("3\n")
    // Each cell's calls are numbered from 1: the host's channel of a cell expects them in order.
    k.send(
      "import subprocess\nr = subprocess.run(['hermes-tool', 'echo', '{}'], capture_output=True)\nprint(r.returncode, r.stdout)\n",
      { extra: "tools 1 1000 1000\n" }
    )
    expect((await k.next("t")).at(-1)!.text).toMatch(/^1 2 echo$/)
    k.write("R 1 0 2\n43")
    expect((await k.result()).stdout).toBe("0 b'43\\n'\n")
  }, 60_000)

  it("a cell's `module` lands in the code directory, on the kernel's path, and replaces the imported hermes_tools", async () => {
    const k = await open()
    const module = (text: string) =>
      `module ${"hermes_tools.py".length} ${Buffer.byteLength(text)}\nhermes_tools.py${text}`
    const a = await k.cell("import hermes_tools\nhermes_tools.VALUE", { extra: module("VALUE = 1\n") })
    expect(a.records[0]!.json.data["text/plain"]).toBe("1")
    const b = await k.cell("import hermes_tools\nhermes_tools.VALUE", { extra: module("VALUE = 2\n") })
    expect(b.records[0]!.json.data["text/plain"], "a new module: the old one is dropped").toBe("2")
    const c = await k.cell("from hermes_tools import VALUE\nVALUE")
    expect(c.records[0]!.json.data["text/plain"]).toBe("2")
    expect(fs.readFileSync(path.join(codeDir, "hermes_tools.py"), "utf8")).toBe("VALUE = 2\n")
  }, 60_000)

  it("`lock`: each cell takes the session lock ('l' before 'C'); a cell waiting for a lock the domain holds is ended by its interrupt", async () => {
    const lock = path.join(tmp, "locks", "session.lock")
    const k = await open({ header: `lock ${Buffer.byteLength(lock)}\n${lock}` })
    const a = await k.cell(
      `import fcntl, os, subprocess\nholder = subprocess.Popen(['flock', ${JSON.stringify(lock)}, 'sleep', '1000'], start_new_session=True)\n`
    )
    expect(a.frames.map((f) => f.type).slice(0, 2)).toEqual(["l", "C"])
    await sleep(300)
    const id = k.send("print('never')")
    const w = await k.next("w")
    expect(w.at(-1)!.text).toMatch(/^\d+ flock /)
    k.write(`interrupt ${id}\n`)
    const g = await k.next("G")
    expect(g.map((f) => f.type)).toEqual(["G"])
    expect(g[0]!.text).toMatch(/interrupt-timeout$/)
  }, 60_000)

  it("the kernel's death while a call holds the lock (the OOM killer's pick, say) never kills the call's processes: 'G' crashed after the call", async () => {
    const lock = path.join(tmp, "locks", "session.lock")
    const k = await open({ header: `lock ${Buffer.byteLength(lock)}\n${lock}` })
    const code = `kill -9 ${k.pid}\nsleep 1\necho still here\n`
    const r = await ns.start("framed", { lock, killLeftovers: true, language: "bash", code }).done
    expectRan(r)
    expect(r.stdout.toString()).toBe("still here\n")
    const g = await k.next("G")
    expect(g.at(-1)!.text).toMatch(/^137 9 [01?] crashed$/)
  }, 60_000)

  it("a call that fails after freezing the domain ('E', 126) resumes it on its way out", async () => {
    const lock = path.join(tmp, "locks", "session.lock")
    const k = await open({ header: `lock ${Buffer.byteLength(lock)}\n${lock}` })
    // A code directory whose tool socket path is too long for a unix socket: the tool channel fails
    // after the lock is taken and the domain frozen.
    const longDir = path.join(tmp, "c".repeat(120))
    const call = ns.start(
      "framed",
      (key) =>
        `HERMES/2\nkey ${key}\nlock ${Buffer.byteLength(lock)}\n${lock}leftovers kill\ntools 1 1000 1000\nlang bash\ncode 5\necho\nrun\n`,
      { env: { HERMES_CODE_DIR: longDir } }
    )
    const r = await call.done
    expect(r.exitCode).toBe(126)
    expect(r.frames.map((f) => f.type)).toEqual(["l", "E"])
    expect(r.frames[1]!.text).toMatch(/too long/)
    expect(await ns.state(k.pid), "resumed").not.toBe("T")
    expect((await k.cell("1 + 1")).records[0]!.json.data["text/plain"]).toBe("2")
  }, 60_000)

  it("a domain left frozen (a call's supervisor killed before it resumed it) is resumed before the next cell", async () => {
    const k = await open()
    await k.cell("import subprocess\nchild = subprocess.Popen(['sleep', '1000'])\n")
    expect((await ns.exec(["kill", "-STOP", String(k.pid)])).code).toBe(0)
    // SIGSTOP takes effect asynchronously: wait until /proc says so.
    expect(await stateWithin(ns, k.pid, (s) => s === "T")).toBe("T")
    expect((await k.cell("child.poll() is None")).records[0]!.json.data["text/plain"]).toBe("True")
    expect(await ns.state(k.pid)).not.toBe("T")
  }, 60_000)

  it("a supervisor its kernel stopped (SIGSTOP) is resumed by `--kill … since` once the domain is dead: 'Z' none, 'G' crashed, exit", async () => {
    const k = await open()
    const [pid, start] = k.ready!.text.split(" ")
    const supervisor = await parentIn(ns, Number(pid))
    // The cell stays busy after stopping its supervisor: a "done" it sent first would be read by
    // the resumed supervisor, and the cell would end 'ok' (a race on a loaded host).
    k.send("import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(1000)\n")
    expect(await stateWithin(ns, supervisor, (s) => s === "T"), "stopped by its kernel").toBe("T")
    // The host's kill of a kernel whose channel went silent: everything since the kernel started.
    expect((await ns.exec([SUPERVISOR, "--kill", pid!, start!, "since"])).code).toBe(0)
    expect(await stateWithin(ns, supervisor, (s) => s === "Z" || s === undefined), "resumed, it ended").toBeOneOf([
      "Z",
      undefined
    ])
    // nsenter stopped itself with its child (job control; an engine's shim does not): resumed, it reaps.
    k.child.kill("SIGCONT")
    const r = await k.result()
    expect(r.status).toBe("none")
    expect(r.gone).toMatch(/^137 9 [01?] crashed$/)
    expect(await k.exited).toBe(0)
  }, 60_000)

  it("`--kill PID START all` while a kernel lives ends only what the call started", async () => {
    const k = await open()
    const call = ns.start("framed", {
      language: "bash",
      code: "setsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $!\nsleep 1000\n"
    })
    await call.until("the call's output", () => call.stdoutSoFar().toString().includes("\n"))
    const left = Number(call.stdoutSoFar().toString().trim())
    const [pid, start] = call.frames.find((f) => f.type === "p")!.text.split(" ")
    const killer = await ns.exec([SUPERVISOR, "--kill", pid!, start!, "all"])
    expect(killer.code).toBe(0)
    await call.done
    expect(await ns.alive(left)).toBe(false)
    expect(await ns.alive(k.pid), "the kernel is older than the call: spared").toBe(true)
    expect((await k.cell("1 + 1")).records[0]!.json.data["text/plain"]).toBe("2")
  }, 60_000)

  it("a call with `leftovers kill` freezes a live kernel's domain, kills only what it started, and resumes the domain", async () => {
    const lock = path.join(tmp, "locks", "session.lock")
    const k = await open({ header: `lock ${Buffer.byteLength(lock)}\n${lock}` })
    await k.cell(
      "import threading, time\nn = 0\ndef count():\n    global n\n    while True:\n        n += 1\n        time.sleep(0.01)\nthreading.Thread(target=count, daemon=True).start()\n"
    )
    const code = [
      `s=$(cut -d' ' -f3 /proc/${k.pid}/stat)`,
      'echo "kernel: $s"',
      `cat /proc/${k.pid}/environ >/dev/null 2>&1 && echo readable || echo unreadable`,
      "setsid sleep 1000 </dev/null >/dev/null 2>&1 &",
      "echo $!",
      ""
    ].join("\n")
    const r = await ns.start("framed", { lock, killLeftovers: true, language: "bash", code }).done
    expectRan(r)
    const [state, environ, left] = r.stdout.toString().trim().split("\n")
    expect(state).toBe("kernel: T")
    // Root reads any process's environ (this test's calls run as root); in a sandbox they do not.
    expect(["readable", "unreadable"]).toContain(environ)
    expect(await ns.alive(Number(left)), "what the call started is killed").toBe(false)
    expect(await ns.state(k.pid), "the kernel runs again").not.toBe("T")
    const before = Number((await k.cell("n")).records[0]!.json.data["text/plain"])
    await sleep(200)
    expect(Number((await k.cell("n")).records[0]!.json.data["text/plain"])).toBeGreaterThan(before)
  }, 60_000)
})
