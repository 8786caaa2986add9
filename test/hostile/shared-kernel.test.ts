/**
 * Hostile programs against kernel resources that every container of the host shares, within the
 * sandbox's own limits (hostile review 1, findings 7, 8, 9, 11): host-wide AIO contexts, pseudo-
 * terminals, per-uid counters (inotify instances, POSIX message queues, pending signals), netlink
 * protocols that deliver host events, and host information in /proc and /sys.
 *
 * Each attack is measured where it would hurt: on the host (aio-nr, pty/nr), or in a second
 * sandbox running at the same time. Under gVisor (runsc) AIO, ptys, inotify, mqueues, signals and
 * netlink are the Sentry's own, per sandbox; the assertions say so where the outcome differs.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import type Docker from "dockerode"
import * as HermesDocker from "@hermes-sandbox/docker"
import { docker } from "../support/docker.js"
import { exited, expectOutcome, facts, hostileExecutor, useHostileExecutor, RUNTIMES } from "./support.js"

const readHost = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** Runs `during` while sampling a host counter every 20 ms; returns its result and the counter's largest rise. */
const sampling = async <A>(path: string, during: () => Promise<A>): Promise<{ result: A; rise: number }> => {
  const read = () => Number((readHost(path) ?? "0").trim().split(/\s+/)[0])
  const before = read()
  let max = before
  const timer = setInterval(() => (max = Math.max(max, read())), 20)
  try {
    const result = await during()
    max = Math.max(max, read())
    return { result, rise: max - before }
  } finally {
    clearInterval(timer)
  }
}

const PY_SYSCALL = String.raw`
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *args)
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
`

