/**
 * The packages as a user gets them: every package packed (`pnpm pack`, after `pnpm build`), the
 * tarballs installed into a new project outside the workspace, once with npm and once with pnpm,
 * third-party packages from the registry as a user would get them (npm's cache and pnpm's store as
 * they are). In each project, with the project as the working directory and nothing of the
 * workspace reachable (no workspace entry on PATH, no NODE_PATH or NODE_OPTIONS, no npm_* or pnpm
 * variables): a strict consumer type-checks against the published declarations
 * (`skipLibCheck: false`), plain Node runs an execution through the Promise API, and the installed
 * `hermes-sandbox` bin runs a program and builds the images from the package's own assets.
 *
 * Under pnpm 10 better-sqlite3's build script is not run (it is not approved), which is what a pnpm
 * user meets first: the durable journal fails with SqliteAddonMissing and its fix, the rest works.
 * npm runs it: prebuild-install fetches the prebuilt addon for the user's Node from better-sqlite3's
 * releases, which this machine cannot reach, so the same file is given to it locally (see
 * localPrebuilds); without it npm compiled the addon from source, ~2 minutes of CPU.
 */
import { type SpawnOptions, spawn } from "node:child_process"
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { delimiter, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PROMISE_API_PROGRAM, README_PLAIN_NODE_PROGRAM } from "./support/plainNodeProgram.js"

const repoRoot = realpathSync(fileURLToPath(new URL("..", import.meta.url)))
const PACKAGES = ["events", "core", "docker", "kubernetes", "mcp", "cli"] as const
const PNPM_VERSION = "10.34.0"
/**
 * pnpm as `npx -y pnpm@<version>` runs it, without npx's own start (~1 s of CPU each): the pnpm
 * that runs this suite (`pnpm test` sets npm_execpath to it) when it is that version.
 */
const pnpm = ((): readonly [string, ReadonlyArray<string>] => {
  const execPath = process.env["npm_execpath"] ?? ""
  const manifest = join(execPath, "..", "..", "package.json")
  const version = existsSync(manifest)
    ? (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string })
    : undefined
  return version?.name === "pnpm" && version.version === PNPM_VERSION
    ? [process.execPath, [execPath]]
    : ["npx", ["-y", `pnpm@${PNPM_VERSION}`]]
})()
const INSTALL_TIMEOUT_MS = 15 * 60_000
const started = Date.now()
const timings: Array<string> = []

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const insideRepo = (p: string) => p === repoRoot || p.startsWith(repoRoot + sep)

/**
 * What a user's shell has, and nothing that leads back to the workspace: PATH without its
 * node_modules/.bin entries (pnpm and vitest add them), no NODE_PATH/NODE_OPTIONS, none of the
 * npm_*, pnpm_* or INIT_CWD variables a `pnpm test` run passes down.
 */
const userEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue
    if (/^(npm_|pnpm_|PNPM_|NODE_PATH$|NODE_OPTIONS$|INIT_CWD$|VITEST|TSX_)/i.test(k)) continue
    env[k] = v
  }
  env["PATH"] = (process.env["PATH"] ?? "")
    .split(delimiter)
    .filter((d) => d !== "" && !insideRepo(d) && !d.includes(`${sep}node_modules${sep}`))
    .join(delimiter)
  return env
}

const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { cwd: string; input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }
) =>
  new Promise<Ran>((resolve, reject) => {
    const spawnOptions: SpawnOptions = {
      cwd: options.cwd,
      env: options.env ?? userEnv(),
      stdio: ["pipe", "pipe", "pipe"]
    }
    const child = spawn(command, args, spawnOptions)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
    child.stdin!.end(options.input ?? "")
  })

