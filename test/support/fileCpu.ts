/**
 * The suite is CPU-bound on 2 cores (BENCHMARKS.md, "The test suite's own time"): what a test file
 * costs is its CPU, not its wall time. A setup file of every project: it reads the worker's CPU
 * (its own and its reaped children's: the CLI, fixtures, docker and npm it ran and waited for) when
 * the file starts and when it ends, and with HERMES_SANDBOX_TEST_CPU=FILE appends
 * `cpuSeconds<TAB>project<TAB>file` to FILE (scripts/test-tiers.sh ranks them: slowestFiles.ts).
 * Not counted: the engine's and the kernel's work for the file's sandboxes, and processes it left
 * detached (watchdogs).
 */
import { appendFileSync, readFileSync } from "node:fs"
import { relative } from "node:path"
import { afterAll, expect } from "vitest"

/** utime + stime + cutime + cstime of this process, in clock ticks (100 a second on Linux). */
const cpuTicks = (): number => {
  const stat = readFileSync("/proc/self/stat", "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0)
}

const out = process.env["HERMES_SANDBOX_TEST_CPU"]
if (out !== undefined && out !== "") {
  const startTicks = cpuTicks()
  afterAll(() => {
    const file = expect.getState().testPath
    if (file === undefined) return
    const seconds = (cpuTicks() - startTicks) / 100
    appendFileSync(
      out,
      `${seconds.toFixed(1)}\t${process.env["HERMES_SANDBOX_TEST_PROJECT"] ?? "?"}\t${relative(process.cwd(), file)}\n`
    )
  })
}
