/**
 * Hostile programs on the live cluster, through the public Promise API
 * (createExecutor({ runtime: { kubernetes } })), as the ServiceAccount of the runtime's Role: the
 * hostile core cases (test/hostile/coreCases.ts, the same bodies as on Docker and remote engines),
 * the deadline on every path, forged reports, floods and the pod's hardening seen from inside, each
 * without and with a warm pool; the guarantees a pod cannot give refused, a pod deleted from
 * outside, and what the Role denies.
 */
import { createHash, randomBytes } from "node:crypto"
import * as k8s from "@kubernetes/client-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Labels } from "@hermes-sandbox/core"
import { createExecutor } from "@hermes-sandbox/docker"
import { forkedChildDoesNotEndRun, GONE_MARGIN_MS, spinningExitHandler } from "../hostile/coreCases.js"
import { exited, expectOutcome, facts, type HostileExecutor, MiB, TIMED_OUT } from "../hostile/support.js"
import { adminCore, kubernetesHostileExecutor, namespace, podsLeft, runtimeOptions } from "../support/kubernetes.js"

const podExists = async (name: string): Promise<boolean> => (await podsLeft()).includes(name)

/**
 * The cases whose path differs with a warm pool (a pod created ahead, claimed, its program run by a
 * preloaded interpreter): run without one and with one, as the Docker suites are (engine-pool).
 */