const timed = async <A>(label: string, f: () => Promise<A>): Promise<A> => {
  const t0 = Date.now()
  try {
    return await f()
  } finally {
    timings.push(`${label} ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  }
}

const ok = (r: Ran, what: string) => {
  if (r.code !== 0)
    throw new Error(
      `${what} exited ${r.code}\n--- stdout\n${r.stdout.slice(-4000)}\n--- stderr\n${r.stderr.slice(-4000)}`
    )
  return r
}

const scratch = mkdtempSync(join(tmpdir(), "hermes-installed-"))
const tarballDir = join(scratch, "tarballs")
const tarballs: Record<string, string> = {}

/** The packed tarballs as file: dependencies (npm takes the nested @hermes-sandbox/* ranges from them). */
const ownDependencies = () => Object.fromEntries(PACKAGES.map((p) => [`@hermes-sandbox/${p}`, `file:${tarballs[p]}`]))

// What a consumer installs next to the packages: the peers it shares types with, and its compiler.
const userDependencies = { effect: "^3.22.4", rxjs: "^7.8.2" }
const userDevDependencies = { typescript: "~5.9.3", "@types/node": "^20.19.0" }

const CONSUMER_TS = `// A strict consumer of every public entry point.
import { Executor, type ExecutionResult, InvalidRequest } from "@hermes-sandbox/core"
import * as CoreTesting from "@hermes-sandbox/core/testing"
import { createExecutor, DockerExecutor, ImageBuild, type SandboxExecutor } from "@hermes-sandbox/docker"
import { createFakeExecutor } from "@hermes-sandbox/docker/testing"
import { type EventEnvelope, MemoryJournal, SqliteJournal } from "@hermes-sandbox/events"
import { summarize } from "@hermes-sandbox/events/Projection"
import { arbLifecycle } from "@hermes-sandbox/events/testing"
import { McpSandbox, serveHttp, type ToolSchemas } from "@hermes-sandbox/mcp"
import { Effect, FastCheck, Layer } from "effect"
import { filter, map, type Observable } from "rxjs"

const types = (executor: SandboxExecutor): Observable<string> =>
  executor.events$.pipe(filter((e: EventEnvelope) => e.type !== "ExecutionRequested"), map((e) => e.type))

const program: Effect.Effect<ExecutionResult, unknown, Executor.Executor> = Effect.flatMap(Executor.Executor, (executor) =>
  executor.executeCode({ language: "python", code: "print(6*7)" }))
const layer = DockerExecutor.layer({}).pipe(Layer.provide(MemoryJournal.layer()))
export const viaEffect = (): Promise<ExecutionResult> => Effect.runPromise(Effect.provide(program, layer))

export const viaPromise = async (): Promise<{ exitCode: number; stdout: string; types: Array<string> }> => {
  await using executor = await createExecutor({ sweepOnStart: false, watchdog: false })
  const seen: Array<string> = []
  types(executor).subscribe((t) => seen.push(t))
  const r = await executor.executeCode({ language: "python", code: "print(6*7)" })
  return { exitCode: r.exitCode, stdout: r.stdout, types: seen }
}

export const durable = (path: string) =>
  SqliteJournal.make({ path }).pipe(Effect.catchTag("SqliteAddonMissing", (e) => Effect.die(e.message)))
export const fake = () => createFakeExecutor()
export const invalid: typeof InvalidRequest = InvalidRequest
export const fakeRuntime = CoreTesting.FakeRuntime.layer()
export const properties = () => FastCheck.assert(FastCheck.property(arbLifecycle(), (l) => l.events.length > 0 && summarize([]).total === 0))
export const build: typeof ImageBuild.buildImages = ImageBuild.buildImages
export const mcpHttp = async (token: string) => {
  const sandbox = await McpSandbox.open({ journal: "memory" })
  const serving = await serveHttp(sandbox, { token })
  return { url: serving.url, sessions: serving.sessions(), close: () => serving.close().then(() => sandbox.close()) }
}
export const statusOf = (r: ToolSchemas.ExecuteCodeResult): string => r.status
`

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    module: "NodeNext",
    moduleResolution: "NodeNext",
    target: "ES2022",
    lib: ["ES2022", "ESNext.Disposable"],
    types: ["node"],
    skipLibCheck: false,
    noEmit: true
  },
  files: ["consumer.ts"]
}

/** Internal modules, each under a directory its package's exports map to null. */
const FENCED = [
  "@hermes-sandbox/events/internal/envelope",
  "@hermes-sandbox/core/internal/sessionShell",
  "@hermes-sandbox/core/kernel/Run",
  "@hermes-sandbox/core/session/plan",
  "@hermes-sandbox/core/tools/stubs",
  "@hermes-sandbox/docker/internal/dockerCall",
  "@hermes-sandbox/mcp/tools/definitions"
]
/** Public top-level modules, entries of their own (like `effect/Schema`). */
const PUBLIC_DEEP = [
  "@hermes-sandbox/events/Projection",
  "@hermes-sandbox/core/RunnerProtocol",
  "@hermes-sandbox/docker/ImageBuild"
]

type Manager = "npm" | "pnpm"

const project = (manager: Manager): string => {
  const dir = join(scratch, `consumer-${manager}`)
  mkdirSync(dir)
  const manifest: Record<string, unknown> = {
    name: `consumer-${manager}`,
    private: true,
    type: "module",
    dependencies: { ...ownDependencies(), ...userDependencies },
    devDependencies: userDevDependencies
  }
  // pnpm resolves the packages' own @hermes-sandbox/* dependencies from the registry (where they are
  // not published yet) unless told to take them from the tarballs too.
  if (manager === "pnpm") manifest["pnpm"] = { overrides: ownDependencies() }
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`)
  writeFileSync(join(dir, "consumer.ts"), CONSUMER_TS)
  writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(TSCONFIG, null, 2)}\n`)
  writeFileSync(join(dir, "main.mjs"), PROMISE_API_PROGRAM)
  writeFileSync(join(dir, "readme.mjs"), README_PLAIN_NODE_PROGRAM)
  return dir
}

/**
 * better-sqlite3's prebuilt addon as its install script would download it for this Node (the
 * releases' file name, with the addon at build/Release/), packed from the addon the workspace built
 * from the same version; handed to prebuild-install through its own option, local_prebuilds. If npm
 * resolves another version the name does not match, and npm compiles it from source as before.
 */
const localPrebuilds = async (): Promise<Record<string, string>> => {
  const manifest = createRequire(join(repoRoot, "packages", "events", "package.json")).resolve(
    "better-sqlite3/package.json"
  )
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string }
  const staging = join(scratch, "prebuild")
  mkdirSync(join(staging, "build", "Release"), { recursive: true })
  copyFileSync(
    join(manifest, "..", "build", "Release", "better_sqlite3.node"),
    join(staging, "build", "Release", "better_sqlite3.node")
  )
  const dir = join(scratch, "prebuilds")
  mkdirSync(dir)
  const file = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`
  ok(await run("tar", ["-czf", join(dir, file), "-C", staging, "build"], { cwd: scratch }), "tar (the prebuilt addon)")
  return { npm_config_better_sqlite3_local_prebuilds: dir }
}

