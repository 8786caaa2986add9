/**
 * A warm pool's preload on the real engine (issue 28, item 9): `warmPool.preload.python` names
 * modules that each pooled sandbox's interpreter imports before it is claimed (the supervisor's
 * `--preload python MODULE...`, images/runner/preload.py). A claim finds them loaded; a request that
 * takes the cold path does not; a name that fails to import is ignored there, and the program's own
 * import still raises the real error. (The time it saves is measured by `pnpm bench:preload`.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"

// colorsys: in every Python image, and imported by nothing a bare `python3` loads.
const PROBE = "import sys\nprint('colorsys' in sys.modules, 'no_such_module_hs' in sys.modules)\n"

describe("warm pool: preloaded modules", () => {
  let executor: SandboxExecutor
  const claimed = new Set<string>()

  beforeAll(async () => {
    executor = await createExecutor({
      warmPool: { size: 1, languages: ["python"], preload: { python: ["colorsys", "no_such_module_hs"] } }
    })
    executor.events$.subscribe((e) => {
      if (e.type === "ContainerClaimed") claimed.add(e.streamId)
    })
  })
  afterAll(async () => {
    await executor?.close()
  })

  const ready = async () => {
    while (((await executor.stats()).warm["python"] ?? 0) < 1) await new Promise((r) => setTimeout(r, 20))
  }

  it("a claimed sandbox's interpreter has them imported; a cold one has not", async () => {
    await ready()
    const warm = await executor.executeCode({ language: "python", code: PROBE })
    expect(claimed.has(warm.executionId)).toBe(true)
    expect(warm.stdout).toBe("True False\n")
    // Other limits than the pool's: the cold path, a plain interpreter.
    const cold = await executor.executeCode({ language: "python", code: PROBE, memory: "96m" })
    expect(claimed.has(cold.executionId)).toBe(false)
    expect(cold.stdout).toBe("False False\n")
  })

  it("a module that failed to preload fails the program's own import, with Python's own error", async () => {
    await ready()
    const r = await executor.executeCode({ language: "python", code: "import no_such_module_hs\n" })
    expect(claimed.has(r.executionId)).toBe(true)
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toContain("ModuleNotFoundError: No module named 'no_such_module_hs'")
  })
})
