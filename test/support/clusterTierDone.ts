/**
 * A vitest reporter that tells the cluster tier's global setup (test/kubernetes-global-setup.ts)
 * when the last file of the cluster projects has ended, so it checks for leaked pods and stops the
 * cluster then rather than when every other tier is done too. Both run in vitest's main process.
 */
import type { Reporter, TestModule, TestSpecification } from "vitest/node"

/** The projects that run on the cluster (vitest.config.ts). */
export const CLUSTER_PROJECTS: ReadonlySet<string> = new Set(["cluster", "cluster-chaos"])
/** Where the global setup leaves what to call when the cluster projects' files all ended. */
export const CLUSTER_TIER_DONE = Symbol.for("hermes-sandbox.cluster-tier-done")

export const onClusterTierDone = (callback: () => void) => {
  ;(globalThis as Record<symbol, unknown>)[CLUSTER_TIER_DONE] = callback
}

export default class ClusterTierDone implements Reporter {
  private left = 0

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>) {
    this.left = specifications.filter((s) => CLUSTER_PROJECTS.has(s.project.name)).length
  }

  onTestModuleEnd(module: TestModule) {
    if (!CLUSTER_PROJECTS.has(module.project.name)) return
    this.left -= 1
    if (this.left === 0) (globalThis as Record<symbol, (() => void) | undefined>)[CLUSTER_TIER_DONE]?.()
  }
}
