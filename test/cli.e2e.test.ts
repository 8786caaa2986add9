/** The `hermes-sandbox` command line, as a user runs it, on the real engine. */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli } from "./support/cli.js"
import { docker } from "./support/docker.js"

const dir = mkdtempSync(join(tmpdir(), "hermes-cli-"))
const journal = join(dir, "journal.sqlite")

describe("hermes-sandbox CLI", () => {
  it("run FILE streams stdout/stderr and exits with the program's exit code", async () => {
    const file = join(dir, "prog.py")
    writeFileSync(file, "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(7)\n")
    const r = await cli(["run", "--journal", journal, file])
    expect(r.code).toBe(7)
    expect(r.stdout).toBe("to stdout\n")
    expect(r.stderr).toContain("to stderr\n")
  })

  it("run - reads the program from stdin; --json prints the result as one JSON line", async () => {
    const r = await cli(["run", "--json", "--journal", journal, "-"], { stdin: "print(6*7)" })
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines).toHaveLength(1)
    const result = JSON.parse(lines[0]!)
    expect(result).toMatchObject({ exitCode: 0, stdout: "42\n", timedOut: false })
    expect(result.containerName).toMatch(/^hermes-sandbox-[0-9a-f-]{36}$/)
  })

  it("infers the language from the extension and applies --memory and --cpus", async () => {
    const file = join(dir, "limits.sh")
    writeFileSync(file, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us\n")
    const r = await cli(["run", "--memory", "256m", "--cpus", "0.5", "--no-journal", file])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(`${256 * 1024 * 1024}\n50000\n`)
  })

  it("runs a ~600 KB program piped into run - (it exited 125 with EAGAIN)", async () => {
    const program = `x = "${"a".repeat(600_000)}"\nprint(len(x))\n`
    const r = await cli(["run", "--no-journal", "-"], { stdin: program })
    expect(r.stderr).not.toMatch(/EAGAIN/)
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: "600000\n" })
  })

  it("exits 124 on timeout", async () => {
    const r = await cli(["run", "--timeout", "1s", "--no-journal", "-"], { stdin: "while True: pass" })
    expect(r.code).toBe(124)
    expect(r.stderr).toContain("timed out")
  })

  it("exits 125 when the sandbox itself fails (no engine), naming the endpoint and the fix", async () => {
    const r = await cli(["run", "--no-journal", "-"], {
      stdin: "print(1)",
      env: { DOCKER_HOST: "unix:///tmp/hermes-no-engine.sock" }
    })
    expect(r.code).toBe(125)
    expect(r.stderr).toContain("unix:///tmp/hermes-no-engine.sock")
    expect(r.stderr).toContain("fix:")
  })

  it("exits 2 on invalid input, naming the field", async () => {
    const r = await cli(["run", "--language", "cobol", "--no-journal", "-"], { stdin: "x" })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("language")
    const t = await cli(["run", "--timeout", "soon", "--no-journal", "-"], { stdin: "x" })
    expect(t.code).toBe(2)
    expect(t.stderr).toContain("--timeout")
  })

  it("events prints the recorded lifecycles as a timeline and as JSON lines; summary counts them", async () => {
    const text = await cli(["events", "--journal", journal])
    expect(text.code).toBe(0)
    for (const type of [
      "ExecutionRequested",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerExited",
      "ContainerDestroyed"
    ]) {
      expect(text.stdout).toContain(type)
    }
    const json = await cli(["events", "--json", "--journal", journal])
    const events = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { sequence: number; streamId: string; type: string })
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1))
    const one = events.find((e) => e.type === "ExecutionRequested")!.streamId
    const only = await cli(["events", "--json", "--execution", one, "--journal", journal])
    expect(
      only.stdout
        .trim()
        .split("\n")
        .every((l) => JSON.parse(l).streamId === one)
    ).toBe(true)
    const summary = await cli(["events", "summary", "--json", "--journal", journal])
    const s = JSON.parse(summary.stdout)
    expect(s.total).toBe(2)
    expect(s.containersAlive).toBe(0)
    expect(s.openLifecycles).toBe(0)
    expect(s.exitCodes).toMatchObject({ "0": 1, "7": 1 })
  })

  it("doctor reports the engine, images and runtimes and passes on this machine", async () => {
    const r = await cli(["doctor"])
    expect(r.stdout).toMatch(/ok\s+engine/)
    expect(r.stdout).toMatch(/ok\s+image python/)
    expect(r.stdout).toMatch(/ok\s+smoke run/)
    expect(r.stdout).toMatch(/disk quota/)
    // userns-remap is reported as the engine has it (test/chaos/userns-remap.test.ts covers "on").
    const remapped =
      ((await docker.info()) as { SecurityOptions?: Array<string> }).SecurityOptions?.some((o) =>
        o.includes("name=userns")
      ) === true
    expect(r.stdout).toMatch(
      remapped ? /ok\s+userns-remap\s+on:/ : /warn\s+userns-remap\s+off: uid 1001 in a sandbox is uid 1001 on the host/
    )
    expect(r.code).toBe(0)
  })

  it("config show prints each value and where it came from", async () => {
    const r = await cli(["config", "show", "--config", "examples/hermes-config.yaml"], {
      env: { TERMINAL_TIMEOUT: "42" }
    })
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("TERMINAL_TIMEOUT")
    expect(r.stdout).toContain("hermes-config.yaml")
  })
})
