/**
 * Sessions and persistent sandboxes on the real engine, where only the engine can show it: bash
 * itself, files, process trees under the deadline, hardening, frozen sandboxes, the watchdog,
 * reconnects from a new process (measured), two handles on one sandbox, the Hermes configuration
 * (mounts, forwarded secrets). What the fake shows too is the sessions contract
 * (test/session-contract.docker.test.ts). Every test removes what it created.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { execFile, spawn } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Effect, Layer, Stream } from "effect"
import { type EventEnvelope, Journal, MemoryJournal, SqliteJournal } from "@hermes-sandbox/events"
import { Sessions } from "@hermes-sandbox/core/Session"
import {
  createExecutor,
  createSession,
  DockerSessions,
  openHermesSandbox,
  openPersistent,
  type SandboxSession
} from "@hermes-sandbox/docker"
import { containerExists, docker, waitFor } from "./support/docker.js"
import { fixtureCommand } from "./support/nodeFixture.js"
import { firstLine, sessionTracker } from "./support/sessions.js"

/** test/support/sessionChild.ts as a process of its own, on the packages' build. */
const sessionChild = fixtureCommand(new URL("./support/sessionChild.ts", import.meta.url).pathname)

const run = promisify(execFile)
const { track, trackName, removeTracked } = sessionTracker()
afterEach(removeTracked)
afterAll(removeTracked)

const collect = (s: SandboxSession) => {
  const events: Array<EventEnvelope> = []
  const sub = s.events$.subscribe((e) => events.push(e))
  return { events, stop: () => sub.unsubscribe() }
}
const runId = `${process.pid}-${Date.now().toString(36)}`

