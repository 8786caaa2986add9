// Fails when a run-time import cycle exists inside any package's src (as Effect's
// scripts/circular.mjs). Type-only imports are skipped: they vanish at run time, and the port
// modules (Journal.ts, SandboxRuntime.ts) are meant to be imported back as types by internals.
import madge from "madge"
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.resolve(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname), "..")
const sources = fs
  .readdirSync(path.join(root, "packages"))
  .map((name) => path.join(root, "packages", name, "src"))
  .filter((dir) => fs.existsSync(dir))

const result = await madge(sources, {
  baseDir: root,
  fileExtensions: ["ts"],
  tsConfig: path.join(root, "tsconfig.base.json"),
  detectiveOptions: { ts: { skipTypeImports: true }, tsx: { skipTypeImports: true } }
})

const circular = result.circular()
// Another workspace package is a boundary, not followed: packages depend one way
// (events <- core <- docker <- cli), which their package.json dependencies already enforce.
const unresolved = result.warnings().skipped.filter((specifier) => !specifier.startsWith("@hermes-sandbox/"))
if (unresolved.length > 0) {
  console.error(
    `import(s) that could not be resolved (a cycle through them would go unseen):\n  ${unresolved.join("\n  ")}`
  )
  process.exit(1)
}
if (circular.length > 0) {
  console.error(`${circular.length} run-time import cycle(s):`)
  for (const cycle of circular) console.error(`  ${[...cycle, cycle[0]].join(" -> ")}`)
  process.exit(1)
}
console.log(`no run-time import cycle in ${Object.keys(result.obj()).length} modules`)
