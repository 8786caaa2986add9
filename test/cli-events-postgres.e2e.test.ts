/**
 * `hermes-sandbox events --journal postgres://…` against the run's throwaway PostgreSQL
 * (test/postgres-global-setup.ts): timeline, --json, summary and --follow read a database that
 * other writers append to; a server that is not there, or refuses the login, is a clear error
 * within seconds that names the server and never prints the password. No engine is needed:
 * the events are written through the journal's own client.
 */
import { spawn } from "node:child_process"
import { beforeAll, describe, expect, it } from "vitest"
import { Event, openJournal } from "@hermes-sandbox/events"
import { cli, cliCommand } from "./support/cli.js"
import { createDatabase } from "./support/postgres.js"

const E = Event.make
const streamId = "01a23261-e690-75bb-95e7-a93c6a6de2d8"
const container = { containerName: "hermes-sandbox-1", containerId: "c1" }
let url: string

const lifecycle = [
  E("ExecutionRequested", {
    language: "python",
    image: "hermes-sandbox/python:latest",
    codeBytes: 8,
    codeSha256: "ab".repeat(32),
    stdinBytes: 0,
    fileCount: 0,
    timeoutMs: 30_000,
    limits: { memoryBytes: 1, nanoCpus: 1, pidsLimit: 1, outputLimitBytes: 1 },
    network: false,
    runtime: "docker"
  }),
  E("ContainerCreated", { ...container, imageId: "sha256:i" }),
  E("ContainerStarted", { containerId: "c1" }),
  E("ContainerExited", { exitCode: 0, oomKilled: false, durationMs: 120 }),
  E("ContainerDestroyed", { ...container, reason: "completed" })
]

beforeAll(async () => {
  url = createDatabase("cli_events")
  const client = await openJournal({ url })
  try {
    await client.append({ streamId, executorId: "test", events: lifecycle })
  } finally {
    await client.close()
  }
})

describe("events --journal postgres://", () => {
  it("prints the timeline, JSON lines and the summary of the database's journal", async () => {
    const text = await cli(["events", "--journal", url])
    expect({ code: text.code, stderr: text.stderr }).toEqual({ code: 0, stderr: "" })
    const lines = text.stdout.trim().split("\n")
    expect(lines).toHaveLength(5)
    expect(lines[0]).toContain(`${streamId.slice(-12)}  ExecutionRequested`)
    const json = await cli(["events", "--json", "--journal", url])
    expect(
      json.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).sequence)
    ).toEqual([1, 2, 3, 4, 5])
    const summary = await cli(["events", "summary", "--json", "--journal", url])
    expect(summary.code).toBe(0)
    expect(JSON.parse(summary.stdout)).toMatchObject({
      total: 1,
      byOutcome: { exited: 1 },
      containersAlive: 0,
      openLifecycles: 0
    })
  })

  it("--follow prints the history, then what another process appends, until stopped", async () => {
    const child = spawn(cliCommand[0]!, [...cliCommand.slice(1), "events", "--follow", "--json", "--journal", url])
    let stdout = ""
    let stderr = ""
    child.stderr.on("data", (d) => (stderr += d))
    const seen = (n: number) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (
            stdout
              .trim()
              .split("\n")
              .filter((l) => l !== "").length >= n
          )
            resolve()
        }
        child.stdout.on("data", (d) => {
          stdout += d
          check()
        })
        child.once("close", () => reject(new Error(`events --follow exited: ${stderr}`)))
        check()
      })
    const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)))
    try {
      await seen(5)
      const writer = await openJournal({ url })
      try {
        const appendedAt = Date.now()
        await writer.append({
          streamId: "another",
          executorId: "test",
          events: [E("ExecutorStats", { inFlight: 1, queued: 0 })]
        })
        await seen(6)
        // Woken by the notification, not by the 5 s safety re-check.
        expect(Date.now() - appendedAt).toBeLessThan(3_000)
      } finally {
        await writer.close()
      }
      const last = JSON.parse(stdout.trim().split("\n").at(-1)!)
      expect(last).toMatchObject({ sequence: 6, streamId: "another", type: "ExecutorStats" })
    } finally {
      child.kill("SIGINT")
    }
    expect(await exited).toBe(130)
  })

  it("a server that is not there fails within seconds, naming it without the password", async () => {
    const started = Date.now()
    const r = await cli(["events", "--journal", "postgres://hermes:s3cret-pw@127.0.0.1:1/nothing"])
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain("127.0.0.1:1")
    expect(r.stderr).toMatch(/ECONNREFUSED/)
    expect(r.stderr + r.stdout).not.toContain("s3cret-pw")
  })

  it("a refused login fails, naming the server and the reason, without the password", async () => {
    const wrong = new URL(url)
    wrong.password = "not-the-password"
    const r = await cli(["events", "--json", "--journal", wrong.toString()])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain(`${wrong.host}`)
    expect(r.stderr).toMatch(/password authentication failed/)
    expect(r.stderr + r.stdout).not.toContain("not-the-password")
    expect(r.stderr + r.stdout).not.toContain(new URL(url).password)
  })
})
