/**
 * Longest first: the suite is CPU-bound and runs 4 files at a time, so a long file that starts
 * late ends the run alone while the other workers idle. Files start in the order of their measured
 * time (test/support/fileSeconds.json: seconds per "project file", from a whole run's slowest-files
 * report), the greedy order that packs a fixed number of workers best; a file not measured yet
 * counts as UNMEASURED_SECONDS. Refresh the table from a run's times (scripts/test-tiers.sh keeps
 * them in HERMES_SANDBOX_TEST_TIMES) when files are added or grow.
 */
import { readFileSync } from "node:fs"
import { relative } from "node:path"
import type { TestSpecification } from "vitest/node"
import { BaseSequencer } from "vitest/node"

/** What a file without a measurement is taken to last: about a typical real-engine file. */
export const UNMEASURED_SECONDS = 20

/** Measured seconds by "project file". */
export const fileSeconds: Readonly<Record<string, number>> = JSON.parse(
  readFileSync(new URL("./fileSeconds.json", import.meta.url), "utf8")
) as Record<string, number>

export class LongFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const seconds = (f: TestSpecification) =>
      fileSeconds[`${f.project.name} ${relative(f.project.config.root, f.moduleId)}`] ?? UNMEASURED_SECONDS
    const sorted = await super.sort(files)
    // Array.prototype.sort is stable: among equal times, vitest's own order stays.
    return sorted.sort((a, b) => seconds(b) - seconds(a))
  }
}
