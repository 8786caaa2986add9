import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as util from "node:util"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Redacted } from "effect"
import { afterAll } from "vitest"
import {
  defaultHermesConfigPath,
  formatConfig,
  HermesConfigError,
  loadHermesConfig,
  loadHermesConfigAsync,
  loadHermesConfigSync,
  type LoadHermesConfigOptions,
  toExecutorOptions,
  toExecutorOptionsEffect
} from "../src/HermesConfig.js"
import { fromHermesConfig } from "../src/HermesOptions.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const fixture = (name: string) => path.join(here, "fixtures", name)
const example = path.join(here, "..", "..", "..", "examples", "hermes-config.yaml")
const MiB = 1024 * 1024
/** How messages show a path: under the home directory as ~/... */
const shown = (p: string) => (p.startsWith(`${os.homedir()}/`) ? `~${p.slice(os.homedir().length)}` : p)
/** `shown` escaped for a RegExp. */
const shownRe = (p: string) => shown(p).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-config-test-"))
afterAll(() => fs.rmSync(tmpRoot, { recursive: true, force: true }))
let counter = 0
/** Writes a config (and optionally a .env next to it); returns the config path. */
const writeConfig = (yaml: string, dotEnv?: string): string => {
  const dir = path.join(tmpRoot, `case-${counter++}`)
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, "config.yaml"), yaml)
  if (dotEnv !== undefined) fs.writeFileSync(path.join(dir, ".env"), dotEnv)
  return path.join(dir, "config.yaml")
}
const terminal = (...lines: Array<string>) => ["terminal:", ...lines.map((line) => `  ${line}`)].join("\n") + "\n"

/** Loads with an isolated environment (never the real process.env or ~/.hermes). */
const load = (options: LoadHermesConfigOptions) => loadHermesConfigSync({ env: {}, ...options })
const failure = (options: LoadHermesConfigOptions): HermesConfigError => {
  const result = Effect.runSync(Effect.either(loadHermesConfig({ env: {}, ...options })))
  if (Either.isRight(result)) throw new Error("expected the config to be refused")
  expect(result.left._tag).toBe("HermesConfigError")
  return result.left
}

