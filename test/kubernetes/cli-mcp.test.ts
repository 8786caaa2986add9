/**
 * The command line and the MCP server on the live cluster, as a user runs them: the built CLI
 * (`run`, `doctor` and `mcp`, each with --kubernetes) as the tier's ServiceAccount, whose
 * kubeconfig is KUBECONFIG here, read as kubectl reads it. The MCP server is driven by the MCP
 * SDK's own client: a one-shot run, a shell session's calls and a Python kernel's cells, each an
 * exec on a pod whose stdin cannot end.
 */
import { afterAll, describe, expect, it } from "vitest"
import { cli } from "../support/cli.js"
import { stdioClient, type StdioClient } from "../support/mcpClient.js"
import { ALL_DEGRADED, namespace, podsOfExecutor } from "../support/kubernetes.js"

const kubeconfig = process.env["HERMES_SANDBOX_TEST_KUBECONFIG"]!
// The MCP server's process reads it from here (the client passes the test's environment on).
process.env["KUBECONFIG"] = kubeconfig
const env = { KUBECONFIG: kubeconfig }

/** The cluster's flags: this run's namespace, the nodes' own images, a quarter CPU each (2-core node). */
const cluster = (...more: Array<string>) => [
  "--kubernetes",
  "--namespace",
  namespace(),
  "--image-pull-policy",
  "Never",
  ...more
]
const degraded = ["--allow-degraded", ALL_DEGRADED.join(",")]

const clients: Array<StdioClient> = []
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()))
})

const textOf = (result: unknown): string =>
  ((result as { content?: Array<{ type: string; text?: string }> }).content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text ?? "")
    .join("\n")

describe("the CLI on the cluster", () => {
  it("run --kubernetes runs the program in a pod: its output and its exit code", async () => {
    const r = await cli(
      [
        "run",
        ...cluster(...degraded),
        "--no-journal",
        "-c",
        "0.25",
        "-e",
        "import sys\nprint('hi from a pod')\nsys.exit(3)"
      ],
      { env }
    )
    expect(r.stderr).not.toMatch(/error/i)
    expect(r).toMatchObject({ code: 3, stdout: "hi from a pod\n" })
  }, 90_000)

  it("run --kubernetes without --allow-degraded is refused before any pod, naming each guarantee (exit 125)", async () => {
    const r = await cli(["run", ...cluster(), "--no-journal", "-c", "0.25", "-e", "print(1)"], { env })
    expect(r.code).toBe(125)
    for (const g of ALL_DEGRADED) expect(r.stderr).toContain(g)
    expect(r.stderr).toContain("allowDegraded")
    expect(r.stdout).toBe("")
  }, 60_000)

  it("an unknown guarantee, and cluster flags without --kubernetes, are usage errors", async () => {
    const unknown = await cli(
      ["run", ...cluster("--allow-degraded", "pids-limit,no-such"), "--no-journal", "-e", "print(1)"],
      {
        env
      }
    )
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain("no-such")
    expect(unknown.stderr).toContain("pids-limit")
    const stray = await cli(["run", "--namespace", "x", "--no-journal", "-e", "print(1)"], { env })
    expect(stray.code).toBe(2)
    expect(stray.stderr).toContain("--namespace: only with --kubernetes")
    const strayDoctor = await cli(["doctor", "--allow-degraded", "ulimits"], { env })
    expect(strayDoctor.code).toBe(2)
    expect(strayDoctor.stderr).toContain("--allow-degraded: only with --kubernetes")
  }, 60_000)

  it("doctor --kubernetes: the API server, every permission of the Role, the guarantees, a smoke run", async () => {
    const r = await cli(["doctor", "--json", ...cluster("--allow-degraded", "ulimits,logging-off")], { env })
    const checks = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean; required: boolean; detail: string }>
    const byName = Object.fromEntries(checks.map((c) => [c.name, c]))
    expect(byName["api server"]).toMatchObject({ ok: true })
    expect(byName["api server"]!.detail).toMatch(/Kubernetes v1\./)
    expect(byName["permissions"]).toMatchObject({ ok: true })
    expect(byName["smoke run"]).toMatchObject({ ok: true })
    // The two allowed are said so; the others are warnings (runs needing them are refused).
    expect(byName["guarantee ulimits"]).toMatchObject({ ok: true, required: false })
    expect(byName["guarantee pids-limit"]).toMatchObject({ ok: false, required: false })
    expect(byName["guarantee pids-limit"]!.detail).toContain("refused")
    expect(r.code).toBe(0)
  }, 120_000)

  it("doctor --kubernetes where the ServiceAccount has no Role: the missing permissions and the fix, exit 1", async () => {
    const r = await cli(["doctor", "--json", "--kubernetes", "--namespace", "default"], { env })
    const checks = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean; detail: string; fix?: string }>
    const permissions = checks.find((c) => c.name === "permissions")!
    expect(permissions.ok).toBe(false)
    expect(permissions.detail).toContain("create pods")
    expect(permissions.detail).toContain("create pods/exec")
    expect(permissions.fix).toContain("rbac.yaml")
    expect(checks.some((c) => c.name === "smoke run")).toBe(false)
    expect(r.code).toBe(1)
  }, 60_000)
})

describe("the MCP server on the cluster", () => {
  it("mcp --kubernetes: execute_code, a terminal session and run_python's kernel, through the MCP SDK's client", async () => {
    const c = await stdioClient([...cluster(...degraded), "--no-journal", "-c", "0.25"], "cluster-stdio")
    clients.push(c)
    const one = await c.client.callTool({
      name: "execute_code",
      arguments: { language: "python", code: "print(sum(range(10)))" }
    })
    expect(textOf(one)).toContain("45")

    const cd = await c.client.callTool({
      name: "terminal",
      arguments: { command: "mkdir -p /tmp/k && cd /tmp/k && export K=pod" }
    })
    expect(cd.isError ?? false).toBe(false)
    const kept = await c.client.callTool({ name: "terminal", arguments: { command: 'echo "$PWD $K"' } })
    expect(textOf(kept)).toContain("/tmp/k pod")

    const set = await c.client.callTool({ name: "run_python", arguments: { code: "x = 6 * 7" } })
    expect(set.isError ?? false).toBe(false)
    const got = await c.client.callTool({ name: "run_python", arguments: { code: "print(x)" } })
    expect(textOf(got)).toContain("42")

    expect((await podsOfExecutor(c.executorId)).length).toBeGreaterThan(0)
    await c.close()
    clients.pop()
    // The server's sandboxes (the one-shot's, the session's and the pool's) are gone with it.
    const deadline = Date.now() + 30_000
    while ((await podsOfExecutor(c.executorId)).length > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 250))
    expect(await podsOfExecutor(c.executorId)).toEqual([])
  }, 180_000)
})
