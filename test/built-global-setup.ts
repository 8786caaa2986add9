/**
 * The real-engine tiers import the packages as built (vitest.config.ts, BUILT_PACKAGES): each
 * library's bundle/ (scripts/bundle-packages.mjs), made from its dist/, made from its sources.
 * Refuse to run on a dist/ or bundle/ that is missing or older than what it is made from, which
 * would test code that is no longer there. `pnpm build` (or `pnpm test:engine`, which builds
 * first) makes them current.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

/** Every .ts file under `dir` (declaration files excluded), as paths relative to it. */
const sources = (dir: string): Array<string> =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))

/** The sources whose dist/ file is missing or older, as `package/src/file.ts` paths. */
export const staleBuilds = (): Array<string> => {
  const stale: Array<string> = []
  for (const pkg of readdirSync(join(root, "packages"))) {
    const src = join(root, "packages", pkg, "src")
    if (!existsSync(src)) continue
    // A library's bundle is made in one go from all of its dist/: its entry is as old as the bundle.
    const bundled = join(root, "packages", pkg, "bundle", "index.js")
    const bundles = readFileSync(join(root, "packages", pkg, "package.json"), "utf8").includes("./bundle/index.js")
    for (const file of sources(src)) {
      const built = join(root, "packages", pkg, "dist", file.replace(/\.ts$/, ".js"))
      if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(src, file)).mtimeMs)
        stale.push(relative(root, join(src, file)))
      else if (bundles && (!existsSync(bundled) || statSync(bundled).mtimeMs < statSync(built).mtimeMs))
        stale.push(relative(root, built))
    }
  }
  return stale
}

export default function setup() {
  const stale = staleBuilds()
  if (stale.length > 0) {
    throw new Error(
      `the real-engine tiers test the built packages, and dist/ or bundle/ is missing or older than ${stale.length} source file(s) ` +
        `(${stale.slice(0, 5).join(", ")}${stale.length > 5 ? ", ..." : ""}): run \`pnpm build\` first (pnpm test:engine does)`
    )
  }
}
