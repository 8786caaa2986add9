/**
 * The Promise facade's sessions on the live cluster, as a user without Effect opens them:
 * createSession({ runtime: { kubernetes } }) as the tier's ServiceAccount. A shell's state from
 * call to call, a snippet and a kernel cell in the same pod, a file round trip; closing removes the
 * pod. A session asking for a bind mount is refused there.
 */
import { describe, expect, it } from "vitest"
import { createSession } from "@hermes-sandbox/docker"
import { podsLeft, runtimeOptions } from "../support/kubernetes.js"

describe("createSession on the cluster", () => {
  it("runs calls, a snippet, a cell and file operations in one pod; close removes it", async () => {
    const session = await createSession({ runtime: { kubernetes: runtimeOptions() }, cpus: 0.25, lifetimeSeconds: 120 })
    try {
      expect(await podsLeft()).toContain(session.containerName)
      expect((await session.run("mkdir -p /tmp/f && cd /tmp/f && export F=pod")).exitCode).toBe(0)
      expect((await session.run('echo "$PWD $F"')).stdout).toBe("/tmp/f pod\n")
      const code = await session.runCode({ language: "python", code: "import os\nprint(os.getcwd(), os.environ['F'])" })
      expect(code.stdout).toBe("/tmp/f pod\n")
      await session.writeFile("/workspace/note.txt", "from the host\n")
      expect(Buffer.from((await session.readFile("/workspace/note.txt")).content).toString()).toBe("from the host\n")
      const first = await session.runCell({ code: "n = 6 * 7" })
      expect(first.error).toBeUndefined()
      expect((await session.runCell({ code: "n" })).result?.data["text/plain"]).toBe("42")
    } finally {
      await session.close()
    }
    expect(await podsLeft()).not.toContain(session.containerName)
  }, 120_000)

  it("a session with a bind mount is refused (a hostPath would hand over a node's directory)", async () => {
    await expect(
      createSession({
        runtime: { kubernetes: runtimeOptions() },
        cpus: 0.25,
        mounts: [{ hostPath: "/tmp", containerPath: "/data" }]
      })
    ).rejects.toMatchObject({
      _tag: "ContainerFailed",
      message: expect.stringContaining("bind mounts are not available")
    })
  }, 60_000)
})
