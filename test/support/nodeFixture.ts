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
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { buildSync } from "esbuild"

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

/** The bundled fixture's path (built once per process, named by its content). */
export const bundleFixture = (source: string): string => {
  const known = built.get(source)
  if (known !== undefined) return known
  const result = buildSync({
    entryPoints: [source],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: EXTERNAL,
    banner: { js: REQUIRE },
    write: false,
    logLevel: "error"
  })
  const text = result.outputFiles[0]!.contents
  const out = join(
    outDir,
    `${basename(source, ".ts")}-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.mjs`
  )
  if (!existsSync(out)) {
    // Test files build the same fixture side by side: each writes its own file, then renames it.
    mkdirSync(outDir, { recursive: true })
    const tmp = `${out}.${process.pid}.tmp`
    writeFileSync(tmp, text)
    renameSync(tmp, out)
  }
  built.set(source, out)
  return out
}

/** argv to start a fixture in plain Node: `spawn(cmd[0], [...cmd.slice(1), ...args])`. */
export const fixtureCommand = (source: string): Array<string> => [process.execPath, bundleFixture(source)]
