/**
 * `hermes-sandbox daemon` and `run` through it, on the real engine, as installed (the bundle's
 * launcher: the daemon's client is its first stop for `run`). Each case runs both ways, through
 * the daemon and with --no-daemon, and must print the same, exit the same and fail the same;
 * the daemon's status says which runs it served. Then what SECURITY.md ("The CLI's local daemon")
 * promises: the socket's and directory's modes, oversized requests, a client killed mid-run, a
 * daemon killed mid-run leaving no container, and stop draining the pool.
 *
 * The daemon lives in a runtime directory of this suite's own (XDG_RUNTIME_DIR), so nothing else
 * running on this machine talks to it.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, statSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Docker from "dockerode"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli, type CliResult } from "./support/cli.js"

const root = new URL("..", import.meta.url).pathname
const bin = join(root, "packages/cli/bundle/hermes-sandbox.cjs")
const command = [process.execPath, bin]
const runtimeDir = mkdtempSync(join(tmpdir(), "hermes-daemon-"))
const env = { XDG_RUNTIME_DIR: runtimeDir }
const socket = join(runtimeDir, "hermes-sandbox", "daemon.sock")
const docker = new Docker({ socketPath: "/var/run/docker.sock" })

const hs = (args: Array<string>, stdin?: string): Promise<CliResult> =>
  cli(args, { command, env, ...(stdin === undefined ? {} : { stdin }) })

/** Standard error without the direct path's startup-sweep report (another suite's orphans). */
const ownStderr = (stderr: string) =>
  stderr
    .split(/(?<=\n)/)
    .filter((l) => !/^timestamp=\S+ level=INFO .*startup sweep:/.test(l))
    .join("")

