// `pnpm build`'s bundle step (after scripts/build.mjs has emitted each package's dist/): each
// library package's public modules as ES module bundles in its bundle/, what an installed package
// runs (its manifest's publishConfig) and what the real-engine tiers import.
//
// Why (issue 27, BENCHMARKS.md "The client's own cost"): Node's ES module loader spends ~0.8 ms on
// each module it loads, and importing @hermes-sandbox/docker from dist/ loaded ~740 of them
// (effect's 362 and the fast-check effect/Schema pulls in, 239): 0.6–0.9 CPU-s, 3.3× a
// `require("dockerode")`, before any of this project's code ran. The same code in a few files
// loads in a fraction of that.
//
// Effect in one copy. A package's bundle keeps the other @hermes-sandbox packages external (a
// user importing two of them must get one ExecutionTimeout class, not one per bundle), so effect
// cannot be inlined in each: three copies to evaluate. It is inlined once, in
// @hermes-sandbox/events/vendor (bundle/vendor.js, the lowest package, on which every other
// depends): every effect module any package's runtime imports, each as the namespace the barrel
// names it by (`Effect`, `Schema`, ...). The other packages' bundles import from there: `from
// "effect"` is that module itself, and `from "effect/Schema"` a small module taking the names out
// of its `Schema`. The user's own `effect` (a peer dependency, for the types) is another copy at
// run time; effect keeps its global state (fiber refs, the metric registry, ...) in one store
// shared by every copy in a process (effect/GlobalValue, made for its CommonJS and ES builds
// loaded side by side), so Effect values, layers and tags cross between them.
//
// Test code stays off that path: `Arbitrary` and `FastCheck` (fast-check's arbitraries) are not
// vendored; a module importing them (the testing entries) takes them from the installed effect.
//
//   node scripts/bundle-packages.mjs                 every package's bundle/
//   HERMES_BUNDLE_METAFILES=dir node ...             also writes esbuild's metafile per package
//                                                    there (<package>.json), bundle/ untouched
//                                                    when HERMES_BUNDLE_METAFILES_ONLY=1
import * as esbuild from "esbuild"
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
/** In dependency order: a package's bundle imports the ones before it. */
const PACKAGES = ["events", "core", "docker", "mcp"]
const VENDOR = "@hermes-sandbox/events/vendor"
/** effect's modules of property-based testing: only the testing entries import them. */
const NOT_VENDORED = new Set(["Arbitrary", "FastCheck"])
/**
 * Dependencies inlined where they are imported: small, stateless, and of no identity a caller could
 * see (uuid: 20 ES modules to load for the one function, v7, that several packages call).
 */
const INLINED = ["uuid"]
const metafiles = process.env.HERMES_BUNDLE_METAFILES
const metafilesOnly = metafiles !== undefined && process.env.HERMES_BUNDLE_METAFILES_ONLY === "1"

const distOf = (pkg) => join(root, "packages", pkg, "dist")
const srcOf = (pkg) => join(root, "packages", pkg, "src")
/**
 * A package's modules as dist/ paths, taken from its src/ (dist/ may still hold a module whose
 * source was removed since): `top` only those at the top, its public modules (the manifest exports
 * "./*" and closes "./internal/*").
 */
const modulesOf = (pkg, top = false) => {
  const walk = (dir) =>
    readdirSync(join(srcOf(pkg), dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? top
          ? []
          : walk(join(dir, e.name))
        : /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts")
          ? [join(distOf(pkg), dir, e.name.replace(/\.tsx?$/, ".js"))]
          : []
    )
  return walk("").sort()
}

/** Test doubles and property-test helpers: public modules the runtime never loads. */
const isTestOnly = (file) => /^(testing|FakeRuntime|[^/]*[Ff]ake[^/]*)\.js$/.test(basename(file))
/** A package's public modules that its runtime may load (what each entry pulls into the shared chunk). */
const runtimeModules = (pkg) => modulesOf(pkg, true).filter((f) => !isTestOnly(f))

/** `import { A, B as C } from "effect"` → ["A", "B"], and `from "effect/X"` → X, in a module's text. */
const effectImportsOf = (text) => {
  const names = new Set()
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"effect"/g))
    for (const part of m[1].split(",")) {
      const name = part.trim().split(/\s+as\s+/)[0]
      if (name !== "") names.add(name)
    }
  for (const m of text.matchAll(/(?:from|import)\s*"effect\/([A-Za-z]+)"/g)) names.add(m[1])
  if (/\bimport\s*"effect"|\*\s*as\s+\w+\s+from\s*"effect"/.test(text)) names.add("*")
  return names
}

// What the vendor module exports: every namespace some package's module imports, fast-check's aside.
const requireEffect = createRequire(join(root, "packages", "events", "package.json"))
const barrel = requireEffect("effect")
const vendored = new Set()
for (const pkg of PACKAGES)
  for (const file of modulesOf(pkg))
    for (const name of effectImportsOf(readFileSync(file, "utf8"))) {
      if (name === "*") throw new Error(`${file}: a bare import of "effect" (name what it uses)`)
      if (!(name in barrel)) throw new Error(`${file}: "effect" has no export ${name}`)
      if (!NOT_VENDORED.has(name)) vendored.add(name)
    }
