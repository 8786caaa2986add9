/**
 * A TypeScript fixture (a process a test starts and kills: an executor's owner, a fleet host, a
 * journal writer) run in plain Node: esbuild bundles the fixture with the workspace's packages
 * (their sources, compiled as the build compiles them) and every pure-JS dependency into one ES
 * module under test/.built/, so a start parses one file instead of resolving and loading ~700
 * modules. Per start: through tsx ~2.5 s of CPU (its loader hooks every module), on the packages'
 * build with the dependencies left external ~1.1–1.3 s, bundled ~0.4 s.
 *
 * Left external: native addons (better-sqlite3, found from test/'s own dependencies; `.node`
 * files) and the optional ones their packages try and do without (cpu-features, pg-native).
 * No build is needed, so the unit tier's fixtures use it too.
 *
 * Also left external: @hermes-sandbox/kubernetes, which the docker package import()s only when
 * asked for `runtime: { kubernetes }` (createExecutor.ts). Bundled, its client (@kubernetes/client-node,
 * ~3.9 MB) was half of each fixture's 10 MB file, parsed at every start though no fixture runs on a
 * cluster: ~0.55 CPU-s to a victim's first execution, ~0.45 without. A fixture that asked for it
 * would get the InvalidRequest "needs @hermes-sandbox/kubernetes" (found from test/, the package is
 * its TypeScript sources, which plain Node does not load).
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { type BuildOptions, buildSync, version } from "esbuild"

const root = new URL("../..", import.meta.url).pathname
const outDir = join(root, "test/.built")
const built = new Map<string, string>()

/** Packages required at run time rather than bundled. */
const EXTERNAL = ["better-sqlite3", "cpu-features", "pg-native", "*.node", "@hermes-sandbox/kubernetes"]
/**
 * What bundled CommonJS dependencies expect of their scope: a `require` for the external packages
 * (from the bundle's place, test/: its own dependencies) and `__dirname`/`__filename`, the bundle's
 * (ssh2 computes a Windows helper's path from it at load; nothing a fixture runs reads files there).
 */
const REQUIRE = [
  `import { createRequire as __fixtureRequire } from "node:module";`,
  `import { dirname as __fixtureDirname } from "node:path";`,
  `import { fileURLToPath as __fixturePath } from "node:url";`,
  `const require = __fixtureRequire(import.meta.url);`,
  `const __filename = __fixturePath(import.meta.url);`,
  `const __dirname = __fixtureDirname(__filename);`
].join(" ")

const OPTIONS = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: EXTERNAL,
  banner: { js: REQUIRE },
  // Input paths in the metafile (and the bundle's comments) relative to the repository, whichever
  // directory the test runs from.
  absWorkingDir: root,
  logLevel: "error"
} as const satisfies BuildOptions

/**
 * What decides a bundle besides its entry: esbuild's version and options, the workspace's manifests
 * (export maps, dependencies) and the lockfile (which version of each dependency is installed).
 */
const setting = (): string => {
  const hash = createHash("sha256").update(`${version}\n${JSON.stringify(OPTIONS)}\n`)
  const manifests = ["package.json", "pnpm-lock.yaml", "test/package.json"]
  for (const pkg of readdirSync(join(root, "packages"))) manifests.push(`packages/${pkg}/package.json`)
  for (const file of manifests)
    if (existsSync(join(root, file))) hash.update(`${file}\n`).update(readFileSync(join(root, file)))
  return hash.digest("hex")
}

/** The digest of every file a bundle was made of (the metafile's inputs), by path and content. */
const digestOf = (inputs: ReadonlyArray<string>): string => {
  const hash = createHash("sha256").update(setting())
  for (const input of inputs) {
    const file = join(root, input)
    hash.update(`\n${input}\n`)
    // Not a file (esbuild's "(disabled):..." stand-ins): its name is what there is.
    if (existsSync(file)) hash.update(readFileSync(file))
  }
  return hash.digest("hex")
}

/** Written next to a bundle: the files it was made of, and their digest then. */
interface Made {
  readonly out: string
  readonly inputs: ReadonlyArray<string>
  readonly digest: string
}

/** Writes `text` to `file` as one step (test files build the same fixture side by side). */
const writeAtomically = (file: string, text: string | Uint8Array) => {
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, text)
  renameSync(tmp, file)
}

/**
 * The bundled fixture's path (named by its content). Built once per process, and reused across
 * processes (the test files, the tiers) while every file it was made of is as it was: the record
 * test/.built/<fixture>-<entry's hash>.json lists them, and a bundle whose inputs' digest differs
 * is built again. Each build costs esbuild ~1–1.5 CPU-s; the check reads the ~700 inputs (~40 ms).
 */
export const bundleFixture = (source: string): string => {
  const known = built.get(source)
  if (known !== undefined) return known
  const record = join(
    outDir,
    `${basename(source, ".ts")}-${createHash("sha256").update(source).digest("hex").slice(0, 12)}.json`
  )
  try {
    const made = JSON.parse(readFileSync(record, "utf8")) as Made
    if (existsSync(made.out) && digestOf(made.inputs) === made.digest) {
      built.set(source, made.out)
      return made.out
    }
  } catch {
    // No record yet, or one being replaced: build.
  }
  const started = Date.now()
  const result = buildSync({ ...OPTIONS, entryPoints: [source], write: false, metafile: true })
  const text = result.outputFiles[0]!.contents
  const out = join(
    outDir,
    `${basename(source, ".ts")}-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.mjs`
  )
  mkdirSync(outDir, { recursive: true })
  if (!existsSync(out)) writeAtomically(out, text)
  const inputs = Object.keys(result.metafile.inputs).sort()
  const digest = digestOf(inputs)
  // A file changed while esbuild read it: the digest may not be the bundle's; no record (built again next time).
  const changed = inputs.some((i) => existsSync(join(root, i)) && statSync(join(root, i)).mtimeMs >= started)
  if (!changed) writeAtomically(record, JSON.stringify({ out, inputs, digest } satisfies Made))
  built.set(source, out)
  return out
}

/** argv to start a fixture in plain Node: `spawn(cmd[0], [...cmd.slice(1), ...args])`. */
export const fixtureCommand = (source: string): Array<string> => [process.execPath, bundleFixture(source)]
