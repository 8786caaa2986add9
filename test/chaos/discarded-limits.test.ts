/**
 * An engine that cannot apply a sandbox's hard limits. Docker creates the container anyway and
 * only says so in `docker info` and the create response's Warnings ("… PIDs limit discarded."):
 * the program would run with no pids or memory limit at all. On a PRIVATE dockerd that runs in a mount namespace
 * without the pids and memory cgroup hierarchies (as on a kernel without those controllers, or
 * a rootless engine on cgroup v1), the SDK must refuse before the program runs, remove what the
 * engine created, and say why; `limitsUnsupported: "warn"` runs anyway; `doctor` fails the check.
 */
import { describe, expect, it } from "vitest"
import { cli } from "../support/cli.js"
import { ownEngineDefaults, useEngine } from "./engineSuite.js"
import { doctorChecks, PrivateEngine } from "./privateEngine.js"

describe("an engine that discards resource limits (private dockerd without pids and memory cgroups)", () => {
  const engine = new PrivateEngine({ hideCgroups: ["pids", "memory"] })
  const { open } = useEngine(engine, ownEngineDefaults)

  it("the engine reports no pids or memory limits", async () => {
    const info = (await engine.client.info()) as { PidsLimit: boolean; MemoryLimit: boolean; CpuCfsQuota: boolean }
    expect(info).toMatchObject({ PidsLimit: false, MemoryLimit: false, CpuCfsQuota: true })
  })

  it("an execution fails with a typed ContainerFailed naming the limits the engine cannot apply; the program never runs and nothing is left", async () => {
    const executor = await open()
    const ran: Array<string> = []
    const sub = executor.events$.subscribe((e) => ran.push(e.type))
    const error = await executor.executeCode({ language: "python", code: "print('ran')" }).then(
      () => undefined,
      (e: unknown) => e
    )
    sub.unsubscribe()
    expect(error).toMatchObject({ _tag: "ContainerFailed", operation: "create" })
    const message = (error as { message: string }).message
    expect(message).toContain("the engine cannot apply the sandbox's memory, swap, pids limits")
    expect(message).toContain('limitsUnsupported: "warn"')
    expect(ran).not.toContain("ContainerStarted")
    expect(await engine.client.listContainers({ all: true })).toEqual([])
  })

  it('with limitsUnsupported: "warn" it runs, without those limits', async () => {
    const executor = await open({ limitsUnsupported: "warn" })
    const r = await executor.executeCode({ language: "python", code: "print(open('/proc/self/cgroup').read())" })
    expect(r).toMatchObject({ exitCode: 0, timedOut: false })
    // Not in a pids or memory cgroup of its own: the root ones.
    expect(r.stdout).toMatch(/^\d+:pids:\/$/m)
    expect(r.stdout).toMatch(/^\d+:memory:\/$/m)
  })

  it("the CLI exits 125 naming the reason, and runs with --limits-unsupported warn", async () => {
    const env = { DOCKER_HOST: `unix://${engine.socketPath}` }
    const refused = await cli(["run", "--no-journal", "-"], { stdin: "print('ran')", env })
    expect(refused.code).toBe(125)
    expect(refused.stdout).toBe("")
    expect(refused.stderr).toContain("the engine cannot apply the sandbox's memory, swap, pids limits")
    const lenient = await cli(["run", "--no-journal", "--limits-unsupported", "warn", "-"], {
      stdin: "print('ran')",
      env
    })
    // The warning goes to standard error: standard output is the program's.
    expect(lenient).toMatchObject({ code: 0, stdout: "ran\n" })
    expect(lenient.stderr).toContain('sandboxes run without them because limitsUnsupported is \\"warn\\"')
  }, 60_000)

  it("doctor fails the resource-limits check, naming the missing ones", async () => {
    const check = (await doctorChecks(engine)).find((c) => c.name === "resource limits")
    expect(check).toMatchObject({ ok: false, required: true })
    expect(check?.detail).toContain("memory")
    expect(check?.detail).toContain("pids")
    expect(check?.detail).not.toContain("cpu")
  })
})
