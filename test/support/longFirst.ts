/**
 * Longest first: the files that take minutes start before the rest, so that on a fresh clone
 * (no vitest cache yet to order by) none of them starts last and ends the run alone. The list is
 * vitest.config.ts's LONG_RUNNING (the end of every run prints the slowest files to keep it true);
 * every other file keeps vitest's own order (failed first, then longest by its cache).
 */
import { relative } from "node:path"
import type { TestSpecification } from "vitest/node"
import { BaseSequencer } from "vitest/node"

export const longFirst = (long: ReadonlyArray<string>) =>
  class LongFirst extends BaseSequencer {
    override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
      const rank = (f: TestSpecification) => {
        const i = long.indexOf(relative(f.project.config.root, f.moduleId))
        return i === -1 ? long.length : i
      }
      const sorted = await super.sort(files)
      // Array.prototype.sort is stable: within a rank, vitest's order stays.
      return sorted.sort((a, b) => rank(a) - rank(b))
    }
  }