for (const pooled of [false, true])
  describe(pooled ? "with a warm pool" : "without a warm pool", () => {
    let h!: HostileExecutor
    beforeAll(async () => {
      h = await kubernetesHostileExecutor(
        pooled ? { warmPool: { size: 1, languages: ["python", "javascript", "bash"] } } : {}
      )
    }, 120_000)
    afterAll(async () => {
      await h?.finish()
    }, 120_000)

    describe("the hostile core cases (as on Docker and remote engines)", () => {
      it("a JavaScript exit handler spinning past the deadline is killed; the pod is gone by deadline + margin", async () => {
        await spinningExitHandler(h, podExists)
      }, 60_000)

      it("a forked child reaching the end of its script does not end the run", async () => {
        await forkedChildDoesNotEndRun(h)
      }, 60_000)
    })

    describe.concurrent("code and stdin in, output and the exit out", () => {
      it("a 1 MiB program and 1 MiB of stdin arrive whole (one attach stream, stdin in the header)", async () => {
        const filler = "#".repeat(MiB - 200) // the program at most maxCodeBytes (1 MiB)
        const stdin = randomBytes(MiB / 2).toString("hex") // 1 MiB of text
        const r = await h.run({
          language: "python",
          code: `# ${filler}\nimport hashlib, sys\nd = sys.stdin.buffer.read()\nprint(len(open(__file__).read()), len(d), hashlib.sha256(d).hexdigest())\n`,
          stdin
        })
        expectOutcome(r, exited(0))
        const sha = createHash("sha256").update(stdin).digest("hex")
        expect(r.stdout.trim().split(" ").slice(1)).toEqual([String(MiB), sha])
        expect(Number(r.stdout.split(" ")[0])).toBeGreaterThan(MiB - 200)
      }, 60_000)

      it("exit codes are the program's, in python and bash", async () => {
        const [py, sh] = await Promise.all([
          h.run({ language: "python", code: "import sys\nsys.exit(3)" }),
          h.run({ language: "bash", code: "exit 7" })
        ])
        expectOutcome(py!, exited(3))
        expectOutcome(sh!, exited(7))
      }, 60_000)

      it("a forged report (frames with a key of the program's own) stays the program's stdout; the exit is the real one", async () => {
        const key = randomBytes(16).toString("hex")
        const r = await h.run({
          language: "python",
          code: `import sys\nsys.stdout.buffer.write(bytes.fromhex("${key}") + b"x" + (9).to_bytes(4, "big") + b"0 0 0 0 0")\nsys.stdout.flush()\nsys.exit(4)\n`
        })
        expectOutcome(r, exited(4))
        expect(r.stdout.length).toBeGreaterThan(16)
      }, 60_000)

      it("an output flood is capped: the first bytes kept, the rest counted, the run ends normally", async () => {
        const r = await h.run({
          language: "python",
          code: "import sys\nfor _ in range(800):\n    sys.stdout.write('x' * 65536)\nsys.stdout.flush()\n",
          outputLimitBytes: 64 * 1024
        })
        expectOutcome(r, exited(0))
        expect(r.stdoutTruncated).toBe(true)
        expect(r.stdout.length).toBeLessThanOrEqual(64 * 1024)
        expect(r.stdoutBytes).toBe(800 * 65536)
      }, 60_000)

      it("the deadline kills a program that ignores SIGTERM and forks children that never end; nothing is left", async () => {
        const r = await h.run({
          language: "python",
          code: "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        while True: time.sleep(1)\nprint('forked', flush=True)\nwhile True: time.sleep(1)\n",
          timeoutMs: 3_000
        })
        expectOutcome(r, TIMED_OUT)
        expect(r.stdout).toBe("forked\n")
        expect(Date.now() - (Date.parse(r.startedAt) + 3_000)).toBeLessThan(GONE_MARGIN_MS)
        expect(await podExists(r.containerName)).toBe(false)
      }, 60_000)
    })

    describe.concurrent("the pod's hardening, seen from inside", () => {
      it("non-root, no capabilities, no new privileges, a seccomp filter, read-only root, sized writable /tmp and /workspace", async () => {
        const r = await h.run({
          language: "python",
          code: String.raw`
import os
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("uid", os.getuid(), os.getgid())
print("capeff", status["CapEff"].strip(), status["CapBnd"].strip())
print("nonewprivs", status["NoNewPrivs"].strip())
print("seccomp", status["Seccomp"].strip())
for path in ("/", "/usr", "/etc/passwd"):
    try:
        open(os.path.join(path, "x") if os.path.isdir(path) else path, "a").close()
        print("write" + path, "ok")
    except OSError as e:
        print("write" + path, e.errno)
for path in ("/tmp", "/workspace"):
    open(os.path.join(path, "f"), "w").write("x")
    st = os.statvfs(path)
    print("size" + path, st.f_blocks * st.f_frsize)
print("token", os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"))
print("service_env", any(v for k, v in os.environ.items() if k.endswith("_SERVICE_HOST") or k.startswith("KUBERNETES_")))
print("hostname", open("/etc/hostname").read().strip())
`
        })
        expectOutcome(r, exited(0))
        const f = facts(r.stdout)
        expect(f.uid).toBe("1001 1001")
        expect(f.capeff).toBe("0000000000000000 0000000000000000")
        expect(f.nonewprivs).toBe("1")
        expect(f.seccomp).toBe("2")
        expect(f["write/"]).toBe("30") // EROFS
        expect(f["write/usr"]).toBe("30")
        expect(f["write/etc/passwd"]).toMatch(/^(13|30)$/) // EACCES or EROFS
        expect(Number(f["size/tmp"])).toBeGreaterThan(0)
        expect(Number(f["size/tmp"])).toBeLessThanOrEqual(256 * MiB)
        expect(f.token).toBe("False")
        expect(f.service_env).toBe("False")
        expect(f.hostname).toBe("sandbox")
      }, 60_000)

      it("the seccomp profile denies what it removes (unshare, mount, keyctl, ptrace of init): EPERM, not ENOSYS or success", async () => {
        const r = await h.run({
          language: "python",
          code: String.raw`
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    rc = getattr(libc, name)(*args)
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
print("unshare", call("unshare", 0x10000000))
print("mount", call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
print("keyctl", call("syscall", 250, 0, 0, 0, 0, 0))
print("ptrace", call("ptrace", 16, 1, None, None))
`
        })
        expectOutcome(r, exited(0))
        const f = facts(r.stdout)
        for (const call of ["unshare", "mount", "keyctl", "ptrace"]) expect(f[call], call).toBe("EPERM")
      }, 60_000)

      it("no network: nothing off the pod answers (the API server, a public address, the cluster's service IP)", async () => {
        const r = await h.run({
          language: "python",
          code: String.raw`
import socket
for name, addr in (("apiserver", ("127.0.0.1", 16443)), ("public", ("1.1.1.1", 443)), ("service", ("10.0.0.1", 443))):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(addr)
        print(name, "connected")
    except OSError as e:
        print(name, type(e).__name__)
    finally:
        s.close()
`
        })
        expectOutcome(r, exited(0))
        const f = facts(r.stdout)
        for (const name of ["apiserver", "public", "service"]) expect(f[name], name).not.toBe("connected")
      }, 60_000)
    })
  })

