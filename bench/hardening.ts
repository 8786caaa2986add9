/**
 * One source for the container configuration every variant uses: the SDK's own
 * `toCreateOptions` (ContainerSpec.ts) applied to a spec with the SDK's defaults.
 * The `docker run` flags are DERIVED from that object, so the CLI baseline cannot
 * drift from the SDK's hardening; `verifyCliMatchesSdk` checks it on the engine.
 */
import type Docker from "dockerode"
import { fileURLToPath } from "node:url"
import { defaultLanguageRuntimes, type SandboxSpec } from "@hermes-sandbox/core"
import { defaults } from "@hermes-sandbox/core/ExecutorConfig"
import { encodeRunnerPayload } from "@hermes-sandbox/core/RunnerProtocol"
import { ContainerSpec } from "@hermes-sandbox/docker"
import { loadSeccompProfile, SECCOMP_PROFILE_URL } from "@hermes-sandbox/docker/Seccomp"

export const PYTHON_IMAGE = defaultLanguageRuntimes.python.image
/** The runner protocol command (the same as the SDK's). */
export const RUNNER_COMMAND: ReadonlyArray<string> = defaultLanguageRuntimes.python.command
export const PROGRAM = "print(1)"
export const EXPECTED_STDOUT = "1\n"
export const SECCOMP_PROFILE_PATH = fileURLToPath(SECCOMP_PROFILE_URL)

/**
 * The bytes the baselines write to the supervisor's stdin for `print(1)`: runner protocol 2 in plain
 * mode (no key), so the supervisor sets up the code and execs python3 in place (one interpreter
 * start, as the SDK gets) and the program's own bytes are the container's stdout. The CLI and
 * dockerode variants wait for the container's exit; the SDK (framed mode) returns on the supervisor's
 * keyed end-of-run frame.
 */
export const runnerPayload = (): Buffer =>
  Buffer.from(
    encodeRunnerPayload({
      language: "python",
      code: new TextEncoder().encode(PROGRAM),
      files: [],
      stdin: new Uint8Array()
    })
  )

/** What a runner variant's stdout must be: the program's output. */
export const expectedRunnerStdout = () => EXPECTED_STDOUT

export { BenchLabel } from "./benchLabel.js"

/** A spec with the SDK's defaults (512m, 1 CPU, 256 pids, 64m tmpfs, uid 1001, no network). */
export const benchSpec = (
  name: string,
  labels: Record<string, string>,
  command: ReadonlyArray<string> = RUNNER_COMMAND,
  openStdin = true
): SandboxSpec => ({
  name,
  image: PYTHON_IMAGE,
  command,
  env: {},
  workingDir: defaults.workingDir,
  user: defaults.user,
  labels,
  limits: {
    memoryBytes: defaults.memoryBytes,
    nanoCpus: defaults.cpus * 1e9,
    pidsLimit: defaults.pidsLimit,
    tmpBytes: defaults.tmpBytes,
    workspaceBytes: defaults.workspaceBytes
  },
  network: false,
  openStdin,
  capAdd: [],
  mounts: []
})

/** Engine API create options, exactly as the SDK builds them (hermes seccomp profile). */
export const createOptionsFor = (spec: SandboxSpec): Docker.ContainerCreateOptions =>
  ContainerSpec.toCreateOptions(spec, { seccomp: loadSeccompProfile(), applyDiskQuota: false })

/**
 * `docker run`/`docker create` flags for the same configuration. Every HostConfig field the
 * SDK sets is mapped; an unmapped field throws, so a new hardening line cannot be silently skipped.
 */
