/**
 * This package's root directory (package.json, seccomp/, watchdog/, assets/), where its modules
 * find the files they ship with.
 *
 * Found by resolving the package's own name rather than from a module's URL: the installed CLI is
 * one bundled file set (packages/cli/scripts/bundle.mjs) that inlines this package, and there
 * `import.meta.url` is the bundle's, not this module's. From either place the name resolves to
 * this package (its own name from inside it, the CLI's dependency from the bundle) and to its
 * entry, src/index.ts or dist/index.js, one level below the root; the root is the same whichever
 * export condition picked the entry.
 */
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"

const resolveRoot = (): URL => {
  try {
    return new URL("../", pathToFileURL(createRequire(import.meta.url).resolve("@hermes-sandbox/docker")))
  } catch {
    // Not resolvable by name (this package bundled into something that does not install it):
    // this module's own place, packages/docker/{src,dist}/internal/, as when it was not bundled.
    return new URL("../../", import.meta.url)
  }
}

export const packageRoot: URL = resolveRoot()
