/**
 * Shared pieces of the hostile-program suite (test/hostile/*.test.ts).
 *
 * Every hostile program runs on the REAL engine through the public Promise API
 * (`createExecutor` from "@hermes-sandbox/docker"), once per OCI runtime that the
 * engine has registered: runc always, gVisor's runsc when present. Programs report
 * what they saw as `key value...` lines on stdout (see `facts`), and every test
 * asserts both the program's observations and how the SDK classified the end
 * (`exitCode` / `timedOut` / `oomKilled`).
 *
 * Each file's executor records the names of the containers it created, so the
 * file can prove at the end that none is left and that the engine still runs
 * `print(1)`, without being confused by other suites' containers.
 */
import { readdirSync, readFileSync } from "node:fs"
import { afterAll, beforeAll, expect } from "vitest"
import type { ExecuteRequest, ExecutionResult } from "@hermes-sandbox/core"
import type { CreateExecutorOptions, SandboxExecutor } from "@hermes-sandbox/docker"
import { testExecutor } from "../support/executor.js"
import { containerExists, docker, waitFor } from "../support/docker.js"

export type RuntimeName = "runc" | "runsc"

/** The runtimes this engine can run: runc, plus runsc (gVisor) when registered. */
export const availableRuntimes = async (): Promise<ReadonlyArray<RuntimeName>> => {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> }
  const registered = Object.keys(info.Runtimes ?? {})
  return registered.includes("runsc") ? ["runc", "runsc"] : ["runc"]
}

export const RUNTIMES = await availableRuntimes()
if (!RUNTIMES.includes("runsc")) {
  // Visible in the run's output; the gVisor half of the suite is skipped, not failed.
  console.warn("hostile suite: runtime runsc (gVisor) is not registered with the engine; only runc is exercised")
}

export interface Outcome {
  readonly exitCode: number
  readonly timedOut: boolean
  readonly oomKilled: boolean
}

/** The classification the SDK gave the run, with the output tails in the failure message. */
export const expectOutcome = (r: ExecutionResult, expected: Outcome): void => {
  expect(
    { exitCode: r.exitCode, timedOut: r.timedOut, oomKilled: r.oomKilled },
    `classification of ${r.containerName}\n--- stdout (tail)\n${r.stdout.slice(-1500)}\n--- stderr (tail)\n${r.stderr.slice(-1500)}`
  ).toEqual(expected)
}

/** An ordinary end: exit code as given, neither timed out nor OOM-killed. */
export const exited = (exitCode: number): Outcome => ({ exitCode, timedOut: false, oomKilled: false })
/** Killed by the host-side deadline. */
export const TIMED_OUT: Outcome = { exitCode: 137, timedOut: true, oomKilled: false }
/** Killed by the kernel's OOM killer inside the sandbox's memory cgroup. */
export const OOM_KILLED: Outcome = { exitCode: 137, timedOut: false, oomKilled: true }

/** `key value...` lines printed by a hostile program, as a map (later lines win). */
export const facts = (stdout: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const line of stdout.split("\n")) {
    const m = /^([A-Za-z0-9_./-]+) ?(.*)$/.exec(line)
    if (m) out[m[1]!] = m[2]!
  }
  return out
}

/** Host processes whose command line contains `needle` (this suite runs on the engine's host). */
export const hostProcessesMatching = (needle: string): Array<string> => {
  const found: Array<string> = []
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim()
      if (cmdline.includes(needle)) found.push(`${pid}: ${cmdline.slice(0, 200)}`)
    } catch {
      // the process ended while we looked
    }
  }
  return found
}

export interface HostileExecutor {
  readonly runtime: RuntimeName
  readonly executor: SandboxExecutor
  /** Names and ids of every container this executor created. */
  readonly created: Array<{ name: string; id: string }>
  run(request: ExecuteRequest): Promise<ExecutionResult>
  /**
   * The engine still runs an ordinary program (unless `healthCheck: false`, for an executor whose
   * options make every run fail), then every container created here is gone. Closes the executor.
   */
  finish(options?: { readonly healthCheck?: boolean }): Promise<void>
}

/**
 * An executor for one runtime with the product's defaults (only what a test needs is
 * overridden) and removal awaited before each result, so "the container is gone" can be
 * checked right after `run` returns.
 */
export const hostileExecutor = async (
  runtime: RuntimeName,
  options: CreateExecutorOptions = {}
): Promise<HostileExecutor> =>
  // testExecutor: with HERMES_SANDBOX_TEST_WARM_POOL set, the same programs meet warm sandboxes.
  hostileOver(
    await testExecutor({ timeoutMs: 30_000, maxConcurrency: 4, awaitRemoval: true, ...options, runtime }),
    runtime,
    async (created) => {
      for (const { name, id } of created) {
        expect(await containerExists(name), `${name} is still on the engine`).toBe(false)
        // Nothing of the sandbox survives on the host: no runc shim, no gVisor sandbox process.
        expect(
          await waitFor(async () => hostProcessesMatching(id).length === 0, 10_000),
          hostProcessesMatching(id).join("\n")
        ).toBe(true)
      }
    }
  )

/**
 * A HostileExecutor over any executor (the engine's, or a cluster's: test/support/kubernetes.ts):
 * it records the sandboxes created, and `finish` runs the health check, closes the executor and
 * hands what was created to `checkGone`.
 */
export const hostileOver = (
  executor: SandboxExecutor,
  runtime: RuntimeName,
  checkGone: (created: ReadonlyArray<{ name: string; id: string }>) => Promise<void>
): HostileExecutor => {
  const created: Array<{ name: string; id: string }> = []
  const subscription = executor.events$.subscribe((e) => {
    if (e.type === "ContainerCreated") created.push({ name: e.data.containerName, id: e.data.containerId })
  })
  return {
    runtime,
    executor,
    created,
    run: (request) => executor.executeCode(request),
    finish: async ({ healthCheck = true } = {}) => {
      try {
        if (healthCheck) {
          const health = await executor.executeCode({ language: "python", code: "print(1)" })
          expect(health.stdout).toBe("1\n")
          expectOutcome(health, exited(0))
        }
      } finally {
        await executor.close()
        subscription.unsubscribe()
      }
      await checkGone(created)
    }
  }
}

/** The content's SHA-256 as hex, or undefined when the host file cannot be read. */
export const hostFileSha256 = async (path: string): Promise<string | undefined> => {
  const { createHash } = await import("node:crypto")
  try {
    return createHash("sha256").update(readFileSync(path)).digest("hex")
  } catch {
    return undefined
  }
}

export const MiB = 1024 * 1024

/**
 * One executor for a describe block: made before its tests, finished (health check, nothing
 * left behind) after them. Returns a handle that forwards to it once it exists.
 */
export const useHostileExecutor = (runtime: RuntimeName, options: CreateExecutorOptions = {}): HostileExecutor => {
  let current: HostileExecutor | undefined
  const get = (): HostileExecutor => {
    if (current === undefined) throw new Error("the hostile executor is used before beforeAll made it")
    return current
  }
  beforeAll(async () => {
    current = await hostileExecutor(runtime, options)
  })
  afterAll(async () => {
    await current?.finish()
  })
  return {
    runtime,
    get executor() {
      return get().executor
    },
    get created() {
      return get().created
    },
    run: (request) => get().run(request),
    finish: (finishOptions) => get().finish(finishOptions)
  }
}
