/**
 * A TypeScript fixture (a process a test starts and kills: an executor's owner, a fleet host) run
 * in plain Node, as a user's program runs: esbuild bundles the fixture's own files into one ES
 * module under test/.built/, with every package left external, so Node resolves the workspace's
 * packages to their build (dist/, by the workspace's `hermes-sandbox-dist` export condition).
 * Started through tsx instead, each process paid ~2.5 s of CPU before its first line (tsx's
 * loader hooks every one of the ~700 modules the SDK imports); this way, ~1 s.
 *
 * The real-engine tiers build first (`pnpm test:engine`, scripts/test-tiers.sh); without a build
 * this fails and says so.
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { buildSync } from "esbuild"

const root = new URL("../..", import.meta.url).pathname
const outDir = join(root, "test/.built")
const built = new Map<string, string>()

/** The bundled fixture's path (built once per process, named by its content). */
export const bundleFixture = (source: string): string => {
  const known = built.get(source)
  if (known !== undefined) return known
  if (!existsSync(join(root, "packages/docker/dist/index.js"))) {
    throw new Error(`${source} runs on the packages' build, which is missing: run \`pnpm build\` first`)
  }
  const result = buildSync({ entryPoints: [source], bundle: true, packages: "external", platform: "node", format: "esm", target: "node20", write: false })
  const text = result.outputFiles[0]!.contents
  const out = join(outDir, `${basename(source, ".ts")}-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.mjs`)
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

/** argv to start a fixture in plain Node on the packages' build: `spawn(cmd[0], [...cmd.slice(1), ...args])`. */
export const fixtureCommand = (source: string): Array<string> => [process.execPath, "--conditions=hermes-sandbox-dist", bundleFixture(source)]
