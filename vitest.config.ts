import { defineConfig } from "vitest/config"
import type { TestProjectInlineConfiguration } from "vitest/config"
import { LongFirst } from "./test/support/longFirst.js"

/**
 * The suite in tiers, one vitest project each, named by what it needs (README, "Development"):
 *
 * - unit     nothing but Node and this machine's compilers: the fake runtime, journals in memory and
 *            SQLite, protocol codecs, the supervisor on the host, property models, CLI parsing. No
 *            global setup starts anything: it passes with no Docker engine and no PostgreSQL.
 * - journal  the PostgreSQL journal (`*.pg.test.ts`): its global setup starts a throwaway cluster.
 * - engine   contracts, e2e, hostile and MCP suites on the local engine (runc and runsc), and
 *            `engine-pool`: the suites whose path differs with a warm pool, again with one.
 * - heavy    suites that bring up infrastructure of their own: private engines (chaos), TLS and ssh
 *            engines (remote), the fleet (three hosts on one PostgreSQL), the 1,000-execution soak;
 *            and `heavy-pool`, the pool variants of those.
 * - cluster  the Kubernetes runtime on a live one-node cluster (test/kubernetes/): its global setup
 *            starts it (scripts/kubernetes-local.sh) and runs the files as a ServiceAccount bound to
 *            the runtime's Role (one cluster and one namespace; the executor contract's file runs
 *            it with and without a warm pool itself), and `cluster-chaos`: a node component killed
 *            mid-run, in the run's first group, alone on the cluster.
 *
 * `pnpm test` runs every project; `pnpm test:<tier>` one tier (its pool variant included).
 * Real-engine tiers talk to the engine `.ci/run` (or scripts/ensure-engine.sh) started.
 */

/** The unit tier: every file here runs with no engine and no database. */
const UNIT = [
  "packages/*/test/**/*.test.ts",
  "images/runner/*.test.ts",
  "test/*.fake.test.ts",
  "test/sweep-owner-identity.test.ts",
  "test/cli-events-tools.test.ts",
  "test/entry-points.test.ts",
  "test/tiers.test.ts",
  "examples/testing/doc.test.ts",
  "examples/testing/evaluate.test.ts",
  "examples/testing/scripting.test.ts"
]

/** The Kubernetes runtime's suites, on the cluster the cluster tier's global setup starts. */
const CLUSTER = ["test/kubernetes/**/*.test.ts"]
/**
 * The cluster's chaos (a node component killed mid-run): a project of its own in the run's first
 * group, so no other file uses the cluster meanwhile. It mostly waits, beside the unit tier and
 * the fuzzers that run outside vitest then (scripts/test-tiers.sh).
 */
const CLUSTER_CHAOS = ["test/kubernetes/chaos.test.ts"]
/** The project groups (vitest's sequence.groupOrder): a group starts when the one before ended. */
const FIRST = { groupOrder: 0 }
const AFTER_CHAOS = { groupOrder: 1 }

/** Suites on the PostgreSQL journal; the CLI's reader of it needs the engine as well. */
const JOURNAL = ["packages/*/test/**/*.pg.test.ts", "test/cli-events-postgres.e2e.test.ts"]

/** Suites that start engines, hosts or clusters of their own, and the soak. */
const HEAVY = [
  "test/chaos/discarded-limits.test.ts",
  "test/chaos/engine-restart.test.ts",
  "test/chaos/rootless.test.ts",
  "test/chaos/userns-remap.test.ts",
  "test/chaos/xfs-storage.test.ts",
  "test/chaos/thousand.test.ts",
  "test/remote/**/*.test.ts",
  "test/fleet/**/*.test.ts"
]

/**
 * With a warm pool a sandbox is created ahead, claimed, and runs its program in a preloaded
 * interpreter: these suites cover that path again with HERMES_SANDBOX_TEST_WARM_POOL=1. Suites
 * whose sandboxes never come from a pool (sessions, MCP sessions, the CLI, remote engines) are
 * not repeated.
 */
const POOL_ENGINE = [
  "test/execute.e2e.test.ts",
  "test/collect.e2e.test.ts",
  "test/tools.e2e.test.ts",
  "test/executor-contract.docker.test.ts",
  // Sessions and their kernels never take a pooled sandbox: their hostile suites run once, in `engine`.
  "test/hostile/!(python-kernel|sessions).test.ts",
  "test/chaos/kill-owner.test.ts",
  "test/chaos/sweep.test.ts",
  "test/chaos/late-events.test.ts"
]
// (The 1,000-execution soak runs once, with a pool that 16 at a time drain: both paths at scale.)
const POOL_HEAVY = ["test/chaos/engine-restart.test.ts"]

/**
 * The real-engine tiers run the CLI as users do, through the installed bin (pnpm build makes it,
 * and the MCP suites need the build anyway): a start through tsx costs ten times its CPU.
 */
const BUILT_CLI = { HERMES_SANDBOX_TEST_CLI_BIN: "packages/cli/bundle/hermes-sandbox.cjs" }
/**
 * The real-engine tiers import the packages as built (each library's bundle/, what an installed
 * package runs): the "hermes-sandbox-dist" condition picks it in vite's resolution and in Node's own
 * (the forks' --conditions flag), and it is loaded by Node itself, not transformed and run by vite. Loading the sources through vite cost each file
 * ~1.7 s of a core (BENCHMARKS.md, "The test suite's own time"). test/built-global-setup.ts refuses
 * a dist/ or bundle/ older than what it is made from; the unit and journal tiers test the sources.
 */
