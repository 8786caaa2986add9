/**
 * How real-engine suites make executors. With HERMES_SANDBOX_TEST_WARM_POOL=N set,
 * every executor keeps a warm pool of N per language, so the same suites prove the
 * pool changes nothing observable (scripts/test.sh runs them both ways).
 */
import { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "@hermes-sandbox/docker"

export const warmPoolSize = Number(process.env.HERMES_SANDBOX_TEST_WARM_POOL ?? "0")
export const poolOn = warmPoolSize > 0

export const testExecutor = (options: CreateExecutorOptions = {}): Promise<SandboxExecutor> =>
  createExecutor(poolOn && options.warmPool === undefined ? { ...options, warmPool: { size: warmPoolSize } } : options)