/**
 * At the machine's ordinary priority: with the prebuilt addon an install is mostly waiting (~25 s
 * here). (At nice 19, which the compile once needed, a loaded CI machine starved the installs for
 * ten minutes, and this file ended the whole run.)
 */
const install = (manager: Manager, dir: string) =>
  timed(`${manager} install`, async () =>
    ok(
      manager === "npm"
        ? await run("npm", ["install", "--no-audit", "--no-fund"], {
            cwd: dir,
            env: { ...userEnv(), ...(await localPrebuilds()) },
            timeoutMs: INSTALL_TIMEOUT_MS
          })
        : await run(pnpm[0], [...pnpm[1], "install", "--reporter=append-only"], {
            cwd: dir,
            timeoutMs: INSTALL_TIMEOUT_MS
          }),
      `${manager} install`
    )
  )

/** Every file of the installed @hermes-sandbox packages, resolved: none may lead into the workspace. */
const installedFiles = (dir: string): Array<string> => {
  const files: Array<string> = []
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name)
      if (entry.isDirectory()) walk(p)
      else files.push(realpathSync(p))
    }
  }
  for (const p of PACKAGES) walk(realpathSync(join(dir, "node_modules", "@hermes-sandbox", p)))
  return files
}

const projects: Partial<Record<Manager, string>> = {}