describe("seed configuration", () => {
  it.effect("loads the seed's terminal section with the right values", () =>
    Effect.gen(function* () {
      const loaded = yield* loadHermesConfig({
        path: fixture("hermes-seed.yaml"),
        env: { GITHUB_TOKEN: "ghp_fromenv" }
      })
      const v = loaded.values
      expect(v.backend).toBe("docker")
      expect(v.image).toBe("nikolaik/python-nodejs:python3.11-nodejs20")
      expect(v.volumes).toEqual([{ hostPath: "/opt/data", containerPath: "/data", mode: "ro" }])
      expect(v.forwardEnv.map((f) => [f.name, f.from, Redacted.value(f.value)])).toEqual([
        ["GITHUB_TOKEN", "env", "ghp_fromenv"]
      ])
      expect(v.cpus).toBe(1)
      expect(v.memoryBytes).toBe(5120 * MiB)
      expect(v.scope).toBe("session")
      expect(v.lifetimeSeconds).toBe(300)
      expect(v.cwd).toBe("/workspace")
      expect(v.network).toBe(false)
      expect(v.timeoutMs).toBeUndefined()
      expect(loaded.warnings).toEqual([])
      expect(loaded.fileFound).toBe(true)
      expect(loaded.sources.memoryBytes).toEqual({
        source: "file",
        where: `${shown(fixture("hermes-seed.yaml"))}:11`,
        key: "container_memory"
      })
      expect(loaded.sources.cwd).toEqual({ source: "default" })
    })
  )

  it("loads the hardened seed-2 keys", () => {
    const v = load({ path: fixture("hermes-hardened.yaml") }).values
    expect(v.image).toBe("python:3.12-slim")
    expect(v.network).toBe(false)
    expect(v.memoryBytes).toBe(512 * MiB)
    expect(v.cpus).toBe(1)
    expect(v.cwd).toBe("/workspace")
    expect(v.timeoutMs).toBe(300_000)
    expect(v.scope).toBe("oneShot")
  })

  it("loads the documented example and turns it into executor options", () => {
    const loaded = load({ path: example, env: { GITHUB_TOKEN: "tok" } })
    expect(loaded.warnings).toEqual([])
    const v = loaded.values
    expect(v.volumes).toEqual([
      { hostPath: "/opt/data", containerPath: "/data", mode: "ro" },
      { hostPath: path.join(os.homedir(), "hermes-scratch"), containerPath: "/scratch", mode: "rw" }
    ])
    expect(v.env).toEqual({ PYTHONUNBUFFERED: "1" })
    expect(v.diskBytes).toBe(10240 * MiB)
    // Straight to the core options (memory in bytes, CPUs as CPUs: no conversion left).
    const options = toExecutorOptions(v)
    const image = "nikolaik/python-nodejs:python3.11-nodejs20"
    const limits = { timeoutMs: 300_000, memory: 5120 * MiB, cpus: 1, network: false }
    expect(options.scope).toBe("session")
    expect(options.session).toMatchObject({
      ...limits,
      image,
      workingDir: "/workspace",
      env: { PYTHONUNBUFFERED: "1" },
      lifetimeSeconds: 300,
      mounts: v.volumes
    })
    expect(options.executor).toMatchObject({
      ...limits,
      images: { python: image, javascript: image, bash: image },
      env: { PYTHONUNBUFFERED: "1" },
      diskSize: 10240 * MiB
    })
    expect(Object.keys(options.session.secretEnv ?? {})).toEqual(["GITHUB_TOKEN"])
    expect(Redacted.value(options.session.secretEnv!["GITHUB_TOKEN"]!)).toBe("tok")
    expect(JSON.stringify(options)).not.toContain('tok"')
  })

  it("fromHermesConfig: the executor's options carry the forwarded values (its containers' env), the session's keep them redacted", () => {
    const hermes = fromHermesConfig({ path: example, env: { GITHUB_TOKEN: "tok" } })
    expect(hermes.scope).toBe("session")
    expect(hermes.executor.env).toEqual({ PYTHONUNBUFFERED: "1", GITHUB_TOKEN: "tok" })
    expect(hermes.executor).toMatchObject({ memory: 5120 * MiB, cpus: 1, diskSize: 10240 * MiB })
    expect(Redacted.isRedacted(hermes.session.secretEnv?.["GITHUB_TOKEN"])).toBe(true)
    expect(hermes.session.env).toEqual({ PYTHONUNBUFFERED: "1" })
  })
})

