/** `hermes-sandbox session list | reap` on the real engine. */
import { spawn } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import { openPersistent } from "@hermes-sandbox/docker"
import { containerExists, docker } from "./support/docker.js"

const root = new URL("..", import.meta.url).pathname
const cli = (args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("npx", ["tsx", "packages/cli/src/bin.ts", ...args], { cwd: root })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end()
  })

const names: Array<string> = []
afterAll(async () => {
  await Promise.all(names.map((n) => docker.getContainer(n).remove({ force: true }).catch(() => {})))
})

describe("hermes-sandbox session", () => {
  it("list shows a persistent sandbox; reap removes it once idle past its lifetime", async () => {
    const profile = `cli-${process.pid}`
    const p = await openPersistent({ profile, lifetimeSeconds: 1 })
    names.push(p.containerName)
    await p.run("echo used")
    await p.close()

    const listed = await cli(["session", "list", "--json"])
    expect(listed.code).toBe(0)
    const row = listed.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).find((r) => r["name"] === p.containerName)
    expect(row).toMatchObject({ scope: "persistent", status: "running", profile, idleSeconds: 1 })

    await new Promise((r) => setTimeout(r, 2_500))
    const reaped = await cli(["session", "reap", "--json", "--no-journal"])
    expect(reaped.code).toBe(0)
    expect((JSON.parse(reaped.stdout) as { removed: Array<string> }).removed).toContain(p.containerName)
    expect(await containerExists(p.containerName)).toBe(false)
  }, 60_000)
})
