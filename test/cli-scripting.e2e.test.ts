/**
 * `hermes-sandbox` as scripts and agents launch it, on the real engine: from any directory, with
 * relative paths that are the caller's, machine-readable failures under --json, quiet ends in a
 * closed pipe, short execution ids, inline code, files, env, image, network, #! lines and the
 * Hermes configuration.
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { lastValueFrom, toArray } from "rxjs"
import { beforeAll, describe, expect, it } from "vitest"
import { openJournal } from "@hermes-sandbox/events"
import { cli, cliBin, cliCommand } from "./support/cli.js"

const root = new URL("..", import.meta.url).pathname
// A folder outside the repository, as a user's project would be.
const dir = mkdtempSync(join(tmpdir(), "hermes-cli-scripting-"))
const journal = join(dir, "journal.sqlite")
const version = (JSON.parse(readFileSync(join(root, "packages/cli/package.json"), "utf8")) as { version: string })
  .version

/** The environment `pnpm hermes-sandbox` gives its script: started at the workspace root, the caller's folder in INIT_CWD. */
const asPnpmScript = (callerDir: string) => ({
  npm_lifecycle_event: "hermes-sandbox",
  INIT_CWD: callerDir,
  npm_package_json: join(root, "package.json")
})

/**
 * Standard error without the startup sweep's report: orphans of dead owners (another suite's
 * killed process, on a shared engine) may be removed by any run, which says so there.
 */
const ownStderr = (stderr: string) =>
  stderr
    .split(/(?<=\n)/)
    .filter((l) => !/^timestamp=\S+ level=INFO .*startup sweep:/.test(l))
    .join("")

const jsonLine = (stdout: string) => {
  const lines = stdout.trim().split("\n")
  expect(lines).toHaveLength(1)
  return JSON.parse(lines[0]!) as Record<string, unknown>
}

