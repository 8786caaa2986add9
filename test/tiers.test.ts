/**
 * The test tiers' own tools: the slowest-files table every run ends with, the stress script's
 * arguments and the failure lines it reports, and the split of the suite into projects (every test
 * file belongs to a tier; the unit tier holds nothing that needs an engine or a database).
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { failureLines, parseArgs } from "../scripts/stress.js"
import { readTimes, slowestTable } from "./support/slowestFiles.js"

describe("the slowest-files table", () => {
  it("ranks files by time, at most 15, across the lines several runs appended", () => {
    const dir = mkdtempSync(join(tmpdir(), "tiers-"))
    const file = join(dir, "times.tsv")
    const lines = Array.from(
      { length: 20 },
      (_, i) => `${i + 0.5}\t${i % 2 === 0 ? "unit" : "engine"}\ttest/f${i}.test.ts\t0.1\t${i}\n`
    )
    writeFileSync(file, lines.join(""))
    const times = readTimes(file)
    expect(times).toHaveLength(20)
    expect(times[3]).toEqual({
      seconds: 3.5,
      project: "engine",
      file: "test/f3.test.ts",
      collectSeconds: 0.1,
      testsSeconds: 3
    })
    const table = slowestTable(times).split("\n")
    expect(table[0]).toBe("15 slowest test files (import + tests, seconds):")
    expect(table).toHaveLength(16)
    expect(table[1]).toMatch(/^ +19\.5 +engine +test\/f19\.test\.ts$/)
    expect(table[15]).toMatch(/^ +5\.5 +engine +test\/f5\.test\.ts$/)
  })
})

describe("pnpm test:stress", () => {
  it("takes runs, load, projects and files; refuses what it cannot use", () => {
    expect(parseArgs(["--runs", "3", "--load", "0", "--project", "engine", "a.test.ts", "b.test.ts"])).toEqual({
      runs: 3,
      load: 0,
      projects: ["engine"],
      files: ["a.test.ts", "b.test.ts"]
    })
    expect(parseArgs(["a.test.ts"]).runs).toBe(5)
    expect(() => parseArgs([])).toThrow(/name at least one test file/)
    expect(() => parseArgs(["--runs", "0", "a.test.ts"])).toThrow(/--runs takes a whole number >= 1/)
    expect(() => parseArgs(["--load", "x", "a.test.ts"])).toThrow(/--load takes a whole number >= 0/)
    expect(() => parseArgs(["--retry", "a.test.ts"])).toThrow(/unknown option --retry/)
    expect(() => parseArgs(["--project"])).toThrow(/--project takes a name/)
  })

  it("reports what a failed run needs to be repeated: the failing test, its error, the seed", () => {
    const output = [
      "\u001b[31m FAIL \u001b[39m |engine| test/x.test.ts > a case",
      "AssertionError: expected 1 to be 2",
      " ❯ test/x.test.ts:12:5",
      "Counterexample: [3]",
      '{ seed: -1725429651, path: "41", endOnFailure: true }',
      " ✓ test/y.test.ts (3 tests) 12ms",
      "some other line"
    ].join("\n")
    expect(failureLines(output)).toEqual([
      " FAIL  |engine| test/x.test.ts > a case",
      "AssertionError: expected 1 to be 2",
      " ❯ test/x.test.ts:12:5",
      "Counterexample: [3]",
      '{ seed: -1725429651, path: "41", endOnFailure: true }'
    ])
  })
})

describe("the tiers (vitest.config.ts)", () => {
  it("every test file in the repository runs in some tier, and the unit tier holds none of the engine's, journal's or heavy tiers' files", async () => {
    const { createVitest } = await import("vitest/node")
    const root = new URL("..", import.meta.url).pathname
    const vitest = await createVitest("test", { watch: false, config: join(root, "vitest.config.ts") }, {}, {})
    try {
      const specs = await vitest.globTestSpecifications()
      const byProject = new Map<string, Set<string>>()
      for (const s of specs) {
        const file = s.moduleId.slice(root.length)
        byProject.set(s.project.name, (byProject.get(s.project.name) ?? new Set()).add(file))
      }
      const { execFileSync } = await import("node:child_process")
      const tracked = execFileSync("git", ["ls-files", "*.test.ts"], { cwd: root, encoding: "utf8" })
        .split("\n")
        .filter((f) => f !== "")
      const inSomeTier = new Set([...byProject.values()].flatMap((files) => [...files]))
      expect(
        tracked.filter((f) => !inSomeTier.has(f)),
        "test files no tier runs"
      ).toEqual([])
      const unit = byProject.get("unit") ?? new Set()
      for (const other of ["journal", "engine", "engine-pool", "heavy", "heavy-pool", "cluster", "cluster-chaos"]) {
        expect(
          [...(byProject.get(other) ?? [])].filter((f) => unit.has(f)),
          `files in both unit and ${other}`
        ).toEqual([])
      }
      expect(
        [...unit].filter((f) => f.endsWith(".pg.test.ts")),
        "PostgreSQL suites in the unit tier"
      ).toEqual([])
    } finally {
      await vitest.close()
    }
  }, 60_000)
})
