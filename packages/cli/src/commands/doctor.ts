/**
 * `hermes-sandbox doctor`: what this machine can and cannot do, each problem
 * with the command that fixes it. Exits 1 when something required is missing.
 */
import Docker from "dockerode"
import { randomUUID } from "node:crypto"
import { ContainerNamePrefix } from "@hermes-sandbox/core/Labels"
import { defaultLanguageRuntimes, type DoctorCheck, Languages } from "@hermes-sandbox/core"
import { createExecutor, importKubernetes, type KubernetesChoice } from "@hermes-sandbox/docker"
import * as DiskQuota from "@hermes-sandbox/docker/DiskQuota"
import { type DockerEngineOptions, unreachableHint } from "@hermes-sandbox/docker/DockerEngine"
import * as EngineEndpoint from "@hermes-sandbox/docker/EngineEndpoint"
import { DATA_IMAGE, imageBuildCommand } from "@hermes-sandbox/docker/ImageBuild"
import * as ResourceLimits from "@hermes-sandbox/docker/ResourceLimits"
import { loadSeccompProfile } from "@hermes-sandbox/docker/Seccomp"
import { executorOptionsOf, type SandboxCommandOptions } from "../sandboxOptions.js"

export interface Check extends DoctorCheck {
  /** The "engine" check: how the engine was reached (kind, endpoint, source, whether TLS is verified). */
  readonly engine?: EngineEndpoint.EngineDescription
}

const MIN_API = "1.41"
const apiAtLeast = (v: string, min: string) => {
  const [a = 0, b = 0] = v.split(".").map(Number)
  const [c = 0, d = 0] = min.split(".").map(Number)
  return a > c || (a === c && b >= d)
}

/** overlay2 on XFS can cap the writable layer only when mounted with pquota, which only a create tells. */
const diskQuotaCheck = async (docker: Docker, info: Record<string, unknown>): Promise<Check> => {
  const name = "disk quota"
  const fix = DiskQuota.quotaFix(typeof info.DockerRootDir === "string" ? info.DockerRootDir : undefined)
  const unsupported = (storage: string): Check => ({
    name,
    ok: false,
    required: false,
    detail: `${storage}: per-container disk quotas are NOT supported (a diskSize option fails, or warns with diskQuotaUnsupported: "warn")`,
    fix
  })
  const support = DiskQuota.fromInfo(info as Parameters<typeof DiskQuota.fromInfo>[0])
  if (support._tag === "Unsupported") return unsupported(support.storage)
  const image = defaultLanguageRuntimes.python.image
  try {
    const applies = await DiskQuota.probe(docker, image, `${ContainerNamePrefix}doctor-quota-${randomUUID()}`)
    return applies
      ? {
          name,
          ok: true,
          required: false,
          detail: "overlay2 on xfs with pquota: per-container disk quotas can be applied"
        }
      : unsupported(DiskQuota.XFS_WITHOUT_PQUOTA)
  } catch (error) {
    return {
      name,
      ok: false,
      required: false,
      detail: `overlay2 on xfs: quotas apply only if it is mounted with pquota, and asking the engine failed (${(error as Error).message})`,
      fix
    }
  }
}

/** The data-science image is optional (about 510 MB, not in the default build): absent is a warning, never a failure. */
export const dataImageCheck = async (docker: Docker, image: string = DATA_IMAGE): Promise<Check> => {
  const name = "image python-data"
  try {
    const i = await new Docker.Image(docker.modem, image).inspect()
    return {
      name,
      ok: true,
      required: false,
      detail: `${image} (${(i.Size / 1e6).toFixed(0)} MB): numpy, pandas, matplotlib, scipy, ...`
    }
  } catch {
    return {
      name,
      ok: false,
      required: false,
      detail: `${image} is absent (optional: numpy, pandas, matplotlib, scipy, ...)`,
      fix: imageBuildCommand("data")
    }
  }
}

/** How the engine is reached, as one line: "tls, certificate verified, from DOCKER_HOST". */
const reachedBy = (d: EngineEndpoint.EngineDescription): string => {
  const how =
    d.kind === "tls"
      ? `tls, server certificate ${d.tlsVerified ? "verified" : "NOT verified"}`
      : d.kind === "ssh"
        ? `ssh, host key ${d.hostKeyVerified === true ? "checked" : "NOT checked"}`
        : d.kind === "tcp"
          ? "plain tcp, unencrypted"
          : "unix socket"
  return `${how}, from ${d.source}`
}