beforeAll(async () => {
  for (const p of PACKAGES) {
    for (const file of ["index.js", "index.d.ts"].map((f) => (p === "cli" ? f.replace("index", "main") : f))) {
      if (!existsSync(join(repoRoot, "packages", p, "dist", file)))
        throw new Error(`packages/${p}/dist/${file} is missing: run pnpm build first`)
    }
  }
  expect(insideRepo(scratch), `${scratch} must be outside the workspace ${repoRoot}`).toBe(false)
  mkdirSync(tarballDir)
  await timed("pack", async () => {
    // Every package in one pnpm process (each start of pnpm costs ~1.5 CPU-s), as `pnpm -r pack`
    // publishes them; the docker package's prepack and postpack write and remove its assets/.
    ok(
      await run(pnpm[0], [...pnpm[1], "-r", "--filter", "./packages/*", "pack", "--pack-destination", tarballDir], {
        cwd: repoRoot,
        env: { ...process.env }
      }),
      "pnpm -r pack"
    )
    for (const p of PACKAGES) {
      const version = (
        JSON.parse(readFileSync(join(repoRoot, "packages", p, "package.json"), "utf8")) as { version: string }
      ).version
      tarballs[p] = join(tarballDir, `hermes-sandbox-${p}-${version}.tgz`)
      expect(existsSync(tarballs[p]!), tarballs[p]).toBe(true)
    }
  })
  expect(existsSync(join(repoRoot, "packages", "docker", "assets")), "postpack removes packages/docker/assets").toBe(
    false
  )
  // Both at once: they mostly wait on the registry and link from their caches.
  const managers: ReadonlyArray<Manager> = ["npm", "pnpm"]
  await Promise.all(
    managers.map(async (m) => {
      const dir = project(m)
      await install(m, dir)
      projects[m] = dir
    })
  )
}, 2 * INSTALL_TIMEOUT_MS)

afterAll(() => {
  process.stderr.write(
    `[installed.e2e] ${timings.join(", ")}; whole file ${((Date.now() - started) / 1000).toFixed(1)} s\n`
  )
  if (process.env["HERMES_KEEP_INSTALLED"] === undefined) rmSync(scratch, { recursive: true, force: true })
})

