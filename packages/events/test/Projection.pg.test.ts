/** Projection's replay-equals-live property (support/projectionReplay.ts) on PostgreSQL. */
import { describe } from "@effect/vitest"
import { postgresImplementation } from "./helpers.js"
import { replayEqualsLive } from "./support/projectionReplay.js"

describe("Projection", () => replayEqualsLive(postgresImplementation))
