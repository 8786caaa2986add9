/**
 * How real-engine suites make executors. With HERMES_SANDBOX_TEST_WARM_POOL=N set,
 * every executor keeps a warm pool of N per language, so the same suites prove the
 * pool changes nothing observable (scripts/test.sh runs them both ways).
 */
import { expect } from "vitest"
import { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "@hermes-sandbox/docker"

export const warmPoolSize = Number(process.env.HERMES_SANDBOX_TEST_WARM_POOL ?? "0")
export const poolOn = warmPoolSize > 0

export const testExecutor = (options: CreateExecutorOptions = {}): Promise<SandboxExecutor> =>
  createExecutor(poolOn && options.warmPool === undefined ? { ...options, warmPool: { size: warmPoolSize } } : options)

/**
 * A python execution that prints "up" and sleeps a minute (or `code`); resolves once it printed,
 * with the container it runs in: the one created for it (not pooled) or claimed from the pool (a
 * pool's refill also creates and starts containers, in streams of their own).
 */
export const startSleeper = async (
  executor: SandboxExecutor,
  options: { readonly signal?: AbortSignal; readonly code?: string } = {}
) => {
  const containers: Array<{ readonly name: string; readonly id: string }> = []
  const subscription = executor.events$.subscribe((e) => {
    if ((e.type === "ContainerCreated" && e.data.pooled !== true) || e.type === "ContainerClaimed") {
      containers.push({ name: e.data.containerName, id: e.data.containerId })
    }
  })
  let running!: () => void
  const up = new Promise<void>((resolve) => (running = resolve))
  const run = executor.executeCode(
    { language: "python", code: options.code ?? "import time\nprint('up', flush=True)\ntime.sleep(60)" },
    { ...(options.signal === undefined ? {} : { signal: options.signal }), onStdout: () => running() }
  )
  await up
  subscription.unsubscribe()
  expect(containers).toHaveLength(1)
  return { run, container: containers[0]! }
}
