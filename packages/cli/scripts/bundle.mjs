// The installed `hermes-sandbox` bin (pnpm build runs this after the CLI's tsc): dist/bin.js and
// everything it imports (the sibling packages' dist/, effect, rxjs, dockerode, ...) bundled by
// esbuild into one CommonJS file, bundle/cli.cjs, and the launcher that runs it through V8's
// code cache, bundle/hermes-sandbox.cjs (from scripts/launcher.cjs). Node's loader took ~0.6 s
// of every run to load ~700 ES modules one by one, and compiling the one file ~90 ms more.
//
// bundle/ is one level below the package root, like src/ and dist/, so main.ts's
// `new URL("../package.json", import.meta.url)` finds the manifest. The docker package finds its
// own files (watchdog, seccomp profile, image sources) by resolving its name, not by its module's
// URL (packages/docker/src/internal/packageRoot.ts), so inlining it is safe.
//
// What a bundled dependency finds next to its own files stays where the package is installed (a
// bundle moves the code, not the files): the CommonJS files that use __dirname or __filename, or
// require a native addon by a relative path (ssh2, cpu-features, grpc-js, dockerode), get their
// real place at run time; better-sqlite3 stays outside (the bindings package finds its addon
// from the caller's stack). A package's place is found as Node finds it for the package that
// depends on it, from the CLI's own dependencies down: pnpm lets a package resolve only its own
// dependencies, and npm may hoist or nest them.
//
// HERMES_BUNDLE_METAFILE=path writes esbuild's metafile there (what the bundle holds, by input);
// HERMES_BUNDLE_METAFILE_ONLY=path writes only that and leaves bundle/ as it is (for
// test/runtime-path.test.ts, which checks what the bundle holds while other tests run the bin).
import * as esbuild from "esbuild"
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = join(root, "bundle")
const runtime = "hermes-bundle:runtime"

/** Packages loaded from their installed place instead of being bundled. */
const external = ["better-sqlite3"]

/**
 * Modules of dependencies that a run never uses, evaluated on their first call instead of at
 * start: docker-modem's ssh:// transport (ssh2, ~40 ms to load; DockerEngine reaches ssh:// engines
 * through its own transport, docker/src/internal/sshAgent.ts, which loads ssh2 from the installed
 * dockerode when an ssh engine is used) and dockerode's BuildKit session (grpc-js, proto-loader, protobufjs, ~60 ms; the
 * images are built by scripts/build-images.sh). Each exports one function and its importer only
 * calls it, so a function that requires the module on its first call stands in for it. (A newer
 * dockerode that moved them is only slower: the import is then bundled as it is.)
 */
const deferred = [
  { importer: "docker-modem/lib/modem.js", request: "./ssh" },
  { importer: "dockerode/lib/docker.js", request: "./session" }
]

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"))

/** The package a file belongs to: the nearest package.json upward that has a name. */
const packageOf = (file) => {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, "package.json")
    if (existsSync(manifest)) {
      const { name } = readJson(manifest)
      if (name !== undefined) return { dir: realpathSync(dir), name }
    }
  }
  throw new Error(`no package above ${file}`)
}

/** Where Node finds package `name` for a file of the package in `dir` (node_modules, upward). */
const installedAt = (dir, name) => {
  for (let d = dir; d !== dirname(d); d = dirname(d)) {
    const candidate = join(d, "node_modules", name)
    if (existsSync(join(candidate, "package.json"))) return realpathSync(candidate)
  }
  return undefined
}

/**
 * The dependency names that lead from the CLI to the package in `target` (each a dependency of the
 * one before, the first one of the CLI's), shortest first; [] for the CLI itself. Checked here as
 * the bundle will follow it at run time (each name resolved by require() from the one before), so
 * a package whose manifest lets require() resolve nothing fails the build, not a user's run.
 */
const chainTo = (target) => {
  const queue = [{ dir: realpathSync(root), chain: [] }]
  const seen = new Set([queue[0].dir])
  while (queue.length > 0) {
    const { dir, chain } = queue.shift()
    if (dir === target) {
      let from = join(outdir, "cli.cjs")
      for (const name of chain) from = createRequire(from).resolve(name)
      if (packageOf(from).dir !== target)
        throw new Error(`require() along ${chain.join(" > ")} leads to ${from}, not into ${target}`)
      return chain
    }
    const manifest = readJson(join(dir, "package.json"))
    for (const name of Object.keys({
      ...manifest.dependencies,
      ...manifest.optionalDependencies,
      ...manifest.peerDependencies
    })) {
      const at = installedAt(dir, name)
      if (at !== undefined && !seen.has(at)) {
        seen.add(at)
        queue.push({ dir: at, chain: [...chain, name] })
      }
    }
  }
  throw new Error(`${target} is bundled but not reachable through the CLI's dependencies`)
}