describe("precedence: defaults < file < TERMINAL_* < overrides", () => {
  it("takes each field from the highest source and records where it came from", () => {
    const file = writeConfig(
      terminal("docker_image: from-file:1", "container_memory: 1024", "container_cpu: 2", "cwd: /srv")
    )
    const loaded = load({
      path: file,
      env: { TERMINAL_CONTAINER_MEMORY: "2048", TERMINAL_CONTAINER_CPU: "3", TERMINAL_TIMEOUT: "60" },
      overrides: { container_cpu: 0.5 }
    })
    expect(loaded.values.image).toBe("from-file:1")
    expect(loaded.values.memoryBytes).toBe(2048 * MiB)
    expect(loaded.values.cpus).toBe(0.5)
    expect(loaded.values.timeoutMs).toBe(60_000)
    expect(loaded.values.cwd).toBe("/srv")
    expect(loaded.values.network).toBe(false)
    expect(loaded.sources.image).toEqual({ source: "file", where: `${shown(file)}:2`, key: "docker_image" })
    expect(loaded.sources.memoryBytes).toEqual({
      source: "env",
      where: "TERMINAL_CONTAINER_MEMORY",
      key: "container_memory"
    })
    expect(loaded.sources.cpus).toEqual({ source: "option", where: "overrides.container_cpu", key: "container_cpu" })
    expect(loaded.sources.timeoutMs).toEqual({ source: "env", where: "TERMINAL_TIMEOUT", key: "timeout" })
    expect(loaded.sources.network).toEqual({ source: "default" })
  })

  it("lets a later source win across alias keys (memory_limit in env beats container_memory in file)", () => {
    const file = writeConfig(terminal("container_memory: 1024", "network_enabled: true"))
    const loaded = load({ path: file, env: { TERMINAL_MEMORY_LIMIT: "256M" }, overrides: { docker_network: "none" } })
    expect(loaded.values.memoryBytes).toBe(256 * MiB)
    expect(loaded.sources.memoryBytes.key).toBe("memory_limit")
    expect(loaded.values.network).toBe(false)
    expect(loaded.sources.network).toEqual({
      source: "option",
      where: "overrides.docker_network",
      key: "docker_network"
    })
  })

  it("replaces lists rather than merging them", () => {
    const file = writeConfig(terminal('docker_volumes: ["/a:/a", "/b:/b"]'))
    const loaded = load({ path: file, env: { TERMINAL_DOCKER_VOLUMES: "/c:/c:rw" } })
    expect(loaded.values.volumes).toEqual([{ hostPath: "/c", containerPath: "/c", mode: "rw" }])
  })

  it("prints one line per field with its value and origin", () => {
    const file = writeConfig(terminal("container_memory: 1024"))
    const text = formatConfig(load({ path: file, env: { TERMINAL_CONTAINER_CPU: "2" } }))
    expect(text).toMatch(/^memoryBytes\s+1g \(1073741824 bytes\)\s+# .*config\.yaml:2 \(terminal\.container_memory\)$/m)
    expect(text).toMatch(/^cpus\s+2\s+# env TERMINAL_CONTAINER_CPU$/m)
    expect(text).toMatch(/^cwd\s+\/workspace\s+# default$/m)
    expect(text.split("\n").filter((line) => !line.startsWith("#"))).toHaveLength(13)
  })
})

describe("invalid values name the key, the file and the line", () => {
  it("container_memory that is not a number", () => {
    const error = failure({ path: fixture("hermes-invalid-memory.yaml") })
    expect(error.message).toBe(
      `${shown(fixture("hermes-invalid-memory.yaml"))}:7: terminal.container_memory: expected an integer number of MB >= 6, got "lots"`
    )
    expect(error).toMatchObject({
      key: "container_memory",
      source: "file",
      line: 7,
      path: fixture("hermes-invalid-memory.yaml")
    })
  })

  it.each([
    ["container_memory: 4", 3, "container_memory", "expected an integer number of MB >= 6, got 4"],
    ["container_memory: 512.5", 3, "container_memory", "integer number of MB"],
    ["container_cpu: 0", 3, "container_cpu", "expected a number of CPUs > 0, got 0"],
    ["cpu_quota: -1", 3, "cpu_quota", "> 0"],
    ["container_disk: 0", 3, "container_disk", "integer number of MB >= 1"],
    ["lifetime_seconds: 1.5", 3, "lifetime_seconds", "integer number of seconds"],
    ["timeout: never", 3, "timeout", 'expected a number of seconds > 0, got "never"'],
    ["cwd: workspace", 3, "cwd", 'expected an absolute path, got "workspace"'],
    ["backend: kubernetes", 3, "backend", "expected one of docker, local, ssh, singularity, modal, daytona"],
    ["docker_image: ''", 3, "docker_image", "non-empty image"],
    ["container_persistent: maybe", 3, "container_persistent", "expected a boolean"],
    ["memory_limit: 1x", 3, "memory_limit", "Docker-style size"],
    ["memory_limit: 1k", 3, "memory_limit", "at least 6m"],
    ["docker_network: 'bad name!'", 3, "docker_network", "network name"],
    ["docker_forward_env: [GITHUB_TOKEN, 'A=B']", 3, "docker_forward_env[1]", "NAME"],
    ["docker_env: {'bad name': x}", 3, "docker_env", "variable name"]
  ])("%s", (line, lineNo, label, problem) => {
    const file = writeConfig(`# comment\nterminal:\n  ${line}\n`)
    const error = failure({ path: file })
    expect(error.message).toContain(`${shown(file)}:${lineNo}: terminal.${label}: `)
    expect(error.message).toContain(problem)
    expect(error.line).toBe(lineNo)
  })

  it("names the line of the offending list item", () => {
    const file = writeConfig(terminal("docker_volumes:", '  - "/a:/a"', '  - "relative:/b"'))
    const error = failure({ path: file })
    expect(error.message).toMatch(/config\.yaml:4: terminal\.docker_volumes\[1\]: expected an absolute host path/)
    expect(error.line).toBe(4)
  })

  it("names the environment variable for env sources", () => {
    const error = failure({ env: { HERMES_HOME: path.join(tmpRoot, "none"), TERMINAL_CONTAINER_MEMORY: "lots" } })
    expect(error.message).toBe(
      'environment variable TERMINAL_CONTAINER_MEMORY: expected an integer number of MB >= 6, got "lots"'
    )
    expect(error).toMatchObject({ source: "env", envVar: "TERMINAL_CONTAINER_MEMORY", key: "container_memory" })
  })

  it("names the override for option sources", () => {
    const error = failure({ env: { HERMES_HOME: path.join(tmpRoot, "none") }, overrides: { timeout: -5 } })
    expect(error.message).toBe("overrides.timeout: expected a number of seconds > 0, got -5")
  })

  it("rejects a non-mapping terminal section", () => {
    const file = writeConfig("model: x\nterminal: docker\n")
    expect(failure({ path: file }).message).toBe(
      `${shown(file)}:2: terminal: expected a mapping of settings, got "docker"`
    )
  })

  it("the sync and Promise variants fail with the same typed error", async () => {
    const file = fixture("hermes-invalid-memory.yaml")
    expect(() => loadHermesConfigSync({ path: file, env: {} })).toThrow(HermesConfigError)
    await expect(loadHermesConfigAsync({ path: file, env: {} })).rejects.toMatchObject({
      _tag: "HermesConfigError",
      line: 7
    })
  })
})

describe("unknown keys and conflicts", () => {
  it("warns about unknown keys with their line, never fails", () => {
    const file = fixture("hermes-unknown-keys.yaml")
    const loaded = load({ path: file })
    expect(loaded.values.image).toBe("python:3.12-slim")
    expect(loaded.warnings).toEqual([
      `${shown(file)}:4: terminal.container_memroy is not a known setting (did you mean container_memory?); ignored`,
      `${shown(file)}:5: terminal.ssh_host is a setting of the ssh backend; ignored by hermes-sandbox`,
      `${shown(file)}:6: terminal.colour is not a known setting; ignored`
    ])
  })

  it("warns about unknown TERMINAL_* variables", () => {
    const loaded = load({ path: writeConfig(""), env: { TERMINAL_DOCKER_IMAGES: "x", TERMINAL_EMULATOR: "JetBrains" } })
    expect(loaded.warnings).toEqual([
      "environment variable TERMINAL_DOCKER_IMAGES is not a known setting (did you mean docker_image?); ignored",
      "environment variable TERMINAL_EMULATOR is not a known setting; ignored"
    ])
  })

  it("refuses two spellings of the same setting in one file, naming both keys", () => {
    const file = fixture("hermes-conflict.yaml")
    const error = failure({ path: file })
    expect(error.message).toBe(
      `${shown(file)}:5: terminal.memory_limit: terminal.container_memory (line 3) and terminal.memory_limit both set the memory limit; keep only one of them`
    )
  })

  it("refuses conflicts within the environment and within overrides", () => {
    const none = path.join(tmpRoot, "none")
    expect(
      failure({ env: { HERMES_HOME: none, TERMINAL_CONTAINER_CPU: "1", TERMINAL_CPU_QUOTA: "2" } }).message
    ).toContain("TERMINAL_CONTAINER_CPU and TERMINAL_CPU_QUOTA both set the CPU limit")
    expect(
      failure({ env: { HERMES_HOME: none }, overrides: { docker_network: true, network_enabled: false } }).message
    ).toContain("overrides.docker_network and overrides.network_enabled both set network access")
  })

  it("a non-docker backend loads with a warning but cannot become executor options", () => {
    const loaded = load({ path: writeConfig(terminal("backend: ssh")) })
    expect(loaded.values.backend).toBe("ssh")
    expect(loaded.warnings.join("\n")).toContain('backend "ssh" is not supported')
    expect(() => toExecutorOptions(loaded.values)).toThrow(/only runs the "docker" backend/)
    const result = Effect.runSync(Effect.either(toExecutorOptionsEffect(loaded.values)))
    expect(Either.isLeft(result) && result.left._tag).toBe("HermesConfigError")
  })
})

describe("volumes", () => {
  it("are read-only by default and honour :rw; ~ expands", () => {
    const loaded = load({
      path: writeConfig(terminal('docker_volumes: ["/opt/a:/a", "/opt/b:/b:rw", "/opt/c:/c:ro", "~/d:/d"]'))
    })
    expect(loaded.values.volumes).toEqual([
      { hostPath: "/opt/a", containerPath: "/a", mode: "ro" },
      { hostPath: "/opt/b", containerPath: "/b", mode: "rw" },
      { hostPath: "/opt/c", containerPath: "/c", mode: "ro" },
      { hostPath: path.join(os.homedir(), "d"), containerPath: "/d", mode: "ro" }
    ])
  })

  it.each([
    ["/opt/a:data", "absolute container path"],
    ["/opt/a:/a:z", "mode to be ro or rw"],
    ["/opt/a", "host:container"],
    ["/opt/a:/", "container's root"]
  ])("refuses %s", (spec, problem) => {
    expect(failure({ path: writeConfig(terminal(`docker_volumes: ["${spec}"]`)) }).message).toContain(problem)
  })

  it("refuses a container path mounted twice", () => {
    expect(failure({ path: writeConfig(terminal('docker_volumes: ["/a:/x", "/b:/x"]')) }).message).toContain(
      "mounted twice"
    )
  })

  it.each([
    ["/var/run/docker.sock:/var/run/docker.sock", "Docker socket"],
    ["/run/docker.sock:/sock", "Docker socket"],
    ["/var/run/../run/docker.sock:/sock", "Docker socket"],
    ["/var/run:/hostrun", "contains the Docker socket"],
    ["/:/host:ro", "host's root directory"]
  ])("refuses %s unless allowDangerousMounts", (spec, problem) => {
    const file = writeConfig(terminal("docker_volumes:", `  - "${spec}"`))
    const error = failure({ path: file })
    expect(error.message).toMatch(
      new RegExp(`^${shownRe(file)}:3: terminal\\.docker_volumes\\[0\\]: refusing to mount `)
    )
    expect(error.message).toContain(problem)
    expect(error.message).toContain("allowDangerousMounts: true")
    const forced = load({ path: file, allowDangerousMounts: true })
    expect(forced.values.volumes).toHaveLength(1)
    expect(forced.warnings.join("\n")).toContain("allowDangerousMounts is on")
  })

  it("refuses any socket file named docker.sock, found through a symlink", async () => {
    const dir = fs.mkdtempSync(path.join("/tmp", "hs-sock-")) // short path: unix socket paths are limited
    const socketPath = path.join(dir, "docker.sock")
    const server = net.createServer()
    await new Promise<void>((resolve) => server.listen(socketPath, resolve))
    try {
      fs.symlinkSync(socketPath, path.join(dir, "innocent"))
      const direct = failure({ path: writeConfig(terminal(`docker_volumes: ["${socketPath}:/s"]`)) })
      expect(direct.message).toContain("Docker socket")
      const viaLink = failure({ path: writeConfig(terminal(`docker_volumes: ["${dir}/innocent:/s"]`)) })
      expect(viaLink.message).toContain("Docker socket")
      // a regular file called docker.sock is harmless
      fs.writeFileSync(path.join(dir, "plain"), "")
      fs.mkdirSync(path.join(dir, "sub"))
      fs.writeFileSync(path.join(dir, "sub", "docker.sock"), "")
      expect(
        load({ path: writeConfig(terminal(`docker_volumes: ["${dir}/sub/docker.sock:/s"]`)) }).values.volumes
      ).toHaveLength(1)
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("refuses the socket named by DOCKER_HOST", () => {
    const error = failure({
      path: writeConfig(terminal('docker_volumes: ["/srv/engine:/e"]')),
      env: { DOCKER_HOST: "unix:///srv/engine/docker.sock" }
    })
    expect(error.message).toContain("contains the Docker socket /srv/engine/docker.sock")
  })
})

describe("forwarded environment", () => {
  const SECRET = "s3cr3t-Value-9f8e7d"
  const OTHER_SECRET = "another-Secret-1a2b3c"

  it("resolves names from the environment first, then from .env, and warns about missing ones", () => {
    const file = writeConfig(
      terminal('docker_forward_env: ["FROM_ENV", "FROM_FILE", "QUOTED", "MISSING"]'),
      [
        "# secrets",
        `FROM_ENV=${OTHER_SECRET}`,
        `export FROM_FILE=${SECRET}   # inline comment`,
        `QUOTED="a b \\"c\\""`,
        "this line is junk",
        ""
      ].join("\n")
    )
    const loaded = load({ path: file, env: { FROM_ENV: "env-wins" } })
    const byName = Object.fromEntries(loaded.values.forwardEnv.map((f) => [f.name, [f.from, Redacted.value(f.value)]]))
    expect(byName).toEqual({ FROM_ENV: ["env", "env-wins"], FROM_FILE: [".env", SECRET], QUOTED: [".env", 'a b "c"'] })
    expect(loaded.warnings).toEqual([
      `${shown(path.join(path.dirname(file), ".env"))}:5: ignoring a line that is not KEY=VALUE`,
      `docker_forward_env: MISSING is set neither in the environment nor in ${shown(path.join(path.dirname(file), ".env"))}; it will not be forwarded`
    ])
  })

  it("reads process.env when no env option is given", () => {
    const name = `HERMES_SANDBOX_TEST_FWD_${process.pid}`
    process.env[name] = SECRET
    try {
      const loaded = loadHermesConfigSync({ path: writeConfig(terminal(`docker_forward_env: [${name}]`)) })
      expect(loaded.values.forwardEnv.map((f) => [f.name, f.from])).toEqual([[name, "env"]])
      expect(Redacted.value(loaded.values.forwardEnv[0]!.value)).toBe(SECRET)
    } finally {
      delete process.env[name]
    }
  })

  it("never shows a forwarded value: formatConfig, warnings, JSON, inspect, executor options", () => {
    const envFile = path.join(tmpRoot, `secrets-${counter++}.env`)
    fs.writeFileSync(envFile, `GITHUB_TOKEN='${SECRET}'\nUNUSED=${OTHER_SECRET}\n`)
    const loaded = load({
      path: writeConfig(terminal("docker_forward_env: [GITHUB_TOKEN, NPM_TOKEN]")),
      envFile,
      env: { NPM_TOKEN: OTHER_SECRET }
    })
    const shown = formatConfig(loaded)
    expect(shown).toMatch(/^forwardEnv\s+GITHUB_TOKEN=<redacted, from \.env>, NPM_TOKEN=<redacted, from env>/m)
    for (const text of [
      shown,
      loaded.warnings.join("\n"),
      JSON.stringify(loaded),
      util.inspect(loaded, { depth: 10 }),
      String(loaded.values.forwardEnv[0]?.value),
      JSON.stringify(toExecutorOptions(loaded.values))
    ]) {
      expect(text).not.toContain(SECRET)
      expect(text).not.toContain(OTHER_SECRET)
    }
    expect(Redacted.value(loaded.values.forwardEnv[0]!.value)).toBe(SECRET)
  })

  it("a value written where a name belongs is refused without echoing it", () => {
    const error = failure({
      env: { HERMES_HOME: path.join(tmpRoot, "none"), TERMINAL_DOCKER_FORWARD_ENV: `GITHUB_TOKEN=${SECRET}` }
    })
    expect(error.message).toContain("TERMINAL_DOCKER_FORWARD_ENV[0]: expected an environment variable NAME")
    expect(error.message).not.toContain(SECRET)
  })

  it("an explicit envFile that is missing is an error; the default one is not", () => {
    const file = writeConfig(terminal("docker_forward_env: [X]"))
    expect(failure({ path: file, envFile: path.join(tmpRoot, "nope.env") }).message).toContain(".env file not found")
    expect(load({ path: file }).warnings).toHaveLength(1)
  })

  it("redacts secret-looking docker_env values when printing and suggests forwarding", () => {
    const loaded = load({ path: writeConfig(terminal("docker_env:", `  API_TOKEN: ${SECRET}`, "  MODE: fast")) })
    const shown = formatConfig(loaded)
    expect(shown).toContain('API_TOKEN=<redacted>, MODE="fast"')
    expect(shown).not.toContain(SECRET)
    expect(loaded.warnings.join("\n")).toContain("API_TOKEN looks like a secret")
    expect(loaded.warnings.join("\n")).not.toContain(SECRET)
  })

  it("a name in both docker_env and docker_forward_env is forwarded (with a warning)", () => {
    const loaded = load({
      path: writeConfig(terminal("docker_env: {X: plain}", "docker_forward_env: [X]")),
      env: { X: "fwd" }
    })
    expect(loaded.values.env).toEqual({})
    expect(loaded.values.forwardEnv.map((f) => f.name)).toEqual(["X"])
    expect(loaded.warnings).toEqual(["X is both in docker_env and docker_forward_env; the forwarded value wins"])
  })
})

describe("TERMINAL_* parsing", () => {
  const none = path.join(tmpRoot, "absent")
  const fromEnv = (env: Record<string, string>) => load({ env: { HERMES_HOME: none, ...env } }).values

  it.each([
    ["true", "persistent"],
    ["1", "persistent"],
    ["yes", "persistent"],
    ["TRUE", "persistent"],
    ["false", "session"],
    ["0", "session"],
    ["no", "session"]
  ])("booleans: TERMINAL_CONTAINER_PERSISTENT=%s → %s", (raw, scope) => {
    expect(fromEnv({ TERMINAL_CONTAINER_PERSISTENT: raw }).scope).toBe(scope)
  })

  it("numbers and sizes", () => {
    const v = fromEnv({
      TERMINAL_CONTAINER_CPU: "1.5",
      TERMINAL_MEMORY_LIMIT: "1073741824",
      TERMINAL_TIMEOUT: "2.5",
      TERMINAL_CONTAINER_DISK: "100"
    })
    expect(v).toMatchObject({ cpus: 1.5, memoryBytes: 1024 * MiB, timeoutMs: 2500, diskBytes: 100 * MiB })
    expect(fromEnv({ TERMINAL_MEMORY_LIMIT: "1g" }).memoryBytes).toBe(1024 * MiB)
  })

  it("sizes use core's one grammar: fractions that are whole bytes, k/m/g/t with b or ib; never a fraction of a byte", () => {
    expect(fromEnv({ TERMINAL_MEMORY_LIMIT: "1.5g" }).memoryBytes).toBe(1536 * MiB)
    expect(fromEnv({ TERMINAL_MEMORY_LIMIT: "64MiB" }).memoryBytes).toBe(64 * MiB)
    expect(fromEnv({ TERMINAL_MEMORY_LIMIT: "8 mb" }).memoryBytes).toBe(8 * MiB)
    for (const size of ["536870912.5", "7340032.5", "6.1m"]) {
      expect(failure({ env: { HERMES_HOME: none, TERMINAL_MEMORY_LIMIT: size } }).message).toBe(
        `environment variable TERMINAL_MEMORY_LIMIT: expected a Docker-style size such as "512m" or "1g", or a number of bytes, of at least 6m, got ${JSON.stringify(size)}`
      )
    }
  })

  it("lists: JSON array or comma-separated", () => {
    expect(
      fromEnv({ TERMINAL_DOCKER_FORWARD_ENV: '["A", "B"]', A: "1", B: "2" }).forwardEnv.map((f) => f.name)
    ).toEqual(["A", "B"])
    expect(fromEnv({ TERMINAL_DOCKER_FORWARD_ENV: " A, B ,,", A: "1", B: "2" }).forwardEnv.map((f) => f.name)).toEqual([
      "A",
      "B"
    ])
    expect(fromEnv({ TERMINAL_DOCKER_VOLUMES: "/x:/x,/y:/y:rw" }).volumes.map((v) => v.mode)).toEqual(["ro", "rw"])
    expect(failure({ env: { HERMES_HOME: none, TERMINAL_DOCKER_VOLUMES: "[oops" } }).message).toContain(
      "JSON does not parse"
    )
  })

  it("maps: JSON object or comma-separated K=V", () => {
    expect(fromEnv({ TERMINAL_DOCKER_ENV: '{"A": "1", "B": 2}' }).env).toEqual({ A: "1", B: "2" })
    expect(fromEnv({ TERMINAL_DOCKER_ENV: "A=1, B=x=y" }).env).toEqual({ A: "1", B: "x=y" })
    expect(failure({ env: { HERMES_HOME: none, TERMINAL_DOCKER_ENV: "A" } }).message).toContain("expected NAME=value")
  })

  it("docker_network: booleans and names", () => {
    expect(fromEnv({ TERMINAL_DOCKER_NETWORK: "none" }).network).toBe(false)
    expect(fromEnv({ TERMINAL_DOCKER_NETWORK: "bridge" }).network).toBe(true)
    expect(fromEnv({ TERMINAL_DOCKER_NETWORK: "false" }).network).toBe(false)
    expect(fromEnv({ TERMINAL_NETWORK_ENABLED: "on" }).network).toBe(true)
    const loaded = load({ env: { HERMES_HOME: none, TERMINAL_DOCKER_NETWORK: "host" } })
    expect(loaded.values.network).toBe(true)
    expect(loaded.warnings.join("\n")).toContain("host networking is never used")
  })

  it("empty variables count as unset", () => {
    expect(fromEnv({ TERMINAL_DOCKER_IMAGE: "", TERMINAL_CWD: "  " }).cwd).toBe("/workspace")
  })
})

describe("files", () => {
  it("a missing file at the default path gives defaults and a note", () => {
    const hermesHome = path.join(tmpRoot, "no-such-home")
    const loaded = load({ env: { HERMES_HOME: hermesHome } })
    expect(loaded.path).toBe(path.join(hermesHome, "config.yaml"))
    expect(loaded.fileFound).toBe(false)
    expect(loaded.notes).toEqual([`no config file at ${shown(path.join(hermesHome, "config.yaml"))}; using defaults`])
    expect(loaded.values).toEqual({
      backend: "docker",
      volumes: [],
      forwardEnv: [],
      env: {},
      scope: "oneShot",
      cwd: "/workspace",
      network: false
    })
    expect(Object.values(loaded.sources).every((s) => s.source === "default")).toBe(true)
    expect(formatConfig(loaded)).toContain("(not found; defaults)")
  })

  it("a missing explicit path is an error (option or HERMES_CONFIG)", () => {
    const missing = path.join(tmpRoot, "missing.yaml")
    expect(failure({ path: missing }).message).toBe(`${shown(missing)}: config file not found`)
    expect(failure({ env: { HERMES_CONFIG: missing } }).message).toBe(`${shown(missing)}: config file not found`)
  })

  it("defaultHermesConfigPath: HERMES_CONFIG, then HERMES_HOME, then ~/.hermes/config.yaml", () => {
    expect(defaultHermesConfigPath({ HERMES_CONFIG: "/etc/h.yaml", HERMES_HOME: "/x" })).toBe("/etc/h.yaml")
    expect(defaultHermesConfigPath({ HERMES_HOME: "/x" })).toBe("/x/config.yaml")
    expect(defaultHermesConfigPath({})).toBe(path.join(os.homedir(), ".hermes", "config.yaml"))
  })

  it("a YAML syntax error names the line", () => {
    const file = fixture("hermes-syntax-error.yaml")
    const error = failure({ path: file })
    expect(error.message).toMatch(new RegExp(`^${shownRe(file)}:\\d+: YAML syntax error: `))
    expect(error.line).toBeGreaterThanOrEqual(3)
    expect(error.line).toBeLessThanOrEqual(4)
  })

  it("a duplicate key is a syntax error on its line", () => {
    const file = writeConfig(terminal("container_cpu: 1", "container_cpu: 2"))
    const error = failure({ path: file })
    expect(error.message).toContain(`${shown(file)}:3: YAML syntax error: Map keys must be unique`)
  })

  it("a file without a terminal section, or an empty file, gives defaults", () => {
    const noSection = load({ path: writeConfig("model:\n  default: x\n") })
    expect(noSection.values.scope).toBe("oneShot")
    expect(noSection.notes.join()).toContain("no terminal: section")
    expect(load({ path: writeConfig("") }).fileFound).toBe(true)
  })

  it("accepts YAML 1.1-style booleans (yes/no) as PyYAML-based Hermes does", () => {
    expect(
      load({ path: writeConfig(terminal("container_persistent: yes", "network_enabled: no")) }).values
    ).toMatchObject({
      scope: "persistent",
      network: false
    })
  })
})
