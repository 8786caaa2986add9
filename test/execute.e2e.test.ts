/**
 * The product's main path on the real engine: one request, one hardened
 * single-use container, removed on every path. What the fake shows too (output,
 * deadlines, OOM, interruption, close, invalid requests, the queue, lifecycle,
 * stdin, files, the output cap) is the executor contract
 * (test/executor-contract.docker.test.ts); here: languages, hardening, outside
 * kills, images, the engine, and the Promise facade (AbortSignal, events$, stats,
 * await using).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import { startSleeper, testExecutor as createExecutor } from "./support/executor.js"
import Docker from "dockerode"
import { lastValueFrom, toArray } from "rxjs"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { containerExists, sandboxContainers, waitFor } from "./support/docker.js"

const run = promisify(execFile)

describe("executeCode on the real engine", () => {
  let executor: SandboxExecutor
  beforeAll(async () => {
    executor = await createExecutor({ timeoutMs: 20_000, maxConcurrency: 8, awaitRemoval: true })
  })
  afterAll(async () => {
    await executor.close()
  })

  it("runs javascript and bash, and feeds stdin", async () => {
    const js = await executor.executeCode({
      language: "javascript",
      code: "console.log([1,2,3].map(x => x * 2).join(','))"
    })
    expect(js.stdout).toBe("2,4,6\n")
    const sh = await executor.executeCode({
      language: "bash",
      code: 'read name; echo "hello $name"; echo oops >&2; exit 4',
      stdin: "agent\n"
    })
    expect(sh).toMatchObject({ exitCode: 4, stdout: "hello agent\n", stderr: "oops\n" })
    const py = await executor.executeCode({
      language: "python",
      code: "import sys\nprint(sys.stdin.read().upper())",
      stdin: "from stdin"
    })
    expect(py.stdout).toBe("FROM STDIN\n")
  })

  it("reports a non-zero exit and an exception as a result, not an error", async () => {
    const r = await executor.executeCode({ language: "python", code: "raise ValueError('boom')" })
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toContain("ValueError: boom")
  })

  it("runs with the seeds' defaults: uid/gid 1001, /workspace, no network, 512 MiB (no extra swap), 256 pids, 1 CPU", async () => {
    const code = [
      "import os",
      "print(os.getuid(), os.getgid(), os.getcwd())",
      "print(sorted(os.listdir('/sys/class/net')))",
      "def rd(p):",
      "    try: return open(p).read().strip()",
      "    except Exception as e: return 'n/a'",
      "print(rd('/sys/fs/cgroup/memory/memory.limit_in_bytes'), rd('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes'))",
      "print(rd('/sys/fs/cgroup/pids/pids.max'))",
      "print(rd('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'), rd('/sys/fs/cgroup/cpu/cpu.cfs_period_us'))"
    ].join("\n")
    const r = await executor.executeCode({ language: "python", code })
    const [ids, nets, mem, pids, cpu] = r.stdout.trim().split("\n")
    expect(ids).toBe("1001 1001 /workspace")
    expect(nets).toBe("['lo']")
    const [limit, memsw] = (mem ?? "").split(" ")
    expect(Number(limit)).toBe(512 * 1024 * 1024)
    // memsw is only present when the host enables swap accounting; when present it equals the limit.
    if (memsw !== "n/a") expect(Number(memsw)).toBe(512 * 1024 * 1024)
    expect(pids).toBe("256")
    const [quota, period] = (cpu ?? "").split(" ").map(Number)
    expect(quota! / period!).toBe(1)
  })

  it("applies per-request limits", async () => {
    const r = await executor.executeCode({
      language: "python",
      memory: "128m",
      pidsLimit: 32,
      code: "print(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip(), open('/sys/fs/cgroup/pids/pids.max').read().strip())"
    })
    expect(r.stdout).toBe(`${128 * 1024 * 1024} 32\n`)
  })

  it("runs 20 concurrent executions in 20 distinct containers", async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => executor.executeCode({ language: "python", code: `print(${i})` }))
    )
    expect(new Set(results.map((r) => r.containerName)).size).toBe(20)
    results.forEach((r, i) => {
      expect(r.exitCode).toBe(0)
      expect(r.stdout).toBe(`${i}\n`)
    })
  })

  it("a program that leaves a background sleeper returns at once and leaves nothing running", async () => {
    const t0 = Date.now()
    const r = await executor.executeCode({
      language: "bash",
      code: "(sleep 1000 &) ; nohup sleep 1000 >/dev/null 2>&1 & echo started",
      timeoutMs: 15_000
    })
    expect(r.stdout).toBe("started\n")
    expect(r.timedOut).toBe(false)
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(await containerExists(r.containerName)).toBe(false)
  })

  it("never throws on invalid UTF-8 or binary output", async () => {
    const r = await executor.executeCode({
      language: "python",
      code: "import sys\nsys.stdout.buffer.write(b'ok\\xff\\xfe\\x00\\x80end')"
    })
    expect(r.exitCode).toBe(0)
    expect(r.stdout.startsWith("ok")).toBe(true)
    expect(r.stdout).toContain("\uFFFD")
    expect(r.stdout.endsWith("end")).toBe(true)
  })

  it("delivers 1 MiB of code without touching the host filesystem", async () => {
    const filler = "# " + "x".repeat(1024 * 1024 - 200) + "\n"
    const r = await executor.executeCode({ language: "python", code: `${filler}print(len(open(__file__).read()))` })
    expect(r.exitCode).toBe(0)
    expect(Number(r.stdout.trim())).toBeGreaterThan(1024 * 1024 - 200)
  })

  it("abort mid-run removes the container", async () => {
    const controller = new AbortController()
    const { run, container } = await startSleeper(executor, { signal: controller.signal })
    const seen: Array<{ type: string; streamId: string; data: unknown }> = []
    const sub = executor.events$.subscribe((e) => seen.push(e))
    controller.abort("test abort")
    const error = await run.then(
      () => undefined,
      (e: unknown) => e as { _tag: string; executionId: string; reason: string }
    )
    sub.unsubscribe()
    // The error names the execution (its journal stream) and the journal keeps the abort's reason.
    expect(error).toMatchObject({
      _tag: "ExecutionAborted",
      reason: "test abort",
      executionId: expect.stringMatching(/^[0-9a-f-]{36}$/)
    })
    // (A pooled sandbox keeps its pool name: the journal, not the name, ties it to the execution.)
    expect(seen.find((e) => e.streamId === error!.executionId && e.type === "ExecutionInterrupted")?.data).toEqual({
      reason: "interrupted by the caller: test abort"
    })
    expect(await containerExists(container.name)).toBe(false)
  })

  it("a sandbox killed from outside (docker kill, docker stop) is a typed ContainerFailed, never the program's result", async () => {
    // The supervisor forwards the signal; Python dies of it, and either the supervisor's report (143)
    // or the engine's exit report arrives first: whether that end was the program's own is what the
    // engine's event stream tells, on both paths.
    const docker = new Docker({ socketPath: "/var/run/docker.sock" })
    const killers: Array<[string, (id: string) => Promise<unknown>]> = [
      ["docker kill -s TERM", (id) => docker.getContainer(id).kill({ signal: "SIGTERM" })],
      ["docker stop", (id) => docker.getContainer(id).stop({ t: 1 })]
    ]
    for (const [how, kill] of killers) {
      const { run, container } = await startSleeper(executor)
      // Handled from now on: the run may reject while `docker stop` is still waiting for the exit
      // (an unhandled rejection in between failed a whole CI run).
      const outcome = run.then(
        (result) => ({ resolved: result }),
        (error: unknown) => error
      )
      await kill(container.id)
      expect(await outcome, how).toMatchObject({
        _tag: "ContainerFailed",
        message: expect.stringMatching(
          /killed from outside the SDK \(signal (15|9)(, exit code (143|137)\)|\) while the program ran; the exit code it then reported \((143|137)\))/
        )
      })
    }
  })

  it("a program that traps the outside SIGTERM and exits 0 (the supervisor reports the end) is still a ContainerFailed, not a success", async () => {
    // The supervisor reports the end before the engine's verdict; the engine's event stream has the
    // kill by then (it is logged before the signal is delivered; the program takes 0.3 s to exit).
    const trapping =
      "import signal, sys, time\ndef bye(*_):\n    time.sleep(0.3)\n    print('cleaned up', flush=True)\n    sys.exit(0)\n" +
      "signal.signal(signal.SIGTERM, bye)\nprint('up', flush=True)\ntime.sleep(60)\n"
    const docker = new Docker({ socketPath: "/var/run/docker.sock" })
    const killers: Array<[string, (id: string) => Promise<unknown>]> = [
      ["docker kill -s TERM", (id) => docker.getContainer(id).kill({ signal: "SIGTERM" })],
      ["docker stop", (id) => docker.getContainer(id).stop({ t: 5 })]
    ]
    for (const [how, kill] of killers) {
      const { run, container } = await startSleeper(executor, { code: trapping })
      // Handled from now on: the run may reject while `docker stop` is still waiting for the exit.
      const outcome = run.then(
        (result) => ({ resolved: result }),
        (error: unknown) => error
      )
      await kill(container.id)
      expect(await outcome, how).toMatchObject({
        _tag: "ContainerFailed",
        message: expect.stringMatching(
          /killed from outside the SDK \(signal 15\) while the program ran; the exit code it then reported \(0\)/
        )
      })
      expect(await waitFor(async () => !(await containerExists(container.name)), 10_000), how).toBe(true)
    }
  })

  it("an image without the supervisor (no runner-protocol 2 label) is a typed ContainerFailed naming the image, before any container exists", async () => {
    // The offline base the images are built FROM (scripts/build-images.sh): Debian, no supervisor.
    const suite = /^VERSION_CODENAME=(.*)$/m.exec(readFileSync("/etc/os-release", "utf8"))?.[1] ?? "bookworm"
    const bare = await createExecutor({ images: { python: `hermes-sandbox/base:${suite}` } })
    // This executor's containers only: other files' executors run beside this one, and with a warm
    // pool this executor's pools (of the other languages) fill meanwhile.
    const ours = async () => await sandboxContainers({ executorId: bare.executorId, exceptPooled: true })
    try {
      const before = await ours()
      await expect(bare.executeCode({ language: "python", code: "print(1)" })).rejects.toMatchObject({
        _tag: "ContainerFailed",
        reason: "protocol",
        message: expect.stringMatching(
          /image hermes-sandbox\/base:\w+ does not speak runner protocol 2 .*org\.hermes-sandbox\.runner-protocol/
        )
      })
      expect(await ours()).toEqual(before)
    } finally {
      await bare.close()
    }
  })

  it("an image whose supervisor lacks a feature (its runner-features label) refuses a request that needs it before any container exists; what it has runs", async () => {
    // A throwaway image FROM the python image whose label says its supervisor has no tool calls.
    const tag = `hermes-sandbox-test/no-tools:${process.pid}`
    const dir = mkdtempSync(join(tmpdir(), "hs-no-tools-"))
    writeFileSync(
      join(dir, "Dockerfile"),
      'FROM hermes-sandbox/python:latest\nLABEL org.hermes-sandbox.runner-features="collect,fileops,preload"\n'
    )
    try {
      await run("docker", ["build", "--network", "none", "-q", "-t", tag, dir], { timeout: 120_000 })
      const lacking = await createExecutor({ images: { python: tag } })
      const ours = async () => await sandboxContainers({ executorId: lacking.executorId, exceptPooled: true })
      try {
        const before = await ours()
        const error = await lacking
          .executeCode({ language: "python", code: "print(1)", tools: { one: { handler: () => 1 } } })
          .catch((e: unknown) => e)
        expect(error).toMatchObject({ _tag: "ContainerFailed", reason: "protocol", operation: "create" })
        const message = (error as Error).message
        expect(message).toContain(`image ${tag} has a supervisor without the feature this request needs: tools`)
        expect(message).toContain('says org.hermes-sandbox.runner-features="collect,fileops,preload"')
        expect(message).toContain("hermes-sandbox image build")
        expect(await ours()).toEqual(before)
        const r = await lacking.executeCode({
          language: "python",
          code: "open('a.csv', 'w').write('x,y')",
          collect: ["*.csv"]
        })
        expect(r.files?.map((f) => f.path)).toEqual(["a.csv"])
      } finally {
        await lacking.close()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
      await run("docker", ["rmi", "-f", tag]).catch(() => {})
    }
  }, 180_000)

  it("a missing image is ImageNotFound saying how to get that image (the image build does not make this one)", async () => {
    const error = await executor
      .executeCode({ language: "python", code: "print(1)", image: "hermes-sandbox/missing:0" })
      .catch((e: unknown) => e)
    expect(error).toMatchObject({
      _tag: "ImageNotFound",
      image: "hermes-sandbox/missing:0",
      buildCommand: "docker pull hermes-sandbox/missing:0"
    })
    expect((error as Error).message).toContain("docker build -t hermes-sandbox/missing:0")
  })
})

describe("executor lifecycle on the real engine", () => {
  it("events$ completes once close() has removed every container; stats() reports pending removals apart from running executions", async () => {
    const e = await createExecutor({ awaitRemoval: false })
    const all = lastValueFrom(e.events$.pipe(toArray()))
    const r = await e.executeCode({ language: "python", code: "print(1)" })
    const stats = await e.stats()
    // The result is back: nothing runs; its removal may still be pending (and then holds its slot).
    expect(stats.inFlight).toBe(0)
    expect(stats.removing).toBeLessThanOrEqual(1)
    await e.close()
    const events = await all
    expect(
      events
        .filter((x) => x.streamId === r.executionId)
        .map((x) => x.type)
        .at(-1)
    ).toBe("ContainerDestroyed")
    // Subscribing after close completes at once.
    expect(await lastValueFrom(e.events$.pipe(toArray()))).toEqual([])
  })

  // That close() interrupts every execution and removes every container is in the executor contract.
  it("close() rejects running executions' promises with ExecutionAborted, and later calls with ExecutorClosed", async () => {
    const executor = await createExecutor({ timeoutMs: 60_000 })
    const outcomes: Array<Promise<unknown>> = []
    try {
      for (let i = 0; i < 3; i++) outcomes.push((await startSleeper(executor)).run.catch((e: unknown) => e))
    } finally {
      await executor.close()
    }
    for (const outcome of await Promise.all(outcomes)) expect(outcome).toMatchObject({ _tag: "ExecutionAborted" })
    await expect(executor.executeCode({ language: "python", code: "print(1)" })).rejects.toMatchObject({
      _tag: "ExecutorClosed"
    })
  })

  it("background removal still completes before close() resolves", async () => {
    const executor = await createExecutor({ awaitRemoval: false })
    const results = await Promise.all(
      Array.from({ length: 4 }, () => executor.executeCode({ language: "python", code: "print(1)" }))
    )
    await executor.close()
    for (const r of results) expect(await containerExists(r.containerName)).toBe(false)
  })

  it("await using disposes the executor", async () => {
    let name = ""
    {
      await using executor = await createExecutor({ timeoutMs: 10_000 })
      const r = await executor.executeCode({ language: "python", code: "print(6*7)" })
      expect(r.stdout).toBe("42\n")
      name = r.containerName
    }
    expect(await containerExists(name)).toBe(false)
  })

  it("an unreachable engine is DockerUnavailable within seconds, naming the socket and how to start one", async () => {
    const t0 = Date.now()
    const error = await createExecutor({ socketPath: "/tmp/no-such-docker.sock" }).catch((e: unknown) => e)
    expect(Date.now() - t0).toBeLessThan(5_000)
    expect(error).toMatchObject({ _tag: "DockerUnavailable", endpoint: "unix:///tmp/no-such-docker.sock" })
    expect((error as { hint: string }).hint).toMatch(/systemctl start docker/)
    expect((error as { hint: string }).hint).not.toMatch(/scripts\//)
  })
})
