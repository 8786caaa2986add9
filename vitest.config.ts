import { defineConfig } from "vitest/config"

// One run covers unit, property and real-engine tests. Real-engine files talk to the
// Docker engine that `.ci/run` (or scripts/ensure-engine.sh) started; they are not opt-in.
export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts", "examples/**/*.test.ts", "images/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    globalSetup: ["test/global-setup.ts", "test/postgres-global-setup.ts"],
    reporters: ["default"]
  }
})