// The run-time half: `require` as the last package of a chain has it, and a package's files.
const runtimeSource = `
import { createRequire } from "node:module"
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
const requireOf = (chain) => chain.reduce((r, name) => createRequire(r.resolve(name)), createRequire(import.meta.url))
const dirs = new Map()
export const requireFrom = requireOf
const packageDir = (chain) => {
  const key = chain.join("\\0")
  let dir = dirs.get(key)
  if (dir === undefined) {
    const name = chain.at(-1)
    dir = dirname(requireOf(chain.slice(0, -1)).resolve(name))
    const isIt = (d) => existsSync(join(d, "package.json")) && JSON.parse(readFileSync(join(d, "package.json"), "utf8")).name === name
    while (!isIt(dir)) {
      if (dir === dirname(dir)) throw new Error("hermes-sandbox bundle: cannot find the directory of " + name)
      dir = dirname(dir)
    }
    dirs.set(key, dir)
  }
  return dir
}
/** __filename and __dirname of a file of the last package of \`chain\`, found on first use. */
export const place = (chain, file) => {
  let filename
  return {
    get filename() { return (filename ??= join(packageDir(chain), file)) },
    get dirname() { return dirname(this.filename) }
  }
}
`

const placesPlugin = {
  name: "installed-places",
  setup(build) {
    build.onResolve({ filter: new RegExp(`^${runtime}$`) }, () => ({ path: runtime, namespace: runtime }))
    build.onLoad({ filter: /.*/, namespace: runtime }, () => ({
      contents: runtimeSource,
      loader: "js",
      resolveDir: root
    }))

    // An external package: required at run time as the package that imports it requires it.
    build.onResolve({ filter: new RegExp(`^(${external.join("|")})$`) }, (args) => {
      const owner = packageOf(args.importer)
      return {
        path: `${args.path} from ${owner.name}`,
        namespace: "external",
        pluginData: { chain: chainTo(owner.dir), name: args.path }
      }
    })
    build.onLoad({ filter: /.*/, namespace: "external" }, ({ pluginData: { chain, name } }) => ({
      contents: `import { requireFrom } from "${runtime}"\nexport default requireFrom(${JSON.stringify(chain)})(${JSON.stringify(name)})\n`,
      loader: "js",
      resolveDir: root
    }))

    for (const { importer, request } of deferred) {
      const filter = new RegExp(`^${request.replace(/[./]/g, "\\$&")}$`)
      build.onResolve({ filter }, async (args) => {
        if (
          !args.importer.split("\\").join("/").endsWith(`/node_modules/${importer}`) ||
          args.pluginData === "deferred"
        )
          return undefined
        const real = await build.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          pluginData: "deferred"
        })
        if (real.errors.length > 0) return { errors: real.errors }
        return { path: real.path, namespace: "deferred" }
      })
    }
    build.onLoad({ filter: /.*/, namespace: "deferred" }, (args) => ({
      contents: `let f\nmodule.exports = function () { return (f ??= require(${JSON.stringify(args.path)})).apply(this, arguments) }\n`,
      loader: "js",
      resolveDir: dirname(args.path)
    }))

    // rxjs's export map sends Node to its CommonJS build, which cannot be tree-shaken (all 223
    // modules, ~150 KB); its ES2015 build is the same library.
    build.onResolve({ filter: /^rxjs$/ }, async (args) => {
      if (args.pluginData === "rxjs") return undefined
      const cjs = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "rxjs" })
      if (cjs.errors.length > 0) return { errors: cjs.errors }
      const esm = cjs.path.replace(/([\\/])dist[\\/]cjs[\\/]index\.js$/, "$1dist$1esm$1index.js")
      return { path: existsSync(esm) ? esm : cjs.path }
    })

    // A relative require of a native addon is left to run time (rewritten below), built or not.
    build.onResolve({ filter: /\.node$/ }, (args) => ({ path: args.path, external: true }))

    // A dependency's CommonJS file that uses its own place gets the installed one, looked up
    // when the file first asks (most never do: commander names __dirname only in a comment,
    // grpc-js reads its .proto files only for a BuildKit session), not when it loads.
    build.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, async (args) => {
      const source = readFileSync(args.path, "utf8")
      const addon = /\brequire\((["'])(\.{1,2}\/[^"']+\.node)\1\)/g
      if (!/\b__(dirname|filename)\b/.test(source) && !addon.test(source)) return undefined
      const withAddons = source.replace(
        addon,
        (_, _q, path) => `require(require("node:path").join(__dirname, ${JSON.stringify(path)}))`
      )
      // esbuild's define rewrites the identifiers only (not comments or strings).
      const { code } = await esbuild.transform(withAddons, {
        loader: "js",
        define: { __dirname: "__hermesPlace.dirname", __filename: "__hermesPlace.filename" }
      })
      if (!code.includes("__hermesPlace")) return undefined
      const pkg = packageOf(args.path)
      const file = relative(pkg.dir, realpathSync(args.path)).split("\\").join("/")
      // One line: the file's own line numbers stay as they were.
      return {
        contents: `var __hermesPlace = require("${runtime}").place(${JSON.stringify(chainTo(pkg.dir))}, ${JSON.stringify(file)});${code}`,
        loader: "js"
      }
    })
  }
}

