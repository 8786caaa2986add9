/**
 * A dependency that loads on first use, not with the package that needs it: dockerode, ajv and yaml
 * cost ~0.07–0.25 s of CPU each to load, which importing the SDK need not pay when most processes
 * never use them (BENCHMARKS.md, "The client's own cost").
 *
 * Both loaders name the module literally. In the CLI's CommonJS bundle `require` is the bundle's own
 * and esbuild inlines a literal `require("x")`, so `bundled` is the one that runs; Node's ES modules
 * have no `require`, so there `esm` runs, with `createRequire(import.meta.url)` of the caller's own
 * module (so the name resolves from the caller's package).
 */
export const onFirstUse = <T>(bundled: () => T, esm: () => T): (() => T) => {
  let loaded: { readonly value: T } | undefined
  return () => (loaded ??= { value: typeof require === "function" ? bundled() : esm() }).value
}
