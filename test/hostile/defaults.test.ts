/**
 * Every hardening default of ContainerSpec.ts, checked twice on the real engine: in the
 * container's configuration as the engine recorded it (inspected while the program runs),
 * and in effect from inside the sandbox. Also: capability add-backs, the disk quota on an
 * engine that cannot apply one, and that the languages still work under all of it.
 */
import { firstValueFrom, filter, take } from "rxjs"
import { describe, expect, it } from "vitest"
import type Docker from "dockerode"
import { createExecutor } from "@hermes-sandbox/docker"
import * as DiskQuota from "@hermes-sandbox/docker/DiskQuota"
import { runChecks } from "@hermes-sandbox/cli/commands/doctor"
import { docker } from "../support/docker.js"
import { exited, expectOutcome, facts, hostileExecutor, useHostileExecutor, MiB, RUNTIMES } from "./support.js"

const engineInfo = (await docker.info()) as { Driver: string; DriverStatus?: Array<[string, string]> }
const backingFs = engineInfo.DriverStatus?.find(([k]) => k === "Backing Filesystem")?.[1] ?? "unknown"
// overlay2 on XFS applies quotas only when mounted with pquota: there, ask the engine.
const diskQuotaSupported =
  DiskQuota.fromInfo(engineInfo)._tag !== "Unsupported" &&
  (await DiskQuota.probe(docker, "hermes-sandbox/python:latest", `hermes-sandbox-test-quota-${process.pid}`))

