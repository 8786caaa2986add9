/**
 * `diskSize` on an engine whose storage is overlay2 on XFS mounted WITHOUT project quotas (how
 * XFS mounts by default). `docker info` reports "overlay2" on "xfs" exactly as for a pquota mount,
 * but the engine refuses a quota; the SDK must treat that like any storage that cannot apply one:
 * a typed ContainerFailed naming the reason, or (diskQuotaUnsupported: "warn") a run without it,
 * and `doctor` must say so. On a PRIVATE dockerd whose data root is a fresh XFS filesystem on a
 * loop device (this kernel has no XFS quota support, so a pquota mount — the enforcing case —
 * cannot be made here).
 */
import { describe, expect, it } from "vitest"
import { ownEngineDefaults, useEngine } from "./engineSuite.js"
import { doctorChecks, PrivateEngine } from "./privateEngine.js"

describe("diskSize on overlay2 on XFS without pquota (private dockerd)", () => {
  const engine = new PrivateEngine({ dataRootOn: "xfs" })
  const { open } = useEngine(engine, { ...ownEngineDefaults, diskSize: "64m" })

  const containers = async () => (await engine.client.listContainers({ all: true })).map((c) => c.Names[0])

  it("the engine reports overlay2 on xfs, and refuses a quota", async () => {
    const info = (await engine.client.info()) as { Driver: string; DriverStatus: Array<[string, string]> }
    expect(info.Driver).toBe("overlay2")
    expect(info.DriverStatus).toContainEqual(["Backing Filesystem", "xfs"])
    const refused = await engine.client
      .createContainer({
        Image: "hermes-sandbox/python:latest",
        Cmd: ["true"],
        HostConfig: { StorageOpt: { size: "64m" } }
      })
      .then(
        () => "created",
        (e: { json?: { message?: string } }) => e.json?.message ?? ""
      )
    expect(refused).toMatch(/storage-opt is supported only for overlay over xfs with 'pquota'/)
    expect(await containers()).toEqual([])
  })

  it("diskSize fails with a typed ContainerFailed naming the reason, every time, and leaves no container", async () => {
    const executor = await open()
    for (let i = 0; i < 2; i++) {
      const error = await executor.executeCode({ language: "python", code: "print(1)" }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect(error).toMatchObject({ _tag: "ContainerFailed", operation: "create" })
      const message = (error as { message: string }).message
      expect(message).toContain("overlay2 on xfs mounted without pquota")
      expect(message).toContain("it needs overlay2 on XFS mounted with pquota")
    }
    expect(await containers()).toEqual([])
  })

  it('with diskQuotaUnsupported: "warn" it runs without the quota', async () => {
    const executor = await open({ diskQuotaUnsupported: "warn" })
    for (let i = 0; i < 2; i++) {
      const r = await executor.executeCode({ language: "python", code: "print('ran without a quota')" })
      expect(r).toMatchObject({ exitCode: 0, timedOut: false, stdout: "ran without a quota\n" })
    }
  })

  it("doctor reports that quotas are not supported here, and why; its fix names this engine's data root", async () => {
    const quota = (await doctorChecks(engine)).find((c) => c.name === "disk quota")
    expect(quota).toMatchObject({ ok: false, required: false })
    const { DockerRootDir } = (await engine.client.info()) as { DockerRootDir: string }
    expect(DockerRootDir).not.toBe("/var/lib/docker")
    expect(quota?.fix).toContain(`data root (${DockerRootDir})`)
    expect(quota?.detail).toContain("overlay2 on xfs mounted without pquota")
    expect(quota?.detail).toContain("NOT supported")
    // Its probe (a create with a quota) left nothing either.
    expect((await containers()).filter((name) => name?.includes("doctor"))).toEqual([])
  })
})
