/**
 * The Promise facades' completeness, on the real engine: past events next to the live ones,
 * one `run` whatever scope openHermesSandbox opened (and `await using`), and a session whose
 * idle lifetime ended reopened on the next call when asked (as the Hermes agent re-creates its
 * sandbox) instead of failing.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { lastValueFrom, toArray } from "rxjs"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { createExecutor, createSession, openHermesSandbox } from "@hermes-sandbox/docker"
import { byLabels, parseFamilies, sampleValue } from "./support/prometheus.js"
import { containerExists } from "./support/docker.js"
import { sessionTracker } from "./support/sessions.js"

const { track, trackName, removeTracked } = sessionTracker()
afterEach(removeTracked)
const dir = mkdtempSync(join(tmpdir(), "hs-facade-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const hermesConfig = (name: string, lines: ReadonlyArray<string>) => {
  const path = join(dir, `${name}.yaml`)
  writeFileSync(path, ["terminal:", "  backend: docker", ...lines.map((l) => `  ${l}`), ""].join("\n"))
  return { path, env: {} }
}

describe("Promise facades", () => {
  it("an executor's past events can be replayed from the default in-memory journal: one execution's whole lifecycle after the fact; after close() it is ExecutorClosed", async () => {
    const executor = await createExecutor()
    const r = await executor.executeCode({ language: "python", code: "print(1)" })
    // The removal is recorded after the result (in the background): read until it is there.
    const lifecycle = async () =>
      (await lastValueFrom(executor.replay({ streamId: r.executionId }).pipe(toArray()))).map((e) => e.type)
    const deadline = Date.now() + 10_000
    while (!(await lifecycle()).includes("ContainerDestroyed") && Date.now() < deadline)
      await new Promise((ok) => setTimeout(ok, 50))
    const history = await lastValueFrom(executor.replay({ streamId: r.executionId }).pipe(toArray()))
    expect(history.map((e) => e.type)).toEqual([
      "ExecutionRequested",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerExited",
      "ContainerDestroyed"
    ])
    await executor.close()
    await expect(lastValueFrom(executor.replay())).rejects.toMatchObject({ _tag: "ExecutorClosed" })
    expect(history.every((e) => e.streamId === r.executionId)).toBe(true)
  })

  it("a session's past events can be replayed from the default in-memory journal, completing after the last one", async () => {
    const s = track(await createSession())
    const r = await s.run("echo replayed")
    const stream = await lastValueFrom(s.replay({ streamId: r.executionId }).pipe(toArray()))
    expect(stream.map((e) => e.type)).toEqual(["ExecutionRequested", "ContainerExited"])
    const session = await lastValueFrom(s.replay({ streamId: s.sessionId }).pipe(toArray()))
    expect(session.map((e) => e.type)).toEqual(["SessionOpened", "ContainerCreated", "ContainerStarted"])
    // Its own Prometheus registry (no executor here): its call, its open sandbox.
    const families = parseFamilies(await s.metrics())
    expect(byLabels(families.get("hermes_sandbox_executions_total"), ["language", "outcome"])).toEqual({ "bash/ok": 1 })
    expect(sampleValue(families, "hermes_sandbox_sessions_open")).toBe(1)
    await s.close()
  })

  it("with reopenWhenIdleExpired, the call after an idle expiry runs in a new sandbox (nothing of the old one carried); without it, SessionEnded", async () => {
    const s = track(await createSession({ lifetimeSeconds: 1, reopenWhenIdleExpired: true }))
    const first = { sessionId: s.sessionId, containerName: s.containerName }
    await s.run("cd /tmp && export CARRIED=yes && echo data > /tmp/file")
    expect((await s.run('echo "$PWD $CARRIED"')).stdout).toBe("/tmp yes\n")
    await new Promise((r) => setTimeout(r, 3_000))
    const after = await s.run('echo "$PWD ${CARRIED:-unset}"; ls /tmp/file 2>&1 | head -1')
    trackName(s.containerName)
    expect(after.exitCode).toBe(0)
    expect(after.stdout).toMatch(/^\/workspace unset\n.*No such file/)
    expect(s.sessionId).not.toBe(first.sessionId)
    expect(s.containerName).not.toBe(first.containerName)
    expect(await containerExists(first.containerName)).toBe(false)
    const old = await lastValueFrom(s.replay({ streamId: first.sessionId }).pipe(toArray()))
    expect(old.map((e) => e.type).slice(-3)).toEqual(["SessionIdleExpired", "ContainerDestroyed", "SessionClosed"])
    await s.close()
    expect(await containerExists(s.containerName)).toBe(false)

    const plain = track(await createSession({ lifetimeSeconds: 1 }))
    await plain.run("true")
    await new Promise((r) => setTimeout(r, 3_000))
    await expect(plain.run("true")).rejects.toMatchObject({ _tag: "SessionEnded", reason: "idle-expired" })
    await plain.close()
  }, 30_000)

  it("cells: state kept across runCell; after a reopen the first cell says stateLost; a one-shot openHermesSandbox refuses runCell", async () => {
    const s = track(await createSession({ lifetimeSeconds: 1, reopenWhenIdleExpired: true }))
    await s.runCell({ code: "kept = 41" })
    expect(await s.runCell({ code: "kept + 1" })).toMatchObject({
      status: "ok",
      stateLost: false,
      executionCount: 2,
      result: { data: { "text/plain": "42" } }
    })
    await new Promise((r) => setTimeout(r, 3_000))
    const after = await s.runCell({ code: "kept" })
    trackName(s.containerName)
    expect(after).toMatchObject({ status: "error", stateLost: true, executionCount: 1, error: { name: "NameError" } })
    expect(await s.runCell({ code: "1" })).toMatchObject({ status: "ok", stateLost: false })
    // The journal records what the caller was told.
    const stream = await lastValueFrom(s.replay({ streamId: s.sessionId }).pipe(toArray()))
    expect(stream.flatMap((e) => (e.type === "CellExecuted" ? [e.data.stateLost] : []))).toEqual([true, false])
    await s.close()

    const h = await openHermesSandbox({ hermesConfig: hermesConfig("oneshot-cell", ["container_memory: 256"]) })
    expect(h.scope).toBe("oneShot")
    await expect(h.runCell({ code: "1" })).rejects.toMatchObject({ _tag: "InvalidRequest", field: "scope" })
    await h.close()
  }, 30_000)

  it("openHermesSandbox: `run` and `runCode` whatever the scope, and `await using` closes it", async () => {
    let oneShotContainer = ""
    {
      await using h = await openHermesSandbox({ hermesConfig: hermesConfig("oneshot", ["container_memory: 256"]) })
      expect(h.scope).toBe("oneShot")
      const r = await h.run("cd /tmp && echo $PWD")
      expect(r).toMatchObject({ exitCode: 0, stdout: "/tmp\n" })
      // One-shot: nothing carries over.
      expect((await h.run("echo $PWD")).stdout).toBe("/workspace\n")
      expect((await h.runCode({ language: "python", code: "print(6*7)" })).stdout).toBe("42\n")
      oneShotContainer = r.containerName
    }
    expect(await containerExists(oneShotContainer)).toBe(false)

    let sessionContainer = ""
    {
      await using h = await openHermesSandbox({
        hermesConfig: hermesConfig("session", ["container_persistent: false"])
      })
      expect(h.scope).toBe("session")
      if (h.scope !== "oneShot") track(h.session)
      await h.run("cd /tmp")
      expect((await h.run("echo $PWD")).stdout).toBe("/tmp\n")
      expect((await h.runCode({ language: "python", code: "import os; print(os.getcwd())" })).stdout).toBe("/tmp\n")
      sessionContainer = (await h.run("true")).containerName
    }
    expect(await containerExists(sessionContainer)).toBe(false)
  }, 60_000)
})