describe("hermes-sandbox from any directory", () => {
  beforeAll(() => {
    mkdirSync(join(dir, "sub"), { recursive: true })
    writeFileSync(
      join(dir, "sub", "a.py"),
      "import sys\nprint(open('data/in.txt').read().strip(), sys.stdin.read().strip())\n"
    )
    writeFileSync(join(dir, "sub", "in.txt"), "from-file\n")
    writeFileSync(join(dir, "sub", "input.txt"), "from-stdin\n")
  })

  it("relative FILE, --file and --stdin are the caller's, started in another folder", async () => {
    const r = await cli(["run", "--no-journal", "--file", "data/in.txt=in.txt", "--stdin", "input.txt", "a.py"], {
      cwd: join(dir, "sub")
    })
    expect({ code: r.code, stdout: r.stdout, stderr: ownStderr(r.stderr) }).toEqual({
      code: 0,
      stdout: "from-file from-stdin\n",
      stderr: ""
    })
  })

  it("relative paths are the caller's through the workspace script too (pnpm starts it at the workspace root; it exited 125)", async () => {
    const r = await cli(["run", "--no-journal", "--file", "data/in.txt=in.txt", "--stdin", "input.txt", "a.py"], {
      env: asPnpmScript(join(dir, "sub"))
    })
    expect({ code: r.code, stdout: r.stdout, stderr: ownStderr(r.stderr) }).toEqual({
      code: 0,
      stdout: "from-file from-stdin\n",
      stderr: ""
    })
  })

  it("a missing FILE is a usage error (2) with one clean line (it was 125 with a raw ENOENT)", async () => {
    const r = await cli(["run", "--no-journal", "nope.py"], { cwd: dir })
    expect(r.code).toBe(2)
    expect(r.stderr).toBe("hermes-sandbox: nope.py: no such file\n")
    const f = await cli(["run", "--no-journal", "--file", "x=missing.txt", "-e", "print(1)"], { cwd: dir })
    expect(f.code).toBe(2)
    expect(f.stderr).toBe("hermes-sandbox: --file x: missing.txt: no such file\n")
  })

  it("the bin is plain Node: #!/usr/bin/env node, and the build runs without tsx from another folder", async () => {
    expect(readFileSync(cliBin, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node")
    const dist = join(root, "packages/cli/dist/bin.js")
    expect(existsSync(dist), "packages/cli/dist/bin.js (run pnpm build)").toBe(true)
    expect(readFileSync(dist, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node")
    // Inside the workspace the sibling packages' dist/ is chosen by this condition; installed, by their manifests.
    const command = [process.execPath, "--conditions=hermes-sandbox-dist", dist]
    const v = await cli(["--version"], { command, cwd: dir, env: { NODE_OPTIONS: "" } })
    expect({ code: v.code, stdout: v.stdout }).toEqual({ code: 0, stdout: `${version}\n` })
    const r = await cli(
      ["run", "--json", "--no-journal", "--file", "data/in.txt=in.txt", "--stdin", "input.txt", "a.py"],
      { command, cwd: join(dir, "sub"), env: { NODE_OPTIONS: "" } }
    )
    expect(ownStderr(r.stderr)).toBe("")
    expect(jsonLine(r.stdout)).toMatchObject({ exitCode: 0, stdout: "from-file from-stdin\n" })
  })
})

describe("hermes-sandbox --json failures", () => {
  it("a failed run prints {error: {_tag, ...fields}} on stdout, with the exit code as before", async () => {
    const invalid = await cli(["run", "--json", "--no-journal", "--language", "cobol", "-"], { stdin: "x" })
    expect(invalid.code).toBe(2)
    expect(jsonLine(invalid.stdout)).toEqual({
      error: expect.objectContaining({
        _tag: "InvalidRequest",
        field: "language",
        value: "cobol",
        message: expect.stringContaining("language")
      })
    })

    const missingImage = await cli(["run", "--json", "--no-journal", "--image", "hermes-sandbox/missing:0", "-"], {
      stdin: "print(1)"
    })
    expect(missingImage.code).toBe(125)
    expect(jsonLine(missingImage.stdout)).toEqual({
      error: expect.objectContaining({ _tag: "ImageNotFound", image: "hermes-sandbox/missing:0" })
    })

    const noEngine = await cli(["run", "--json", "--no-journal", "-"], {
      stdin: "print(1)",
      env: { DOCKER_HOST: "unix:///tmp/hermes-no-engine.sock" }
    })
    expect(noEngine.code).toBe(125)
    expect(jsonLine(noEngine.stdout)).toEqual({
      error: expect.objectContaining({
        _tag: "DockerUnavailable",
        endpoint: expect.stringContaining("hermes-no-engine.sock"),
        hint: expect.any(String)
      })
    })

    const usage = await cli(["run", "--json", "--no-journal", "nope.py"], { cwd: dir })
    expect(usage.code).toBe(2)
    expect(jsonLine(usage.stdout)).toEqual({ error: { _tag: "UsageError", message: "nope.py: no such file" } })

    const option = await cli(["run", "--json", "--bogus", "-"], { stdin: "print(1)" })
    expect(option.code).toBe(2)
    expect(jsonLine(option.stdout)).toEqual({
      error: expect.objectContaining({ _tag: "UsageError", message: expect.stringContaining("--bogus") })
    })
  })

  it("a run that succeeds keeps its result shape", async () => {
    const r = await cli(["run", "--json", "--no-journal", "-e", "print(6*7)"])
    expect(r.code).toBe(0)
    const result = jsonLine(r.stdout)
    expect(result).toMatchObject({ exitCode: 0, stdout: "42\n", timedOut: false })
    expect(result).not.toHaveProperty("error")
  })
})

describe("hermes-sandbox run options", () => {
  it("--version prints the package's version", async () => {
    const r = await cli(["--version"])
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: `${version}\n` })
  })

  it("-e CODE, repeatable --env and --file (a path inside /workspace, with or without the prefix)", async () => {
    writeFileSync(join(dir, "one.txt"), "1")
    writeFileSync(join(dir, "two.bin"), Buffer.from([0, 255, 10]))
    const code =
      "import os\nprint(os.environ['A'], os.environ['B'], open('/workspace/in/one.txt').read(), list(open('two.bin','rb').read()), os.getcwd())"
    const r = await cli(
      [
        "run",
        "--no-journal",
        "-e",
        code,
        "--env",
        "A=x=y",
        "--env",
        "B=",
        "--file",
        "in/one.txt=one.txt",
        "--file",
        "/workspace/two.bin=two.bin"
      ],
      { cwd: dir }
    )
    expect({ code: r.code, stdout: r.stdout, stderr: ownStderr(r.stderr) }).toEqual({
      code: 0,
      stdout: "x=y  1 [0, 255, 10] /workspace\n",
      stderr: ""
    })
    const both = await cli(["run", "--no-journal", "-e", "print(1)", "prog.py"])
    expect(both.code).toBe(2)
    const badEnv = await cli(["run", "--no-journal", "-e", "print(1)", "--env", "NOVALUE"])
    expect(badEnv.code).toBe(2)
    expect(badEnv.stderr).toContain("--env")
  })

  it("--image picks the image; --network gives the sandbox a network (none by default)", async () => {
    const image = await cli([
      "run",
      "--no-journal",
      "--image",
      "hermes-sandbox/bash:latest",
      "--language",
      "bash",
      "-e",
      "echo ok"
    ])
    expect({ code: image.code, stdout: image.stdout }).toEqual({ code: 0, stdout: "ok\n" })
    const interfaces = "ls /sys/class/net | tr '\\n' ' '"
    const none = await cli(["run", "--no-journal", "-l", "bash", "-e", interfaces])
    expect({ code: none.code, stdout: none.stdout }).toEqual({ code: 0, stdout: "lo " })
    const some = await cli(["run", "--json", "--no-journal", "--network", "-l", "bash", "-e", interfaces])
    const out = jsonLine(some.stdout)
    if (some.code === 0)
      expect(
        String(out["stdout"])
          .split(" ")
          .filter((i) => i !== "" && i !== "lo").length
      ).toBeGreaterThan(0)
    // An engine without a usable bridge (docker0; this CI's has none) refuses the network the flag asked for.
    else
      expect(out).toEqual({
        error: expect.objectContaining({
          _tag: "ContainerFailed",
          message: expect.stringMatching(/network bridge|docker0/)
        })
      })
  })

  it("the language comes from a #! line when the extension does not say it; an unknown extension is a usage error", async () => {
    const cases = [
      ["py-script", "#!/usr/bin/env python3\nimport sys\nprint('python', sys.version_info[0])\n", "python 3\n"],
      ["js-script", "#!/usr/bin/env node\nconsole.log('node', typeof process.versions.node)\n", "node string\n"],
      ["sh-script", '#!/bin/bash\necho "bash ${BASH_VERSINFO[0]}"\n', "bash 5\n"],
      ["sh2-script", "#!/bin/sh\necho sh\n", "sh\n"],
      ["env-s-script", "#!/usr/bin/env -S python3 -u\nprint('unbuffered')\n", "unbuffered\n"]
    ] as const
    for (const [name, code, expected] of cases) {
      writeFileSync(join(dir, name), code)
      const r = await cli(["run", "--no-journal", name], { cwd: dir })
      expect({ name, code: r.code, stdout: r.stdout }).toEqual({ name, code: 0, stdout: expected })
    }
    // Piped programs have no extension: their #! line says it too (python otherwise, as before).
    const piped = await cli(["run", "--no-journal", "-"], { stdin: "#!/bin/bash\necho piped-bash\n" })
    expect({ code: piped.code, stdout: piped.stdout }).toEqual({ code: 0, stdout: "piped-bash\n" })

    writeFileSync(join(dir, "prog.ts"), "const x: number = 1\nconsole.log(x)\n")
    const ts = await cli(["run", "--no-journal", "prog.ts"], { cwd: dir })
    expect(ts.code).toBe(2)
    expect(ts.stderr).toMatch(/^hermes-sandbox: prog\.ts: cannot tell the language from the extension \.ts.*--language/)
    writeFileSync(join(dir, "noext"), "echo hi\n")
    expect((await cli(["run", "--no-journal", "noext"], { cwd: dir })).code).toBe(2)
    writeFileSync(join(dir, "rb-script"), "#!/usr/bin/env ruby\nputs 1\n")
    const ruby = await cli(["run", "--no-journal", "rb-script"], { cwd: dir })
    expect(ruby.code).toBe(2)
    expect(ruby.stderr).toContain("ruby")
    // --language still decides.
    const forced = await cli(["run", "--no-journal", "--language", "bash", "noext"], { cwd: dir })
    expect({ code: forced.code, stdout: forced.stdout }).toEqual({ code: 0, stdout: "hi\n" })
  })

  it("--config PATH (relative) and --hermes apply the Hermes terminal: section; options given win; warnings once, on stderr", async () => {
    const hermesDir = join(dir, "hermes")
    mkdirSync(hermesDir, { recursive: true })
    writeFileSync(
      join(hermesDir, "config.yaml"),
      "terminal:\n  backend: docker\n  docker_env:\n    GREETING: from-config\n  timeout: 1\n  container_memroy: 64\n"
    )
    const program = "import os, time\nprint(os.environ['GREETING'], flush=True)\ntime.sleep(3)\n"

    const r = await cli(["run", "--no-journal", "--config", "hermes/config.yaml", "-e", program], { cwd: dir })
    expect(r.stdout).toBe("from-config\n")
    expect(r.code).toBe(124) // the config's timeout: 1 s
    expect(r.stderr.match(/container_memroy/g)).toHaveLength(1)
    expect(r.stderr).toContain("warning:")

    const overridden = await cli(
      [
        "run",
        "--no-journal",
        "--config",
        "hermes/config.yaml",
        "--timeout",
        "10s",
        "--env",
        "GREETING=from-flag",
        "-e",
        program
      ],
      { cwd: dir }
    )
    expect({ code: overridden.code, stdout: overridden.stdout }).toEqual({ code: 0, stdout: "from-flag\n" })

    const hermes = await cli(["run", "--no-journal", "--hermes", "-e", "import os\nprint(os.environ['GREETING'])"], {
      env: { HERMES_CONFIG: join(hermesDir, "config.yaml") }
    })
    expect({ code: hermes.code, stdout: hermes.stdout }).toEqual({ code: 0, stdout: "from-config\n" })

    // Without --config or --hermes the Hermes configuration is not read.
    const plain = await cli(["run", "--no-journal", "-e", "import os\nprint(os.environ.get('GREETING'))"], {
      env: { HERMES_CONFIG: join(hermesDir, "config.yaml") }
    })
    expect(plain.stdout).toBe("None\n")

    const missing = await cli(["run", "--no-journal", "--config", "nowhere.yaml", "-e", "print(1)"], { cwd: dir })
    expect(missing.code).toBe(2)

    const show = await cli(["config", "show", "--config", "hermes/config.yaml"], { cwd: dir })
    expect(show.code).toBe(0)
    expect(show.stdout).not.toContain("container_memroy")
    expect(show.stderr.match(/container_memroy/g)).toHaveLength(1)
  })
})

describe("hermes-sandbox events for scripts", () => {
  let streamId = ""

  beforeAll(async () => {
    const r = await cli(["run", "--journal", journal, "-"], { stdin: "print(1)" })
    expect(r.code).toBe(0)
    // Enough events that the output outgrows a pipe's buffer, so `| head` closes it mid-way.
    const client = await openJournal({ path: journal })
    try {
      const recorded = await lastValueFrom(client.replay().pipe(toArray()))
      // The run's execution (the journal also holds the CLI's ownership lease, in its executor stream).
      streamId = recorded.find((e) => e.type === "ExecutionRequested")!.streamId
      const events = recorded
        .filter((e) => e.streamId === streamId)
        .map((e) => ({ type: e.type, data: e.data }) as never)
      for (let batch = 0; batch < 10; batch++) {
        await client.appendBatch(
          Array.from({ length: 40 }, () => ({ streamId: randomUUID(), events, executorId: "cli-scripting-test" }))
        )
      }
    } finally {
      await client.close()
    }
  })

  /** The CLI's stdout into `head`, as a shell pipeline: its exit status and stderr. */
  const intoHead = (args: Array<string>, lines: number) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const quoted = [...cliCommand, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ")
      const child = spawn("bash", ["-c", `${quoted} | head -${lines}; exit "\${PIPESTATUS[0]}"`], { cwd: root })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (d) => (stdout += d))
      child.stderr.on("data", (d) => (stderr += d))
      child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }))
    })

  it("events | head -2 and events --json | head -1 end quietly (they crashed with an EPIPE stack trace)", async () => {
    const text = await intoHead(["events", "--journal", journal], 2)
    expect({ code: text.code, stderr: text.stderr, lines: text.stdout.trim().split("\n").length }).toEqual({
      code: 0,
      stderr: "",
      lines: 2
    })
    const json = await intoHead(["events", "--json", "--journal", journal], 1)
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 0, stderr: "" })
    expect(JSON.parse(json.stdout)).toMatchObject({ sequence: 1 })
    const follow = await intoHead(["events", "--follow", "--journal", journal], 1)
    expect({ code: follow.code, stderr: follow.stderr }).toEqual({ code: 0, stderr: "" })
  })

  it("run | head: the program is stopped, its sandbox removed, and the CLI exits 141 without a stack trace", async () => {
    const pipeJournal = join(dir, "pipe.sqlite")
    const r = await intoHead(["run", "--journal", pipeJournal, "-e", 'while True: print("x" * 1000, flush=True)'], 1)
    expect({ code: r.code, stderr: ownStderr(r.stderr) }).toEqual({ code: 141, stderr: "" })
    const summary = await cli(["events", "summary", "--json", "--journal", pipeJournal])
    expect(JSON.parse(summary.stdout)).toMatchObject({
      total: 1,
      byOutcome: { interrupted: 1 },
      containersAlive: 0,
      openLifecycles: 0
    })
  })

  it("--execution takes the short id the timeline prints (a unique suffix or prefix); none or several matching fail and say so", async () => {
    const timeline = await cli(["events", "--journal", journal])
    const shortId = streamId.slice(-12)
    expect(timeline.stdout).toContain(`  ${shortId}  ExecutionRequested`)
    for (const given of [shortId, streamId.slice(0, 13), streamId]) {
      const r = await cli(["events", "--json", "--execution", given, "--journal", journal])
      expect(r.code).toBe(0)
      const streams = new Set(
        r.stdout
          .trim()
          .split("\n")
          .map((l) => (JSON.parse(l) as { streamId: string }).streamId)
      )
      expect([...streams]).toEqual([streamId])
    }
    const none = await cli(["events", "--execution", "ffffffffffff", "--journal", journal])
    expect(none.code).not.toBe(0)
    expect(none.stdout).toBe("")
    expect(none.stderr).toBe("hermes-sandbox: no execution ffffffffffff in the journal\n")
    // The 400 random ids share every first hex digit many times over.
    const ambiguous = await cli(["events", "--execution", streamId.slice(0, 1), "--journal", journal])
    expect(ambiguous.code).not.toBe(0)
    expect(ambiguous.stderr).toMatch(/matches \d+ executions/)
  })

  it("a journal that does not exist: 'no journal at PATH', non-zero, and no file created", async () => {
    const typo = join(dir, "typo", "journal.sqlite")
    for (const args of [["events"], ["events", "summary"], ["events", "--follow"]]) {
      const r = await cli([...args, "--journal", typo])
      expect(r.code).not.toBe(0)
      expect(r.stderr).toBe(`hermes-sandbox: no journal at ${typo}\n`)
    }
    expect(existsSync(typo)).toBe(false)
    expect(existsSync(join(dir, "typo"))).toBe(false)
  })
})
