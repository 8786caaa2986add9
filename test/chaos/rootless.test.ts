/**
 * The SDK against a rootless Docker engine (SECURITY.md "Rootless Docker"). The SDK needs only
 * the socket; but on a cgroup v1 host, as this one, a rootless engine has no cgroups at all: it
 * accepts a sandbox's memory, pids and CPU limits without a word in the create response, records
 * them, and never applies them. So by default the SDK refuses to run there (naming the engine's
 * own explanation), `limitsUnsupported: "warn"` runs anyway — and then, as this suite shows, the
 * 512 MiB memory limit does not hold — and `doctor` fails its resource-limits check.
 */
import { describe, expect, it } from "vitest"
import { SandboxUid } from "@hermes-sandbox/docker"
import { ownEngineDefaults, useEngine } from "./engineSuite.js"
import { doctorChecks } from "./privateEngine.js"
import { ROOTLESS_UID, RootlessEngine, subordinateBase } from "./rootlessEngine.js"

describe("a rootless engine on cgroup v1", () => {
  const engine = new RootlessEngine()
  const { open } = useEngine(engine, ownEngineDefaults)

  it("the engine is rootless, without cgroups, and its create response does not warn about the limits it drops", async () => {
    const info = (await engine.client.info()) as {
      SecurityOptions: Array<string>
      CgroupDriver: string
      CgroupVersion: string
    }
    expect(info.SecurityOptions).toContain("name=rootless")
    expect(info.CgroupVersion, "this suite describes a cgroup v1 host").toBe("1")
    expect(info.CgroupDriver).toBe("none")
    const created = await new Promise<{ Id: string; Warnings: Array<string> | null }>((resolve, reject) =>
      engine.client.modem.dial(
        {
          path: "/containers/create?",
          method: "POST",
          options: {
            Image: "hermes-sandbox/python:latest",
            Cmd: ["true"],
            HostConfig: { Memory: 256 << 20, MemorySwap: 256 << 20, PidsLimit: 64 }
          },
          statusCodes: { 201: true, 400: "bad parameter", 500: "server error" }
        },
        (error: unknown, data: unknown) =>
          error ? reject(error) : resolve(data as { Id: string; Warnings: Array<string> | null })
      )
    )
    expect(created.Warnings ?? []).toEqual([])
    expect((await engine.client.getContainer(created.Id).inspect()).HostConfig).toMatchObject({
      Memory: 256 << 20,
      PidsLimit: 64
    })
    await engine.client.getContainer(created.Id).remove({ force: true })
  })

  it("an execution is refused with the engine's explanation; nothing is created", async () => {
    const executor = await open()
    const error = await executor.executeCode({ language: "python", code: "print('ran')" }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toMatchObject({ _tag: "ContainerFailed", operation: "create" })
    const message = (error as { message: string }).message
    expect(message).toContain(
      "the engine cannot apply the sandbox's memory, swap, pids, cpu limits: Running in rootless-mode without cgroups"
    )
    expect(message).toContain('limitsUnsupported: "warn"')
    expect(await engine.client.listContainers({ all: true })).toEqual([])
  })

  it('with limitsUnsupported: "warn" it runs as an unprivileged host uid — and the memory limit does not hold', async () => {
    const executor = await open({ limitsUnsupported: "warn" })
    const ids = await executor.executeCode({
      language: "python",
      code: "import os\nprint(os.getuid(), ' '.join(open('/proc/self/uid_map').read().split()))"
    })
    // Container uid 1001 is the rootless user's namespace uid 1001, i.e. its subordinate range + 1000;
    // the namespace's root is the user itself (host uid ROOTLESS_UID, not the sandboxes' 1001).
    expect(ids).toMatchObject({ exitCode: 0, stdout: `1001 0 ${ROOTLESS_UID} 1 1 ${subordinateBase()} 65536\n` })
    const hog = await executor.executeCode({
      language: "python",
      code: "b = bytearray(700 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint('700 MiB')"
    })
    expect(hog).toMatchObject({ exitCode: 0, oomKilled: false, stdout: "700 MiB\n" })
  })

  it('sandboxUid: "per-sandbox" uids are inside the user\'s 65536 subordinate ids: such a sandbox runs', async () => {
    const executor = await open({ limitsUnsupported: "warn", sandboxUid: "per-sandbox" })
    const r = await executor.executeCode({
      language: "python",
      code: "import os\nopen('/workspace/f', 'w').write('x')\nprint(os.getuid(), os.getgid(), os.stat('/workspace').st_uid)"
    })
    expect(r).toMatchObject({ exitCode: 0 })
    const [uid, gid, owner] = r.stdout.trim().split(" ").map(Number)
    expect(uid).toBeGreaterThanOrEqual(SandboxUid.RANGE.first)
    expect(uid).toBeLessThanOrEqual(SandboxUid.RANGE.last)
    expect([gid, owner]).toEqual([uid, uid])
  })

  it("doctor fails the resource-limits check with the same explanation", async () => {
    const check = (await doctorChecks(engine)).find((c) => c.name === "resource limits")
    expect(check).toMatchObject({ ok: false, required: true })
    expect(check?.detail).toContain("Running in rootless-mode without cgroups")
  })
})