describe.each(RUNTIMES)("hardening defaults are in effect (%s)", (runtime) => {
  const gvisor = runtime === "runsc"
  const h = useHostileExecutor(runtime)

  it("the engine holds exactly the hardened configuration while the program runs", async () => {
    const started = firstValueFrom(
      h.executor.events$.pipe(
        filter((e) => e.type === "ContainerStarted"),
        take(1)
      )
    )
    const run = h.run({ language: "python", code: "import time\ntime.sleep(2)\nprint('done')" })
    const event = await started
    const info: Docker.ContainerInspectInfo = await docker.getContainer(`hermes-sandbox-${event.streamId}`).inspect()
    const r = await run
    expectOutcome(r, exited(0))

    const hc = info.HostConfig as Docker.HostConfig & { CgroupnsMode?: string; Runtime?: string }
    expect(info.State.Running).toBe(true)
    expect(info.Config.User).toBe("1001:1001")
    expect((info.Config as { NetworkDisabled?: boolean }).NetworkDisabled).toBe(true)
    expect(hc).toMatchObject({
      NetworkMode: "none",
      Memory: 512 * MiB,
      MemorySwap: 512 * MiB,
      NanoCpus: 1e9,
      PidsLimit: 256,
      CapDrop: ["ALL"],
      Privileged: false,
      ReadonlyRootfs: true,
      IpcMode: "private",
      CgroupnsMode: "private",
      ShmSize: 16 * MiB,
      // The supervisor is PID 1 (no docker-init): images/runner/hermes-run.c.
      Init: false,
      AutoRemove: false,
      Runtime: runtime,
      PidMode: "",
      UTSMode: "",
      UsernsMode: ""
    })
    expect(hc.CapAdd ?? []).toEqual([])
    expect(hc.LogConfig?.Type).toBe("none")
    expect(hc.RestartPolicy?.Name).toBe("no")
    expect(hc.Devices ?? []).toEqual([])
    expect(hc.Binds ?? []).toEqual([])
    expect(info.Mounts).toEqual([])
    expect(hc.Privileged).toBe(false)
    // Tmpfs: sized, inode-capped, nosuid, nodev; /tmp noexec.
    expect(hc.Tmpfs?.["/tmp"]).toBe(`rw,nosuid,nodev,size=${64 * MiB},nr_inodes=16384,noexec,mode=1777`)
    expect(hc.Tmpfs?.["/workspace"]).toBe(
      `rw,nosuid,nodev,size=${64 * MiB},nr_inodes=16384,exec,mode=0755,uid=1001,gid=1001`
    )
    // No devpts (host-wide pty table) and host information masked on top of the engine's own list
    // (test/hostile/shared-kernel.test.ts shows the effect).
    expect(hc.Tmpfs?.["/dev/pts"]).toBe("ro,nosuid,nodev,noexec,size=4096,nr_inodes=16,mode=0755")
    expect((hc as { MaskedPaths?: Array<string> }).MaskedPaths).toEqual(
      expect.arrayContaining([
        "/proc/kcore",
        "/proc/keys",
        "/sys/firmware",
        "/proc/cmdline",
        "/proc/sys/kernel/random/boot_id",
        "/proc/interrupts",
        "/proc/diskstats",
        "/proc/pressure",
        "/proc/zoneinfo",
        "/sys/block"
      ])
    )
    expect([...(hc.Ulimits ?? [])].sort((a, b) => a.Name!.localeCompare(b.Name!))).toEqual([
      { Name: "core", Soft: 0, Hard: 0 },
      { Name: "fsize", Soft: 256 * MiB, Hard: 256 * MiB },
      { Name: "nofile", Soft: 1024, Hard: 1024 }
    ])
    // no-new-privileges and the shipped allow-list profile (default action: EPERM).
    const securityOpt: Array<string> = hc.SecurityOpt ?? []
    expect(securityOpt).toContain("no-new-privileges=true")
    const seccomp = securityOpt.filter((s) => s.startsWith("seccomp="))
    expect(seccomp).toHaveLength(1)
    const profile = JSON.parse(seccomp[0]!.slice("seccomp=".length)) as {
      defaultAction: string
      defaultErrnoRet?: number
    }
    expect(profile).toMatchObject({ defaultAction: "SCMP_ACT_ERRNO", defaultErrnoRet: 1 })
  })

  it("...and in effect inside the sandbox: identity, capabilities, mounts, limits, init, devices, namespaces", async () => {
    const r = await h.run({
      language: "python",
      code: String.raw`
import os, resource
status = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/self/status")}
print("ids", os.getuid(), os.getgid(), ",".join(map(str, os.getgroups())))
print("cwd", os.getcwd())
print("caps", status["CapEff"], status["CapPrm"], status["CapBnd"], status["CapInh"])
print("no_new_privs", status.get("NoNewPrivs", "absent"))
print("seccomp", status.get("Seccomp", "absent"))
mounts = {}
for line in open("/proc/mounts"):
    dev, path, fstype, opts = line.split()[:4]
    mounts[path] = (fstype, set(opts.split(",")))
def flags(path, wanted):
    fstype, opts = mounts.get(path, ("absent", set()))
    return fstype + ":" + ",".join(w for w in wanted if w in opts)
print("mount/", flags("/", ["ro", "rw"]))
print("mount/tmp", flags("/tmp", ["rw", "nosuid", "nodev", "noexec", "size=65536k", "nr_inodes=16384"]))
print("mount/workspace", flags("/workspace", ["rw", "nosuid", "nodev", "noexec", "size=65536k", "nr_inodes=16384"]))
print("mount/dev/shm", flags("/dev/shm", ["nosuid", "nodev", "noexec"]))
def lim(r):
    return "%d,%d" % resource.getrlimit(r)
print("rlimits", lim(resource.RLIMIT_NOFILE), lim(resource.RLIMIT_FSIZE), lim(resource.RLIMIT_CORE))
def rd(p):
    try:
        return open(p).read().strip()
    except OSError:
        return "n/a"
print("cgroup_memory", rd("/sys/fs/cgroup/memory/memory.limit_in_bytes"), rd("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"))
print("cgroup_pids", rd("/sys/fs/cgroup/pids/pids.max"))
print("cgroup_cpu", rd("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), rd("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
print("cgroup_path", ",".join(sorted({l.strip().split(":", 2)[2] for l in open("/proc/self/cgroup")})))
print("init", open("/proc/1/cmdline").read().split("\0")[0])
print("devices", ",".join(sorted(os.listdir("/dev"))))
print("hostname", os.uname().nodename)
def ns(n):
    try:
        return os.readlink("/proc/self/ns/" + n)
    except OSError:
        return "absent:" + n
print("ns", *(ns(n) for n in ("ipc", "pid", "net", "uts", "mnt", "cgroup")))
`
    })
    expectOutcome(r, exited(0))
    const f = facts(r.stdout)
    expect(f).toMatchObject({
      ids: "1001 1001 1001",
      cwd: "/workspace",
      caps: "0000000000000000 0000000000000000 0000000000000000 0000000000000000",
      "mount/": gvisor ? "9p:ro" : "overlay:ro",
      rlimits: `1024,1024 ${256 * MiB},${256 * MiB} 0,0`,
      init: gvisor ? "/opt/hermes/hermes-run-readable" : "/opt/hermes/hermes-run",
      hostname: "sandbox"
    })
    // Namespaces differ from this (host) process's own.
    const { readlinkSync } = await import("node:fs")
    const hostNs = ["ipc", "pid", "net", "uts", "mnt", "cgroup"].map((n) => readlinkSync(`/proc/self/ns/${n}`))
    for (const ns of f.ns!.split(" ")) expect(hostNs).not.toContain(ns)
    if (!gvisor) {
      expect(f.no_new_privs).toBe("1")
      expect(f.seccomp).toBe("2") // a seccomp filter is loaded
      expect(f["mount/tmp"]).toBe("tmpfs:rw,nosuid,nodev,noexec,size=65536k,nr_inodes=16384")
      expect(f["mount/workspace"]).toBe("tmpfs:rw,nosuid,nodev,size=65536k,nr_inodes=16384")
      expect(f["mount/dev/shm"]).toBe("tmpfs:nosuid,nodev,noexec")
      expect(f.cgroup_memory).toMatch(new RegExp(`^${512 * MiB} (${512 * MiB}|n/a)$`))
      expect(f.cgroup_pids).toBe("256")
      expect(f.cgroup_cpu).toBe("100000 100000")
      expect(f.cgroup_path).toBe("/") // private cgroup namespace: no host path
      expect(f.devices).toBe("fd,full,mqueue,null,ptmx,pts,random,shm,stderr,stdin,stdout,tty,urandom,zero")
    } else {
      // gVisor: the Sentry's /proc does not show NoNewPrivs, and the shipped seccomp profile is not
      // loaded inside the sandbox (runsc without --oci-seccomp); the Sentry's own host-side seccomp
      // filter applies instead. Its tmpfs options show noexec and size only; no cgroupfs inside.
      expect(f.no_new_privs).toBe("absent")
      expect(f.seccomp).toBe("0")
      expect(f["mount/tmp"]).toBe("tmpfs:rw,noexec")
      expect(f["mount/workspace"]).toBe("tmpfs:rw")
      expect(f.cgroup_pids).toBe("n/a")
      // The Sentry's own emulated devices (net/tun and fuse need capabilities the sandbox lacks).
      expect(f.devices).toBe("fd,full,fuse,net,null,ptmx,pts,random,shm,stderr,stdin,stdout,tty,urandom,zero")
    }
  })

  it("capAdd reaches only the bounding set: uid 1001 never holds CHOWN, DAC_OVERRIDE or FOWNER", async () => {
    const withCaps = await hostileExecutor(runtime, { capAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER"] })
    try {
      const r = await withCaps.run({
        language: "bash",
        code: String.raw`
grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status | tr -d '\t' | tr ':' ' '
touch /workspace/f; chown 0:0 /workspace/f 2>/dev/null; echo chown $?
cat /etc/shadow >/dev/null 2>&1; echo read_shadow $?
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      // CHOWN (bit 0), DAC_OVERRIDE (bit 1), FOWNER (bit 3) = 0xb, in the bounding set only.
      expect(f).toMatchObject({
        CapBnd: "000000000000000b",
        CapEff: "0000000000000000",
        CapPrm: "0000000000000000",
        chown: "1",
        read_shadow: "1"
      })
      if (!gvisor) expect(f.CapAmb).toBe("0000000000000000")
    } finally {
      await withCaps.finish()
    }
    // Anything else is refused before an executor exists.
    await expect(createExecutor({ capAdd: ["SYS_ADMIN" as "CHOWN"] })).rejects.toMatchObject({
      _tag: "InvalidRequest",
      field: "capAdd"
    })
  })

  it("python, node and bash still work under all of it: threads, processes, multiprocessing, ctypes callbacks, pipes", async () => {
    const py = await h.run({
      language: "python",
      code: String.raw`
import ctypes, multiprocessing, subprocess, threading
def square(x):
    return x * x
if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print("pool", sum(pool.map(square, range(10))))
    t = threading.Thread(target=lambda: None); t.start(); t.join(); print("thread", "ok")
    print("subprocess", subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout.strip())
    CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    arr = (ctypes.c_int * 5)(5, 1, 4, 2, 3)
    ctypes.CDLL(None).qsort(arr, 5, ctypes.sizeof(ctypes.c_int), CMP(lambda a, b: a[0] - b[0]))
    print("ctypes", ",".join(map(str, arr)))
`
    })
    expectOutcome(py, exited(0))
    expect(facts(py.stdout)).toMatchObject({ pool: "285", thread: "ok", subprocess: "hi", ctypes: "1,2,3,4,5" })
    const js = await h.run({
      language: "javascript",
      code: String.raw`
const { Worker } = require("worker_threads")
const { execFileSync } = require("child_process")
new Worker("require('worker_threads').parentPort.postMessage(6 * 7)", { eval: true }).on("message", (m) => {
  console.log("worker", m)
  console.log("child", execFileSync("echo", ["hi"]).toString().trim())
})
`
    })
    expectOutcome(js, exited(0))
    expect(facts(js.stdout)).toMatchObject({ worker: "42", child: "hi" })
    const sh = await h.run({
      language: "bash",
      code: "printf 'b\\na\\n' > /workspace/x.txt\necho sorted $(sort /workspace/x.txt | tr '\\n' ' ')\nprintf '#!/bin/sh\\necho script ran\\n' > /workspace/run.sh && chmod +x /workspace/run.sh && /workspace/run.sh"
    })
    expectOutcome(sh, exited(0))
    expect(facts(sh.stdout)).toMatchObject({ sorted: "a b", script: "ran" })
  })
})

describe("disk quota where the engine cannot apply one", () => {
  it.skipIf(diskQuotaSupported)(
    'diskSize fails with a typed ContainerFailed naming the reason; with diskQuotaUnsupported: "warn" it runs',
    async () => {
      const strict = await hostileExecutor("runc", { diskSize: "256m" })
      try {
        const error = await strict.run({ language: "python", code: "print(1)" }).then(
          () => undefined,
          (e: unknown) => e
        )
        expect(error).toMatchObject({ _tag: "ContainerFailed", operation: "create" })
        const message = (error as { message: string }).message
        expect(message).toContain(`${engineInfo.Driver} on ${backingFs}`)
        expect(message).toContain("overlay2 on XFS")
        expect(strict.created).toEqual([]) // refused before any container was created
      } finally {
        await strict.finish({ healthCheck: false })
      }
      const lenient = await hostileExecutor("runc", { diskSize: "256m", diskQuotaUnsupported: "warn" })
      try {
        const r = await lenient.run({ language: "python", code: "print('ran without a quota')" })
        expectOutcome(r, exited(0))
        expect(r.stdout).toBe("ran without a quota\n")
      } finally {
        await lenient.finish()
      }
      // `hermes-sandbox doctor` says the same.
      const quota = (await runChecks()).find((c) => c.name === "disk quota")
      expect(quota).toMatchObject({ ok: false, required: false })
      expect(quota?.detail).toContain("NOT supported")
    }
  )
})