describe.each(["npm", "pnpm"] as const)("installed with %s, outside the workspace", (manager) => {
  const dir = () => projects[manager]!
  const bin = () => join(dir(), "node_modules", ".bin", "hermes-sandbox")

  it("the project's own packages come only from the tarballs: no installed file leads into the workspace", () => {
    const files = installedFiles(dir())
    expect(files.length).toBeGreaterThan(0)
    expect(files.filter(insideRepo)).toEqual([])
    const docker = realpathSync(join(dir(), "node_modules", "@hermes-sandbox", "docker"))
    for (const asset of [
      "assets/scripts/build-images.sh",
      "assets/images/python/Dockerfile",
      "assets/images/python-data/Dockerfile",
      "assets/images/python-data/no-pythran.control",
      "assets/images/runner/hermes-run.c",
      "seccomp/hermes-sandbox.json",
      "watchdog/watchdog.mjs",
      "LICENSE",
      "README.md"
    ]) {
      expect(existsSync(join(docker, asset)), asset).toBe(true)
    }
    for (const p of PACKAGES) {
      const manifest = JSON.parse(
        readFileSync(join(dir(), "node_modules", "@hermes-sandbox", p, "package.json"), "utf8")
      ) as Record<string, unknown>
      expect(manifest, p).toMatchObject({
        license: "MIT",
        engines: { node: ">=20" },
        repository: { directory: `packages/${p}` }
      })
      expect(existsSync(join(dir(), "node_modules", "@hermes-sandbox", p, "LICENSE")), `${p}/LICENSE`).toBe(true)
    }
  })

  it("a strict consumer type-checks against the published declarations (skipLibCheck: false)", async () => {
    await timed(`${manager} tsc`, async () =>
      ok(await run(join(dir(), "node_modules", ".bin", "tsc"), ["-p", "."], { cwd: dir() }), "tsc")
    )
  })

  it("a deep import of an internal module is refused; a public module is an entry of its own", async () => {
    // One Node process tries each specifier: the code of the error, or "ok".
    const program = `const out = {}
for (const s of ${JSON.stringify([...FENCED, ...PUBLIC_DEEP])}) {
  try { await import(s); out[s] = "ok" } catch (e) { out[s] = e.code ?? String(e) }
}
console.log(JSON.stringify(out))`
    const r = ok(await run(process.execPath, ["--input-type=module", "-e", program], { cwd: dir() }), "deep imports")
    expect(JSON.parse(r.stdout.trim())).toEqual({
      ...Object.fromEntries(FENCED.map((s) => [s, "ERR_PACKAGE_PATH_NOT_EXPORTED"])),
      ...Object.fromEntries(PUBLIC_DEEP.map((s) => [s, "ok"]))
    })
  })

  it("plain Node runs an execution through the Promise API", async () => {
    const r = ok(await run(process.execPath, ["main.mjs"], { cwd: dir() }), "node main.mjs")
    expect(JSON.parse(r.stdout.trim())).toEqual({
      exitCode: 0,
      stdout: "42\n",
      types: ["ExecutionRequested", "ContainerCreated", "ContainerStarted", "ContainerExited", "ContainerDestroyed"]
    })
  })

  it("plain Node runs the README's plain-JavaScript snippet as written", async () => {
    const r = ok(await run(process.execPath, ["readme.mjs"], { cwd: dir() }), "node readme.mjs")
    const lines = r.stdout.trim().split("\n")
    expect(lines).toContain('result 0 "42\\n"')
    expect(lines).toContain("ContainerDestroyed")
  })

  it("the installed bin runs a program (hermes-sandbox run) and knows its version", async () => {
    const version = ok(await run(bin(), ["--version"], { cwd: dir() }), "--version")
    expect(version.stdout.trim()).toBe("0.1.0")
    const journal = join(dir(), "journal.sqlite")
    const r = await run(bin(), ["run", "--json", "--journal", journal, "-e", "print(6*7)"], { cwd: dir() })
    if (manager === "npm") {
      // npm built the addon: the run is recorded in the project's journal.
      expect(JSON.parse(ok(r, "run").stdout.trim())).toMatchObject({ exitCode: 0, stdout: "42\n", timedOut: false })
      const summary = ok(
        await run(bin(), ["events", "summary", "--journal", journal, "--json"], { cwd: dir() }),
        "events summary"
      )
      expect(summary.stdout).toContain('"total":1')
    } else {
      // pnpm 10 did not run better-sqlite3's build script: the journal says how to fix that.
      expect(r.code).toBe(125)
      const error = (JSON.parse(r.stdout.trim()) as { error: { _tag: string; reason: string; message: string } }).error
      expect(error).toMatchObject({ _tag: "SqliteAddonMissing", reason: "not-built" })
      expect(error.message).toContain("pnpm approve-builds")
      expect(error.message).toContain("npm rebuild better-sqlite3")
      const memory = ok(
        await run(bin(), ["run", "--json", "--no-journal", "-e", "print(6*7)"], { cwd: dir() }),
        "run --no-journal"
      )
      expect(JSON.parse(memory.stdout.trim())).toMatchObject({ exitCode: 0, stdout: "42\n" })
    }
  })

  it("the installed bin serves MCP over stdio (hermes-sandbox mcp), driven by the SDK's client", async () => {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js")
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js")
    const transport = new StdioClientTransport({
      command: bin(),
      args: ["mcp", "--no-journal"],
      cwd: dir(),
      env: userEnv() as Record<string, string>,
      stderr: "pipe"
    })
    const client = new Client({ name: "installed-test", version: "1" })
    await client.connect(transport)
    try {
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
        "execute_code",
        "patch",
        "process",
        "read_file",
        "reset_session",
        "run_python",
        "search_files",
        "terminal",
        "write_file"
      ])
      const r = await client.callTool({ name: "execute_code", arguments: { language: "python", code: "print(6*7)" } })
      expect(r.structuredContent).toMatchObject({ status: "success", stdout: "42\n" })
      const t = await client.callTool({ name: "terminal", arguments: { command: "cd /tmp && echo $PWD" } })
      expect(t.structuredContent).toMatchObject({ status: "success", stdout: "/tmp\n" })
    } finally {
      await client.close()
    }
  })

  it(
    "the installed bin builds the images from the package's assets (hermes-sandbox image build)",
    async () => {
      const r = await timed(`${manager} image build`, async () =>
        ok(await run(bin(), ["image", "build"], { cwd: dir(), timeoutMs: 20 * 60_000 }), "image build")
      )
      expect(r.stdout).toContain("built: hermes-sandbox/python:latest")
      expect(r.stdout).toContain("built: hermes-sandbox/node:latest")
      expect(r.stdout).toContain("built: hermes-sandbox/bash:latest")
      // The supervisor was compiled from the package's C source, next to it (not in the checkout).
      const docker = realpathSync(join(dir(), "node_modules", "@hermes-sandbox", "docker"))
      expect(existsSync(join(docker, "assets", "images", "runner", "build", "hermes-run"))).toBe(true)
      expect(relative(repoRoot, docker).startsWith("..")).toBe(true)
    },
    20 * 60_000
  )
})