const BUILT_PACKAGES: Pick<TestProjectInlineConfiguration, "resolve" | "ssr"> = {
  resolve: { conditions: ["hermes-sandbox-dist", "import", "module", "node", "default"] },
  ssr: { resolve: { conditions: ["hermes-sandbox-dist", "import", "node", "default"] } }
}
const builtPackages = (test: NonNullable<TestProjectInlineConfiguration["test"]>): TestProjectInlineConfiguration => ({
  extends: true,
  ...BUILT_PACKAGES,
  test: {
    sequence: { sequencer: LongFirst, ...AFTER_CHAOS },
    ...test,
    env: { ...test.env, HERMES_SANDBOX_TEST_PROJECT: String(test.name ?? "") },
    globalSetup: [BUILT, ...(test.globalSetup === undefined ? [] : [test.globalSetup].flat())],
    server: { deps: { external: [/\/packages\/[^/]+\/(dist|bundle)\//] } }
  }
})

const POOL_ENV = { ...BUILT_CLI, HERMES_SANDBOX_TEST_WARM_POOL: "1" }
/** Refuses a dist/ older than its sources (the tiers that import the built packages). */
const BUILT = "test/built-global-setup.ts"
/** Fails the run if a hermes-sandbox-* container is left on the engine. */
const LEAK_CHECK = "test/global-setup.ts"
/** Starts the one-node Kubernetes cluster (unless it is up) and this run's namespace and ServiceAccount. */
const KUBERNETES = "test/kubernetes-global-setup.ts"
/** Starts the throwaway PostgreSQL cluster (unless HERMES_SANDBOX_TEST_PG_URL names one). */
const POSTGRES = "test/postgres-global-setup.ts"

const project = (test: NonNullable<TestProjectInlineConfiguration["test"]>): TestProjectInlineConfiguration => ({
  extends: true,
  // The project's name for test/support/fileCpu.ts.
  test: {
    sequence: { sequencer: LongFirst, ...AFTER_CHAOS },
    ...test,
    env: { ...test.env, HERMES_SANDBOX_TEST_PROJECT: String(test.name ?? "") }
  }
})

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Real-engine files mostly wait (on containers, deadlines, timers), so more of them overlap than
    // there are cores; HERMES_SANDBOX_TEST_FORKS sets it (scripts/test.sh picks per tier).
    poolOptions: {
      forks: {
        maxForks: Number(process.env["HERMES_SANDBOX_TEST_FORKS"] ?? 2),
        minForks: 1,
        // Node's own resolution in the workers, for the built packages' imports of each other (the
        // tiers that load dist/, below). The unit and journal tiers' packages go through vite, whose
        // conditions pick src/. (A project's own poolOptions.forks is not applied by vitest 3.2.)
        execArgv: ["--conditions=hermes-sandbox-dist"]
      }
    },
    setupFiles: ["./test/support/fileCpu.ts"],
    reporters: ["default", "./test/support/slowestFiles.ts", "./test/support/clusterTierDone.ts"],
    sequence: { sequencer: LongFirst },
    projects: [
      // Unit files share their workers (no fresh process per file): the unit runs pass --isolate=false
      // (package.json, scripts/test-tiers.sh). A project's own `isolate` is not applied by vitest 3.2
      // (its forks pool takes the root's), so it is not set here.
      project({ name: "unit", include: UNIT, exclude: [...JOURNAL, "**/node_modules/**"] }),
      project({ name: "journal", include: JOURNAL, env: BUILT_CLI, globalSetup: [POSTGRES, LEAK_CHECK] }),
      builtPackages({
        name: "engine",
        include: ["test/**/*.test.ts", "examples/examples.test.ts", "examples/testing/evaluate.engine.test.ts"],
        exclude: [...UNIT, ...JOURNAL, ...HEAVY, ...CLUSTER, "**/node_modules/**"],
        env: BUILT_CLI,
        globalSetup: [LEAK_CHECK]
      }),
      builtPackages({ name: "engine-pool", include: POOL_ENGINE, env: POOL_ENV, globalSetup: [LEAK_CHECK] }),
      builtPackages({ name: "heavy", include: HEAVY, env: BUILT_CLI, globalSetup: [POSTGRES, LEAK_CHECK] }),
      builtPackages({ name: "heavy-pool", include: POOL_HEAVY, env: POOL_ENV, globalSetup: [LEAK_CHECK] }),
      builtPackages({
        name: "cluster",
        include: CLUSTER,
        exclude: [...CLUSTER_CHAOS, "**/node_modules/**"],
        env: BUILT_CLI,
        globalSetup: [KUBERNETES]
      }),
      builtPackages({
        name: "cluster-chaos",
        include: CLUSTER_CHAOS,
        env: BUILT_CLI,
        globalSetup: [KUBERNETES],
        sequence: { sequencer: LongFirst, ...FIRST }
      })
    ]
  }
})
