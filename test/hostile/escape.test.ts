/**
 * Hostile programs trying to reach beyond the sandbox: host secrets, the Docker socket,
 * the network, mounts and namespaces, privilege gain, ptrace, kernel tunables, the
 * read-only root filesystem, and the system calls the shipped seccomp profile removes.
 *
 * Under gVisor (runsc) the program talks to gVisor's user-space kernel (the Sentry), not
 * to the host's: several calls the seccomp profile denies under runc are implemented by the
 * Sentry instead (the engine's runsc is registered without --oci-seccomp, so the profile is
 * not loaded inside gVisor). Those differences are asserted as such and listed in SECURITY.md.
 */
import { readFileSync } from "node:fs"
import * as RunnerProtocol from "@hermes-sandbox/core/RunnerProtocol"
import { describe, expect, it } from "vitest"
import { exited, expectOutcome, facts, hostFileSha256, useHostileExecutor, RUNTIMES } from "./support.js"

/** A value only the host process knows: it must not reach any sandbox. */
const HOST_SECRET = `hermes-host-secret-${process.pid}-${Date.now()}`
process.env.HERMES_HOSTILE_HOST_SECRET = HOST_SECRET

const readHost = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

describe.each(RUNTIMES)("nothing beyond the sandbox is reachable (%s)", (runtime) => {
  const gvisor = runtime === "runsc"
  const h = useHostileExecutor(runtime)

  describe.concurrent("host secrets", () => {
    it("host /etc/shadow, the Docker socket, /proc/kcore and the host's environment are out of reach", async () => {
      const r = await h.run({
        language: "python",
        code: String.raw`
import errno, hashlib, os, stat
def attempt(path, n=1 << 20):
    try:
        with open(path, "rb") as f:
            data = f.read(n)
        return "read %d %s" % (len(data), hashlib.sha256(data).hexdigest())
    except OSError as e:
        return "denied " + errno.errorcode.get(e.errno, str(e.errno))
print("shadow", attempt("/etc/shadow"))
print("kcore", attempt("/proc/kcore", 16))
for dev in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda"):
    print("dev" + dev, os.path.exists(dev))
sockets = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    for name in files + dirs:
        p = os.path.join(root, name)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                sockets.append(p)
        except OSError:
            pass
print("sockets", ",".join(sockets) or "none")
print("docker.sock", os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock"))
env = open("/proc/self/environ", "rb").read()
try:
    env += open("/proc/1/environ", "rb").read()
    print("init_environ", "readable")
except OSError as e:
    print("init_environ", type(e).__name__)
print("secret_in_env", b"${HOST_SECRET}" in env)
print("hostname", open("/etc/hostname").read().strip())
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      // The image's own shadow file, unreadable by uid 1001; and never the host's content.
      expect(f.shadow).toBe("denied EACCES")
      const hostShadow = await hostFileSha256("/etc/shadow")
      if (hostShadow !== undefined) expect(r.stdout).not.toContain(hostShadow)
      // /proc/kcore: absent on this kernel, masked (empty) or denied elsewhere; never kernel memory.
      expect(f.kcore).toMatch(/^(denied (ENOENT|EACCES|EPERM)|read 0 )/)
      for (const dev of ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/sda", "/dev/vda"])
        expect(f[`dev${dev}`]).toBe("False")
      expect(f.sockets).toBe("none")
      // The supervisor (PID 1) is not dumpable: its environment is closed to the program (runc).
      // gVisor (2022-12) does not apply dumpability to /proc/<pid>/environ; it holds no secret.
      expect(f.init_environ).toBe(runtime === "runsc" ? "readable" : "PermissionError")
      expect(f["docker.sock"]).toBe("False")
      expect(f.secret_in_env).toBe("False")
      expect(f.hostname).toBe("sandbox")
    })
  })

  describe.concurrent("network", () => {
    it("only loopback exists; then a TCP connect and a DNS lookup fail without leaving the sandbox", async () => {
      // Interfaces are checked FIRST; connections are attempted only when loopback is the only
      // one, and only to 127.0.0.1. The DNS lookup cannot send anything anywhere: there is no
      // interface to send it on.
      const r = await h.run({
        language: "python",
        code: String.raw`
import errno, os, socket
ifaces = sorted(os.listdir("/sys/class/net"))
indexed = sorted(n for _, n in socket.if_nameindex())
routes = [l for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
print("ifaces", ",".join(ifaces))
print("indexed", ",".join(indexed))
print("routes", len(routes))
if ifaces == ["lo"] and indexed == ["lo"] and not routes:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this port now
    c = socket.socket()
    c.settimeout(3)
    try:
        c.connect(("127.0.0.1", port))
        print("connect", "connected")
    except OSError as e:
        print("connect", errno.errorcode.get(e.errno, e.errno))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    ok = socket.create_connection(server.getsockname(), timeout=3)
    print("loopback", "works")
    try:
        socket.getaddrinfo("example.com", 80)
        print("dns", "resolved")
    except socket.gaierror as e:
        print("dns", "failed")
else:
    print("attempts", "skipped")
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      expect(f).toMatchObject({ ifaces: "lo", indexed: "lo", routes: "0" })
      expect(f.attempts).toBeUndefined()
      expect(f).toMatchObject({ connect: "ECONNREFUSED", loopback: "works", dns: "failed" })
    })
  })

  describe.concurrent("privileges", () => {
    it("mount and namespaces: mount(8), mount(2) and unshare are denied (gVisor: user namespaces are the Sentry's)", async () => {
      const r = await h.run({
        language: "bash",
        code: String.raw`
mount -t tmpfs none /mnt 2>/dev/null; echo mount_cmd $?
unshare --user true 2>/dev/null; echo unshare_user $?
unshare --mount true 2>/dev/null; echo unshare_mount $?
unshare -rm true 2>/dev/null; echo unshare_user_mount $?
unshare --net true 2>/dev/null; echo unshare_net $?
python3 - <<'EOF'
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
rc = libc.mount(b"none", b"/mnt", b"tmpfs", 0, None)
print("mount_syscall", rc, errno.errorcode.get(ctypes.get_errno()))
EOF
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      expect(f.mount_cmd).toBe("32") // util-linux: "must be superuser"
      expect(f.mount_syscall).toBe("-1 EPERM")
      expect(f.unshare_mount).toBe("1")
      expect(f.unshare_user_mount).toBe("1")
      expect(f.unshare_net).toBe("1")
      // runc: clone/unshare with CLONE_NEWUSER is filtered by the seccomp profile.
      // gVisor: the Sentry implements user namespaces itself; the host kernel never sees one.
      expect(f.unshare_user).toBe(gvisor ? "0" : "1")
    })

    it("no setuid/setgid binaries, no capabilities, no-new-privileges: uid 1001 cannot become root", async () => {
      const r = await h.run({
        language: "bash",
        code: String.raw`
echo suid $(find / -xdev \( -perm -4000 -o -perm -2000 \) -type f 2>/dev/null | wc -l)
su -c id root </dev/null >/dev/null 2>&1; echo su $?
python3 - <<'EOF'
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
print("ids", os.getuid(), os.geteuid(), os.getgid(), os.getegid(), ",".join(map(str, os.getgroups())))
print("no_new_privs", libc.prctl(39, 0, 0, 0, 0))  # PR_GET_NO_NEW_PRIVS
for name, call in (("setuid", lambda: os.setuid(0)), ("setgid", lambda: os.setgid(0)), ("setgroups", lambda: os.setgroups([0]))):
    try:
        call()
        print(name, "allowed")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
caps = {l.split(":")[0]: l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")}
print("cap_eff", caps["CapEff"])
print("cap_prm", caps["CapPrm"])
print("cap_bnd", caps["CapBnd"])
EOF
`
      })
      expectOutcome(r, exited(0))
      expect(facts(r.stdout)).toMatchObject({
        suid: "0",
        su: "1",
        ids: "1001 1001 1001 1001 1001",
        no_new_privs: "1",
        setuid: "EPERM",
        setgid: "EPERM",
        setgroups: "EPERM",
        cap_eff: "0000000000000000",
        cap_prm: "0000000000000000",
        cap_bnd: "0000000000000000"
      })
    })

    it("ptrace: PTRACE_TRACEME and PTRACE_ATTACH are denied (gVisor: the Sentry's own ptrace, inside the sandbox)", async () => {
      const r = await h.run({
        language: "python",
        code: String.raw`
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def outcome(rc):
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # trace itself in a child, so the program's own process is never stopped
    os.write(w, outcome(libc.ptrace(0, 0, None, None)).encode())  # PTRACE_TRACEME
    os._exit(0)
os.waitpid(pid, 0)
print("traceme", os.read(r, 64).decode())
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
ctypes.set_errno(0)
print("attach", outcome(libc.ptrace(16, pid, None, None)))  # PTRACE_ATTACH
os.kill(pid, 9)
os.waitpid(pid, 0)
`
      })
      expectOutcome(r, exited(0))
      expect(facts(r.stdout)).toEqual(gvisor ? { traceme: "ok", attach: "ok" } : { traceme: "EPERM", attach: "EPERM" })
    })
  })

  describe.concurrent("kernel and root filesystem", () => {
    it("writes to /proc/sys and /proc/sysrq-trigger are denied, and the host's values do not change", async () => {
      const before = {
        aslr: readHost("/proc/sys/kernel/randomize_va_space"),
        core: readHost("/proc/sys/kernel/core_pattern")
      }
      const r = await h.run({
        language: "python",
        code: String.raw`
import errno
targets = [
    ("aslr", "/proc/sys/kernel/randomize_va_space", "0"),
    ("core_pattern", "/proc/sys/kernel/core_pattern", "|/tmp/x"),
    ("drop_caches", "/proc/sys/vm/drop_caches", "3"),
    ("sysrq", "/proc/sys/kernel/sysrq", "1"),
    ("sysrq_trigger", "/proc/sysrq-trigger", "h"),
]
for name, path, value in targets:
    try:
        with open(path, "w") as f:
            f.write(value)
        print(name, "written")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      // Existing files: read-only proc mounts under runc (EROFS), permission checks under gVisor (EACCES).
      const denied = gvisor ? "EACCES" : "EROFS"
      expect(f).toMatchObject({ aslr: denied, core_pattern: denied, drop_caches: denied })
      // sysrq files may not exist at all on a kernel without CONFIG_MAGIC_SYSRQ.
      expect(f.sysrq).toMatch(/^(EROFS|EACCES|ENOENT)$/)
      expect(f.sysrq_trigger).toMatch(/^(EROFS|EACCES|ENOENT)$/)
      expect({
        aslr: readHost("/proc/sys/kernel/randomize_va_space"),
        core: readHost("/proc/sys/kernel/core_pattern")
      }).toEqual(before)
    })

    it("touch /etc/test fails: the root filesystem is read-only (the seeds' own check)", async () => {
      const r = await h.run({
        language: "bash",
        code: String.raw`
touch /etc/test 2>/dev/null; echo etc $?
touch /test 2>/dev/null; echo root $?
echo x 2>/dev/null > /usr/bin/python3; echo usr $?
echo x 2>/dev/null > /opt/hermes/hermes-run; echo runner $?
test -e /etc/test; echo exists $?
python3 -c 'import errno
try:
    open("/etc/test", "w")
except OSError as e:
    print("errno", errno.errorcode[e.errno])'
touch /workspace/ok /tmp/ok; echo writable $?
`
      })
      expectOutcome(r, exited(0))
      expect(facts(r.stdout)).toMatchObject({
        etc: "1",
        root: "1",
        usr: "1",
        runner: "1",
        exists: "1",
        errno: gvisor ? "EACCES" : "EROFS",
        writable: "0"
      })
    })

    it("io_uring and AF_VSOCK are denied by the seccomp profile (gVisor: not the host's, see assertions)", async () => {
      const r = await h.run({
        language: "python",
        code: String.raw`
import ctypes, errno, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *args)
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
params = ctypes.create_string_buffer(120)
print("io_uring_setup", sys(425, ctypes.c_long(8), params))  # same number on every architecture
for name, family, kind in (("af_vsock", 40, socket.SOCK_STREAM), ("af_packet", 17, socket.SOCK_RAW), ("af_alg", 38, socket.SOCK_SEQPACKET)):
    try:
        socket.socket(family, kind).close()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, "?"))
if platform.machine() == "x86_64":
    print("keyctl", sys(250, ctypes.c_long(0), ctypes.c_long(0)))        # KEYCTL_GET_KEYRING_ID
    print("bpf", sys(321, ctypes.c_long(0), None, ctypes.c_long(0)))
    print("userfaultfd", sys(323, ctypes.c_long(0)))
    print("perf_event_open", sys(298, None, ctypes.c_long(0), ctypes.c_long(-1), ctypes.c_long(-1), ctypes.c_long(0)))
    print("clone3", sys(435, None, ctypes.c_long(0)))
`
      })
      expectOutcome(r, exited(0))
      const f = facts(r.stdout)
      if (!gvisor) {
        expect(f).toMatchObject({ io_uring_setup: "EPERM", af_vsock: "EPERM", af_packet: "EPERM", af_alg: "EPERM" })
        if (f.keyctl !== undefined) {
          expect(f).toMatchObject({
            keyctl: "EPERM",
            bpf: "EPERM",
            userfaultfd: "EPERM",
            perf_event_open: "EPERM",
            clone3: "ENOSYS"
          })
        }
      } else {
        // The host kernel's io_uring and vsock are never reached: the Sentry answers. It has its
        // own io_uring; it has no vsock and no AF_ALG; raw packet sockets need CAP_NET_RAW.
        expect(f).toMatchObject({
          io_uring_setup: "ok",
          af_vsock: "EAFNOSUPPORT",
          af_packet: "EPERM",
          af_alg: "EAFNOSUPPORT"
        })
      }
    })
  })

  describe.concurrent("request files", () => {
    it("paths that are absolute, contain '..' or are not normalized are refused before any container exists", async () => {
      const before = h.created.length
      for (const path of ["/etc/passwd", "../escape", "a/../../escape", "a/..", "./a", "a//b", "a\\..\\b", ""]) {
        const error = await h.run({ language: "python", code: "print(1)", files: { [path]: "x" } }).then(
          () => undefined,
          (e: unknown) => e
        )
        expect(error, JSON.stringify(path)).toMatchObject({ _tag: "InvalidRequest" })
        expect((error as { field: string }).field.startsWith("files")).toBe(true)
      }
      expect(h.created.length).toBe(before)
    })

    it("the in-container supervisor refuses to write through a symlink escaping the workspace (from python and node programs)", async () => {
      // The program plants attack/evil -> /tmp/outside and feeds the image's supervisor a runner
      // protocol 2 payload (plain mode: no key) with a file "evil/planted.txt", as a hostile
      // earlier program could in a reused workspace. Under gVisor the SDK runs the readable copy
      // (RunnerProtocol.supervisorFor): its loader cannot load the execute-only one.
      const supervisor = RunnerProtocol.supervisorFor(runtime)
      const plant = String.raw`
import os, subprocess
os.makedirs("/workspace/attack")
os.mkdir("/tmp/outside")
os.symlink("/tmp/outside", "/workspace/attack/evil")
code = b"print('the program must not run')"
name = b"evil/planted.txt"
payload = b"HERMES/2\nlang python\ncode %d\n" % len(code) + code + b"file %d 5\n" % len(name) + name + b"owned" + b"run\n"
env = dict(os.environ, HERMES_WORKSPACE="/workspace/attack", HERMES_CODE_DIR="/tmp/code2")
p = subprocess.run(["${supervisor}"], input=payload, env=env, capture_output=True)
print("rc", p.returncode)
print("stderr", p.stderr.decode().strip())
print("stderr_lines", len(p.stderr.splitlines()))
print("stdout", p.stdout.decode().strip())
print("planted", os.path.exists("/tmp/outside/planted.txt"))
`
      // The node image may have no python3: the same attack in JavaScript.
      const plantJs = String.raw`
const fs = require("fs"), cp = require("child_process")
fs.mkdirSync("/workspace/attack"); fs.mkdirSync("/tmp/outside"); fs.symlinkSync("/tmp/outside", "/workspace/attack/evil")
const code = Buffer.from("console.log('the program must not run')")
const name = Buffer.from("evil/planted.txt")
const payload = Buffer.concat([Buffer.from("HERMES/2\nlang javascript\ncode " + code.length + "\n"), code, Buffer.from("file " + name.length + " 5\n"), name, Buffer.from("owned"), Buffer.from("run\n")])
const env = { ...process.env, HERMES_WORKSPACE: "/workspace/attack", HERMES_CODE_DIR: "/tmp/code2" }
const p = cp.spawnSync("${supervisor}", [], { input: payload, env })
console.log("rc", p.status)
console.log("stderr", p.stderr.toString().trim())
console.log("stderr_lines", p.stderr.toString().split("\n").filter((l) => l !== "").length)
console.log("stdout", p.stdout.toString().trim())
console.log("planted", fs.existsSync("/tmp/outside/planted.txt") ? "True" : "False")
`
      for (const language of ["python", "javascript"] as const) {
        const r = await h.run({ language, code: language === "python" ? plant : plantJs })
        expectOutcome(r, exited(0))
        const f = facts(r.stdout)
        expect(f, language).toMatchObject({ rc: "126", stdout: "", planted: "False", stderr_lines: "1" })
        expect(f.stderr, language).toMatch(/^hermes-run: .*symlink/)
      }
    })
  })
})
