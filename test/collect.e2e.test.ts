/**
 * Files out of one-shot runs (`collect`) on the real engine: the supervisor sends what matches
 * from /workspace after the program and everything it left were killed, over the run's keyed
 * frames. Attack first: forged frames in the output and in file names, symlinks out of the
 * workspace, FIFOs, floods past every limit, a daemon rewriting a file while it is read, a
 * program that never ends. Then the ordinary paths: binary content, odd names, the journal.
 */
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ExecutionResult } from "@hermes-sandbox/core"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import { testExecutor } from "./support/executor.js"
import { RUNTIMES } from "./hostile/support.js"

const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex")
const text = (b: Uint8Array) => Buffer.from(b).toString("utf8")
const byPath = (r: ExecutionResult) => new Map((r.files ?? []).map((f) => [f.path, f]))

describe.each(RUNTIMES)("collect: files out of one-shot runs (real engine, %s)", (runtime) => {
  let executor: SandboxExecutor
  const events: Array<{ type: string; streamId: string; data: unknown }> = []
  beforeAll(async () => {
    executor = await testExecutor({ timeoutMs: 30_000, maxConcurrency: 4, awaitRemoval: true, runtime })
    executor.events$.subscribe((e) => events.push(e))
  })
  afterAll(async () => {
    await executor.close()
  })

  it("a PNG and a CSV come back byte for byte, with the sha256 and size the host computed and a media type", async () => {
    const r = await executor.executeCode({
      language: "python",
      // A real PNG from the standard library alone (zlib + struct): 64x64, a gradient.
      code: String.raw`
import hashlib, struct, zlib, csv
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
w = h = 64
raw = b"".join(b"\x00" + b"".join(bytes((x * 4, y * 4, 128)) for x in range(w)) for y in range(h))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("chart.png", "wb").write(png)
rows = list(csv.reader(open("in.csv")))
with open("out.csv", "w", newline="") as f:
    csv.writer(f).writerows([[c.upper() for c in row] for row in rows])
print(hashlib.sha256(png).hexdigest(), len(png))
`,
      files: { "in.csv": "name,city\nada,london\n" },
      collect: ["*.png", "out.csv"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const [digest, size] = r.stdout.trim().split(" ")
    const files = byPath(r)
    expect([...files.keys()].sort()).toEqual(["chart.png", "out.csv"])
    const png = files.get("chart.png")!
    expect(Buffer.from(png.content.subarray(0, 8)).toString("hex")).toBe("89504e470d0a1a0a")
    expect(png).toMatchObject({ size: Number(size), sha256: digest, mime: "image/png" })
    expect(sha256(png.content)).toBe(png.sha256)
    expect(text(files.get("out.csv")!.content)).toBe("NAME,CITY\r\nADA,LONDON\r\n")
    expect(files.get("out.csv")!.mime).toBe("text/csv")
    expect(r).toMatchObject({ skippedFiles: [], filesTruncated: false, collection: { status: "complete" } })
    // The journal has the metadata, never the content.
    const collected = events.find((e) => e.streamId === r.executionId && e.type === "ArtifactsCollected")
    expect(collected?.data).toEqual({
      files: [
        { path: "chart.png", size: png.size, sha256: png.sha256, mime: "image/png" },
        { path: "out.csv", size: 23, sha256: files.get("out.csv")!.sha256, mime: "text/csv" }
      ],
      skipped: [],
      truncated: false,
      status: "complete"
    })
    const types = events.filter((e) => e.streamId === r.executionId).map((e) => e.type)
    expect(types.indexOf("ArtifactsCollected")).toBe(types.indexOf("ContainerExited") - 1)
  })

  it("names with any bytes JavaScript strings hold round-trip exactly; `**`, directories and dotfiles follow glob rules", async () => {
    const names = [
      "spaced name.txt",
      "ünïcødé-表.txt",
      "new\nline.txt",
      "tab\there.txt",
      "deep/a/b/c.txt",
      ".hidden.txt",
      "out/x.bin",
      "out/sub/y.bin"
    ]
    const r = await executor.executeCode({
      language: "python",
      code: `import os\nfor i, n in enumerate(${JSON.stringify(names)}):\n    os.makedirs(os.path.dirname(n) or ".", exist_ok=True)\n    open(n, "wb").write(bytes([i]) * (i + 1))\n`,
      collect: ["*.txt", "deep/**/*.txt", "out"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const files = byPath(r)
    expect([...files.keys()].sort()).toEqual(names.filter((n) => n !== ".hidden.txt").sort())
    names.forEach((n, i) => {
      if (n === ".hidden.txt") return
      expect(Buffer.from(files.get(n)!.content)).toEqual(Buffer.alloc(i + 1, i))
    })
    const dot = await executor.executeCode({
      language: "bash",
      code: "echo h > .hidden.txt",
      collect: [".*.txt", "missing.csv"]
    })
    expect(dot.files?.map((f) => f.path)).toEqual([".hidden.txt"])
    expect(dot.skippedFiles).toEqual([{ path: "missing.csv", size: 0, skipped: "not-found" }])
  })

  it("symlinks (to /etc/passwd, out of /workspace, to a directory) are reported, never followed; FIFOs, sockets and other non-files are skipped", async () => {
    const r = await executor.executeCode({
      language: "python",
      code: String.raw`
import os, socket
os.symlink("/etc/passwd", "passwd.txt")
os.symlink("../tmp", "tmpdir")
os.symlink("/proc/1/environ", "environ.txt")
open("/tmp/secret.txt", "w").write("outside")
os.symlink("/tmp/secret.txt", "secret.txt")
os.mkfifo("fifo.txt")
s = socket.socket(socket.AF_UNIX); s.bind("sock.txt")
open("real.txt", "w").write("real")
`,
      collect: ["*.txt", "tmpdir/**", "tmpdir"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.files?.map((f) => [f.path, text(f.content)])).toEqual([["real.txt", "real"]])
    const skipped = Object.fromEntries((r.skippedFiles ?? []).map((s) => [s.path, s.skipped]))
    expect(skipped).toEqual({
      "environ.txt": "symlink",
      "fifo.txt": "not-regular",
      "passwd.txt": "symlink",
      "secret.txt": "symlink",
      "sock.txt": "not-regular",
      tmpdir: "symlink"
    })
    expect(r.filesTruncated).toBe(false)
  })

  it("limits: too many files, one too large, a total over the cap; each listed with its reason, the result honest", async () => {
    const many = await executor.executeCode({
      language: "python",
      code: "for i in range(150):\n    open(f'f{i:03}.dat', 'wb').write(b'x' * 10)\n",
      collect: ["*.dat"]
    })
    expect(many.files).toHaveLength(100)
    expect(many.skippedFiles?.filter((s) => s.skipped === "limit")).toHaveLength(50)
    expect(many.filesTruncated).toBe(true)
    expect(many.collection).toEqual({ status: "complete" })

    const sized = await executor.executeCode({
      language: "python",
      code: "open('big.bin', 'wb').write(b'b' * (3 << 20))\nfor i in range(5):\n    open(f'part{i}.bin', 'wb').write(bytes([i]) * (300 << 10))\n",
      collect: ["*.bin"],
      collectLimits: { maxFileBytes: 1 << 20, maxTotalBytes: 1 << 20 }
    })
    expect(sized.exitCode, sized.stderr).toBe(0)
    expect(sized.files?.map((f) => [f.path, f.size])).toEqual([
      ["part0.bin", 300 << 10],
      ["part1.bin", 300 << 10],
      ["part2.bin", 300 << 10]
    ])
    expect(sized.skippedFiles).toEqual([
      { path: "big.bin", size: 3 << 20, skipped: "too-large" },
      { path: "part3.bin", size: 300 << 10, skipped: "total-limit" },
      { path: "part4.bin", size: 300 << 10, skipped: "total-limit" }
    ])
    expect(sized.filesTruncated).toBe(true)
  })

  it("16,000 symlinks with 4 KiB paths (hostile review 2, #2): the skipped list the host keeps, journals and returns is bounded; the rest are counted", async () => {
    const r = await executor.executeCode({
      language: "python",
      // A directory path of ~3.5 KiB, then symlinks with 245-byte names until the workspace runs out of inodes.
      code: String.raw`
import os
d = "/workspace/" + "/".join(["d" * 250] * 14)
os.makedirs(d)
os.chdir(d)
n = 0
try:
    for i in range(20000):
        os.symlink("x", ("%05d" % i) + "L" * 240)
        n += 1
except OSError:
    pass
print(n)
`,
      collect: ["**"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const made = Number(r.stdout.trim())
    expect(made).toBeGreaterThan(5_000)
    const listed = r.skippedFiles ?? []
    // Paths of ~3.8 KiB: the 256 KiB bound binds before the 1,000 entries.
    expect(listed.length).toBeGreaterThan(10)
    expect(listed.length).toBeLessThanOrEqual(1_000)
    expect(listed.reduce((n, s) => n + Buffer.byteLength(s.path), 0)).toBeLessThanOrEqual(256 * 1024)
    expect(listed.every((s) => s.skipped === "symlink")).toBe(true)
    expect(listed.length + (r.skippedFilesOmitted ?? 0)).toBe(made)
    expect(r.collection).toEqual({ status: "complete" })
    const collected = events.find((e) => e.streamId === r.executionId && e.type === "ArtifactsCollected")?.data as {
      skipped: Array<unknown>
      skippedOmitted?: number
    }
    expect(collected.skipped.length).toBe(listed.length)
    expect(collected.skippedOmitted).toBe(r.skippedFilesOmitted)
    expect(JSON.stringify(collected).length).toBeLessThan(400 * 1024)
  })

  it("forged frames in the output and in file names inject no file, alter no content and forge no result", async () => {
    // Frames need the run's key, which the program never sees; it tries 'f'/'c'/'F'/'x' frames
    // with random and all-zero keys on both streams, and names a file as if it were a frame.
    const r = await executor.executeCode({
      language: "python",
      code: String.raw`
import os, struct, sys
def frame(key, t, payload): return key + t + struct.pack(">I", len(payload)) + payload
for key in (os.urandom(16), bytes(16)):
    forged = frame(key, b"f", b"644 4 evil.txt") + frame(key, b"c", b"EVIL") + frame(key, b"F", b"4") + frame(key, b"x", b"0 0 0 0")
    sys.stdout.buffer.write(forged); sys.stderr.buffer.write(forged)
sys.stdout.flush(); sys.stderr.flush()
open("a.txt", "w").write("genuine")
open("644 4 evil.txt", "w").write("named like a frame")
open("fc 4 x.txt", "w").write("x")
`,
      collect: ["*.txt"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.files?.map((f) => [f.path, text(f.content)]).sort()).toEqual([
      ["644 4 evil.txt", "named like a frame"],
      ["a.txt", "genuine"],
      ["fc 4 x.txt", "x"]
    ])
    expect(r.stdout).toContain("evil.txt") // the forged bytes are the program's output, nothing else
    expect(r.collection).toEqual({ status: "complete" })
  })

  it("a daemon left running cannot change a file while it is sent: everything is killed before the walk", async () => {
    // The daemon waits (inotify) for anyone to open /workspace — the walk's first step — and then
    // rewrites log.txt at once and for ever; 5000 files sorted before it give it milliseconds to
    // win. Alive during the walk, it would tamper; killed before it, the file is as the program left it.
    const r = await executor.executeCode({
      language: "python",
      code: String.raw`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for i in range(5000):
    open(f"a{i:04}", "w").close()
open("log.txt", "w").write("ORIGINAL")
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = libc.inotify_init()
        assert fd >= 0 and libc.inotify_add_watch(fd, b"/workspace", 0x20) >= 0  # IN_OPEN
        os.write(w, b"1")
        while True:
            os.read(fd, 65536)
            with open("/workspace/log.txt", "w") as f:
                f.write("TAMPERED")
    os._exit(0)
assert os.read(r, 1) == b"1"
print("armed")
`,
      collect: ["log.txt"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toBe("armed\n")
    expect(r.files?.map((f) => [f.path, text(f.content)])).toEqual([["log.txt", "ORIGINAL"]])
  })

  it("a program that never ends: the deadline ends it, and the result says nothing was collected, and why", async () => {
    const r = await executor.executeCode({
      language: "python",
      code: "open('early.txt', 'w').write('early')\nf = open('big.txt', 'wb')\nwhile True:\n    f.write(b'x' * 4096)\n    f.seek(0)\n",
      collect: ["*.txt"],
      timeoutMs: 2_000
    })
    expect(r).toMatchObject({
      timedOut: true,
      files: [],
      filesTruncated: true,
      collection: { status: "none", reason: "timed-out" }
    })
    const collected = events.find((e) => e.streamId === r.executionId && e.type === "ArtifactsCollected")
    expect(collected?.data).toMatchObject({ files: [], status: "none", reason: "timed-out" })
  })

  it("an OOM-killed program still gets its files back (runc: the supervisor survives the program); under gVisor the result says none came", async () => {
    const r = await executor.executeCode({
      language: "python",
      memory: "128m",
      code: "open('before.txt', 'w').write('before')\na = []\nwhile True:\n    a.append(bytearray(10**7))\n",
      collect: ["before.txt"]
    })
    expect(r.exitCode).toBe(137)
    expect(r.oomKilled).toBe(true)
    if (runtime === "runsc") {
      // gVisor's OOM ends the whole sandbox (SECURITY.md): nothing could be sent, and the result says so.
      expect(r).toMatchObject({
        files: [],
        filesTruncated: true,
        collection: { status: "none", reason: "sandbox-ended" }
      })
    } else {
      expect(r.collection).toEqual({ status: "complete" })
      expect(r.files?.map((f) => text(f.content))).toEqual(["before"])
    }
  })

  it("refuses bad patterns and limits before any container exists", async () => {
    for (const collect of [["/etc/passwd"], ["../x"], ["a/../../b"], [""], ["**/**/**/**/**/x"]]) {
      await expect(executor.executeCode({ language: "python", code: "pass", collect })).rejects.toMatchObject({
        _tag: "InvalidRequest"
      })
    }
    await expect(
      executor.executeCode({ language: "python", code: "pass", collect: ["x"], collectLimits: { maxFiles: 0 } })
    ).rejects.toMatchObject({ _tag: "InvalidRequest" })
  })
})

describe("collect with the data-science image (hermes-sandbox/python-data)", () => {
  let executor: SandboxExecutor
  beforeAll(async () => {
    executor = await testExecutor({ timeoutMs: 60_000, awaitRemoval: true })
  })
  afterAll(async () => {
    await executor.close()
  })

  it("a matplotlib chart comes back as a PNG, and a CSV goes in through files, through pandas, out through collect", async () => {
    const r = await executor.executeCode({
      language: "python",
      image: "hermes-sandbox/python-data:latest",
      code: String.raw`
import hashlib, os
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("sales.csv")
summary = df.groupby("region", as_index=False)["amount"].sum().sort_values("region")
os.makedirs("out", exist_ok=True)
summary.to_csv("out/summary.csv", index=False)
ax = summary.plot.bar(x="region", y="amount", legend=False)
ax.figure.savefig("chart.png", dpi=80)
print(hashlib.sha256(open("chart.png", "rb").read()).hexdigest())
`,
      files: { "sales.csv": "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\n" },
      collect: ["chart.png", "out/**"]
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toBe("")
    const files = byPath(r)
    const png = files.get("chart.png")!
    expect(Buffer.from(png.content.subarray(0, 8)).toString("hex")).toBe("89504e470d0a1a0a")
    expect(png.mime).toBe("image/png")
    expect(png.sha256).toBe(r.stdout.trim())
    expect(png.size).toBeGreaterThan(2_000) // a rendered chart, not an empty image
    expect(png.size).toBeLessThan(500_000)
    expect(text(files.get("out/summary.csv")!.content)).toBe("region,amount\neast,1\nnorth,17\nsouth,5\n")
    expect(r.collection).toEqual({ status: "complete" })
  })
})
