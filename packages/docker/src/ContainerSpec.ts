/**
 * The one place where a SandboxSpec becomes a Docker container configuration.
 * Every hardening default lives here and reads top to bottom; SECURITY.md maps
 * each line to the seeds' advice and to the CIS Docker Benchmark / OWASP rules.
 */
import type Docker from "dockerode"
import type { SandboxSpec } from "@hermes-sandbox/core"

export interface HardeningOptions {
  /** Seccomp profile JSON text, "engine-default" (Docker's own) or "unconfined" (never by default). */
  readonly seccomp: string
  /** Apply the writable-layer quota (only where the engine supports it). */
  readonly applyDiskQuota: boolean
}

/** Open files per process: enough for ordinary programs, small enough to bound the kernel's work. */
export const NOFILE_LIMIT = 1024
/** Largest single file a program may write (RLIMIT_FSIZE); beyond it the write fails with EFBIG. */
export const FSIZE_LIMIT_BYTES = 256 * 1024 * 1024
/** Inodes per tmpfs: an inode flood hits this instead of the host's memory. */
export const TMPFS_INODES = 16_384

const tmpfs = (bytes: number, extra: string) => `rw,nosuid,nodev,size=${bytes},nr_inodes=${TMPFS_INODES}${extra}`

export const toCreateOptions = (spec: SandboxSpec, hardening: HardeningOptions): Docker.ContainerCreateOptions => {
  const [uid, gid] = spec.user.split(":")
  const securityOpt = ["no-new-privileges:true"]
  if (hardening.seccomp === "unconfined") securityOpt.push("seccomp=unconfined")
  else if (hardening.seccomp !== "engine-default") securityOpt.push(`seccomp=${hardening.seccomp}`)
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: [...spec.command],
    Env: [
      "HOME=/workspace",
      "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "PYTHONUNBUFFERED=1",
      ...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`)
    ],
    WorkingDir: spec.workingDir,
    User: spec.user,
    Hostname: "sandbox",
    Labels: { ...spec.labels },
    // No TTY: stdout and stderr stay separate (multiplexed on the attach stream).
    Tty: false,
    OpenStdin: spec.openStdin,
    // Closing our end of the attach stream closes the program's stdin (EOF).
    StdinOnce: spec.openStdin,
    AttachStdin: spec.openStdin,
    AttachStdout: true,
    AttachStderr: true,
    NetworkDisabled: !spec.network,
    HostConfig: {
      // Network: only loopback unless asked for.
      NetworkMode: spec.network ? "bridge" : "none",
      // Memory with swap equal to it: no extra swap. tmpfs pages count against this too.
      Memory: spec.limits.memoryBytes,
      MemorySwap: spec.limits.memoryBytes,
      NanoCpus: spec.limits.nanoCpus,
      // Fork bombs stop here (not RLIMIT_NPROC: without userns it is shared by every container of the uid).
      PidsLimit: spec.limits.pidsLimit,
      CapDrop: ["ALL"],
      CapAdd: [...spec.capAdd],
      SecurityOpt: securityOpt,
      Privileged: false,
      ReadonlyRootfs: true,
      Tmpfs: {
        "/tmp": tmpfs(spec.limits.tmpBytes, ",noexec,mode=1777"),
        "/workspace": tmpfs(spec.limits.workspaceBytes, `,exec,mode=0755,uid=${uid},gid=${gid}`)
      },
      Ulimits: [
        { Name: "nofile", Soft: NOFILE_LIMIT, Hard: NOFILE_LIMIT },
        { Name: "fsize", Soft: FSIZE_LIMIT_BYTES, Hard: FSIZE_LIMIT_BYTES },
        { Name: "core", Soft: 0, Hard: 0 }
      ],
      IpcMode: "private",
      ShmSize: 16 * 1024 * 1024,
      // docker-init (tini) as PID 1: reaps zombies, forwards signals; the program cannot ignore its own kill.
      Init: true,
      // Output comes from the attach stream, capped by the SDK; the daemon keeps no log a flood could grow.
      LogConfig: { Type: "none", Config: {} },
      RestartPolicy: { Name: "no", MaximumRetryCount: 0 },
      AutoRemove: false,
      Devices: [],
      ...(spec.runtime === undefined ? {} : { Runtime: spec.runtime }),
      ...(hardening.applyDiskQuota && spec.limits.diskBytes !== undefined ? { StorageOpt: { size: String(spec.limits.diskBytes) } } : {}),
      Mounts: spec.mounts.map((m) => ({ Type: "bind" as const, Source: m.hostPath, Target: m.containerPath, ReadOnly: m.mode !== "rw" }))
    }
  }
}
