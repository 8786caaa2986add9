// `pnpm build`'s compile step: ONE TypeScript program over the whole project (tsconfig.json: the
// packages' sources, their tests, the examples, the benchmarks), type-checked once, and each
// package's sources emitted into its own dist/ (JavaScript and declarations).
//
// Why one program: a program's cost is mostly loading and checking what every file imports
// (effect's declarations above all). One tsc per package (five programs) and then `tsc -p .` for
// the type-check (a sixth) checked the packages' sources twice and effect's declarations six times:
// ~70 CPU-s against ~33 for this one (BENCHMARKS.md, "The test suite's own time"). The emitted
// JavaScript is the same; the declarations are equivalent (a union's members may be listed in
// another order), and they name sibling packages by their package names, as before.
//
//   node scripts/build.mjs            type-check everything, emit packages/*/src into packages/*/dist
//   node scripts/build.mjs --no-emit  type-check only (what `tsc -p .` reports)
//   --api-check                       also compare the API reports (packages/*/api.md) with the
//                                     declarations, emitted in memory (scripts/api-report.mjs)
//   --api                             also write the API reports (`pnpm api`)
//
// Exits 1 when the project has a type error (after emitting, as tsc does), printing tsc's lines.
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("..", import.meta.url))
const emit = !process.argv.includes("--no-emit")
const api = process.argv.includes("--api-check") ? "check" : process.argv.includes("--api") ? "write" : undefined

const config = ts.getParsedCommandLineOfConfigFile(
  join(root, "tsconfig.json"),
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"))
    }
  }
)
// The emit is redirected file by file (writeFile below), so outDir is only where tsc computes the
// paths from: packages/<name>/src/<file> under it becomes packages/<name>/dist/<file>.
const staging = join(root, ".build")
const options = {
  ...config.options,
  noEmit: !emit && api === undefined,
  declaration: emit || api !== undefined,
  rootDir: root,
  outDir: staging
}
const program = ts.createProgram({ rootNames: config.fileNames, options, projectReferences: config.projectReferences })

/** packages/<name>/src/<path>, relative to the root with forward slashes: [name, path]. */
const PACKAGE_SOURCE = /^packages\/([^/]+)\/src\/(.+)$/
const posix = (p) => p.split(sep).join("/")
const isPackageSource = (file) => PACKAGE_SOURCE.test(posix(relative(root, file)))

// What `tsc -p .` reports (its noEmit diagnostics), for every file; declaration diagnostics (a type
// that cannot be named in a .d.ts) come with the emit, only for what is emitted.
const diagnostics = [
  ...config.errors,
  ...program.getConfigFileParsingDiagnostics(),
  ...program.getOptionsDiagnostics(),
  ...program.getGlobalDiagnostics(),
  ...program.getSyntacticDiagnostics(),
  ...program.getSemanticDiagnostics()
]

let written = 0
/** The declarations emitted, by "<package>/<file under dist/>", for the API reports. */
const declarations = new Map()
if (emit || api !== undefined) {
  const writeFile = (file, text) => {
    const m = PACKAGE_SOURCE.exec(posix(relative(staging, file)))
    if (m === null) throw new Error(`build: unexpected output ${file}`)
    if (api !== undefined && m[2].endsWith(".d.ts")) declarations.set(`${m[1]}/${m[2]}`, text)
    if (!emit) return
    const dest = join(root, "packages", m[1], "dist", m[2])
    mkdirSync(dirname(dest), { recursive: true })
    writeFileSync(dest, text)
    written++
  }
  for (const source of program.getSourceFiles()) {
    if (source.isDeclarationFile || !isPackageSource(source.fileName)) continue
    diagnostics.push(...program.emit(source, writeFile, undefined, !emit).diagnostics)
  }
}

const host = {
  getCanonicalFileName: (f) => f,
  getCurrentDirectory: () => root,
  getNewLine: () => "\n"
}
const sorted = ts.sortAndDeduplicateDiagnostics(diagnostics)
if (sorted.length > 0) process.stdout.write(ts.formatDiagnostics(sorted, host))
const errors = sorted.filter((d) => d.category === ts.DiagnosticCategory.Error).length
process.stderr.write(
  `build: ${program.getSourceFiles().filter((s) => !s.isDeclarationFile).length} files type-checked` +
    (emit ? `, ${written} files written to packages/*/dist` : "") +
    (errors > 0 ? `; ${errors} error${errors === 1 ? "" : "s"}\n` : "\n")
)
let apiStale = 0
if (api !== undefined && errors === 0) {
  const { apply } = await import("./api-report.mjs")
  const stale = apply((name, file) => declarations.get(`${name}/${file}`), api === "check")
  if (api === "write" && stale.length > 0) process.stderr.write(`build: wrote ${stale.join(", ")}\n`)
  if (api === "check") apiStale = stale.length
}
process.exitCode = errors > 0 || apiStale > 0 ? 1 : 0