describe("sessions on the real engine", () => {
  // State carried between calls (also after exit N), snippets, close and the journal: the sessions contract.
  it("the session shell is bash: relative cd, multi-line values, argv commands, stdin, pipes, unset is carried; snippet files land in the current directory", async () => {
    const s = track(await createSession())
    await s.run('mkdir -p /tmp/proj/sub && cd /tmp/proj && export GREETING="hello world" MULTI="a\nb"; echo started')
    const second = await s.run('cd sub; echo "$PWD|$GREETING"; exit 3')
    expect(second).toMatchObject({ exitCode: 3, stdout: "/tmp/proj/sub|hello world\n" })
    expect((await s.run('printf "%s|%s" "$PWD" "$MULTI"')).stdout).toBe("/tmp/proj/sub|a\nb")
    expect((await s.run(["pwd"])).stdout).toBe("/tmp/proj/sub\n")
    const py = await s.runCode({
      language: "python",
      code: "import os\nprint(os.getcwd(), os.environ['GREETING'], open('data.txt').read())",
      files: { "data.txt": "from files" }
    })
    expect(py).toMatchObject({ exitCode: 0, stdout: "/tmp/proj/sub hello world from files\n" })
    expect((await s.run("cat data.txt")).stdout).toBe("from files")
    expect((await s.run("cat", { stdin: "piped in" })).stdout).toBe("piped in")
    expect((await s.run("echo $((6*7)) | tr 4 X")).stdout).toBe("X2\n")
    const unset = await s.run("unset GREETING; echo ${GREETING-gone}")
    expect(unset.stdout).toBe("gone\n")
    expect((await s.run("echo ${GREETING-gone}")).stdout).toBe("gone\n")
    await s.close()
    // The facade's promise rejects with the typed error itself.
    await expect(s.run("echo again")).rejects.toMatchObject({ _tag: "SessionEnded" })
  })

  it("runs with the same hardening as one-shot sandboxes, the supervisor holding it as PID 1", async () => {
    const s = track(await createSession({ memory: "256m", pidsLimit: 64 }))
    const info = await docker.getContainer(s.containerName).inspect()
    expect(info.Config.Cmd).toEqual(["/opt/hermes/hermes-run", "--hold"])
    expect(info.Config.User).toBe("1001:1001")
    expect(info.HostConfig.ReadonlyRootfs).toBe(true)
    expect(info.HostConfig.CapDrop).toEqual(["ALL"])
    expect(info.HostConfig.Init).toBe(false)
    expect(info.HostConfig.NetworkMode).toBe("none")
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024)
    expect(info.HostConfig.PidsLimit).toBe(64)
    expect(info.HostConfig.SecurityOpt?.some((o: string) => o.startsWith("no-new-privileges"))).toBe(true)
    expect(info.HostConfig.SecurityOpt?.some((o: string) => o.startsWith("seccomp="))).toBe(true)
    expect(info.Config.Labels?.["org.hermes-sandbox.scope"]).toBe("session")
    const probe = await s.run("id -u; touch /etc/x 2>&1 || echo ro-root; ls /sys/class/net")
    expect(probe.stdout).toContain("1001\n")
    expect(probe.stdout).toMatch(/Read-only file system|ro-root/)
    expect(probe.stdout.trim().endsWith("lo")).toBe(true)
    await s.close()
  })

  // Their sandboxes, directories and variables: the sessions contract.
  it("two sessions never share files", async () => {
    const [a, b] = await Promise.all([createSession(), createSession()])
    track(a!)
    track(b!)
    await a!.run("echo secret-of-a > /workspace/a.txt")
    expect((await b!.run("ls /workspace")).stdout).toBe("")
    expect((await a!.run("cat /workspace/a.txt")).stdout).toBe("secret-of-a\n")
    await Promise.all([a!.close(), b!.close()])
  })

  // Order, no crossed cd or variables, no overlap in time: the sessions contract.
  it("serializes parallel calls: no lost update of the sandbox's files", async () => {
    const s = track(await createSession())
    await s.run("echo 0 > /workspace/counter")
    const n = 8
    await Promise.all(
      Array.from({ length: n }, () =>
        s.run("x=$(cat /workspace/counter); sleep 0.05; echo $((x+1)) > /workspace/counter")
      )
    )
    expect((await s.run("cat /workspace/counter")).stdout).toBe(`${n}\n`)
    await s.close()
  })

  // The deadline's result (137, timedOut, output so far, in time) and the session going on: the sessions contract.
  it("the host-side deadline kills the command and its children; background jobs do not hold a call", async () => {
    const s = track(await createSession({ timeoutMs: 1_500 }))
    const r = await s.run("(sleep 300 &) ; setsid sleep 301 & echo started; sleep 299")
    expect(r.timedOut).toBe(true)
    // Its own deadline: the session's 1.5 s is for the call above, and a loaded machine can take that long for ps.
    const ps = await s.run("ps -eo comm,args | grep -c '[s]leep 29[9]\\|[s]leep 30[01]' || true", { timeoutMs: 20_000 })
    expect(ps).toMatchObject({ timedOut: false })
    expect(ps.stdout.trim()).toBe("0")
    // A call that waited for its background job would time out (the job outlives the deadline);
    // it returns when its shell does, and the leftover job is killed with the call (one trust domain per call).
    const started = await s.run("sleep 297 & echo bg", { timeoutMs: 20_000 })
    expect(started).toMatchObject({ stdout: "bg\n", timedOut: false, exitCode: 0 })
    const next = await s.run("echo next; ps -eo args | grep -c '[s]leep 297' || true")
    expect(next.stdout).toBe("next\n0\n")
    await s.close()
  })

  it("a timed-out call holding every pid is still killed from inside (the supervisor's killer needs no new process); the session goes on", async () => {
    const s = track(await createSession())
    // Threads count against the pids limit: take them all and keep them, so nothing new can fork in
    // the sandbox. An exec's first process still joins (pids.max limits forks, not joins): the killer
    // is one process that forks nothing.
    const hog = [
      "import threading, time",
      "n = 0",
      "try:",
      "    while True:",
      "        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()",
      "        n += 1",
      "except RuntimeError:",
      "    pass",
      "print('holding', n, flush=True)",
      "time.sleep(3600)"
    ].join("\n")
    const r = await s.run(["python3", "-c", hog], { timeoutMs: 3_000 })
    expect(r).toMatchObject({ timedOut: true, exitCode: 137 })
    expect(r.stdout).toMatch(/^holding \d+\n$/)
    const after = await s.run("echo after; ps -eo args | grep -c '[t]hreading' || true")
    expect(after.stdout).toBe("after\n0\n")
    await s.close()
  }, 60_000)

  it("a timed-out call that cannot be reached inside (the sandbox is frozen: no exec starts) kills the sandbox and ends the session", async () => {
    const s = track(await createSession())
    const call = s.run("sleep 100", { timeoutMs: 3_000 })
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    await docker.getContainer(s.containerName).pause()
    const r = await call
    expect(r).toMatchObject({ timedOut: true, exitCode: 137 })
    await expect(s.run("echo after")).rejects.toMatchObject({
      _tag: "SessionEnded",
      reason: "a timed-out command could not be killed inside; the sandbox was killed"
    })
    expect(await waitFor(async () => !(await containerExists(s.containerName)), 15_000)).toBe(true)
    await s.close()
  }, 60_000)

  it("an abort signal kills the call's processes; the session goes on", async () => {
    const s = track(await createSession())
    const controller = new AbortController()
    setTimeout(() => controller.abort("enough"), 500)
    await expect(s.run("sleep 123", { signal: controller.signal })).rejects.toMatchObject({
      _tag: "ExecutionAborted",
      reason: "enough"
    })
    expect((await s.run("ps -eo args | grep -c '[s]leep 123' || true")).stdout.trim()).toBe("0")
    await s.close()
  })

  it("a session whose owner process is SIGKILLed is removed while running (watchdog); the next start's sweep closes its journal streams", async () => {
    const journalDir = mkdtempSync(join(tmpdir(), "hs-kill-"))
    const journalPath = join(journalDir, "journal.sqlite")
    const child = spawn(sessionChild[0]!, [...sessionChild.slice(1), "session", journalPath], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const line = await firstLine(child)
    const { containerName } = JSON.parse(line) as { containerName: string }
    trackName(containerName)
    expect((await docker.getContainer(containerName).inspect()).State.Running).toBe(true)
    child.kill("SIGKILL")
    expect(await waitFor(async () => !(await containerExists(containerName)), 15_000)).toBe(true)
    await new Promise((r) => setTimeout(r, 200))
    // A new process on the same journal: its startup sweep closes the dead owner's session stream.
    const sessionId = containerName.slice("hermes-sandbox-".length)
    const types = await Effect.runPromise(
      Effect.gen(function* () {
        yield* Sessions
        const journal = yield* Journal.Journal
        return yield* journal.read({ streamId: sessionId }).pipe(
          Stream.map((e) => e.type),
          Stream.runCollect
        )
      }).pipe(
        Effect.scoped,
        Effect.provide(
          DockerSessions.layer({ watchdog: false, reapOnStart: false }).pipe(
            Layer.provideMerge(SqliteJournal.layer({ path: journalPath }))
          )
        )
      )
    )
    expect([...types]).toEqual([
      "SessionOpened",
      "ContainerCreated",
      "ContainerStarted",
      "ContainerDestroyed",
      "SessionClosed"
    ])
    rmSync(journalDir, { recursive: true, force: true })
  })

  // The Docker socket and / given as mounts: the sessions contract.
  it("refuses a Hermes configuration that mounts the Docker socket", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hs-sock-"))
    try {
      writeFileSync(
        join(dir, "config.yaml"),
        "terminal:\n  backend: docker\n  docker_volumes:\n    - /var/run/docker.sock:/var/run/docker.sock\n"
      )
      await expect(createSession({ hermesConfig: { path: join(dir, "config.yaml"), env: {} } })).rejects.toMatchObject({
        _tag: "HermesConfigError",
        key: "docker_volumes"
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("Hermes configuration: mounts and forwarded secrets", () => {
  const secret = `hs-secret-${Math.random().toString(36).slice(2)}-value`
  const dir = mkdtempSync(join(tmpdir(), "hs-hermes-"))
  const ro = join(dir, "ro")
  const rw = join(dir, "rw")
  mkdirSync(ro)
  mkdirSync(rw)
  chmodSync(rw, 0o777)
  writeFileSync(join(ro, "readme.txt"), "read me")
  writeFileSync(join(dir, ".env"), `FROM_DOTENV=${secret}-dotenv\n`)
  const config = join(dir, "config.yaml")
  writeFileSync(
    config,
    [
      "terminal:",
      "  backend: docker",
      "  docker_volumes:",
      `    - "${ro}:/data"`,
      `    - "${rw}:/out:rw"`,
      '  docker_forward_env: ["HS_TEST_TOKEN", "FROM_DOTENV"]',
      "  docker_env: { PLAIN_SETTING: visible }",
      "  container_memory: 256",
      "  container_persistent: false",
      "  lifetime_seconds: 300",
      ""
    ].join("\n")
  )
  const hermesConfig = { path: config, env: { HS_TEST_TOKEN: secret } }
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it("mounts are read-only unless :rw", async () => {
    const s = track(await createSession({ hermesConfig }))
    expect((await s.run("cat /data/readme.txt")).stdout).toBe("read me")
    const denied = await s.run("echo x > /data/new.txt")
    expect(denied.exitCode).not.toBe(0)
    expect(denied.stderr).toMatch(/Read-only file system/)
    const ok = await s.run("echo written > /out/new.txt && cat /out/new.txt")
    expect(ok).toMatchObject({ exitCode: 0, stdout: "written\n" })
    expect(readFileSync(join(rw, "new.txt"), "utf8")).toBe("written\n")
    const mounts = (await docker.getContainer(s.containerName).inspect()).Mounts
    expect(mounts.find((m) => m.Destination === "/data")?.RW).toBe(false)
    expect(mounts.find((m) => m.Destination === "/out")?.RW).toBe(true)
    await s.close()
  })

  it("forwarded values reach the command by NAME and appear nowhere else: not in docker inspect, process args, the journal or results", async () => {
    const journalPath = join(dir, "journal.sqlite")
    const s = track(await createSession({ hermesConfig, journal: { path: journalPath } }))
    const seen = collect(s)
    const used = await s.run(
      'test "$HS_TEST_TOKEN" = "$EXPECTED" && test -n "$FROM_DOTENV" && echo "present $PLAIN_SETTING"',
      { env: { EXPECTED: secret } }
    )
    expect(used).toMatchObject({ exitCode: 0, stdout: "present visible\n" })
    // The shell's own argv (what ps shows) names the variables but holds no value.
    const argv = await s.run("tr '\\0' ' ' < /proc/$$/cmdline; echo; cat /proc/1/cmdline | tr '\\0' ' '")
    expect(argv.stdout).toContain("HS_TEST_TOKEN")
    expect(argv.stdout).not.toContain(secret)
    // Not saved in the shell's carried state either.
    expect((await s.run("cat /tmp/.hermes-session/env")).stdout).not.toContain(secret)
    const code = await s.runCode({ language: "python", code: "import os\nprint(len(os.environ['HS_TEST_TOKEN']))" })
    expect(code.stdout).toBe(`${secret.length}\n`)

    const info = await docker.getContainer(s.containerName).inspect()
    const inspected = JSON.stringify(info)
    expect(inspected).not.toContain(secret)
    expect(JSON.stringify(info.Config.Cmd)).not.toContain(secret)
    expect(JSON.stringify(info.Args)).not.toContain(secret)
    // Values travel with each exec only: the container's own environment has neither value nor name.
    expect(info.Config.Env?.some((e) => e.startsWith("HS_TEST_TOKEN="))).toBe(false)
    for (const r of [used, argv, code]) expect(JSON.stringify(r)).not.toContain(secret)
    await s.close()
    seen.stop()
    expect(JSON.stringify(seen.events)).not.toContain(secret)
    expect(readFileSync(journalPath).includes(Buffer.from(secret))).toBe(false)
  })

  it("one-shot: forwarded values are in the container's Config.Env (where Docker keeps env), never in Cmd/Args; volumes are refused", async () => {
    await expect(createExecutor({ hermesConfig })).rejects.toMatchObject({
      _tag: "HermesConfigError",
      key: "docker_volumes"
    })
    const noVolumes = join(dir, "oneshot.yaml")
    writeFileSync(noVolumes, "terminal:\n  backend: docker\n  docker_forward_env: [HS_TEST_TOKEN]\n  timeout: 20\n")
    const executor = await createExecutor({
      hermesConfig: { path: noVolumes, env: { HS_TEST_TOKEN: secret } },
      awaitRemoval: true
    })
    try {
      const events: Array<EventEnvelope> = []
      let inspected: Promise<{ Cmd: unknown; Args: unknown; Env: ReadonlyArray<string> }> | undefined
      const sub = executor.events$.subscribe((e) => {
        events.push(e)
        if (e.type === "ContainerStarted") {
          const name = events.find((x) => x.type === "ContainerCreated" && x.streamId === e.streamId)
          if (name?.type === "ContainerCreated") {
            inspected = docker
              .getContainer(name.data.containerName)
              .inspect()
              .then((i) => ({ Cmd: i.Config.Cmd, Args: i.Args, Env: i.Config.Env ?? [] }))
          }
        }
      })
      const r = await executor.executeCode({
        language: "bash",
        code: 'sleep 1; test -n "$HS_TEST_TOKEN" && echo present'
      })
      sub.unsubscribe()
      expect(r.stdout).toBe("present\n")
      expect(JSON.stringify(r)).not.toContain(secret)
      expect(JSON.stringify(events)).not.toContain(secret)
      const container = await inspected!
      expect(JSON.stringify(container.Cmd)).not.toContain(secret)
      expect(JSON.stringify(container.Args)).not.toContain(secret)
      // Documented: a one-shot container's environment is in Config.Env.
      expect(container.Env).toContain(`HS_TEST_TOKEN=${secret}`)
    } finally {
      await executor.close()
    }
  })

  it("openHermesSandbox honours container_persistent: false -> a session with the config's limits", async () => {
    const h = await openHermesSandbox({ hermesConfig })
    expect(h.scope).toBe("session")
    if (h.scope !== "oneShot") {
      track(h.session)
      const info = await docker.getContainer(h.session.containerName).inspect()
      expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024)
      expect(info.Config.Labels?.["org.hermes-sandbox.idle-seconds"]).toBe("300")
    }
    await h.close()
  })
})

describe("persistent sandboxes on the real engine", () => {
  it("a new process finds the sandbox again by its labels within milliseconds, with its state", async () => {
    const profile = `e2e-${runId}`
    const first = track(await openPersistent({ profile, memory: "256m" }))
    expect(first.reconnected).toBe(false)
    await first.run("cd /tmp && export CARRIED=yes && touch /tmp/installed-package")
    await first.close()
    expect(await containerExists(first.containerName)).toBe(true)

    // In this process, through a fresh facade (new engine connection, sweep, lookup).
    const t0 = performance.now()
    const again = track(await openPersistent({ profile, memory: "256m" }))
    const facadeMs = performance.now() - t0
    expect(again).toMatchObject({ reconnected: true, containerName: first.containerName, sessionId: first.sessionId })
    expect((await again.run('printf "%s|%s|" "$PWD" "$CARRIED"; ls /tmp/installed-package')).stdout).toBe(
      "/tmp|yes|/tmp/installed-package\n"
    )
    await again.close()

    // The lookup itself, on a warm service: list by labels + bookkeeping.
    const lookups: Array<number> = []
    await Effect.runPromise(
      Effect.gen(function* () {
        const sessions = yield* Sessions
        for (let i = 0; i < 5; i++) {
          const t = performance.now()
          const s = yield* sessions.openPersistent({ profile, memory: "256m" })
          lookups.push(performance.now() - t)
          expect(s.reconnected).toBe(true)
          yield* s.close
        }
      }).pipe(
        Effect.scoped,
        Effect.provide(
          DockerSessions.layer({ watchdog: false, reapOnStart: false }).pipe(Layer.provide(MemoryJournal.layer()))
        )
      )
    )

    // In a NEW process (a restart).
    const { stdout } = await run(sessionChild[0]!, [...sessionChild.slice(1), "persistent", profile, "256m"], {
      timeout: 60_000
    })
    const child = JSON.parse(stdout.trim().split("\n").pop()!) as {
      reconnected: boolean
      containerName: string
      openMs: number
      firstCallMs: number
      state: string
    }
    expect(child).toMatchObject({ reconnected: true, containerName: first.containerName, state: "/tmp|yes" })

    const median = [...lookups].sort((a, b) => a - b)[2]!
    console.log(
      `persistent reconnect: lookup on a warm service median ${median.toFixed(1)} ms (${lookups.map((x) => x.toFixed(1)).join(", ")}); ` +
        `fresh facade in-process ${facadeMs.toFixed(0)} ms; new process openPersistent ${child.openMs.toFixed(0)} ms, first call ${child.firstCallMs.toFixed(0)} ms`
    )
    expect(median).toBeLessThan(200)

    const last = track(await openPersistent({ profile, memory: "256m" }))
    await last.destroy()
    expect(await containerExists(first.containerName)).toBe(false)
  }, 120_000)

  it("two handles on one persistent sandbox (as two processes hold it) never run calls at the same time: no lost update", async () => {
    // Each facade serializes its own calls; across handles only the in-sandbox lock (flock on the
    // session's state dir) does. Read-modify-write with a pause in between loses updates otherwise.
    const profile = `e2e-lock-${runId}`
    const a = track(await openPersistent({ profile }))
    const b = track(await openPersistent({ profile }))
    expect(b).toMatchObject({ reconnected: true, containerName: a.containerName })
    await a.run("echo 0 > /workspace/counter")
    const perHandle = 4
    const bump = (s: SandboxSession, tag: string) =>
      Array.from({ length: perHandle }, (_, i) =>
        s.run(`x=$(cat /workspace/counter); sleep 0.2; echo $((x+1)) > /workspace/counter; echo ${tag}${i}`)
      )
    const results = await Promise.all([...bump(a, "a"), ...bump(b, "b")])
    expect(results.every((r) => r.exitCode === 0)).toBe(true)
    expect((await b.run("cat /workspace/counter")).stdout).toBe(`${2 * perHandle}\n`)
    await a.close()
    await b.destroy()
  }, 120_000)

  it("an exited persistent sandbox (engine restart) is started again on reconnect", async () => {
    const profile = `e2e-restart-${runId}`
    const p = track(await openPersistent({ profile }))
    await p.close()
    await docker.getContainer(p.containerName).kill()
    const again = track(await openPersistent({ profile }))
    expect(again.reconnected).toBe(true)
    expect((await again.run("echo alive")).stdout).toBe("alive\n")
    await again.destroy()
  }, 30_000)
})