const metafileOnly = process.env.HERMES_BUNDLE_METAFILE_ONLY
if (!metafileOnly) rmSync(outdir, { recursive: true, force: true })
const bundle = (entry, outfile) =>
  esbuild.build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile: join(outdir, outfile),
    bundle: true,
    // One CommonJS file, for the launcher's code cache (scripts/launcher.cjs). The commands stay
    // lazy inside it: main.ts's import() of a command becomes a call that evaluates the command's
    // modules (and the SDK's) when it runs, so --help evaluates none of them.
    format: "cjs",
    platform: "node",
    target: "node20",
    // No import() left in the bundle: a vm.Script from the code cache cannot import() on Node 20
    // (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING, see the launcher), and a dependency's import() of a
    // built-in (the OTLP exporter's import("http"), which failed every export the CLI made)
    // becomes a require(). Bundled modules were already evaluated in place; the Kubernetes
    // package, ES modules only, goes through the launcher's import() (docker's importKubernetes).
    supported: { "dynamic-import": false },
    // The sibling packages' built dist/, as a plain-Node run in the workspace loads them (an
    // installed package's manifest points there anyway).
    conditions: ["hermes-sandbox-modules"],
    // main.ts and the docker package's packageRoot.ts resolve from their module's URL: the bundle's.
    define: { "import.meta.url": "__hermesImportMetaUrl" },
    banner: { js: `var __hermesImportMetaUrl = require("node:url").pathToFileURL(__filename).href;` },
    minify: true,
    plugins: [placesPlugin],
    // The Kubernetes runtime (and its 1.5 MiB client) stays out, an optional package: docker's
    // importKubernetes loads it only for --kubernetes, through the launcher's import().
    external: ["@hermes-sandbox/kubernetes"],
    legalComments: "linked",
    metafile: true,
    write: false,
    logLevel: "warning"
  })
const result = await bundle("dist/bin.js", "cli.cjs")
// The daemon's client (src/daemon/entry.ts), which the launcher tries first for `run`: commander
// and the CLI's own light modules, never Effect or the SDK (checked here, by what esbuild put in).
const client = await bundle("dist/daemon/entry.js", "daemon-client.cjs")
const heavy = Object.keys(client.metafile.inputs).filter((input) =>
  /(^|[\\/])(node_modules[\\/](effect|rxjs|dockerode|better-sqlite3|@effect)[\\/]|packages[\\/](docker|events|mcp)[\\/])/.test(
    input
  )
)
if (heavy.length > 0)
  throw new Error(`the daemon client's bundle holds the SDK's modules: ${heavy.slice(0, 5).join(", ")}`)
if (metafileOnly) {
  writeFileSync(metafileOnly, JSON.stringify(result.metafile))
  process.exit(0)
}
mkdirSync(outdir, { recursive: true })
for (const output of [...result.outputFiles, ...client.outputFiles]) {
  if (!output.path.endsWith(".cjs")) {
    writeFileSync(output.path, output.contents)
    continue
  }
  // bin.ts's #! line: the launcher compiles the file as a function body, where it is a syntax error.
  const code = output.text.replace(/^#!.*\n/, "")
  // The launcher reads it as latin1, which is the same text only for ASCII (esbuild's default charset).
  const nonAscii = code.search(/[\u0080-\uffff]/)
  if (nonAscii >= 0) throw new Error(`${output.path}: a non-ASCII character at ${nonAscii}`)
  writeFileSync(output.path, code)
}
if (process.env.HERMES_BUNDLE_METAFILE)
  writeFileSync(process.env.HERMES_BUNDLE_METAFILE, JSON.stringify(result.metafile))

// The launcher, with the command names it keeps a cache for (what --help lists).
const help = execFileSync(process.execPath, [join(outdir, "cli.cjs"), "--help"], { encoding: "utf8" })
const commands = [...help.slice(help.indexOf("\nCommands:\n")).matchAll(/^ {2}([a-z][a-z-]*)\b/gm)].map((m) => m[1])
if (!commands.includes("run")) throw new Error(`no commands found in the bundle's --help:\n${help}`)
const launcher = readFileSync(join(root, "scripts", "launcher.cjs"), "utf8")
if (!launcher.includes("const COMMANDS = []"))
  throw new Error("scripts/launcher.cjs: no `const COMMANDS = []` to fill in")
writeFileSync(
  join(outdir, "hermes-sandbox.cjs"),
  launcher.replace("const COMMANDS = []", `const COMMANDS = ${JSON.stringify(commands)}`),
  { mode: 0o755 }
)

const kib = (r) => Math.round(r.outputFiles.reduce((n, f) => n + f.contents.byteLength, 0) / 1024)
console.log(
  `bundle: ${relative(process.cwd(), outdir) || "."}/cli.cjs (${kib(result)} KiB), daemon-client.cjs (${kib(client)} KiB), hermes-sandbox.cjs (commands ${commands.join(", ")})`
)
