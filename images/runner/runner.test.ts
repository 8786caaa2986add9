// Runs the in-container runners (runner.py, runner.js) directly on the host — no Docker — with
// HERMES_WORKSPACE / HERMES_CODE_DIR pointing at temporary directories.
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest"

const here = path.dirname(fileURLToPath(import.meta.url))
// runner.js is CommonJS (as in the image, under /opt/hermes) but the repository root says
// "type": "module", so run copies from a directory outside the repository.
const runnerDir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-runners-"))
const RUNNER_PY = path.join(runnerDir, "runner.py")
const RUNNER_JS = path.join(runnerDir, "runner.js")
fs.copyFileSync(path.join(here, "runner.py"), RUNNER_PY)
fs.copyFileSync(path.join(here, "runner.js"), RUNNER_JS)
afterAll(() => fs.rmSync(runnerDir, { recursive: true, force: true }))

type Language = "python" | "javascript" | "bash"
interface Payload {
  readonly language: Language
  readonly code: string | Uint8Array
  readonly files?: ReadonlyArray<readonly [string, string | Uint8Array]>
  readonly stdin?: string | Uint8Array
}
const bytes = (b: string | Uint8Array): Buffer => (typeof b === "string" ? Buffer.from(b, "utf8") : Buffer.from(b))

const encode = (p: Payload): Buffer => {
  const code = bytes(p.code)
  const files = (p.files ?? []).map(([name, content]) => [name, bytes(content)] as const)
  const header = `HERMES/1 ${JSON.stringify({ language: p.language, code: code.length, files: files.map(([n, c]) => [n, c.length]) })}\n`
  return Buffer.concat([Buffer.from(header, "ascii"), code, ...files.map(([, c]) => c), bytes(p.stdin ?? "")])
}

interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: Buffer
  readonly stderr: string
}

interface Runner {
  readonly name: string
  readonly argv: ReadonlyArray<string>
  readonly own: Language // the language the image this runner ships in runs
}
const RUNNERS: ReadonlyArray<Runner> = [
  { name: "runner.py", argv: ["python3", RUNNER_PY], own: "python" },
  { name: "runner.js", argv: ["node", RUNNER_JS], own: "javascript" }
]

let tmp = ""
let workspace = ""
let codeDir = ""
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-runner-test-"))
  workspace = path.join(tmp, "workspace")
  codeDir = path.join(tmp, "code")
  fs.mkdirSync(workspace)
})
afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true })
})

const start = (runner: Runner, stdinFd?: number) => {
  const [cmd, ...args] = runner.argv
  return spawn(cmd!, args, {
    env: { ...process.env, HERMES_WORKSPACE: workspace, HERMES_CODE_DIR: codeDir },
    stdio: [stdinFd ?? "pipe", "pipe", "pipe"]
  })
}