const vendorSource = `export { ${[...vendored].sort().join(", ")} } from "effect"\n`

/**
 * The other packages' imports of effect, served by the vendor module; what is not vendored (fast-check's
 * modules) from the installed effect; the other @hermes-sandbox packages and every other dependency
 * stay imports (installed beside the package; several load on first use, see core/OnFirstUse.ts).
 */
const externals = (pkg) => ({
  name: "hermes-externals",
  setup(build) {
    build.onResolve({ filter: /^hermes-vendor-entry$/ }, () => ({ path: "vendor", namespace: "hermes-vendor" }))
    // A public module's entry: the module, and (imported for its place in the graph only) every
    // runtime module of the package, so that all of them land in one chunk the entries share.
    build.onResolve({ filter: /^hermes-entry:/ }, (args) => ({
      path: args.path.slice("hermes-entry:".length),
      namespace: "hermes-entry"
    }))
    build.onLoad({ filter: /.*/, namespace: "hermes-entry" }, (args) => ({
      contents:
        `export * from ${JSON.stringify(args.path)}\n` +
        runtimeModules(pkg)
          .map((m) => `import ${JSON.stringify(m)}\n`)
          .join(""),
      resolveDir: root
    }))
    build.onLoad({ filter: /.*/, namespace: "hermes-vendor" }, () => ({
      contents: vendorSource,
      resolveDir: join(root, "packages", "events")
    }))
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      // The vendor entry's own "effect", and what effect's modules import (fast-check): inlined.
      if (args.namespace === "hermes-vendor" || args.importer.includes("/node_modules/")) return undefined
      if (args.namespace === "hermes-effect-mixed") return { path: args.path, external: true }
      if (args.namespace === "hermes-entry") return undefined
      const deep = /^effect\/([A-Za-z]+)$/.exec(args.path)
      if (args.path === "effect" || deep !== null) {
        // events bundles effect itself (its modules share the vendor entry's chunks).
        if (pkg === "events" && !(deep !== null && NOT_VENDORED.has(deep[1]))) return undefined
        if (deep === null) {
          const names = [...effectImportsOf(readFileSync(args.importer, "utf8"))]
          if (names.every((n) => !NOT_VENDORED.has(n))) return { path: VENDOR, external: true }
          return { path: args.importer, namespace: "hermes-effect-mixed", pluginData: names }
        }
        if (NOT_VENDORED.has(deep[1])) return { path: args.path, external: true }
        return { path: deep[1], namespace: "hermes-effect-module" }
      }
      if (INLINED.includes(args.path)) return undefined
      return { path: args.path, external: true }
    })
    // `from "effect/Schema"`: the vendor's Schema, its names taken out one by one (effect's modules
    // export no default and never reassign an export).
    build.onLoad({ filter: /.*/, namespace: "hermes-effect-module" }, (args) => {
      const keys = Object.keys(requireEffect(`effect/${args.path}`))
      return {
        contents: `import { ${args.path} as m } from "${VENDOR}"\nexport const { ${keys.join(", ")} } = m\n`,
        resolveDir: root
      }
    })
    // A module importing fast-check's namespaces too (a testing entry): those from the installed effect.
    build.onLoad({ filter: /.*/, namespace: "hermes-effect-mixed" }, (args) => {
      const names = args.pluginData
      const own = names.filter((n) => !NOT_VENDORED.has(n))
      const fromEffect = names.filter((n) => NOT_VENDORED.has(n))
      return {
        contents:
          (own.length > 0 ? `export { ${own.join(", ")} } from "${VENDOR}"\n` : "") +
          `export { ${fromEffect.join(", ")} } from "effect"\n`,
        resolveDir: root
      }
    })
  }
})

for (const pkg of PACKAGES) {
  const outdir = join(root, "packages", pkg, "bundle")
  const entryPoints = modulesOf(pkg, true).map((f) => ({ in: `hermes-entry:${f}`, out: basename(f, ".js") }))
  if (pkg === "events") entryPoints.push({ in: "hermes-vendor-entry", out: "vendor" })
  if (!metafilesOnly) rmSync(outdir, { recursive: true, force: true })
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints,
    outdir,
    bundle: true,
    // One chunk per set of entries sharing modules, so two entries of a package share their classes.
    splitting: true,
    // At the entries' own depth, where a module's `new URL("../…", import.meta.url)` expects to be.
    chunkNames: "chunk-[hash]",
    format: "esm",
    platform: "node",
    target: "node20",
    plugins: [externals(pkg)],
    // The package's own `require`, for the dependencies that load on first use (core/OnFirstUse.ts
    // calls `require` where there is one; esbuild's stand-in for it would only throw).
    banner: {
      js: `import { createRequire as __hermesCreateRequire } from "node:module"\nconst require = __hermesCreateRequire(import.meta.url)`
    },
    legalComments: "linked",
    metafile: true,
    write: !metafilesOnly,
    logLevel: "warning"
  })
  if (metafiles !== undefined) {
    mkdirSync(metafiles, { recursive: true })
    writeFileSync(join(metafiles, `${pkg}.json`), JSON.stringify(result.metafile))
  }
}
if (!metafilesOnly) process.stderr.write(`bundle-packages: ${PACKAGES.map((p) => `packages/${p}/bundle`).join(", ")}\n`)
