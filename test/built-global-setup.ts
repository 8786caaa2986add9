/**
 * The real-engine tiers import the packages' dist/ (vitest.config.ts, BUILT_PACKAGES): refuse to
 * run on a dist/ that is missing or older than its sources, which would test code that is no
 * longer there. `pnpm build` (or `pnpm test:engine`, which builds first) makes it current.
 */
import { existsSync, readdirSync, statSync } from "node:fs"
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
    for (const file of sources(src)) {
      const built = join(root, "packages", pkg, "dist", file.replace(/\.ts$/, ".js"))
      if (!existsSync(built) || statSync(built).mtimeMs < statSync(join(src, file)).mtimeMs)
        stale.push(relative(root, join(src, file)))
    }
  }
  return stale
}

export default function setup() {
  const stale = staleBuilds()
  if (stale.length > 0) {
    throw new Error(
      `the real-engine tiers test the built packages, and dist/ is missing or older than ${stale.length} source file(s) ` +
        `(${stale.slice(0, 5).join(", ")}${stale.length > 5 ? ", ..." : ""}): run \`pnpm build\` first (pnpm test:engine does)`
    )
  }
}
