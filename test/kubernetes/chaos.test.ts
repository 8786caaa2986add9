/**
 * The node's components SIGKILLed mid-run (scripts/kubernetes-local.sh kill|start): the kubelet,
 * then containerd. While one is down, the pod's status and stream stop; the host-side deadline is
 * the authority, so the run ends there as timed out, with the output it had before the fault, and
 * its pod is deleted. Once the component is back, neither the pod nor any process of it is left
 * (the pod object is gone at once; the kubelet kills the containers of a pod it no longer knows).
 *
 * Its own project, `cluster-chaos`, in the first group of the run (vitest.config.ts): no other file
 * uses the cluster while a component is down, and every other file waits for it, so its bounds are
 * tight.
 */
import { execFile } from "node:child_process"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"
import { podsLeft, runtimeOptions } from "../support/kubernetes.js"

const run = promisify(execFile)
const root = new URL("../..", import.meta.url).pathname
const state = dirname(process.env["HERMES_SANDBOX_TEST_K8S_ADMIN"]!)
const socket = join(state, "containerd", "containerd.sock")

const component = (what: "kill" | "start", name: string) =>
  run("bash", [join(root, "scripts/kubernetes-local.sh"), what, name], {
    cwd: root,
    env: { ...process.env, HERMES_K8S_STATE: state },
    timeout: 120_000
  })

/** The pod's processes as containerd sees them: its containers' tasks that are running. */
const runningTasksOf = async (pod: string): Promise<Array<string>> => {
  const ctr = (...args: Array<string>) =>
    run("ctr", ["-a", socket, "-n", "k8s.io", ...args], { timeout: 20_000 }).then((r) => r.stdout)
  const ids = (await ctr("containers", "ls", "-q", `labels."io.kubernetes.pod.name"==${pod}`))
    .split("\n")
    .filter((l) => l !== "")
  const tasks = (await ctr("tasks", "ls"))
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
  return tasks.filter(([id, , status]) => ids.includes(id!) && status === "RUNNING").map(([id]) => id!)
}

const until = async (what: string, check: () => Promise<boolean>, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

describe("the node's components killed mid-run", () => {
  for (const name of ["kubelet", "containerd"] as const)
    it(`${name} SIGKILLed mid-run: the deadline ends the run with the output before the fault; once ${name} is back, no pod and no process of it is left`, async () => {
      const timeoutMs = 10_000
      const executor: SandboxExecutor = await createExecutor({
        timeoutMs,
        cpus: 0.25,
        awaitRemoval: true,
        runtime: { kubernetes: runtimeOptions() }
      })
      let down = false
      try {
        let started!: () => void
        const running = new Promise<void>((resolve) => (started = resolve))
        const execution = executor
          .executeCode(
            { language: "python", code: "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(1)\n" },
            { onStdout: () => started() }
          )
          .then(
            (result) => ({ result }),
            (error: unknown) => ({ error })
          )
        // Started (its first output), or over before that: then the outcome below says why.
        await Promise.race([running, execution])
        const t0 = Date.now()
        await component("kill", name)
        down = true
        const outcome = await execution
        const tookMs = Date.now() - t0
        console.log(`${name} killed mid-run: ${JSON.stringify(outcome).slice(0, 300)} after ${tookMs} ms`)
        // The deadline is the authority: the run ends there, never later, and keeps what came before.
        expect(tookMs).toBeLessThan(timeoutMs + 20_000)
        expect("result" in outcome, "a result, not an error").toBe(true)
        const { result } = outcome as { result: Awaited<ReturnType<SandboxExecutor["executeCode"]>> }
        expect(result).toMatchObject({ timedOut: true, exitCode: 137, stdout: "started\n" })
        // Deleted with grace 0 at the deadline: the pod object is gone even while the node is deaf.
        expect(await podsLeft()).not.toContain(result.containerName)
        // ...but its processes live on until a kubelet acts (SECURITY.md: "gone" is the pod object).
        if (name === "kubelet") expect((await runningTasksOf(result.containerName)).length).toBeGreaterThan(0)

        await component("start", name)
        down = false
        // The kubelet, back or never gone, kills the containers of a pod it no longer knows.
        await until(
          `no process of ${result.containerName} left`,
          async () => (await runningTasksOf(result.containerName)).length === 0,
          90_000
        )
      } finally {
        if (down) await component("start", name)
        await executor.close()
      }
    }, 150_000)
})