describe("what a pod cannot give is refused, not dropped", () => {
  it("without allowDegraded every run fails ContainerFailed 'guarantee-unavailable' naming each guarantee, and no pod is created", async () => {
    const strict = await kubernetesHostileExecutor({}, { allowDegraded: [] })
    try {
      const error = await strict.run({ language: "python", code: "print(1)" }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect(error).toMatchObject({ _tag: "ContainerFailed", reason: "guarantee-unavailable" })
      const message = (error as { message: string }).message
      for (const g of ["pids-limit", "ulimits", "tmpfs-options", "masked-paths", "network-none", "logging-off"])
        expect(message).toContain(g)
      expect(strict.created).toEqual([])
      // A network-enabled run does not need network-none; allowing all but that one runs it.
      const partial = await kubernetesHostileExecutor(
        { network: true },
        { allowDegraded: ["pids-limit", "ulimits", "tmpfs-options", "masked-paths", "logging-off"] }
      )
      const r = await partial.run({ language: "python", code: "print(1)" })
      expectOutcome(r, exited(0))
      await partial.finish({ healthCheck: false })
      // Nor does the API server hold a pod of this executor (other files share the namespace).
      const ofStrict = await adminCore().listNamespacedPod({
        namespace: namespace(),
        labelSelector: `${Labels.Label.executor}=${strict.executor.executorId}`
      })
      expect(ofStrict.items).toEqual([])
    } finally {
      await strict.finish({ healthCheck: false })
    }
  }, 60_000)
})

describe("a pod deleted from outside", () => {
  it("is a ContainerFailed 'killed-externally', not a result; nothing is left", async () => {
    const executor = await createExecutor({ timeoutMs: 30_000, cpus: 0.25, runtime: { kubernetes: runtimeOptions() } })
    try {
      let containerName = ""
      const sub = executor.events$.subscribe((e) => {
        if (e.type === "ContainerCreated") containerName = e.data.containerName
      })
      let printed!: () => void
      const up = new Promise<void>((resolve) => (printed = resolve))
      const run = executor
        .executeCode(
          { language: "python", code: "import time\nprint('up', flush=True)\ntime.sleep(60)" },
          { onStdout: () => printed() }
        )
        .then(
          (r) => r,
          (e: unknown) => e
        )
      await up
      sub.unsubscribe()
      await adminCore().deleteNamespacedPod({ name: containerName, namespace: namespace(), gracePeriodSeconds: 0 })
      const outcome = await run
      expect(outcome).toMatchObject({ _tag: "ContainerFailed", reason: "killed-externally" })
      expect(await podExists(containerName)).toBe(false)
    } finally {
      await executor.close()
    }
  }, 60_000)
})

describe("the Role is all the runtime has", () => {
  it("the tier's ServiceAccount can run sandboxes but cannot read secrets, list nodes, or touch another namespace", async () => {
    const kc = new k8s.KubeConfig()
    kc.loadFromFile(runtimeOptions().kubeconfig!)
    const core = kc.makeApiClient(k8s.CoreV1Api)
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: { code?: number }) => e.code
      )
    expect(await status(core.listNamespacedPod({ namespace: namespace() }))).toBe(200)
    expect(await status(core.listNamespacedSecret({ namespace: namespace() }))).toBe(403)
    expect(await status(core.listNode())).toBe(403)
    expect(await status(core.listNamespacedPod({ namespace: "default" }))).toBe(403)
    expect(await status(core.listNamespacedPod({ namespace: "kube-system" }))).toBe(403)
  }, 30_000)
})
