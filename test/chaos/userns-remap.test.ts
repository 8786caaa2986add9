/**
 * The SDK on an engine with user-namespace remapping (SECURITY.md "User namespace remapping"),
 * which the shared engine cannot be switched to (a daemon restart for everyone). A PRIVATE dockerd
 * started with --userns-remap=default: every hardening default still holds and the program still
 * runs as uid 1001 inside, while on the host its processes belong to the unprivileged subordinate
 * range (/etc/subuid's dockremap entry), never to root or to the host's uid 1001.
 */
import { readFileSync } from "node:fs"
import { beforeAll, describe, expect, it } from "vitest"
import { SandboxUid, type SandboxExecutor } from "@hermes-sandbox/docker"
import { ownEngineDefaults, useEngine } from "./engineSuite.js"
import { doctorChecks, PrivateEngine } from "./privateEngine.js"

describe("an engine with userns-remap (private dockerd)", () => {
  const engine = new PrivateEngine({ daemonArgs: ["--userns-remap=default"] })
  let executor: SandboxExecutor
  /** Where container uid 0 starts on the host (dockerd creates the dockremap entry when missing). */
  let hostBase: number
  let rangeSize: number

  const { open } = useEngine(engine, ownEngineDefaults)

  beforeAll(async () => {
    const entry = readFileSync("/etc/subuid", "utf8")
      .split("\n")
      .find((l) => l.startsWith("dockremap:"))
    expect(entry, "/etc/subuid has the dockremap range").toBeDefined()
    ;[hostBase, rangeSize] = entry!.split(":").slice(1).map(Number) as [number, number]
    executor = await open()
  }, 60_000)

  it("the engine runs remapped", async () => {
    const info = (await engine.client.info()) as { SecurityOptions: Array<string> }
    expect(info.SecurityOptions).toContain("name=userns")
    expect(hostBase).toBeGreaterThan(0)
    expect(rangeSize).toBeGreaterThanOrEqual(65536)
  })

  it("the program runs as uid 1001 in a namespace whose root is the subordinate range; the sandbox's mounts still work", async () => {
    const code = [
      "import os",
      "print('ids', os.getuid(), os.getgid())",
      "print('map', ' '.join(open('/proc/self/uid_map').read().split()))",
      "open('/workspace/out.txt', 'w').write('w')",
      "open('/tmp/t.txt', 'w').write('t')",
      "print('file', open('data.txt').read())",
      "try:\n    open('/etc/x', 'w')\nexcept OSError as e:\n    print('etc', e.errno)"
    ].join("\n")
    const r = await executor.executeCode({ language: "python", code, files: { "data.txt": "given" } })
    expect(r).toMatchObject({ exitCode: 0, timedOut: false })
    expect(r.stdout.split("\n")).toEqual([
      "ids 1001 1001",
      `map 0 ${hostBase} ${rangeSize}`,
      "file given",
      "etc 30",
      ""
    ])
  })

  it("on the host, every process of the sandbox belongs to the remapped uid, not to root or uid 1001", async () => {
    let up!: () => void
    const running = new Promise<void>((resolve) => (up = resolve))
    const run = executor.executeCode(
      { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(30)", timeoutMs: 60_000 },
      { onStdout: () => up() }
    )
    await running
    const [listed] = await engine.client.listContainers({ filters: { name: ["hermes-sandbox-"] } })
    const container = engine.client.getContainer(listed!.Id)
    // `docker top` runs ps on the host over the container's processes: host pids and host uids.
    const top = await container.top({ ps_args: "-o pid,uid,comm" })
    const uidColumn = top.Titles.indexOf("UID")
    const uids = (top.Processes as Array<Array<string>>).map((p) => Number(p[uidColumn]))
    expect(uids.length).toBeGreaterThanOrEqual(2) // docker-init and python
    expect(new Set(uids)).toEqual(new Set([hostBase + 1001]))
    await container.kill({ signal: "SIGKILL" })
    await expect(run).rejects.toMatchObject({ _tag: "ContainerFailed" })
  })

  it('sandboxUid: "per-sandbox" uids are inside the remapped range too: such a sandbox runs', async () => {
    const own = await open({ sandboxUid: "per-sandbox" })
    const r = await own.executeCode({
      language: "python",
      code: "import os\nopen('/workspace/f', 'w').write('x')\nprint(os.getuid(), os.getgid(), ' '.join(open('/proc/self/uid_map').read().split()))"
    })
    await own.close()
    expect(r).toMatchObject({ exitCode: 0 })
    const [uid, gid, ...map] = r.stdout.trim().split(" ").map(Number)
    expect(uid).toBeGreaterThanOrEqual(SandboxUid.RANGE.first)
    expect(uid).toBeLessThanOrEqual(SandboxUid.RANGE.last)
    expect(uid).toBeLessThan(rangeSize) // so it is host uid hostBase + uid, inside dockremap's range
    expect([gid, ...map]).toEqual([uid, 0, hostBase, rangeSize])
  })

  it("the deadline still kills, and nothing is left", async () => {
    const r = await executor.executeCode({ language: "python", code: "import time\ntime.sleep(60)", timeoutMs: 1_000 })
    expect(r).toMatchObject({ timedOut: true, exitCode: 137 })
    await executor.close()
    expect(await engine.client.listContainers({ all: true })).toEqual([])
  })

  it("doctor reports it", async () => {
    const check = (await doctorChecks(engine)).find((c) => c.name === "userns-remap")
    expect(check).toMatchObject({ ok: true, required: false })
    expect(check?.detail).toMatch(/^on:/)
  })
})
