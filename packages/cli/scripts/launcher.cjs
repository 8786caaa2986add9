#!/usr/bin/env node
// The installed `hermes-sandbox` (copied to bundle/hermes-sandbox.cjs by scripts/bundle.mjs): runs
// the bundled CLI, bundle/cli.cjs, through V8's code cache (for `run`, the daemon's client,
// bundle/daemon-client.cjs, first: see the end of this file). Compiling the bundle took ~90 ms of
// every start, and each function a command calls was compiled again on every run; the cache,
// written at the end of a command's first run with everything that run compiled, is read in a
// few milliseconds. (Node 20 has no compile cache for ES modules, `module.enableCompileCache` is
// Node 22's: hence one CommonJS file, compiled here with vm.Script.)
//
// One cache file per command (each calls other functions), under $XDG_CACHE_HOME/hermes-sandbox
// or ~/.cache/hermes-sandbox, named by the bundle's SHA-256, Node's version and the architecture:
// V8 checks its own version and flags and the source's length, not the source itself (the caches
// of a few bundles are kept, installs used side by side; older ones are removed). A cache is
// code, so only a directory of this user's, writable by no one else, is used. Failing to read or
// write it only costs the compile. NODE_DISABLE_COMPILE_CACHE=1 turns it off, as it does Node's.
"use strict"
const { createHash } = require("node:crypto")
const fs = require("node:fs")
const Module = require("node:module")
const os = require("node:os")
const path = require("node:path")
const vm = require("node:vm")

/** The CLI's commands (`hermes-sandbox --help`), filled in by scripts/bundle.mjs. */
const COMMANDS = []
/** Caches of this many builds of each bundle are kept (installs used side by side); older builds' are removed. */
const KEEP_BUNDLES = 4
/** The daemon client's caches are named by its own bundle and pruned among themselves. */
const CLIENT_CACHE = "daemon-client"

/** Whether `dir` is this user's and no one else may write to it. */
const owned = (dir) => {
  const s = fs.statSync(dir)
  return s.isDirectory() && (process.getuid === undefined || s.uid === process.getuid()) && (s.mode & 0o022) === 0
}

/** Runs bundle/<name> (CommonJS) through its code cache (`cacheName`); returns its module.exports. */
const load = (name, cacheName) => {
  const file = path.join(__dirname, name)
  const bytes = fs.readFileSync(file)
  // ASCII only (esbuild escapes the rest; scripts/bundle.mjs checks): latin1 is the same text, decoded faster.
  const source = bytes.toString("latin1")

  const cache = (() => {
    const off = process.env.NODE_DISABLE_COMPILE_CACHE
    if (off !== undefined && off !== "" && off !== "0") return undefined
    const xdg = process.env.XDG_CACHE_HOME
    const dir = path.join(xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".cache"), "hermes-sandbox")
    const key = createHash("sha256").update(bytes).digest("hex").slice(0, 16)
    return { dir, key, file: path.join(dir, `compile-${key}-${process.version}-${process.arch}-${cacheName}.bin`) }
  })()

  let cachedData
  if (cache !== undefined) {
    try {
      if (owned(cache.dir)) cachedData = fs.readFileSync(cache.file)
    } catch {
      // No cache yet (or no such directory): this run writes it.
    }
  }

  const script = new vm.Script(Module.wrap(source), {
    filename: file,
    ...(cachedData === undefined ? {} : { cachedData })
  })

  if (cache !== undefined && (cachedData === undefined || script.cachedDataRejected === true)) {
    process.once("exit", () => {
      try {
        fs.mkdirSync(cache.dir, { recursive: true, mode: 0o700 })
        if (!owned(cache.dir)) return
        const partial = `${cache.file}.${process.pid}.tmp`
        fs.writeFileSync(partial, script.createCachedData(), { mode: 0o600 })
        fs.renameSync(partial, cache.file)
        // Each build of a bundle has its own key: keep the most recently written few of this bundle's.
        const isClient = (name) => name.endsWith(`-${CLIENT_CACHE}.bin`)
        const newest = new Map()
        for (const name of fs.readdirSync(cache.dir)) {
          const key = /^compile-([0-9a-f]{16})-/.exec(name)?.[1]
          if (key === undefined || isClient(name) !== (cacheName === CLIENT_CACHE)) continue
          const written = fs.statSync(path.join(cache.dir, name)).mtimeMs
          const entry = newest.get(key) ?? { written: 0, names: [] }
          entry.written = Math.max(entry.written, written)
          entry.names.push(name)
          newest.set(key, entry)
        }
        const old = [...newest.entries()].filter(([key]) => key !== cache.key).sort((a, b) => b[1].written - a[1].written).slice(KEEP_BUNDLES - 1)
        for (const [, { names }] of old) for (const name of names) fs.rmSync(path.join(cache.dir, name), { force: true })
      } catch {
        // A read-only or full disk: the next run compiles again.
      }
    })
  }

  const loaded = new Module(file, module)
  loaded.filename = file
  script.runInThisContext()(loaded.exports, Module.createRequire(file), loaded, file, __dirname)
  return loaded.exports
}

// A script compiled by vm.Script cannot import() on Node 20 once it comes from a code cache
// (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING; importModuleDynamically is lost with the cache, and is
// experimental): this file, which Node loaded itself, lends its import() to the bundle's one
// optional package (@hermes-sandbox/kubernetes, resolved from here as from the bundle).
globalThis[Symbol.for("hermes-sandbox.import")] = (specifier) => import(specifier)

const cli = () => load("cli.cjs", COMMANDS.includes(process.argv[2]) ? process.argv[2] : "main")

// `run` goes to a running daemon when there is one and it takes the run (src/daemon/entry.ts: a
// stat of its socket first; the client holds no Effect and no SDK); else, or when the client is
// missing, the full CLI runs it.
if (process.argv[2] === "run" && !process.argv.includes("--no-daemon") && fs.existsSync(path.join(__dirname, "daemon-client.cjs"))) {
  load("daemon-client.cjs", CLIENT_CACHE)
    .runViaDaemon(process.argv)
    .then(
      (code) => {
        if (code === undefined) cli()
        else process.exitCode = code
      },
      (error) => {
        process.stderr.write(`hermes-sandbox: ${error instanceof Error ? error.message : String(error)}\n`)
        process.exitCode = 125
      }
    )
} else cli()
