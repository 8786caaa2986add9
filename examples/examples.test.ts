/**
 * The README's API examples are these files: type-checked with the repo
 * (tsconfig includes examples/) and executed here, on the real engine.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const root = new URL("..", import.meta.url).pathname
// The documented `npx tsx examples/<file>`: the same tsx, started without npx (npm's own start cost
// ~1 s of CPU per example and tests nothing of ours), on the packages as built (bundle/, as this
// tier imports them: test/built-global-setup.ts refuses a stale build), so tsx transforms only the
// example and not every module of the packages' sources again (~2.5 CPU-s a run, ~0.7 this way).
const run = (file: string, ...args: Array<string>) =>
  promisify(execFile)(
    `${root}node_modules/.bin/tsx`,
    ["--conditions=hermes-sandbox-dist", `examples/${file}`, ...args],
    {
      cwd: root,
      timeout: 90_000
    }
  )

describe("examples", () => {
  it("quickstart prints each snippet's result and its lifecycle events", async () => {
    const { stdout } = await run("quickstart.ts")
    expect(stdout).toContain('stdout "42\\n"')
    expect(stdout).toContain('stdout "[ 1, 4, 9 ]\\n"')
    expect(stdout).toContain('stdout "hello, sandbox\\n"')
    expect(stdout).toMatch(/result exit=3 timedOut=false/)
    expect(stdout).toMatch(/result exit=137 timedOut=true/)
    for (const type of [
      "ExecutionRequested",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerExited",
      "ExecutionTimedOut",
      "ContainerDestroyed"
    ]) {
      expect(stdout).toContain(type)
    }
  })

  it("the Effect program runs and handles a typed error", async () => {
    const { stdout } = await run("effect-program.ts")
    // Not one of the project's images: the hint is how to get that image, not the project's build.
    expect(stdout).toContain("ImageNotFound: get it with docker pull no/such-image:0")
    expect(stdout.trim().endsWith("42")).toBe(true)
  })

  it("abort removes the run and the SQLite journal replays every lifecycle closed", async () => {
    const { stdout } = await run("abort-and-journal.ts")
    expect(stdout).toContain("second run: ExecutionAborted")
    expect(stdout).toMatch(/outcomes: .*"exited":1.*containers alive: 0/)
    expect(stdout).toMatch(/"interrupted":1/)
  })
})