describe.each(RUNTIMES)("shared kernel resources stay out of reach (%s)", (runtime) => {
  const gvisor = runtime === "runsc"
  const h = useHostileExecutor(runtime)

  describe.concurrent("host-wide tables", () => {
    it("AIO: io_setup and the other io_* calls are denied; the host's aio-nr does not rise (gVisor: the Sentry's own AIO)", async () => {
      // One sandbox could take all of fs.aio-max-nr (65536) with two io_setup(32768) calls; every
      // io_setup on the host then failed with EAGAIN for as long as the sandbox lived.
      const { result: r, rise } = await sampling("/proc/sys/fs/aio-nr", () =>
        h.run({
          language: "python",
          code:
            PY_SYSCALL +
            String.raw`
import time
NR = {"x86_64": dict(io_setup=206, io_destroy=207, io_getevents=208, io_submit=209, io_cancel=210, io_pgetevents=333),
      "aarch64": dict(io_setup=0, io_destroy=1, io_submit=2, io_cancel=3, io_getevents=4, io_pgetevents=292)}[platform.machine()]
ctx = ctypes.c_ulong(0)
print("io_setup", sc(NR["io_setup"], ctypes.c_long(4096), ctypes.byref(ctx)))
held = ctx.value
# On a context that is not one: EPERM when the profile denies the call, EINVAL when the kernel sees it.
bogus = ctypes.c_ulong(0xdead000)
print("io_submit", sc(NR["io_submit"], bogus, ctypes.c_long(0), None))
print("io_getevents", sc(NR["io_getevents"], bogus, ctypes.c_long(0), ctypes.c_long(0), None, None))
print("io_pgetevents", sc(NR["io_pgetevents"], bogus, ctypes.c_long(0), ctypes.c_long(0), None, None, None))
print("io_cancel", sc(NR["io_cancel"], bogus, None, None))
print("io_destroy", sc(NR["io_destroy"], bogus))
time.sleep(1.5)  # hold the context (if any) while the host looks
`
        })
      )
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      // The Sentry implements AIO itself: its contexts are not the host's.
      if (gvisor) expect(f.io_setup).toBe("ok")
      else {
        expect(f).toMatchObject({
          io_setup: "EPERM",
          io_submit: "EPERM",
          io_getevents: "EPERM",
          io_pgetevents: "EPERM",
          io_cancel: "EPERM",
          io_destroy: "EPERM"
        })
      }
      expect(rise, "host /proc/sys/fs/aio-nr rose while the sandbox held 4096 events").toBeLessThan(4096)
    })

    it("pseudo-terminals: the sandbox has none, so it cannot take the host's pty table (kernel.pty.max)", async () => {
      // devpts instances share kernel.pty.max: four forks took 3071 ptys and every other
      // container's open("/dev/ptmx") (docker exec -t, docker run -t) failed with ENOSPC.
      const { result: r, rise } = await sampling("/proc/sys/kernel/pty/nr", () =>
        h.run({
          language: "python",
          code: String.raw`
import errno, os, time
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
fds = []
def many():
    for _ in range(200):
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
print("ptmx", attempt(many))
print("opened", len(fds))
print("openpty", attempt(os.openpty))
print("pts_ptmx", attempt(lambda: os.open("/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)))
print("tty", attempt(lambda: os.open("/dev/tty", os.O_RDWR)))
print("pts", ",".join(sorted(os.listdir("/dev/pts"))) or "empty")
time.sleep(1)
`
        })
      )
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      // runc: no devpts at all (a read-only empty tmpfs on /dev/pts; /dev/ptmx -> pts/ptmx dangles).
      // gVisor: the Sentry keeps its devpts but read-only: opening the multiplexer fails with EROFS.
      const denied = gvisor ? "EROFS" : "ENOENT"
      expect(f).toMatchObject({ ptmx: denied, opened: "0", openpty: denied, pts_ptmx: denied })
      expect(f.tty).not.toBe("ok") // no controlling terminal: ENXIO
      if (!gvisor) expect(f.pts).toBe("empty")
      expect(rise, "host /proc/sys/kernel/pty/nr rose").toBeLessThan(200)
    })
  })

  describe.concurrent("netlink", () => {
    it("only NETLINK_ROUTE can be opened: no host uevents (KOBJECT_UEVENT), no sock_diag, audit, generic…", async () => {
      // A netns owned by the initial user namespace receives the host's uevents: with every group
      // bound, the red team's sandbox saw "change@/devices/virtual/mem/null" triggered on the host.
      // The host triggers such uevents while the program listens (when this process may: root).
      const UEVENT = "/sys/devices/virtual/mem/null/uevent"
      let trigger: NodeJS.Timeout | undefined
      const canTrigger = (() => {
        try {
          writeFileSync(UEVENT, "change")
          return true
        } catch {
          return false
        }
      })()
      const run = h.executor.executeCode(
        {
          language: "python",
          code: String.raw`
import errno, socket, time
def sock(proto, kind=socket.SOCK_RAW):
    try:
        return socket.socket(socket.AF_NETLINK, kind, proto)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def outcome(s):
    if isinstance(s, str):
        return s
    s.close()
    return "ok"
print("route", outcome(sock(0)))
print("route_dgram_flags", outcome(sock(0, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)))
for name, proto in (("sock_diag", 4), ("xfrm", 6), ("audit", 9), ("connector", 11), ("netfilter", 12), ("generic", 16)):
    print(name, outcome(sock(proto)))
# What ordinary programs use NETLINK_ROUTE for: interface lists (getifaddrs, if_nameindex).
print("if_nameindex", ",".join(n for _, n in socket.if_nameindex()))
u = sock(15)
print("kobject_uevent", outcome(u) if isinstance(u, str) else "ok")
try:
    if isinstance(u, str):
        raise OSError(0, u)
    u.bind((0, 1))  # group 1: the kernel's uevents
except OSError as e:
    u = str(e.strerror) if e.errno == 0 else errno.errorcode.get(e.errno, str(e.errno))
    print("bind", u)
if not isinstance(u, str):
    u.settimeout(0.2)
    print("listening", flush=True)
    seen, end = [], time.time() + 3
    while time.time() < end:
        try:
            seen.append(u.recv(65536).split(b"\0")[0].decode(errors="replace"))
        except socket.timeout:
            pass
    print("uevents", len(seen), ",".join(seen[:3]))
`
        },
        {
          onStdout: (chunk) => {
            if (canTrigger && trigger === undefined && Buffer.from(chunk).toString().includes("listening")) {
              trigger = setInterval(() => writeFileSync(UEVENT, "change"), 200)
            }
          }
        }
      )
      const r = await run.finally(() => clearInterval(trigger))
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      expect(f).toMatchObject({ route: "ok", route_dgram_flags: "ok", if_nameindex: "lo" })
      if (!gvisor) {
        // Denied by the seccomp profile: socket(AF_NETLINK, *, protocol != NETLINK_ROUTE) -> EPERM.
        expect(f.uevents, "host uevents reached the sandbox").toBeUndefined()
        expect(f).toMatchObject({
          sock_diag: "EPERM",
          xfrm: "EPERM",
          audit: "EPERM",
          connector: "EPERM",
          netfilter: "EPERM",
          generic: "EPERM",
          kobject_uevent: "EPERM"
        })
      } else {
        // The Sentry's netlink: ROUTE and a uevent socket of its own (no group may be bound), nothing else.
        expect(f).toMatchObject({
          sock_diag: "EPROTONOSUPPORT",
          xfrm: "EPROTONOSUPPORT",
          audit: "EPROTONOSUPPORT",
          connector: "EPROTONOSUPPORT",
          netfilter: "EPROTONOSUPPORT",
          generic: "EPROTONOSUPPORT"
        })
        expect(f.uevents ?? "0").toMatch(/^0/)
      }
    })

    it("node's os.networkInterfaces() and iproute2 in a bash program still work (they speak NETLINK_ROUTE)", async () => {
      const js = await h.run({
        language: "javascript",
        code: `console.log("interfaces", Object.keys(require("os").networkInterfaces()).join(","))`
      })
      expectOutcome(js, exited(0))
      expect(facts(js.stdout)).toMatchObject({ interfaces: "lo" })
      const sh = await h.run({
        language: "bash",
        code: "echo links $(ip -o link show | cut -d: -f2 | tr -d ' ')\nip -o addr show dev lo >/dev/null; echo addr $?"
      })
      expectOutcome(sh, exited(0))
      expect(facts(sh.stdout)).toMatchObject({ links: "lo", addr: "0" })
    })
  })

  describe.concurrent("host information", () => {
    it("the kernel command line, boot id, interrupt, disk, pressure and memory-zone statistics and block devices are masked", async () => {
      const paths = [
        "/proc/cmdline",
        "/proc/sys/kernel/random/boot_id",
        "/proc/interrupts",
        "/proc/softirqs",
        "/proc/diskstats",
        "/proc/partitions",
        "/proc/zoneinfo",
        "/proc/buddyinfo",
        "/proc/pressure/cpu",
        "/proc/pressure/io",
        "/proc/pressure/memory"
      ]
      const r = await h.run({
        language: "python",
        code: String.raw`
import hashlib, os
def rd(p):
    try:
        data = open(p, "rb").read()
        return "read %d %s" % (len(data), hashlib.sha256(data).hexdigest())
    except OSError as e:
        return "denied"
for p in ${JSON.stringify(paths)}:
    print(p, rd(p))
for d in ("/sys/block", "/sys/class/block", "/sys/dev/block", "/proc/pressure"):
    try:
        print(d, "entries", len(os.listdir(d)))
    except OSError:
        print(d, "denied")
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      const { createHash } = await import("node:crypto")
      for (const path of paths) {
        const host = readHost(path)
        // Never the host's content; under runc the engine masks it (empty: /dev/null is bound on it).
        if (host !== undefined && host !== "")
          expect(f[path], path).not.toBe(
            `read ${Buffer.byteLength(host)} ${createHash("sha256").update(host).digest("hex")}`
          )
        // gVisor: the Sentry's own /proc, which has none of these but a /proc/cmdline of its own.
        if (!gvisor) expect(f[path], path).toMatch(/^(read 0 |denied)/)
        else if (path !== "/proc/cmdline") expect(f[path], path).toBe("denied")
      }
      if (!gvisor) {
        for (const d of ["/sys/block", "/sys/class/block", "/sys/dev/block", "/proc/pressure"])
          expect(f[d], d).toMatch(/^(entries 0|denied)$/)
      }
    })

    it("what ordinary programs read from /proc still works: ps, top, uptime, free, vmstat, os.cpus(), os.cpu_count(), multiprocessing", async () => {
      const r = await h.run({
        language: "bash",
        code: String.raw`
ps -eo pid,stime,cmd >/dev/null 2>&1; echo ps $?
top -bn1 >/dev/null 2>&1; echo top $?
uptime >/dev/null 2>&1; echo uptime $?
free -m >/dev/null 2>&1; echo free $?
nproc >/dev/null 2>&1; echo nproc $?
echo node_cpus $(node -e 'console.log(require("os").cpus().length > 0, require("os").loadavg().length, require("os").uptime() > 0)')
python3 - <<'EOF'
import multiprocessing, os
if __name__ == "__main__":
    print("py_cpus", os.cpu_count() > 0, multiprocessing.cpu_count() > 0)
    with multiprocessing.Pool(2) as pool:
        print("pool", sum(pool.map(abs, range(10))))
EOF
`
      })
      expectOutcome(r, exited(0))
      expect(facts(r.stdout)).toMatchObject({
        ps: "0",
        top: "0",
        uptime: "0",
        free: "0",
        nproc: "0",
        node_cpus: "true 3 true",
        py_cpus: "True True",
        pool: "45"
      })
    })

    it("the engine's own default masked paths are all kept (the SDK's MaskedPaths replaces the engine's list)", async () => {
      // What this engine masks by default: a plain container's HostConfig.MaskedPaths.
      const plain = await docker.createContainer({
        Image: "hermes-sandbox/python:latest",
        name: `hermes-sandbox-test-masks-${process.pid}-${runtime}`,
        Cmd: ["true"],
        HostConfig: { Runtime: runtime }
      })
      let engineDefaults: ReadonlyArray<string>
      try {
        engineDefaults =
          ((await plain.inspect()).HostConfig as Docker.HostConfig & { MaskedPaths?: Array<string> }).MaskedPaths ?? []
      } finally {
        await plain.remove({ force: true })
      }
      expect(engineDefaults.length).toBeGreaterThan(0)
      for (const p of engineDefaults)
        expect(HermesDocker.ContainerSpec.ENGINE_DEFAULT_MASKED_PATHS, `engine default ${p}`).toContain(p)
    })
  })

  describe.concurrent("per-uid counters", () => {
    it('sandboxUid: "per-sandbox": a sandbox exhausting inotify instances, POSIX mqueues and pending signals leaves another one unharmed', async () => {
      // With the shared uid 1001 these counters are the uid's, host-wide: one sandbox holding 128
      // inotify instances, 9 mqueues (RLIMIT_MSGQUEUE) and ~96k queued signals (RLIMIT_SIGPENDING)
      // made inotify_init1 and mq_open fail with EMFILE and sigqueue/timer_create with EAGAIN in
      // every other sandbox.
      const x = await hostileExecutor(runtime, { sandboxUid: "per-sandbox" })
      try {
        const COUNTERS = String.raw`
import ctypes, errno, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
def err():
    return errno.errorcode.get(ctypes.get_errno(), "?")
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
def inotify(limit):
    n = 0
    while n < limit:
        if libc.inotify_init1(0) < 0:
            return "%d %s" % (n, err())
        n += 1
    return "%d ok" % n
def mqueues(limit, tag):
    n = 0
    while n < limit:
        if libc.mq_open(b"/%s%d" % (tag, n), os.O_CREAT | os.O_RDWR, 0o600, None) < 0:
            return "%d %s" % (n, err())
        n += 1
    return "%d ok" % n
def signals(limit):
    n = 0
    while n < limit:
        if libc.sigqueue(os.getpid(), signal.SIGRTMIN, None) < 0:
            return "%d %s" % (n, err())
        n += 1
    return "%d ok" % n
def identity():
    st = os.stat("/workspace")
    open("/workspace/mine", "w").write("x")
    return "%d %d %d %d" % (os.getuid(), os.getgid(), st.st_uid, st.st_gid)
`
        // A takes everything its uid may have, says so, and holds it until the test aborts it.
        let aOut = ""
        let held!: () => void
        const holding = new Promise<void>((resolve) => (held = resolve))
        const abort = new AbortController()
        const a = x.executor
          .executeCode(
            {
              language: "python",
              code:
                COUNTERS +
                String.raw`
import time
print("id", identity())
print("inotify", inotify(2000))
print("mqueue", mqueues(300, b"a"))
print("signals", signals(200000))
print("held", flush=True)
time.sleep(60)
`
            },
            {
              signal: abort.signal,
              onStdout: (chunk) => {
                aOut += Buffer.from(chunk).toString()
                if (aOut.includes("held\n")) held()
              }
            }
          )
          .catch((e: unknown) => e)
        await Promise.race([
          holding,
          a.then((e) => {
            throw new Error(`the exhausting sandbox ended early: ${String(e)}\n${aOut}`)
          })
        ])
        // B, while A holds: one of each.
        const b = await x.run({
          language: "python",
          code:
            COUNTERS +
            String.raw`
print("id", identity())
print("inotify", inotify(1))
print("mqueue", mqueues(1, b"b"))
print("signals", signals(1))
`
        })
        abort.abort()
        expect(await a).toMatchObject({ _tag: "ExecutionAborted" })
        const fa = facts(aOut)
        expectOutcome(b, exited(0))
        const fb = facts(b.stdout)
        // B got one of each although A had exhausted its own share.
        expect(fb, `A: ${aOut}`).toMatchObject({ inotify: "1 ok", mqueue: "1 ok", signals: "1 ok" })
        if (!gvisor) {
          // A really hit its uid's limits (fs.inotify.max_user_instances 128, RLIMIT_MSGQUEUE, RLIMIT_SIGPENDING).
          expect(fa.inotify).toMatch(/^\d+ EMFILE$/)
          expect(fa.mqueue).toMatch(/^\d+ EMFILE$/)
          expect(fa.signals).toMatch(/^\d+ EAGAIN$/)
        }
        // Two distinct uids from the reserved range, gid = uid, each owning its /workspace.
        const [uidA, gidA, ownerA, groupA] = fa.id!.split(" ").map(Number)
        const [uidB, gidB, ownerB, groupB] = fb.id!.split(" ").map(Number)
        expect(uidA).not.toBe(uidB)
        for (const [uid, gid, owner, group] of [
          [uidA, gidA, ownerA, groupA],
          [uidB, gidB, ownerB, groupB]
        ] as const) {
          expect(uid).toBeGreaterThanOrEqual(HermesDocker.SandboxUid.RANGE.first)
          expect(uid).toBeLessThanOrEqual(HermesDocker.SandboxUid.RANGE.last)
          expect([gid, owner, group]).toEqual([uid, uid, uid])
        }
      } finally {
        await x.finish()
      }
    })
  })
})
