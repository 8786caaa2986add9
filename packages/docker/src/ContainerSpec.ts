/**
 * The one place where a SandboxSpec becomes a Docker container configuration.
 * Every hardening default lives here and reads top to bottom. SECURITY.md maps each
 * line to the seeds' advice, the OWASP Docker Security Cheat Sheet rules and the CIS
 * Docker Benchmark section 5 rules (cited below as "CIS 5.n", v1.6.0 numbering), and
 * names the hostile test (test/hostile/) that proves it.
 */
import type Docker from "dockerode"
import type { SandboxSpec } from "@hermes-sandbox/core"
import { SANDBOX_BASE_ENV } from "@hermes-sandbox/core/SandboxRuntime"

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
/** Inodes per tmpfs: an inode flood hits this instead of the host's memory (runc; gVisor ignores it). */
export const TMPFS_INODES = 16_384
/** /dev/shm (POSIX shared memory, multiprocessing semaphores); like every tmpfs it counts against memory. */
export const SHM_BYTES = 16 * 1024 * 1024

/**
 * The engine's own masked paths (Docker 20.10's default list, plus /sys/devices/virtual/powercap
 * from later releases). Setting `HostConfig.MaskedPaths` replaces the engine's list, so they are
 * repeated here; a hostile test checks this list holds every path the engine masks by default.
 */
export const ENGINE_DEFAULT_MASKED_PATHS: ReadonlyArray<string> = [
  "/proc/asound",
  "/proc/acpi",
  "/proc/kcore",
  "/proc/keys",
  "/proc/latency_stats",
  "/proc/timer_list",
  "/proc/timer_stats",
  "/proc/sched_debug",
  "/proc/scsi",
  "/sys/firmware",
  "/sys/devices/virtual/powercap"
]

/**
 * Host information no ordinary program reads, masked on top of the engine's list (a file: /dev/null
 * bound on it; a directory: an empty read-only tmpfs; paths this kernel lacks are skipped): the
 * kernel command line, the boot id (ties sandboxes to one host boot), host-wide interrupt, softirq,
 * disk, pressure-stall and memory-zone statistics (side channels on co-tenants), and the host's
 * block devices. /proc/stat, /proc/loadavg, /proc/vmstat, /proc/meminfo and /proc/cpuinfo stay:
 * ps, top, vmstat, free, node's os.cpus() and glibc read them (SECURITY.md lists what is left).
 */
export const MASKED_HOST_INFO_PATHS: ReadonlyArray<string> = [
  "/proc/cmdline",
  "/proc/sys/kernel/random/boot_id",
  "/proc/interrupts",
  "/proc/softirqs",
  "/proc/diskstats",
  "/proc/partitions",
  "/proc/pressure",
  "/proc/zoneinfo",
  "/proc/buddyinfo",
  "/sys/block",
  "/sys/class/block",
  "/sys/dev/block"
]

/**
 * /dev/pts: an empty read-only tmpfs instead of the container's devpts. Every devpts instance
 * draws from the host-wide kernel.pty.max: one sandbox took all the ptys (ENOSPC for every other
 * container's `docker exec -t`). Sandboxes have no TTY, so they get no pseudo-terminals: under runc
 * /dev/ptmx (-> pts/ptmx) dangles (ENOENT); gVisor keeps its own devpts read-only (EROFS).
 */
export const DEV_PTS_TMPFS = "ro,nosuid,nodev,noexec,size=4096,nr_inodes=16,mode=0755"

/** A private tmpfs: never setuid, never a device node, a size and an inode cap. */
const tmpfs = (bytes: number, extra: string) => `rw,nosuid,nodev,size=${bytes},nr_inodes=${TMPFS_INODES}${extra}`

/** Engine API 1.41 field that @types/dockerode does not declare. */
type HostConfig = Docker.HostConfig & { readonly CgroupnsMode?: "private" | "host" }