interface Status {
  readonly running: boolean
  readonly pid: number
  readonly served: number
  readonly handedBack: number
  readonly inFlight: number
  readonly warm: Record<string, number>
}
const status = async (): Promise<Status> => {
  const r = await hs(["daemon", "status", "--json"])
  if (r.stdout === "") throw new Error(`daemon status printed nothing (exit ${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout) as Status
}

const waitFor = async (ok: () => Promise<boolean>, ms: number) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await ok()) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return false
}
const warm = async () => waitFor(async () => ((await status()).warm["python"] ?? 0) >= 1, 60_000)

/** The containers a process owns (the owner-pid label every sandbox and pooled sandbox carries). */
const containersOwnedBy = async (pid: number) =>
  docker.listContainers({ all: true, filters: { label: [`org.hermes-sandbox.owner-pid=${pid}`] } })

/** A run that prints "up" and sleeps; `way` is [] (through the daemon) or ["--no-daemon"]. */
const sleeper = (way: ReadonlyArray<string>) => {
  const child = spawn(
    command[0]!,
    [command[1]!, "run", ...way, "--no-journal", "-e", "import time\nprint('up', flush=True)\ntime.sleep(60)"],
    { env: { ...process.env, ...env } }
  )
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d) => (stdout += d))
  child.stderr.on("data", (d) => (stderr += d))
  const exit = new Promise<number | null>((r) => child.on("exit", (c) => r(c)))
  return { exit, kill: (s: NodeJS.Signals) => child.kill(s), stdout: () => stdout, stderr: () => stderr }
}

/** Eventually the daemon holds its pool's sandboxes only (1 python, 1 bash): every run's is removed. */
const onlyThePool = async () => {
  const pid = (await status()).pid
  return waitFor(async () => (await status()).inFlight === 0 && (await containersOwnedBy(pid)).length <= 2, 30_000)
}

const start = async () => {
  const started = await hs([
    "daemon",
    "start",
    "--no-journal",
    "--pool-size",
    "1",
    "--language",
    "python",
    "--language",
    "bash"
  ])
  expect(started.code, started.stderr).toBe(0)
  expect(await warm()).toBe(true)
}

beforeAll(start, 120_000)
afterAll(async () => {
  await hs(["daemon", "stop"])
}, 120_000)

/** The run both ways: through the daemon (served: the count goes up) and with --no-daemon. */
const bothWays = async (args: Array<string>, stdin?: string, served = true) => {
  const before = await status()
  const viaDaemon = await hs(["run", ...args], stdin)
  const after = await status()
  expect(after.served - before.served, `served by the daemon: ${args.join(" ")}`).toBe(served ? 1 : 0)
  const direct = await hs(["run", "--no-daemon", ...args], stdin)
  expect((await status()).served).toBe(after.served)
  return {
    viaDaemon: { ...viaDaemon, stderr: ownStderr(viaDaemon.stderr) },
    direct: { ...direct, stderr: ownStderr(direct.stderr) }
  }
}

describe("run through the daemon, and without it", () => {
  it("prints the same, exits the same: output, standard error, exit code, standard input, files, #! lines", async () => {
    const cases: Array<{ args: Array<string>; stdin?: string; expected: Partial<CliResult> }> = [
      { args: ["--no-journal", "-e", "print(1)"], expected: { code: 0, stdout: "1\n", stderr: "" } },
      {
        args: ["--no-journal", "-e", "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"],
        expected: { code: 3, stdout: "out\n", stderr: "err\n" }
      },
      { args: ["--no-journal", "-"], stdin: "print('piped')", expected: { code: 0, stdout: "piped\n" } },
      {
        args: ["--no-journal", "-"],
        stdin: "#!/bin/bash\necho from-bash $((6*7))\n",
        expected: { stdout: "from-bash 42\n" }
      },
      {
        args: ["--no-journal", "--stdin", "package.json", "-e", "import sys\nprint(len(sys.stdin.read()) > 0)"],
        expected: { stdout: "True\n" }
      },
      {
        args: ["--no-journal", "--file", "d/x.txt=package.json", "-e", "print(open('d/x.txt').read()[:1])"],
        expected: { stdout: "{\n" }
      },
      { args: ["--no-journal", "-m", "512m", "-c", "1", "-t", "20s", "-e", "print(2)"], expected: { stdout: "2\n" } }
    ]
    for (const c of cases) {
      const { viaDaemon, direct } = await bothWays(c.args, c.stdin)
      expect(viaDaemon, c.args.join(" ")).toMatchObject(c.expected)
      expect(viaDaemon).toEqual(direct)
    }
  })

  it("the deadline: exit 124 and the same line, the sandbox killed by the daemon's clock", async () => {
    const { viaDaemon, direct } = await bothWays(["--no-journal", "-t", "1s", "-e", "import time\ntime.sleep(60)"])
    expect(viaDaemon).toMatchObject({
      code: 124,
      stderr: "hermes-sandbox: timed out after 1000 ms; the sandbox was killed\n"
    })
    expect(viaDaemon).toEqual(direct)
  })

  it("--json: the same result (but for ids and times), and the same error object for a bad request", async () => {
    const { viaDaemon, direct } = await bothWays(["--no-journal", "--json", "-e", "print(6*7)"])
    const stable = (r: CliResult) => {
      const {
        executionId: _e,
        containerName: _c,
        durationMs: _d,
        timings: _t,
        startedAt: _s,
        finishedAt: _f,
        ...rest
      } = JSON.parse(r.stdout)
      return rest
    }
    expect(viaDaemon.code).toBe(0)
    expect(stable(viaDaemon)).toEqual(stable(direct))
    expect(Object.keys(JSON.parse(viaDaemon.stdout)).sort()).toEqual(Object.keys(JSON.parse(direct.stdout)).sort())
    // Refused before it ran: handed back, and the direct path reports it as always.
    const bad = await bothWays(["--no-journal", "--json", "--language", "cobol", "-e", "x"], undefined, false)
    expect(bad.viaDaemon.code).toBe(2)
    expect(bad.viaDaemon).toEqual(bad.direct)
  })

  it("what the pool does not fit runs directly: other options, env, an image, another journal", async () => {
    const before = (await status()).handedBack
    for (const args of [
      ["--no-journal", "--env", "A=1", "-e", "import os\nprint(os.environ['A'])"],
      ["--no-journal", "-m", "256m", "-e", "print(3)"],
      ["--no-journal", "-t", "900s", "-e", "print(4)"],
      ["--no-journal", "-l", "javascript", "-e", "console.log(5)"]
    ]) {
      const { viaDaemon, direct } = await bothWays(args, undefined, false)
      expect(viaDaemon.code).toBe(0)
      expect(viaDaemon).toEqual(direct)
    }
    expect((await status()).handedBack).toBe(before + 4)
    // Another engine (DOCKER_HOST, a docker context, ...): the daemon's would be the wrong one.
    const elsewhere = { DOCKER_HOST: "unix:///tmp/hermes-no-engine.sock" }
    const noEngine = await cli(["run", "--no-journal", "--json", "-e", "print(1)"], {
      command,
      env: { ...env, ...elsewhere }
    })
    const noEngineDirect = await cli(["run", "--no-daemon", "--no-journal", "--json", "-e", "print(1)"], {
      command,
      env: { ...env, ...elsewhere }
    })
    expect(noEngine.code).toBe(125)
    expect(JSON.parse(noEngine.stdout).error._tag).toBe("DockerUnavailable")
    expect(noEngine).toEqual(noEngineDirect)
    // A different journal is not even asked of the pool (the fit key differs): handed back too.
    const journal = join(runtimeDir, "j.sqlite")
    const { viaDaemon } = await bothWays(["--journal", journal, "-e", "print(6)"], undefined, false)
    expect(viaDaemon.stdout).toBe("6\n")
  })

  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143]
  ] as const)
    it(`${signal} mid-run: exit ${code}, the same lines; the sandbox removed`, async () => {
      const outcomes = []
      for (const way of [[], ["--no-daemon"]]) {
        const child = sleeper(way)
        expect(await waitFor(async () => child.stdout().includes("up"), 60_000)).toBe(true)
        child.kill(signal)
        outcomes.push({ code: await child.exit, stdout: child.stdout(), stderr: ownStderr(child.stderr()) })
      }
      expect(outcomes[0]).toEqual({
        code,
        stdout: "up\n",
        stderr: `\nhermes-sandbox: ${signal}: stopping; removing sandboxes…\n`
      })
      expect(outcomes[0]).toEqual(outcomes[1])
      expect(await onlyThePool()).toBe(true)
    }, 180_000)
})

describe("the daemon's trust model (SECURITY.md)", () => {
  it("socket 0600 in a 0700 directory, both this user's", () => {
    expect(statSync(join(runtimeDir, "hermes-sandbox")).mode & 0o777).toBe(0o700)
    const s = statSync(socket)
    expect(s.isSocket()).toBe(true)
    expect(s.mode & 0o777).toBe(0o600)
    expect(s.uid).toBe(process.getuid!())
  })

  it("a frame over the bound, and a connection that sends nothing, are closed; the daemon still serves", async () => {
    const closed = (send: Buffer | undefined) =>
      new Promise<boolean>((done) => {
        const c = connect(socket)
        c.on("connect", () => {
          if (send !== undefined) c.write(send)
        })
        c.on("error", () => {})
        c.on("close", () => done(true))
      })
    const huge = Buffer.alloc(5)
    huge.writeUInt32BE(64 * 1024 * 1024, 0)
    huge[4] = 0x52
    expect(await closed(huge)).toBe(true)
    expect(await closed(undefined)).toBe(true) // after the 10 s request timeout
    const r = await hs(["run", "--no-journal", "-e", "print('still')"])
    expect(r.stdout).toBe("still\n")
  }, 60_000)

  it("a client killed mid-run: its sandbox is removed", async () => {
    const child = sleeper([])
    expect(await waitFor(async () => child.stdout().includes("up"), 60_000)).toBe(true)
    child.kill("SIGKILL")
    await child.exit
    expect(await onlyThePool()).toBe(true)
  }, 90_000)

  it("a daemon killed mid-run: the client says so (125), nothing is left behind, and run works without it", async () => {
    const pid = (await status()).pid
    const child = sleeper([])
    expect(await waitFor(async () => child.stdout().includes("up"), 60_000)).toBe(true)
    process.kill(pid, "SIGKILL")
    expect(await child.exit).toBe(125)
    expect(child.stderr()).toContain("daemon went away mid-run")
    // Its watchdog removes the pool's and the run's containers.
    expect(await waitFor(async () => (await containersOwnedBy(pid)).length === 0, 60_000)).toBe(true)
    // The socket is left, but nothing answers: runs go the direct way.
    const r = await hs(["run", "--no-journal", "-e", "print('direct')"])
    expect(r).toMatchObject({ code: 0, stdout: "direct\n" })
    expect((await hs(["daemon", "status"])).code).toBe(1)
    // Started again over the dead one's socket.
    await start()
  }, 180_000)

  it("a pool made with other limits and an image serves only the runs that ask for them", async () => {
    expect((await hs(["daemon", "stop"])).code).toBe(0)
    const image = "hermes-sandbox/python:latest"
    const started = await hs([
      "daemon",
      "start",
      "--no-journal",
      "--pool-size",
      "1",
      "-m",
      "256m",
      "-t",
      "60s",
      "--image",
      image
    ])
    expect(started.code, started.stderr).toBe(0)
    expect(await warm()).toBe(true)
    const memory =
      "import os\nprint(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip() if os.path.exists('/sys/fs/cgroup/memory/memory.limit_in_bytes') else open('/sys/fs/cgroup/memory.max').read().strip())"
    // Asked as the pool was made: served, with the pool's limit, as the direct path gives it.
    const asked = await bothWays(["--no-journal", "-m", "256m", "-t", "30s", "--image", image, "-e", memory])
    expect(asked.viaDaemon.stdout).toBe(`${256 * 1024 * 1024}\n`)
    expect(asked.viaDaemon).toEqual(asked.direct)
    // Left to run's defaults (512m, 300 s, the language's image): not this pool's, run directly.
    for (const args of [
      ["--no-journal", "-e", memory],
      ["--no-journal", "-m", "256m", "-t", "30s", "-e", memory],
      ["--no-journal", "-m", "256m", "--image", image, "-e", memory]
    ]) {
      const { viaDaemon, direct } = await bothWays(args, undefined, false)
      expect(viaDaemon).toEqual(direct)
    }
    expect((await hs(["daemon", "stop"])).code).toBe(0)
    await start()
  }, 240_000)

  it("stop drains the pool: no container of the daemon's is left, and status says none runs", async () => {
    const pid = (await status()).pid
    expect((await containersOwnedBy(pid)).length).toBeGreaterThan(0)
    const stopped = await hs(["daemon", "stop"])
    expect(stopped.code, stopped.stderr).toBe(0)
    expect(await containersOwnedBy(pid)).toEqual([])
    expect(await hs(["daemon", "status", "--json"])).toMatchObject({ code: 1, stdout: '{"running":false}\n' })
    // For afterAll's stop, and the suites after: none running is fine.
    await start()
  }, 180_000)
})
