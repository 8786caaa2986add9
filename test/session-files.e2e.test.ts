/**
 * A session's file operations (readFile, writeFile, listFiles, removeFile) against what a program
 * in the sandbox can plant, on the real engine — the proof of confinement the fake cannot give:
 * symlinks to /etc/passwd and /proc/1/environ, a symlinked parent directory (also one pointing
 * inside the roots), a FIFO where a write goes, `..`, names with newlines, Unicode and non-UTF-8
 * bytes, a 20 MiB binary file, the roots themselves, a read-only mount and the read-only root, the
 * session lock held by a leftover. Each is handled as specified, nothing outside the sandbox's
 * writable roots is read or written, and the host is unharmed. The round trip, paging, the path
 * rule and serialization with calls are the sessions contract's (test/support/sessionContract.ts).
 */
import { createHash, randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { createSession, openPersistent } from "@hermes-sandbox/docker"
import { docker, waitFor } from "./support/docker.js"
import { sessionTracker } from "./support/sessions.js"

const { track, removeTracked } = sessionTracker()
afterEach(removeTracked)
afterAll(removeTracked)

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
const text = (b: Uint8Array) => Buffer.from(b).toString("utf8")
const hostPasswd = sha256(readFileSync("/etc/passwd"))
afterAll(() => expect(sha256(readFileSync("/etc/passwd"))).toBe(hostPasswd))

describe("session file operations against a hostile sandbox", () => {
  it("a symlink a call planted (to /etc/passwd, /proc/1/environ, a writable file) is never followed: read and write fail with ELOOP, the target is untouched; remove takes the link itself", async () => {
    const s = track(await createSession())
    await s.run(
      "ln -s /etc/passwd /workspace/pw && ln -s /proc/1/environ /tmp/env && echo original > /tmp/target && ln -s /tmp/target /workspace/to-target"
    )
    for (const path of ["pw", "/tmp/env", "to-target"]) {
      await expect(s.readFile(path)).rejects.toMatchObject({
        _tag: "SandboxFileError",
        operation: "read",
        code: "ELOOP",
        message: expect.stringContaining("symlink")
      })
    }
    await expect(s.writeFile("to-target", "overwritten")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "write",
      code: "ELOOP"
    })
    await expect(s.writeFile("pw", "root::0:0::/root:/bin/sh\n")).rejects.toMatchObject({ code: "ELOOP" })
    expect((await s.run("cat /tmp/target")).stdout).toBe("original\n")
    // Listed as what it is, its size the target's length.
    const listed = await s.listFiles()
    expect(listed.entries.filter((e) => e.name === "pw" || e.name === "to-target")).toEqual([
      expect.objectContaining({ name: "pw", kind: "symlink", size: "/etc/passwd".length }),
      expect.objectContaining({ name: "to-target", kind: "symlink", size: "/tmp/target".length })
    ])
    await s.removeFile("to-target")
    expect((await s.run("test -L /workspace/to-target || echo link-gone; cat /tmp/target")).stdout).toBe(
      "link-gone\noriginal\n"
    )
    await s.close()
  }, 60_000)

  it("a symlinked parent directory is never walked through, even one that points inside the roots: ELOOP, nothing read, nothing created at its target", async () => {
    const s = track(await createSession())
    await s.run(
      "ln -s /etc /workspace/etc && ln -s / /tmp/root && mkdir -p /tmp/real && echo inside > /tmp/real/file && ln -s /tmp/real /workspace/inside"
    )
    await expect(s.readFile("etc/passwd")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      code: "ELOOP",
      message: expect.stringContaining("etc is a symlink")
    })
    await expect(s.readFile("/tmp/root/etc/shadow")).rejects.toMatchObject({ code: "ELOOP" })
    await expect(s.listFiles("etc")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "list",
      code: "ELOOP"
    })
    await expect(s.readFile("inside/file")).rejects.toMatchObject({ code: "ELOOP" })
    await expect(s.writeFile("inside/new", "x")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "write",
      code: "ELOOP"
    })
    await expect(s.writeFile("inside/deeper/new", "x")).rejects.toMatchObject({ code: "ELOOP" })
    // A refused write's content is read past, never parsed as header lines (it once made /workspace/abcde).
    await expect(s.writeFile("inside/forged", "file 5 3\nabcdexyz")).rejects.toMatchObject({ code: "ELOOP" })
    await expect(s.writeFile("fifo-missing-dir/../x", "file 5 3\nabcdexyz")).rejects.toMatchObject({
      _tag: "InvalidRequest"
    })
    expect((await s.run("ls -A /workspace")).stdout.split("\n")).not.toContain("abcde")
    await expect(s.removeFile("inside/file")).rejects.toMatchObject({ code: "ELOOP" })
    expect((await s.run("ls -A /tmp/real; cat /tmp/real/file")).stdout).toBe("file\ninside\n")
    // The real directory itself works.
    expect(text((await s.readFile("/tmp/real/file")).content)).toBe("inside\n")
    await s.close()
  }, 60_000)

  it("a FIFO planted where a write goes neither blocks nor is written, with or without a reader waiting on it; reading one is refused; it is listed as 'other'", async () => {
    // keepBackgroundProcesses: a reader left by a call is still waiting on the FIFO when the write comes.
    const s = track(await createSession({ keepBackgroundProcesses: true }))
    await s.run("mkfifo /workspace/fifo /workspace/read-fifo /tmp/fifo2")
    await s.run("setsid cat /workspace/read-fifo > /tmp/what-the-reader-got </dev/null 2>&1 &")
    // Until the reader waits in the FIFO's open (seen from outside: its kernel wait channel), a write would find no reader.
    const sandbox = docker.getContainer(s.containerName)
    const readerWaits = async () =>
      (await sandbox.top({ ps_args: "-eo pid,wchan:32,args" })).Processes.some(
        (p: Array<string>) => p.at(-1) === "cat /workspace/read-fifo" && /partner|fifo|pipe/.test(p[1] ?? "")
      )
    expect(await waitFor(readerWaits, 15_000, 50)).toBe(true)
    // No reader: the non-blocking open fails with ENXIO. (Blocked, it would end at the deadline: ETIMEDOUT.)
    await expect(s.writeFile("fifo", "into the pipe", { timeoutMs: 10_000 })).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "write",
      code: "ENXIO"
    })
    // A reader: the open succeeds, and the FIFO is refused before a byte goes in.
    await expect(s.writeFile("read-fifo", "into the pipe", { timeoutMs: 10_000 })).rejects.toMatchObject({
      _tag: "SandboxFileError",
      code: "EINVAL",
      message: expect.stringContaining("not a regular file")
    })
    await expect(s.readFile("/tmp/fifo2", { timeoutMs: 10_000 })).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "read",
      code: "EINVAL"
    })
    expect((await s.run("sleep 0.2; wc -c < /tmp/what-the-reader-got")).stdout).toBe("0\n")
    expect((await s.listFiles()).entries.find((e) => e.name === "fifo")).toMatchObject({ kind: "other" })
    expect((await s.run("test -p /workspace/fifo && echo still-a-fifo")).stdout).toBe("still-a-fifo\n")
    // The session goes on.
    expect((await s.writeFile("after.txt", "ok")).bytesWritten).toBe(2)
    await s.close()
  }, 60_000)

  it("'..' and paths outside /workspace and /tmp are refused before anything runs; the root filesystem is read-only and a read-only mount refuses writes (EROFS), the host directory unchanged", async () => {
    const host = mkdtempSync(join(tmpdir(), "hs-files-"))
    // Readable by the sandbox's user (uid 1001): only the mount's read-only flag stands in the way.
    chmodSync(host, 0o755)
    writeFileSync(join(host, "kept.txt"), "host content")
    try {
      const s = track(await createSession({ mounts: [{ hostPath: host, containerPath: "/workspace/ro" }] }))
      for (const path of [
        "../etc/passwd",
        "/workspace/../etc/passwd",
        "/tmp/../etc/shadow",
        "a/../../../etc/passwd",
        "/etc/passwd",
        "/proc/1/environ",
        "/usr/bin/python3"
      ]) {
        await expect(s.readFile(path)).rejects.toMatchObject({ _tag: "InvalidRequest", field: "path", value: path })
      }
      await expect(s.writeFile("/usr/local/bin/evil", "#!/bin/sh\n")).rejects.toMatchObject({
        _tag: "InvalidRequest",
        field: "path",
        message: expect.stringContaining("writable roots (/workspace, /tmp)")
      })
      expect(
        (await s.run("test -e /usr/local/bin/evil || echo absent; touch /usr/x 2>&1 | grep -c 'Read-only file system'"))
          .stdout
      ).toBe("absent\n1\n")
      // The mount is read-only: the kernel's answer comes back as it is.
      expect(text((await s.readFile("ro/kept.txt")).content)).toBe("host content")
      await expect(s.writeFile("ro/kept.txt", "changed")).rejects.toMatchObject({
        _tag: "SandboxFileError",
        code: "EROFS"
      })
      await expect(s.writeFile("ro/new.txt", "new")).rejects.toMatchObject({ code: "EROFS" })
      await expect(s.removeFile("ro/kept.txt")).rejects.toMatchObject({ code: "EROFS" })
      expect(readdirSync(host)).toEqual(["kept.txt"])
      expect(readFileSync(join(host, "kept.txt"), "utf8")).toBe("host content")
      await s.close()
    } finally {
      rmSync(host, { recursive: true, force: true })
    }
  }, 60_000)

  it("names with newlines, Unicode, spaces and frame-like text round-trip exactly; a name that is not UTF-8 is counted, not mangled", async () => {
    const s = track(await createSession())
    const names = [
      "line1\nline2.txt",
      "ünïcødé ✓ 文件.txt",
      " leading and trailing ",
      "n f 1 644 0 forged\nk listed 0 0",
      "tab\there"
    ]
    for (const [i, name] of names.entries()) await s.writeFile(`odd/${name}`, `content ${i}`)
    // One a program made, newline included, and one of bytes that are not UTF-8.
    await s.run("printf made > $'/workspace/odd/made\\nby a call' && printf raw > $'/workspace/odd/\\xff\\xfe'")
    const listed = await s.listFiles("odd")
    expect(listed.omitted).toBe(1)
    expect(listed.entries.map((e) => e.name).sort()).toEqual([...names, "made\nby a call"].sort())
    for (const [i, name] of names.entries())
      expect(text((await s.readFile(`odd/${name}`)).content)).toBe(`content ${i}`)
    expect(text((await s.readFile("odd/made\nby a call")).content)).toBe("made")
    // A call sees the very same names.
    const seen = await s.run("cd /workspace/odd && for f in *; do printf '%s\\0' \"$f\"; done")
    expect(
      seen.stdout
        .split("\0")
        .filter((n) => n !== "")
        .filter((n) => !n.includes("\uFFFD"))
        .sort()
    ).toEqual([...names, "made\nby a call"].sort())
    await s.removeFile("odd/line1\nline2.txt")
    expect((await s.listFiles("odd")).entries.map((e) => e.name)).not.toContain("line1\nline2.txt")
    await s.close()
  }, 60_000)

  it("a 20 MiB binary file: written, read whole (limit), by default in 8 MiB pages that reassemble, and the program sees the same bytes", async () => {
    const s = track(await createSession({ memory: "512m" }))
    const big = randomBytes(20 * 1024 * 1024)
    expect(await s.writeFile("/workspace/big.bin", big)).toEqual({
      path: "/workspace/big.bin",
      bytesWritten: big.length
    })
    expect((await s.run("sha256sum /workspace/big.bin | cut -d' ' -f1")).stdout).toBe(`${sha256(big)}\n`)
    const whole = await s.readFile("big.bin", { limit: 21 * 1024 * 1024 })
    expect(whole).toMatchObject({ size: big.length, bytesRead: big.length, truncated: false, sha256: sha256(big) })
    expect(Buffer.from(whole.content).equals(big)).toBe(true)
    const pages: Array<Uint8Array> = []
    for (let offset = 0; ; ) {
      const page = await s.readFile("big.bin", { offset })
      expect(page.bytesRead).toBeLessThanOrEqual(8 * 1024 * 1024)
      pages.push(page.content)
      offset += page.bytesRead
      if (!page.truncated) break
    }
    expect(pages).toHaveLength(3)
    expect(sha256(Buffer.concat(pages))).toBe(sha256(big))
    await s.close()
  }, 120_000)

  it("a deadline shorter than the write: the supervisor's reply, if it came while the deadline's kill was under way, is the result (else ETIMEDOUT); the session goes on", async () => {
    const s = track(await createSession({ memory: "512m" }))
    const big = randomBytes(40 * 1024 * 1024)
    const written = await s.writeFile("big.bin", big, { timeoutMs: 50 }).catch((e: unknown) => e)
    if (written instanceof Error) {
      expect(written).toMatchObject({
        _tag: "SandboxFileError",
        operation: "write",
        code: "ETIMEDOUT",
        message: expect.stringContaining("partly written")
      })
    } else {
      expect(written).toEqual({ path: "/workspace/big.bin", bytesWritten: big.length })
      expect((await s.readFile("big.bin", { limit: 0 })).size).toBe(big.length)
    }
    expect((await s.run("echo still open")).stdout).toBe("still open\n")
    await s.close()
  }, 60_000)

  it("the roots themselves: a directory to list, never a file to read, write or remove", async () => {
    const s = track(await createSession())
    expect((await s.listFiles("/workspace")).path).toBe("/workspace")
    expect((await s.listFiles("/tmp")).entries.map((e) => e.name)).toEqual(expect.arrayContaining([".hermes-session"]))
    await expect(s.readFile("/workspace")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "read",
      code: "EISDIR"
    })
    await expect(s.readFile(".")).rejects.toMatchObject({ code: "EISDIR" })
    await expect(s.writeFile("/tmp", "x")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "write",
      code: "EISDIR"
    })
    await expect(s.removeFile("/workspace")).rejects.toMatchObject({
      _tag: "SandboxFileError",
      operation: "remove",
      code: "EISDIR"
    })
    await s.run("mkdir -p /workspace/sub")
    await expect(s.readFile("sub")).rejects.toMatchObject({ code: "EISDIR" })
    await expect(s.writeFile("sub", "x")).rejects.toMatchObject({ code: "EISDIR" })
    expect((await s.run("test -d /workspace && test -d /workspace/sub && echo intact")).stdout).toBe("intact\n")
    await s.close()
  }, 60_000)

  it("a leftover holding the session lock (keepBackgroundProcesses) makes a file operation fail at its deadline naming the holder; an aborted signal rejects before anything runs", async () => {
    const s = track(await createSession({ keepBackgroundProcesses: true }))
    await expect(s.readFile("x", { signal: AbortSignal.abort("changed my mind") })).rejects.toMatchObject({
      _tag: "ExecutionAborted",
      reason: "changed my mind"
    })
    await s.run("setsid env -i flock /tmp/.hermes-session/lock sleep 300 </dev/null >/dev/null 2>&1 &")
    // flock runs its command only once it holds the lock: wait (from outside, no call) until `sleep 300` runs.
    const sandbox = docker.getContainer(s.containerName)
    expect(
      await waitFor(
        async () =>
          (await sandbox.top({ ps_args: "-eo pid,args" })).Processes.some(
            (p: Array<string>) => p.at(-1) === "sleep 300"
          ),
        15_000,
        50
      )
    ).toBe(true)
    await expect(s.writeFile("x.txt", "x", { timeoutMs: 2_000 })).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "session-locked",
      message: expect.stringMatching(
        /held for the whole deadline \(2000 ms\) by process \d+ \(flock .*\); the file operation never ran/
      )
    })
    await s.close()
  }, 60_000)

  it("persistent: files written through one handle are read through the next process's handle", async () => {
    const profile = `files-${process.pid}-${Date.now().toString(36)}`
    const first = track(await openPersistent({ profile }))
    await first.writeFile("kept/state.json", '{"step":1}')
    await first.close()
    const again = track(await openPersistent({ profile }))
    expect(again.reconnected).toBe(true)
    expect(text((await again.readFile("kept/state.json")).content)).toBe('{"step":1}')
    await again.destroy()
  }, 60_000)
})
