/** For tests (yours and ours): the in-memory runtime and its fault controls. */
export * as FakeRuntime from "./FakeRuntime.js"
export {
  type FakeCellStep,
  fakeCell,
  fakeProgram,
  type FakeFaults,
  type FakeProgram,
  FakeRuntimeControl
} from "./FakeRuntime.js"

import { Arbitrary, type FastCheck, Schema } from "effect"
import { type ExecuteRequest, ExecuteRequestSchema } from "./ExecutionRequest.js"
import { ExecutorOptionsSchema, SandboxDefaultsSchema } from "./ExecutorConfig.js"
import * as Schemas from "./Schemas.js"

/*
 * Arbitraries of valid input, as users write it, derived from the schemas that validate it (their
 * input side, refinements included, so every value decodes): when a schema changes, so do they.
 * Made with effect's bundled fast-check (`import { FastCheck } from "effect"` to run them).
 */

/**
 * Requests planExecution accepts (against the default executor options), typed ExecuteRequest: an
 * absent field is left out rather than `undefined` (as under exactOptionalPropertyTypes). The one
 * request arbitrary: docker's testing entry re-exports it; events' `arbExecuteRequest` is a
 * narrower one for the journal's own tests, held to this schema by core's tests.
 */
export const arbExecuteRequest: FastCheck.Arbitrary<ExecuteRequest> = Arbitrary.make(
  Schema.encodedBoundSchema(ExecuteRequestSchema)
).map(
  (request) =>
    Object.fromEntries(Object.entries(request).filter(([, v]) => v !== undefined)) as unknown as ExecuteRequest
)
/** Sandbox defaults resolveSandboxDefaults accepts. */
export const arbSandboxDefaults = Arbitrary.make(Schema.encodedBoundSchema(SandboxDefaultsSchema))
/** Executor options resolveExecutorConfig accepts. */
export const arbExecutorOptions = Arbitrary.make(Schema.encodedBoundSchema(ExecutorOptionsSchema))
/** Sizes as users write them: bytes, "512m", "64MiB", "1.5g". */
export const arbSize = Arbitrary.make(Schema.encodedBoundSchema(Schemas.Size))
/** Memory limits (at least 6 MiB) as users write them. */
export const arbMemory = Arbitrary.make(Schema.encodedBoundSchema(Schemas.Memory))
/** Byte counts. */
export const arbBytes = Arbitrary.make(Schemas.Bytes)
