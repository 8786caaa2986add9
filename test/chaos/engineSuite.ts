/**
 * A suite on an engine of its own (a PrivateEngine or a RootlessEngine): started with python's
 * image before the suite; afterwards every executor it opened is closed (bounded), then the
 * engine is destroyed.
 */
import { afterAll, beforeAll } from "vitest"
import { createExecutor, type CreateExecutorOptions, type SandboxExecutor } from "@hermes-sandbox/docker"
import { sleep } from "./support.js"

interface SuiteEngine {
  readonly socketPath: string
  start(): Promise<void>
  loadImage(image: string): void
  destroy(): Promise<void>
}

export const bounded = <A>(p: Promise<A>, ms: number, what: string) =>
  Promise.race([p, sleep(ms).then(() => Promise.reject(new Error(`${what} did not settle within ${ms} ms`)))])

/** Engines the suite removes: an executor's watchdog would outlive them, and a startup sweep has nothing to find. */
export const ownEngineDefaults: CreateExecutorOptions = { watchdog: false, sweepOnStart: false }

export const useEngine = (engine: SuiteEngine, defaults: CreateExecutorOptions = {}) => {
  const executors: Array<SandboxExecutor> = []

  beforeAll(async () => {
    await engine.start()
    // Only python's image is on the engine.
    engine.loadImage("hermes-sandbox/python:latest")
  }, 180_000)

  afterAll(async () => {
    for (const e of executors) await bounded(e.close(), 90_000, "close").catch(() => undefined)
    await engine.destroy()
  }, 180_000)

  /** An executor on this engine, closed after the suite. */
  const open = async (options: CreateExecutorOptions = {}) => {
    const executor = await createExecutor({ socketPath: engine.socketPath, ...defaults, ...options })
    executors.push(executor)
    return executor
  }
  return { open }
}