const collect = (child: ReturnType<typeof start>): Promise<Result> =>
  new Promise((resolve, reject) => {
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout!.on("data", (c: Buffer) => out.push(c))
    child.stderr!.on("data", (c: Buffer) => err.push(c))
    child.on("error", reject)
    child.on("close", (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8") })
    )
  })

const run = (runner: Runner, input: Buffer): Promise<Result> => {
  const child = start(runner)
  const result = collect(child)
  child.stdin!.on("error", () => {}) // the runner may exit before reading everything (EPIPE)
  child.stdin!.end(input)
  return result
}

const expectProtocolError = (r: Result, pattern?: RegExp) => {
  expect(r.code, r.stderr).toBe(126)
  expect(r.stderr).toMatch(/^hermes-runner: /)
  expect(r.stderr.trim().split("\n")).toHaveLength(1)
  if (pattern) expect(r.stderr).toMatch(pattern)
}

// Programs that copy their stdin to stdout, byte for byte.
const CAT: Record<Language, string> = {
  python: "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n",
  javascript: "const c = []\nprocess.stdin.on('data', (d) => c.push(d)).on('end', () => process.stdout.write(Buffer.concat(c)))\n",
  bash: "exec cat\n"
}
const EXIT_42: Record<Language, string> = {
  python: "import sys\nsys.exit(42)\n",
  javascript: "process.exit(42)\n",
  bash: "exit 42\n"
}
const SELF_KILL: Record<Language, string> = {
  python: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
  javascript: "process.kill(process.pid, 'SIGKILL')\n",
  bash: "kill -KILL $$\n"
}

const binaryStdin = (): Buffer => {
  const all = Buffer.alloc(256 * 64)
  for (let i = 0; i < all.length; i++) all[i] = i % 256 // includes NUL, \n, \r, 0xff ...
  return Buffer.concat([Buffer.from("HERMES/1 {\"not\":\"a header\"}\n\0\0"), all, Buffer.from([0, 10, 0])])
}

describe.each(RUNNERS)("$name", (runner) => {
  const languages: ReadonlyArray<Language> = runner.name === "runner.py" ? ["python", "bash"] : ["javascript"]

  describe.each(languages)("running %s", (language) => {
    it("passes the program's binary stdin through exactly (NUL bytes, a header look-alike)", async () => {
      const stdin = binaryStdin()
      const r = await run(runner, encode({ language, code: CAT[language], stdin }))
      expect(r.stderr).toBe("")
      expect(r.code).toBe(0)
      expect(r.stdout.equals(stdin)).toBe(true)
    })

    it("passes empty stdin through as an immediate EOF", async () => {
      const r = await run(runner, encode({ language, code: CAT[language] }))
      expect(r.code).toBe(0)
      expect(r.stdout.length).toBe(0)
    })

    it("propagates the exit code", async () => {
      const r = await run(runner, encode({ language, code: EXIT_42[language] }))
      expect(r.code).toBe(42)
    })

    it("propagates death by a signal", async () => {
      const r = await run(runner, encode({ language, code: SELF_KILL[language] }))
      expect(r.signal).toBe("SIGKILL")
    })

    it("writes the supplied files under the workspace and runs there", async () => {
      const blob = Buffer.from([0, 1, 2, 255, 10, 13, 0])
      const files = [
        ["data.txt", "hello\n"],
        ["nested/deeper/blob.bin", blob],
        ["./dot/./ok.txt", "dots"],
        ["empty", ""]
      ] as const
      const code: Record<Language, string> = {
        python: "import os\nprint(os.getcwd())\nprint(open('data.txt').read(), end='')\n",
        javascript: "console.log(process.cwd())\nprocess.stdout.write(require('fs').readFileSync('data.txt'))\n",
        bash: "pwd\ncat data.txt\n"
      }
      const r = await run(runner, encode({ language, code: code[language], files }))
      expect(r.stderr).toBe("")
      expect(r.code).toBe(0)
      expect(r.stdout.toString()).toBe(`${fs.realpathSync(workspace)}\nhello\n`)
      expect(fs.readFileSync(path.join(workspace, "nested/deeper/blob.bin")).equals(blob)).toBe(true)
      expect(fs.readFileSync(path.join(workspace, "dot/ok.txt"), "utf8")).toBe("dots")
      expect(fs.statSync(path.join(workspace, "empty")).size).toBe(0)
    })

    it("writes the code 0600 in a 0700 code directory", async () => {
      const r = await run(runner, encode({ language, code: CAT[language] }))
      expect(r.code).toBe(0)
      const ext = { python: "py", javascript: "js", bash: "sh" }[language]
      expect(fs.statSync(codeDir).mode & 0o777).toBe(0o700)
      expect(fs.statSync(path.join(codeDir, `main.${ext}`)).mode & 0o777).toBe(0o600)
      expect(fs.readFileSync(path.join(codeDir, `main.${ext}`), "utf8")).toBe(CAT[language])
    })

    it("streams: the program starts before stdin ends and answers line by line", async () => {
      const echo: Record<Language, string> = {
        python: "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip())\n",
        javascript:
          "require('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log('got ' + l))\n",
        bash: "while IFS= read -r line; do echo \"got $line\"; done\n"
      }
      const child = start(runner)
      const result = collect(child)
      const seen = new Promise<void>((resolve) => {
        let acc = ""
        child.stdout!.on("data", (c: Buffer) => {
          acc += c.toString()
          if (acc.includes("got first")) resolve()
        })
      })
      child.stdin!.write(encode({ language, code: echo[language], stdin: "first\n" }))
      await seen // stdin still open here
      child.stdin!.end("second\n")
      const r = await result
      expect(r.code).toBe(0)
      expect(r.stdout.toString()).toBe("got first\ngot second\n")
    }, 15_000)
  })

  // Not what the images use, but supported: the other interpreters, if installed.
  describe.each((["python", "javascript", "bash"] as const).filter((l) => !languages.includes(l)))(
    "running %s through the other interpreter",
    (language) => {
      it("passes binary stdin through and propagates the exit code", async () => {
        const stdin = binaryStdin()
        const r = await run(runner, encode({ language, code: CAT[language], stdin }))
        expect(r.code).toBe(0)
        expect(r.stdout.equals(stdin)).toBe(true)
        expect((await run(runner, encode({ language, code: EXIT_42[language] }))).code).toBe(42)
      })
    }
  )

  it("runs 1 MiB of code and reads exactly its length", async () => {
    const filler = "x".repeat(1024 * 1024)
    const code =
      runner.own === "python"
        ? `s = "${filler}"\nimport sys\nprint(len(s), sys.stdin.read())\n`
        : `const s = "${filler}"\nlet d = ""\nprocess.stdin.on("data", (c) => (d += c)).on("end", () => console.log(s.length, d))\n`
    expect(Buffer.byteLength(code)).toBeGreaterThan(1024 * 1024)
    const r = await run(runner, encode({ language: runner.own, code, stdin: "after-the-code" }))
    expect(r.stderr).toBe("")
    expect(r.stdout.toString()).toBe(`${1024 * 1024} after-the-code\n`)
  })

  it("leaves a big binary stdin (2 MiB) intact after a big file", async () => {
    const big = Buffer.alloc(2 * 1024 * 1024)
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff
    const file = Buffer.alloc(3 * 65536 + 17, 0xab)
    const r = await run(runner, encode({ language: runner.own, code: CAT[runner.own], files: [["big.bin", file]], stdin: big }))
    expect(r.code).toBe(0)
    expect(createHash("sha256").update(r.stdout).digest("hex")).toBe(createHash("sha256").update(big).digest("hex"))
    expect(fs.readFileSync(path.join(workspace, "big.bin")).equals(file)).toBe(true)
  })

  it("reads the header from a regular file on stdin without consuming the program's bytes", async () => {
    const input = path.join(tmp, "stdin.bin")
    const stdin = binaryStdin()
    fs.writeFileSync(input, encode({ language: runner.own, code: CAT[runner.own], stdin }))
    const fd = fs.openSync(input, "r")
    try {
      const r = await collect(start(runner, fd))
      expect(r.code).toBe(0)
      expect(r.stdout.equals(stdin)).toBe(true)
    } finally {
      fs.closeSync(fd)
    }
  })

  if (runner.name === "runner.js") {
    it("runs JavaScript as the main module with argv [node, main.js]", async () => {
      const code = "console.log(require.main === module, JSON.stringify(process.argv.slice(1)), __filename)\n"
      const r = await run(runner, encode({ language: "javascript", code }))
      const main = path.join(codeDir, "main.js")
      expect(r.stdout.toString()).toBe(`true ${JSON.stringify([main])} ${main}\n`)
    })

    it("reports an uncaught exception like node does (exit 1, stack on stderr)", async () => {
      const r = await run(runner, encode({ language: "javascript", code: "throw new Error('boom')\n" }))
      expect(r.code).toBe(1)
      expect(r.stderr).toContain("Error: boom")
    })
  }

  if (runner.name === "runner.py") {
    it("sets PYTHONUNBUFFERED for python programs", async () => {
      const r = await run(runner, encode({ language: "python", code: "import os\nprint(os.environ.get('PYTHONUNBUFFERED'))\n" }))
      expect(r.stdout.toString()).toBe("1\n")
    })

    it("restores SIGPIPE for the program (`yes | head -1` ends quietly)", async () => {
      const r = await run(runner, encode({ language: "bash", code: "set -o pipefail\nyes | head -1\necho status=$?\n" }))
      expect(r.stderr).toBe("")
      expect(r.stdout.toString()).toBe("y\nstatus=141\n")
    })
  }

  describe("path escapes are refused with 126", () => {
    const outside = () => path.join(tmp, "outside")

    it.each([
      ["an absolute path", "/etc/hermes-escape"],
      ["a '..' segment", "../escape.txt"],
      ["a '..' in the middle", "a/../../escape.txt"],
      ["a trailing '..'", "a/.."],
      ["an empty path", ""],
      ["only dots and slashes", "./."],
      ["a NUL byte", "a\u0000b"]
    ])("%s", async (_what, name) => {
      const r = await run(runner, encode({ language: runner.own, code: "", files: [[name, "x"]] }))
      expectProtocolError(r, /file path/)
      expect(fs.existsSync(path.join(tmp, "escape.txt"))).toBe(false)
    })

    it("a symlinked directory pointing outside the workspace", async () => {
      fs.mkdirSync(outside())
      fs.symlinkSync(outside(), path.join(workspace, "link"))
      const r = await run(runner, encode({ language: runner.own, code: "", files: [["link/pwned.txt", "x"]] }))
      expectProtocolError(r, /symlink/)
      expect(fs.readdirSync(outside())).toEqual([])
    })

    it("a symlink as the file itself", async () => {
      fs.mkdirSync(outside())
      const target = path.join(outside(), "target.txt")
      fs.writeFileSync(target, "original")
      fs.symlinkSync(target, path.join(workspace, "file.txt"))
      const r = await run(runner, encode({ language: runner.own, code: "", files: [["file.txt", "overwritten"]] }))
      expectProtocolError(r, /symlink/)
      expect(fs.readFileSync(target, "utf8")).toBe("original")
    })

    it("a symlinked code directory", async () => {
      fs.mkdirSync(outside())
      fs.symlinkSync(outside(), codeDir)
      const r = await run(runner, encode({ language: runner.own, code: "print(1)" }))
      expectProtocolError(r)
      expect(fs.readdirSync(outside())).toEqual([])
    })
  })

  describe("malformed input is refused with 126", () => {
    it.each([
      ["empty stdin", Buffer.alloc(0)],
      ["no header prefix", Buffer.from("print('hi')\n")],
      ["another protocol version", Buffer.from('HERMES/2 {"language":"python","code":0}\n')],
      ["no newline after the header", Buffer.from('HERMES/1 {"language":"python","code":0}')],
      ["invalid JSON", Buffer.from("HERMES/1 {language: python}\n")],
      ["a JSON array", Buffer.from("HERMES/1 []\n")],
      ["an unknown language", Buffer.from('HERMES/1 {"language":"ruby","code":0}\n')],
      ["a missing code length", Buffer.from('HERMES/1 {"language":"python"}\n')],
      ["a negative code length", Buffer.from('HERMES/1 {"language":"python","code":-1}\n')],
      ["a fractional code length", Buffer.from('HERMES/1 {"language":"python","code":1.5}\n')],
      ["a string code length", Buffer.from('HERMES/1 {"language":"python","code":"3"}\n')],
      ["files not a list", Buffer.from('HERMES/1 {"language":"python","code":0,"files":{}}\n')],
      ["a file entry without length", Buffer.from('HERMES/1 {"language":"python","code":0,"files":[["a"]]}\n')],
      ["code shorter than announced", Buffer.from('HERMES/1 {"language":"python","code":100}\nprint(1)')],
      ["a file shorter than announced", Buffer.from('HERMES/1 {"language":"python","code":0,"files":[["a",10]]}\nabc')],
      ["invalid UTF-8 in the header", Buffer.concat([Buffer.from('HERMES/1 {"language":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\n')])]
    ])("%s", async (_what, input) => {
      expectProtocolError(await run(runner, input))
    })

    it("a header longer than 1 MiB", async () => {
      const input = Buffer.concat([Buffer.from("HERMES/1 "), Buffer.alloc(1024 * 1024 + 10, 0x20), Buffer.from("\n")])
      expectProtocolError(await run(runner, input), /longer than/)
    }, 60_000)
  })
})
