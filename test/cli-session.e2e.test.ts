/** `hermes-sandbox session list | reap` on the real engine. */
import { afterAll, describe, expect, it } from "vitest"
import { openPersistent } from "@hermes-sandbox/docker"
import { cli } from "./support/cli.js"
import { containerExists, docker } from "./support/docker.js"

const names: Array<string> = []
afterAll(async () => {
  await Promise.all(
    names.map((n) =>
      docker
        .getContainer(n)
        .remove({ force: true })
        .catch(() => {})
    )
  )
})

describe("hermes-sandbox session", () => {
  it("list shows a persistent sandbox; reap removes it once idle past its lifetime", async () => {
    // Other suites' reapers run on the same engine at the same time and may remove this idle
    // sandbox first (any reaper removes every idle one): then it is made again, up to 3 times,
    // so the assertion is always about a removal this CLI made.
    let reapedByCli = false
    for (let attempt = 1; attempt <= 3 && !reapedByCli; attempt++) {
      const profile = `cli-${process.pid}-${attempt}`
      const p = await openPersistent({ profile, lifetimeSeconds: 1 })
      names.push(p.containerName)
      await p.run("echo used")
      await p.close()

      const listed = await cli(["session", "list", "--json"])
      expect(listed.code).toBe(0)
      const row = listed.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((r) => r["name"] === p.containerName)
      if (row === undefined && !(await containerExists(p.containerName))) continue
      expect(row).toMatchObject({ scope: "persistent", status: "running", profile, idleSeconds: 1 })

      await new Promise((r) => setTimeout(r, 2_500))
      const reaped = await cli(["session", "reap", "--json", "--no-journal"])
      expect(reaped.code).toBe(0)
      reapedByCli = (JSON.parse(reaped.stdout) as { removed: Array<string> }).removed.includes(p.containerName)
      expect(await containerExists(p.containerName)).toBe(false)
    }
    expect(reapedByCli).toBe(true)
  }, 60_000)
})