/** The transport check: a warning when the engine is reached without verifying who answers. */
const transportCheck = (d: EngineEndpoint.EngineDescription): Check => {
  const unverified =
    (d.kind === "tls" && !d.tlsVerified) ||
    (d.kind === "ssh" && d.hostKeyVerified !== true) ||
    (d.kind === "tcp" && !EngineEndpoint.isLoopback(new URL(d.endpoint).hostname))
  return {
    name: "engine transport",
    ok: !unverified,
    required: false,
    detail: `${d.endpoint}: ${reachedBy(d)}`,
    engine: d,
    ...(unverified
      ? {
          fix:
            d.kind === "tls"
              ? "set DOCKER_TLS_VERIFY=1 (tlsVerify: true) with the engine's CA in ca.pem"
              : d.kind === "ssh"
                ? "keep ssh.verifyHostKey on and put the host key in ~/.ssh/known_hosts"
                : "reach the engine over TLS or ssh://"
        }
      : {})
  }
}

/** `options`: the engine options (as the SDK takes them); default: DOCKER_HOST, the docker context, the local socket. */
export const runChecks = async (options: DockerEngineOptions = {}): Promise<ReadonlyArray<Check>> => {
  const checks: Array<Check> = []
  const resolved = EngineEndpoint.resolve(options)
  if (resolved._tag === "Left") {
    checks.push({
      name: "engine",
      ok: false,
      required: true,
      detail: resolved.left.message,
      fix: resolved.left.allowed
    })
    return checks
  }
  const { docker, description } = resolved.right
  const endpoint = description.endpoint
  let info: Record<string, unknown> | undefined
  const waitMs = description.kind === "ssh" ? 10_000 : 3_000
  try {
    const version = await Promise.race([
      docker.version(),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${waitMs / 1000} s`)), waitMs).unref()
      )
    ])
    checks.push({
      name: "engine",
      ok: true,
      required: true,
      detail: `Docker ${version.Version} at ${endpoint} (${reachedBy(description)})`,
      engine: description
    })
    checks.push(transportCheck(description))
    checks.push({
      name: "api version",
      ok: apiAtLeast(version.ApiVersion, MIN_API),
      required: true,
      detail: `API ${version.ApiVersion} (needs >= ${MIN_API})`,
      fix: "upgrade the Docker engine"
    })
    info = (await docker.info()) as Record<string, unknown>
  } catch (error) {
    checks.push({
      name: "engine",
      ok: false,
      required: true,
      detail: `cannot reach ${endpoint} (${reachedBy(description)}): ${(error as Error).message}`,
      fix: unreachableHint(description),
      engine: description
    })
    return checks
  }
  for (const language of Languages) {
    const image = defaultLanguageRuntimes[language].image
    try {
      const i = await new Docker.Image(docker.modem, image).inspect()
      checks.push({
        name: `image ${language}`,
        ok: true,
        required: true,
        detail: `${image} (${(i.Size / 1e6).toFixed(0)} MB)`
      })
    } catch {
      checks.push({
        name: `image ${language}`,
        ok: false,
        required: true,
        detail: `${image} is missing`,
        fix: imageBuildCommand()
      })
    }
  }
  checks.push(await dataImageCheck(docker))
  const runtimes = Object.keys((info.Runtimes as Record<string, unknown> | undefined) ?? {})
  checks.push({
    name: "runtime runc",
    ok: runtimes.includes("runc"),
    required: true,
    detail: `runtimes: ${runtimes.join(", ")}`
  })
  checks.push({
    name: "runtime runsc (gVisor)",
    ok: runtimes.includes("runsc"),
    required: false,
    detail: runtimes.includes("runsc") ? "registered (use --runtime runsc)" : "not registered (optional)",
    fix: 'apt-get install runsc, add {"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}} to /etc/docker/daemon.json, then reload dockerd (kill -HUP)'
  })
  checks.push(await diskQuotaCheck(docker, info))
  const securityOptions = ((info.SecurityOptions as Array<string> | undefined) ?? []).map(String)
  const remapped = securityOptions.some((o) => o.split(",").includes("name=userns"))
  checks.push({
    name: "userns-remap",
    ok: remapped,
    required: false,
    detail: remapped
      ? "on: uid 0-65535 in every sandbox map to an unprivileged range on the host"
      : 'off: uid 1001 in a sandbox is uid 1001 on the host (optional; recommended on shared hosts, SECURITY.md "User namespace remapping")',
    // A remapped engine keeps its images apart (a data root of its own): they are built again.
    fix: `add "userns-remap": "default" to /etc/docker/daemon.json, restart dockerd, then build the images again (${imageBuildCommand()})`
  })
  // The engine creates sandboxes even when it cannot apply their limits (see ResourceLimits);
  // the SDK refuses such sandboxes unless limitsUnsupported is "warn".
  const missingLimits = ResourceLimits.unsupported(info as ResourceLimits.EngineLimitInfo)
  checks.push({
    name: "resource limits",
    ok: missingLimits.length === 0,
    required: true,
    detail:
      missingLimits.length === 0
        ? "the engine applies memory, swap, pids and cpu limits"
        : `${ResourceLimits.unsupportedMessage(info as ResourceLimits.EngineLimitInfo, missingLimits)}; executions are refused unless ${ResourceLimits.WARN_OPTION}`,
    fix: "run the engine on a kernel with the memory (with swap accounting), pids and cpu cgroup controllers mounted; a rootless engine needs cgroup v2"
  })
  checks.push({
    name: "cgroups",
    ok: true,
    required: false,
    detail: `cgroup v${String(info.CgroupVersion ?? "?")}, driver ${String(info.CgroupDriver ?? "?")}`
  })
  try {
    const profile = JSON.parse(loadSeccompProfile()) as { syscalls?: Array<unknown> }
    checks.push({
      name: "seccomp profile",
      ok: true,
      required: true,
      detail: `shipped allow-list loaded (${profile.syscalls?.length ?? 0} rules)`
    })
  } catch (error) {
    checks.push({ name: "seccomp profile", ok: false, required: true, detail: (error as Error).message })
  }
  if (checks.every((c) => c.ok || !c.required)) {
    try {
      const executor = await createExecutor({ ...options, timeoutMs: 30_000 })
      const t0 = Date.now()
      const r = await executor.executeCode({ language: "python", code: "print('ok')" })
      await executor.close()
      checks.push({
        name: "smoke run",
        ok: r.stdout === "ok\n",
        required: true,
        detail: `python print in a hardened sandbox: ${Date.now() - t0} ms`
      })
    } catch (error) {
      checks.push({ name: "smoke run", ok: false, required: true, detail: (error as Error).message })
    }
  }
  return checks
}

/** Where a smoke run's failure says the seccomp profile is missing on the node. */
const SECCOMP_MISSING = /seccomp/i

/**
 * A cluster's checks (@hermes-sandbox/kubernetes's Doctor) and a smoke run there. The smoke run
 * accepts every guarantee a pod cannot give: it checks the cluster's path (images and the seccomp
 * profile on the nodes, attach), not the policy, which the guarantees' checks report.
 */
const runKubernetesChecks = async (options: SandboxCommandOptions): Promise<Array<Check>> => {
  const { Doctor, Guarantees } = await importKubernetes()
  const choice = executorOptionsOf({ ...options, journal: false }, undefined)
  const kubernetes = (choice.runtime as KubernetesChoice).kubernetes
  const checks: Array<Check> = await Doctor.checks(kubernetes)
  if (checks.every((c) => c.ok || !c.required)) {
    try {
      const allowDegraded = Object.keys(Guarantees.DEGRADED_GUARANTEES).filter(Guarantees.isDegradedGuarantee)
      const executor = await createExecutor({
        ...choice,
        runtime: { kubernetes: { ...kubernetes, allowDegraded } },
        timeoutMs: 60_000,
        cpus: 0.25
      })
      const t0 = Date.now()
      try {
        const r = await executor.executeCode({ language: "python", code: "print('ok')" })
        checks.push({
          name: "smoke run",
          ok: r.stdout === "ok\n",
          required: true,
          detail: `python print in a hardened pod: ${Date.now() - t0} ms${r.stdout === "ok\n" ? "" : ` (got ${JSON.stringify(r.stdout.slice(0, 200))}, exit ${r.exitCode})`}`
        })
      } finally {
        await executor.close()
      }
    } catch (error) {
      const message = (error as Error).message
      checks.push({
        name: "smoke run",
        ok: false,
        required: true,
        detail: message,
        ...(SECCOMP_MISSING.test(message)
          ? {
              fix: 'put the seccomp profile on every node: the DaemonSet in docs/kubernetes.md ("The seccomp profile on the nodes")'
            }
          : {})
      })
    }
  }
  return checks
}

export const doctor = async (options: { json?: boolean } & SandboxCommandOptions): Promise<number> => {
  // Cluster flags without --kubernetes are usage errors, as for run and mcp (checked before anything runs).
  executorOptionsOf({ ...options, journal: false }, undefined)
  const checks = options.kubernetes === true ? await runKubernetesChecks(options) : await runChecks()
  if (options.json) process.stdout.write(`${JSON.stringify(checks)}\n`)
  else {
    for (const c of checks) {
      process.stdout.write(`${c.ok ? "ok  " : c.required ? "FAIL" : "warn"}  ${c.name.padEnd(24)} ${c.detail}\n`)
      if (!c.ok && c.fix) process.stdout.write(`      fix: ${c.fix}\n`)
    }
  }
  return checks.every((c) => c.ok || !c.required) ? 0 : 1
}
