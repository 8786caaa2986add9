/**
 * examples/docker-compose.sandbox.yml keeps the hardening the SDK applies. Validated with the
 * engine's compose tool when one is installed (`docker compose config`, else
 * `docker-compose config`), whose normalized output is then checked; without one, the file
 * itself is parsed with the `yaml` package and checked. The test's title says which ran.
 * (Debian's `docker.io` has no compose plugin; `apt-get install docker-compose` gives 1.29.)
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { parse } from "yaml"

const file = fileURLToPath(new URL("../../../examples/docker-compose.sandbox.yml", import.meta.url))
// As the file's header says: run from examples/ (docker-compose 1.x reads the seccomp profile relative to it).
const cwd = fileURLToPath(new URL("../../../examples/", import.meta.url))

const tryRun = (cmd: string, args: Array<string>): string | undefined => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 20_000 })
  } catch {
    return undefined
  }
}
// HERMES_SANDBOX_COMPOSE_TOOL=none forces the yaml-only path (to test it where a tool exists).
const tool: { name: string; config: () => string } | undefined =
  process.env["HERMES_SANDBOX_COMPOSE_TOOL"] === "none"
    ? undefined
    : tryRun("docker", ["compose", "version"]) !== undefined
      ? {
          name: "docker compose config",
          config: () => execFileSync("docker", ["compose", "-f", file, "config"], { encoding: "utf8", cwd })
        }
      : tryRun("docker-compose", ["version"]) !== undefined
        ? {
            name: "docker-compose config",
            config: () => execFileSync("docker-compose", ["-f", file, "config"], { encoding: "utf8", cwd })
          }
        : undefined

type Service = Record<string, unknown> & {
  deploy?: { resources?: { limits?: { cpus?: string | number; memory?: string | number } } }
}

const check = (service: Service, normalized: boolean) => {
  expect(service["image"]).toBe("hermes-sandbox/python:latest")
  expect(service["network_mode"]).toBe("none")
  expect(service["read_only"]).toBe(true)
  expect(service["cap_drop"]).toEqual(["ALL"])
  expect(service["init"]).toBe(true)
  expect(service["user"]).toBe("1001:1001")
  expect(service["pids_limit"]).toBe(256)
  const securityOpt = service["security_opt"] as Array<string>
  expect(securityOpt).toContain("no-new-privileges=true")
  // docker-compose 1.x prints it as "seccomp:<path>".
  expect(securityOpt.some((o) => /^seccomp[=:].*hermes-sandbox\.json$/.test(o))).toBe(true)
  const tmpfs = (service["tmpfs"] as Array<string>).join(" ")
  expect(tmpfs).toMatch(/\/tmp:[^ ]*size=64m/)
  expect(tmpfs).toMatch(/\/workspace:[^ ]*size=64m/)
  expect(service["logging"]).toMatchObject({ driver: "none" })
  const limits = service.deploy?.resources?.limits
  // The compose tool normalizes "1" -> 1 and 512M -> "536870912".
  expect(Number(limits?.cpus)).toBe(1)
  expect(String(limits?.memory)).toMatch(normalized ? /^(536870912|512M)$/ : /^512M$/)
  const volumes = service["volumes"] as Array<string | { source?: string; target?: string; read_only?: boolean }>
  const hermes = volumes.find((v) => (typeof v === "string" ? v : (v.target ?? "")).includes("/home/sandbox/.hermes"))
  expect(hermes).toBeDefined()
  // The tool expands ~ to the invoking user's home.
  if (typeof hermes === "string") expect(hermes).toMatch(/\.hermes:\/home\/sandbox\/\.hermes:ro$/)
  else expect(hermes).toMatchObject({ target: "/home/sandbox/.hermes", read_only: true })
}

describe("examples/docker-compose.sandbox.yml", () => {
  it(`is valid and hardened (checked with ${tool?.name ?? "the yaml package: no compose tool is installed"})`, () => {
    if (tool !== undefined) {
      const normalized = parse(tool.config()) as { services: Record<string, Service> }
      check(normalized.services["hermes-sandbox"]!, true)
      // The profile the file names is the one the SDK applies.
      expect(normalized.services["hermes-sandbox"]!["command"]).toEqual(["sleep", "infinity"])
    } else {
      const doc = parse(readFileSync(file, "utf8")) as { services: Record<string, Service>; version?: unknown }
      expect(Object.keys(doc.services)).toEqual(["hermes-sandbox"])
      expect(doc.version).toBeUndefined()
      check(doc.services["hermes-sandbox"]!, false)
    }
  })
})
