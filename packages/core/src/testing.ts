/** For tests (yours and ours): the in-memory runtime and its fault controls. */
export * as FakeRuntime from "./FakeRuntime.js"
export { fakeProgram, type FakeFaults, type FakeProgram, FakeRuntimeControl } from "./FakeRuntime.js"
