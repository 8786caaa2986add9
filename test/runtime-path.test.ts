/**
 * What a built package's runtime path loads (issue 27): importing each package's entry as installed
 * (its bundle/, scripts/bundle-packages.mjs) in plain Node loads a few files of ours and no
 * test-only module (vitest, our testing entries, the fake runtime), takes effect from the one copy
 * inlined in @hermes-sandbox/events/vendor (never the installed effect's hundreds of modules), and
 * leaves the dependencies that only some paths need (dockerode, ajv, yaml, PostgreSQL, ssh2, SQLite)
 * to those paths. What the bundles hold on that path (esbuild's metafiles), and what the CLI's
 * bundle holds: no test runner nor test double, and fast-check only as much as effect/Schema's own
 * import of it keeps.
 *
 * The engine tier runs it: it needs the build (`pnpm build`), which the unit tier runs beside, not
 * before. test/support/recordLoads.mjs records every module a child process loads (ES modules by a
 * resolve hook, CommonJS by Module._resolveFilename) with its importer.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("..", import.meta.url))
const recorder = join(root, "test", "support", "recordLoads.mjs")

interface Load {
  readonly importer: string
  readonly loaded: string
}

/** Every module `import(entry)` loads in a fresh `node`, with its importer. */
const loadsOf = (entry: string): ReadonlyArray<Load> => {
  const dir = mkdtempSync(join(tmpdir(), "runtime-path-"))
  const file = join(dir, "loads.txt")
  try {
    const r = spawnSync(
      process.execPath,
      [
        "--conditions=hermes-sandbox-dist",
        "--import",
        recorder,
        "--input-type=module",
        "-e",
        `await import(${JSON.stringify(entry)})`
      ],
      // From packages/mcp every workspace package resolves (mcp depends on events, core and docker).
      { cwd: join(root, "packages", "mcp"), env: { ...process.env, HERMES_RECORD_LOADS: file }, encoding: "utf8" }
    )
    if (r.status !== 0) throw new Error(`import(${entry}) exited ${r.status}: ${r.stderr}`)
    return readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => {
        const [importer = "", loaded = ""] = l.split("\t")
        return { importer, loaded }
      })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The npm package a module file belongs to (the last node_modules segment), or undefined. */
const packageOf = (url: string): string | undefined => {
  const m = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  return m?.[1]
}

/** Test-only modules: test runners, and our testing entries and doubles (src or dist). */
const TEST_ONLY_PACKAGES = ["vitest", "@vitest/runner", "@effect/vitest", "@fast-check/vitest", "vite", "tsx"]
const isOurTestOnly = (url: string) =>
  /\/packages\/[^/]+\/(dist|src)\/(testing|FakeRuntime|[^/]*[Ff]ake[^/]*|internal\/fake[^/]*|test\/.*)\.(js|ts)$/.test(
    url
  )

/** Dependencies that only some paths need: each loads on its first use, not with the entry. */
const LAZY = [
  "dockerode",
  "docker-modem",
  "ssh2",
  "@grpc/grpc-js",
  "ajv",
  "yaml",
  "pg",
  "@effect/sql-pg",
  "better-sqlite3",
  // OpenTelemetry: imported only when an OTLP endpoint is set (core's Tracing.ts).
  "@effect/opentelemetry",
  "@opentelemetry/api",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/sdk-trace",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/exporter-trace-otlp-proto",
  "@opentelemetry/otlp-exporter-base",
  "@opentelemetry/otlp-transformer",
  "@opentelemetry/core",
  "@opentelemetry/resources",
  "@opentelemetry/semantic-conventions"
]

const ENTRIES = ["@hermes-sandbox/events", "@hermes-sandbox/core", "@hermes-sandbox/docker", "@hermes-sandbox/mcp"]

describe("the runtime path of the built packages", () => {
  for (const entry of ENTRIES) {
    it(`import("${entry}") loads a few bundled files, effect once, no test-only module, and no lazy dependency`, () => {
      const loads = loadsOf(entry)
      // Our own entry was loaded from bundle/ (the condition worked), so the rest means something.
      expect(loads.some((l) => /\/packages\/[^/]+\/bundle\/[^/]+\.js$/.test(l.loaded))).toBe(true)
      const ours = new Set(loads.map((l) => l.loaded).filter((u) => /\/packages\/[^/]+\/bundle\//.test(u)))
      // Per package, the entries imported and the chunk they share (from dist/: 130–300 modules of ours).
      expect(ours.size).toBeLessThanOrEqual(40)

      // effect, and the fast-check its Schema imports, come inlined: not one of their modules loads.
      const installed = loads
        .map((l) => packageOf(l.loaded))
        .filter((p) => p === "effect" || p === "fast-check" || p === "pure-rand")
      expect([...new Set(installed)]).toEqual([])

      const testOnly = loads
        .map((l) => l.loaded)
        .filter((u) => TEST_ONLY_PACKAGES.includes(packageOf(u) ?? "") || isOurTestOnly(u))
      expect([...new Set(testOnly)]).toEqual([])

      // Imported by our own modules, that is (the MCP SDK brings its own ajv: not ours to defer).
      const lazy = loads
        .filter((l) => /\/packages\/[^/]+\/bundle\//.test(l.importer) && LAZY.includes(packageOf(l.loaded) ?? ""))
        .map((l) => `${packageOf(l.loaded)} from ${l.importer.replace(/.*\/packages\//, "")}`)
      expect([...new Set(lazy)]).toEqual([])
    })
  }

  it("the packages' bundles hold, on the runtime path, no test runner or test double, and fast-check only through effect/Schema", () => {
    const dir = mkdtempSync(join(tmpdir(), "runtime-path-"))
    try {
      // The bundles as `pnpm build` makes them, built again without writing bundle/ (tests import them).
      const r = spawnSync(process.execPath, [join(root, "scripts", "bundle-packages.mjs")], {
        cwd: root,
        env: { ...process.env, HERMES_BUNDLE_METAFILES: dir, HERMES_BUNDLE_METAFILES_ONLY: "1" },
        encoding: "utf8"
      })
      if (r.status !== 0) throw new Error(`bundle-packages.mjs exited ${r.status}: ${r.stderr}`)
      for (const pkg of ["events", "core", "docker", "mcp"]) {
        const meta = JSON.parse(readFileSync(join(dir, `${pkg}.json`), "utf8")) as {
          inputs: Record<string, { imports: ReadonlyArray<{ path: string; external?: boolean }> }>
          outputs: Record<
            string,
            {
              entryPoint?: string
              imports: ReadonlyArray<{ path: string; kind: string; external?: boolean }>
              inputs: Record<string, { bytesInOutput: number }>
            }
          >
        }
        // The outputs a runtime entry loads: the non-test entries and the chunks they import, statically.
        const onPath = new Set<string>()
        const visit = (output: string) => {
          if (onPath.has(output)) return
          onPath.add(output)
          for (const i of meta.outputs[output]?.imports ?? [])
            if (i.external !== true && i.kind === "import-statement") visit(i.path)
        }
        for (const [output, o] of Object.entries(meta.outputs))
          if (o.entryPoint !== undefined && !isOurTestOnly(o.entryPoint.replace(/^[a-z-]+:/, ""))) visit(output)
        expect(onPath.size).toBeGreaterThan(1)
        const bundled = new Set(
          [...onPath].flatMap((o) =>
            Object.entries(meta.outputs[o]?.inputs ?? {})
              .filter(([, i]) => i.bytesInOutput > 0)
              .map(([path]) => resolve(root, path))
          )
        )
        const unwanted = [...bundled].filter((p) => TEST_ONLY_PACKAGES.includes(packageOf(p) ?? "") || isOurTestOnly(p))
        expect(unwanted, pkg).toEqual([])
        const fastCheckImporters = Object.entries(meta.inputs)
          .filter(([path]) => packageOf(resolve(root, path)) !== "fast-check" && bundled.has(resolve(root, path)))
          .filter(([, i]) => i.imports.some((imp) => packageOf(resolve(root, imp.path)) === "fast-check"))
          .map(([path]) => resolve(root, path))
        for (const importer of fastCheckImporters)
          expect(importer).toMatch(/\/node_modules\/effect\/dist\/esm\/FastCheck\.js$/)
        // effect's arbitraries (what the testing entries build on) stay with them.
        expect(
          [...bundled].filter((p) => /\/node_modules\/effect\/dist\/esm\/Arbitrary\.js$/.test(p)),
          pkg
        ).toEqual([])
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the CLI's bundle holds no test runner or test double, and fast-check only through effect/Schema", () => {
    const dir = mkdtempSync(join(tmpdir(), "runtime-path-"))
    const metafile = join(dir, "meta.json")
    try {
      // The bundle as `pnpm build` makes it, built again without writing bundle/ (tests may be running it).
      const r = spawnSync(process.execPath, [join(root, "packages", "cli", "scripts", "bundle.mjs")], {
        cwd: join(root, "packages", "cli"),
        env: { ...process.env, HERMES_BUNDLE_METAFILE_ONLY: metafile },
        encoding: "utf8"
      })
      if (r.status !== 0) throw new Error(`bundle.mjs exited ${r.status}: ${r.stderr}`)
      const meta = JSON.parse(readFileSync(metafile, "utf8")) as {
        inputs: Record<string, { imports: ReadonlyArray<{ path: string }> }>
        outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>
      }
      const cli = join(root, "packages", "cli")
      // Inputs that left code in the output (a tree-shaken module leaves none), as absolute paths.
      const bundled = new Set(
        Object.values(meta.outputs).flatMap((o) =>
          Object.entries(o.inputs)
            .filter(([, i]) => i.bytesInOutput > 0)
            .map(([path]) => resolve(cli, path))
        )
      )
      expect([...bundled].some((p) => p.includes("/node_modules/effect/"))).toBe(true)
      const unwanted = [...bundled].filter((p) => TEST_ONLY_PACKAGES.includes(packageOf(p) ?? "") || isOurTestOnly(p))
      expect(unwanted).toEqual([])
      // What is left of fast-check after tree-shaking (~44 KiB) is there through effect/Schema's import alone.
      const fastCheckImporters = new Set(
        Object.entries(meta.inputs)
          .filter(([path]) => packageOf(resolve(cli, path)) !== "fast-check" && bundled.has(resolve(cli, path)))
          .filter(([, i]) => i.imports.some((imp) => packageOf(resolve(cli, imp.path)) === "fast-check"))
          .map(([path]) => resolve(cli, path))
      )
      for (const importer of fastCheckImporters)
        expect(importer).toMatch(/\/node_modules\/effect\/dist\/esm\/FastCheck\.js$/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