export const cliFlags = (o: Docker.ContainerCreateOptions): Array<string> => {
  const h = o.HostConfig ?? {}
  const flags: Array<string> = []
  if (o.name !== undefined) flags.push("--name", o.name)
  for (const [k, v] of Object.entries(o.Labels ?? {})) flags.push("--label", `${k}=${v}`)
  for (const e of o.Env ?? []) flags.push("--env", e)
  if (o.WorkingDir !== undefined) flags.push("--workdir", o.WorkingDir)
  if (o.User !== undefined) flags.push("--user", o.User)
  if (o.Hostname !== undefined) flags.push("--hostname", o.Hostname)
  if (o.Tty) flags.push("--tty")
  if (o.OpenStdin) flags.push("--interactive")
  const handled = new Set<string>()
  const take = <K extends keyof typeof h>(k: K) => {
    handled.add(k as string)
    return h[k]
  }
  const network = take("NetworkMode")
  if (network !== undefined) flags.push("--network", network)
  const memory = take("Memory")
  if (memory !== undefined) flags.push("--memory", `${memory}b`)
  const swap = take("MemorySwap")
  if (swap !== undefined) flags.push("--memory-swap", `${swap}b`)
  const nanoCpus = take("NanoCpus")
  if (nanoCpus !== undefined) flags.push("--cpus", String(nanoCpus / 1e9))
  const pids = take("PidsLimit")
  if (pids !== undefined && pids !== null) flags.push("--pids-limit", String(pids))
  for (const c of take("CapDrop") ?? []) flags.push("--cap-drop", c)
  for (const c of take("CapAdd") ?? []) flags.push("--cap-add", c)
  for (const s of take("SecurityOpt") ?? []) {
    // The CLI takes the profile as a file and sends its text, as the SDK does.
    flags.push(
      "--security-opt",
      s.startsWith("seccomp=") && s.trimEnd().endsWith("}") ? `seccomp=${SECCOMP_PROFILE_PATH}` : s
    )
  }
  if (take("Privileged")) flags.push("--privileged")
  if (take("ReadonlyRootfs")) flags.push("--read-only")
  for (const [path, opts] of Object.entries(take("Tmpfs") ?? {})) flags.push("--tmpfs", `${path}:${opts}`)
  for (const u of take("Ulimits") ?? []) flags.push("--ulimit", `${u.Name}=${u.Soft}:${u.Hard}`)
  const ipc = take("IpcMode")
  if (ipc !== undefined) flags.push("--ipc", ipc)
  const shm = take("ShmSize")
  if (shm !== undefined) flags.push("--shm-size", `${shm}b`)
  const cgroupns = (take as (k: string) => unknown)("CgroupnsMode") as string | undefined
  if (cgroupns !== undefined) flags.push("--cgroupns", cgroupns)
  if (take("Init")) flags.push("--init")
  const log = take("LogConfig")
  if (log?.Type !== undefined) flags.push("--log-driver", log.Type)
  const restart = take("RestartPolicy")
  if (restart?.Name !== undefined && restart.Name !== "") flags.push("--restart", restart.Name)
  if (take("AutoRemove")) flags.push("--rm")
  const devices = take("Devices") ?? []
  if (devices.length > 0) throw new Error("bench: devices are not mapped to docker run flags")
  const runtime = take("Runtime")
  if (runtime !== undefined) flags.push("--runtime", runtime)
  // No docker run flag exists for MaskedPaths: the CLI baseline keeps the engine's default masked
  // paths (the SDK adds host-information paths; runc bind-mounts /dev/null over each, a few µs).
  take("MaskedPaths")
  const mounts = take("Mounts") ?? []
  if (mounts.length > 0) throw new Error("bench: mounts are not mapped to docker run flags")
  const unmapped = Object.keys(h).filter((k) => !handled.has(k))
  if (unmapped.length > 0)
    throw new Error(`bench: HostConfig fields not mapped to docker run flags: ${unmapped.join(", ")}`)
  // NetworkDisabled has no flag of its own: --network none gives the same sandbox (loopback only).
  return flags
}

/** The HostConfig fields compared between a CLI-created and an SDK-config container. */
const COMPARED = [
  "NetworkMode",
  "Memory",
  "MemorySwap",
  "NanoCpus",
  "PidsLimit",
  "CapDrop",
  "CapAdd",
  "SecurityOpt",
  "Privileged",
  "ReadonlyRootfs",
  "Tmpfs",
  "Ulimits",
  "IpcMode",
  "ShmSize",
  "CgroupnsMode",
  "Init",
  "LogConfig",
  "AutoRemove"
] as const

/** Differences between two inspected containers' hardening (empty = identical). */
export const hardeningDiff = (a: Docker.ContainerInspectInfo, b: Docker.ContainerInspectInfo): Array<string> => {
  const out: Array<string> = []
  const ha = a.HostConfig as unknown as Record<string, unknown>
  const hb = b.HostConfig as unknown as Record<string, unknown>
  const norm = (k: string, v: unknown) =>
    k === "LogConfig"
      ? (v as { Type?: string } | undefined)?.Type
      : k === "CapDrop" || k === "CapAdd"
        ? [...((v as Array<string> | null) ?? [])].sort()
        : k === "Init"
          ? v === true // docker create without --init leaves it null; the API's false means the same
          : k === "Ulimits"
            ? [...((v as Array<{ Name: string }> | null) ?? [])].sort((x, y) => x.Name.localeCompare(y.Name))
            : v
  for (const k of COMPARED) {
    const va = JSON.stringify(norm(k, ha[k]))
    const vb = JSON.stringify(norm(k, hb[k]))
    if (va !== vb) out.push(`${k}: ${va} vs ${vb}`)
  }
  const ca = a.Config as unknown as Record<string, unknown>
  const cb = b.Config as unknown as Record<string, unknown>
  for (const k of ["User", "WorkingDir", "Hostname", "OpenStdin", "StdinOnce", "Tty", "Env"]) {
    const va = JSON.stringify(
      k === "Env" ? [...((ca[k] as Array<string>) ?? [])].filter((e) => !e.startsWith("PATH=")).sort() : ca[k]
    )
    const vb = JSON.stringify(
      k === "Env" ? [...((cb[k] as Array<string>) ?? [])].filter((e) => !e.startsWith("PATH=")).sort() : cb[k]
    )
    if (va !== vb) out.push(`Config.${k}: ${va} vs ${vb}`)
  }
  return out
}