export const toCreateOptions = (spec: SandboxSpec, hardening: HardeningOptions): Docker.ContainerCreateOptions => {
  const [uid, gid] = spec.user.split(":")
  // No privilege gain through setuid/setgid files or file capabilities (OWASP #4, CIS 5.26).
  const securityOpt = ["no-new-privileges=true"]
  // The shipped allow-list (packages/docker/seccomp/), never "unconfined" by default (OWASP #6, CIS 5.22).
  if (hardening.seccomp === "unconfined") securityOpt.push("seccomp=unconfined")
  else if (hardening.seccomp !== "engine-default") securityOpt.push(`seccomp=${hardening.seccomp}`)
  const hostConfig: HostConfig = {
    // Network: only loopback unless asked for (CIS 5.10, 5.30; OWASP #5).
    NetworkMode: spec.network ? "bridge" : "none",
    // Memory with swap equal to it: no extra swap. tmpfs pages count against this too (OWASP #7, CIS 5.11).
    Memory: spec.limits.memoryBytes,
    MemorySwap: spec.limits.memoryBytes,
    // A CPU quota, not only a relative share (OWASP #7, CIS 5.12).
    NanoCpus: spec.limits.nanoCpus,
    // Fork and thread bombs stop here (CIS 5.29); not RLIMIT_NPROC: without userns it is shared by every container of the uid.
    PidsLimit: spec.limits.pidsLimit,
    // Every capability dropped; the only add-backs the executor accepts are CHOWN, DAC_OVERRIDE, FOWNER,
    // and for uid 1001 they reach only the bounding set, never the process (OWASP #3, CIS 5.4, 5.5).
    CapDrop: ["ALL"],
    CapAdd: [...spec.capAdd],
    SecurityOpt: securityOpt,
    Privileged: false,
    // Nothing in the image can be changed; writable space is the two sized tmpfs below (OWASP #8, CIS 5.13).
    ReadonlyRootfs: true,
    Tmpfs: {
      // The runner's code file lives here; programs are run by their interpreter, so noexec costs nothing.
      "/tmp": tmpfs(spec.limits.tmpBytes, ",noexec,mode=1777"),
      // exec kept: agents write scripts here and run them (`chmod +x run.sh && ./run.sh`).
      "/workspace": tmpfs(spec.limits.workspaceBytes, `,exec,mode=0755,uid=${uid},gid=${gid}`),
      // No pseudo-terminals: they are a host-wide table (see DEV_PTS_TMPFS).
      "/dev/pts": DEV_PTS_TMPFS
    },
    // The engine's masked paths and host information (see MASKED_HOST_INFO_PATHS).
    MaskedPaths: [...ENGINE_DEFAULT_MASKED_PATHS, ...MASKED_HOST_INFO_PATHS],
    // Per-process caps (OWASP #7, CIS 5.19); no core dumps of the program's memory.
    Ulimits: [
      { Name: "nofile", Soft: NOFILE_LIMIT, Hard: NOFILE_LIMIT },
      { Name: "fsize", Soft: FSIZE_LIMIT_BYTES, Hard: FSIZE_LIMIT_BYTES },
      { Name: "core", Soft: 0, Hard: 0 }
    ],
    // Own IPC namespace, not shareable (CIS 5.17). PID and UTS namespaces are private by default (CIS 5.16, 5.21).
    IpcMode: "private",
    ShmSize: SHM_BYTES,
    // Own cgroup namespace: the program does not learn the host's cgroup paths (Docker's default on cgroup v2).
    CgroupnsMode: "private",
    // No docker-init: the image's supervisor (images/runner/hermes-run.c) is PID 1. It reaps orphans,
    // and as PID 1 without signal handlers nothing inside can signal it; tini would hold the
    // container's stdout open to a dumpable process the program could write through.
    Init: false,
    // Output comes from the attach stream, capped by the SDK; the daemon keeps no log a flood could grow.
    LogConfig: { Type: "none", Config: {} },
    // A single-use sandbox is never restarted (CIS 5.15).
    RestartPolicy: { Name: "no", MaximumRetryCount: 0 },
    AutoRemove: false,
    // No host devices (CIS 5.18).
    Devices: [],
    ...(spec.runtime === undefined ? {} : { Runtime: spec.runtime }),
    ...(hardening.applyDiskQuota && spec.limits.diskBytes !== undefined
      ? { StorageOpt: { size: String(spec.limits.diskBytes) } }
      : {}),
    // None by default; never the Docker socket or a sensitive host directory (CIS 5.6, 5.32; OWASP #1).
    Mounts: spec.mounts.map((m) => ({
      Type: "bind" as const,
      Source: m.hostPath,
      Target: m.containerPath,
      ReadOnly: m.mode !== "rw"
    }))
  }
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: [...spec.command],
    Env: [...Object.entries(SANDBOX_BASE_ENV), ...Object.entries(spec.env)].map(([k, v]) => `${k}=${v}`),
    WorkingDir: spec.workingDir,
    // Never root: uid/gid 1001 from the seeds (OWASP #2), or with sandboxUid "per-sandbox" a uid of its own (SandboxUid.ts).
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
    HostConfig: hostConfig
  }
}
