/**
 * A session's patchFile and searchFiles against what a program in the sandbox can plant, on the
 * real engine: the image's GNU grep and find run by the supervisor as an argv, and the supervisor's
 * read and write under patch. Symlinks (to /etc/passwd, to /etc, inside the roots, loops) are never
 * followed; a FIFO neither hangs a search nor is patched; binary files are skipped; a huge file is
 * refused by patch and its long line bounded in a search; names with newlines and colons come back
 * whole; a pattern that starts with '-' is a pattern; a catastrophic regular expression ends at the
 * call's deadline and the session lives on. One session for the file on runc; the symlink case
 * again on gVisor (runsc), whose O_NOFOLLOW once differed. The host side (the parse, the
 * replacement, the diff): the unit tests (packages/core/test/SessionEdit.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createSession, type SandboxSession } from "@hermes-sandbox/docker"
import { RUNTIMES } from "./hostile/support.js"
import { sessionTracker } from "./support/sessions.js"

const { track, removeTracked } = sessionTracker()
afterAll(removeTracked)

const paths = (r: { readonly matches: ReadonlyArray<{ readonly path: string }> }) => r.matches.map((m) => m.path)

/** What a call planted is not followed: a search of a tree with symlinks, and the symlinks given as paths. */
const symlinksNotFollowed = async (s: SandboxSession) => {
  const setup = await s.run(
    "mkdir -p /workspace/s /tmp/elsewhere && cd /workspace/s && echo 'root:x:0' > real.txt && echo 'root:inside' > /tmp/elsewhere/f && " +
      "ln -s /etc/passwd pw && ln -s /etc etcdir && ln -s /tmp/elsewhere in && ln -s loop loop && ln -s . self"
  )
  expect(setup.exitCode).toBe(0)
  const found = await s.searchFiles({ pattern: "^root:", path: "s" })
  expect(found).toMatchObject({ path: "/workspace/s", target: "content", truncated: false, incomplete: false })
  expect(found.matches).toEqual([{ path: "/workspace/s/real.txt", line: 1, text: "root:x:0", textTruncated: false }])
  const names = await s.searchFiles({ pattern: "*", path: "s", target: "files" })
  // The links are listed as themselves; nothing under them.
  expect(paths(names).sort()).toEqual(
    ["", "/etcdir", "/in", "/loop", "/pw", "/real.txt", "/self"].map((n) => `/workspace/s${n}`)
  )
  for (const path of ["s/etcdir", "s/in", "s/pw", "s/etcdir/passwd", "s/self/real.txt", "s/loop"]) {
    await expect(s.searchFiles({ pattern: "root", path })).rejects.toMatchObject({
      _tag: "SandboxFileError",
      code: "ELOOP"
    })
  }
  await expect(s.patchFile("s/pw", { oldString: "root", newString: "toor" })).rejects.toMatchObject({
    _tag: "SandboxFileError",
    code: "ELOOP"
  })
  await expect(s.patchFile("s/in/f", { oldString: "root", newString: "toor" })).rejects.toMatchObject({
    code: "ELOOP"
  })
  expect((await s.run("cat /tmp/elsewhere/f; head -c 5 /etc/passwd")).stdout).toBe("root:inside\nroot:")
}

describe("patchFile and searchFiles against a hostile sandbox", () => {
  let s: SandboxSession
  beforeAll(async () => {
    s = track(await createSession())
  }, 60_000)
  afterAll(async () => {
    await s?.close()
  })

  it(
    "symlinks are not followed: to /etc/passwd, to /etc, inside the roots, loops; a symlinked path itself is refused",
    () => symlinksNotFollowed(s),
    60_000
  )

  it("a FIFO does not hang a search (skipped) and is not patched; binary files are skipped", async () => {
    await s.run(
      "mkdir -p /workspace/f && cd /workspace/f && mkfifo pipe && echo needle > a.txt && printf 'needle\\0\\1\\2' > bin"
    )
    const r = await s.searchFiles({ pattern: "needle", path: "/workspace/f", timeoutMs: 20_000 })
    expect(paths(r)).toEqual(["/workspace/f/a.txt"])
    await expect(s.patchFile("f/pipe", { oldString: "a", newString: "b" })).rejects.toMatchObject({
      _tag: "SandboxFileError",
      code: "EINVAL"
    })
    await expect(s.searchFiles({ pattern: "needle", path: "f/pipe" })).rejects.toMatchObject({ code: "EINVAL" })
  }, 60_000)

  it("a huge file: patch refuses it unchanged; a search's 20 MiB line is bounded and said to be truncated", async () => {
    await s.run(
      "mkdir -p /workspace/h && cd /workspace/h && { echo 'needle first'; head -c 20971520 /dev/zero | tr '\\0' a; echo needle; } > big"
    )
    await expect(s.patchFile("h/big", { oldString: "first", newString: "1st" })).rejects.toMatchObject({
      _tag: "PatchFailed",
      reason: "too-large"
    })
    expect((await s.run("head -c 12 /workspace/h/big")).stdout).toBe("needle first")
    const r = await s.searchFiles({ pattern: "needle", path: "h" })
    expect(r.matches).toEqual([{ path: "/workspace/h/big", line: 1, text: "needle first", textTruncated: false }])
    expect(r.truncated).toBe(true)
  }, 60_000)

  it("names with newlines and colons come back whole; a pattern starting with '-' is a pattern; maxResults bounds", async () => {
    await s.run(
      "mkdir -p /workspace/n && cd /workspace/n && printf 'x\\n-v\\n' > $'a\\nb:1:c.txt' && printf -- '--help\\n' > plain.py && for i in 1 2 3 4 5; do echo hit > many$i; done"
    )
    const r = await s.searchFiles({ pattern: "-v", path: "n" })
    expect(r.matches).toEqual([{ path: "/workspace/n/a\nb:1:c.txt", line: 2, text: "-v", textTruncated: false }])
    const help = await s.searchFiles({ pattern: "--help", path: "n", glob: "*.py" })
    expect(paths(help)).toEqual(["/workspace/n/plain.py"])
    expect(paths(await s.searchFiles({ pattern: "*:*", path: "n", target: "files" }))).toEqual([
      "/workspace/n/a\nb:1:c.txt"
    ])
    const few = await s.searchFiles({ pattern: "hit", path: "n", maxResults: 2 })
    expect(few).toMatchObject({ truncated: true, matches: { length: 2 } })
    await expect(s.searchFiles({ pattern: "(unclosed", path: "n" })).rejects.toMatchObject({
      _tag: "InvalidRequest",
      field: "pattern"
    })
  }, 60_000)

  it("an unreadable directory (chmod 000): grep and find search the rest, and incomplete says so", async () => {
    await s.run(
      "mkdir -p /workspace/u/locked && echo hit > /workspace/u/open.txt && echo hit > /workspace/u/locked/f.txt && chmod 000 /workspace/u/locked"
    )
    const lines = await s.searchFiles({ pattern: "hit", path: "u" })
    expect(lines).toMatchObject({ incomplete: true, matches: [{ path: "/workspace/u/open.txt", line: 1 }] })
    const names = await s.searchFiles({ pattern: "*.txt", path: "u", target: "files" })
    expect(names).toMatchObject({ incomplete: true, matches: [{ path: "/workspace/u/open.txt" }] })
  }, 60_000)

  it("patch through the real supervisor: the mode kept, a diff applied; the session shell's state is not searched", async () => {
    await s.run(
      "mkdir -p /workspace/p && printf '#!/bin/sh\\necho one\\necho two\\n' > /workspace/p/run.sh && chmod 755 /workspace/p/run.sh"
    )
    await s.patchFile("p/run.sh", { oldString: "echo one", newString: "echo ONE" })
    await s.patchFile("p/run.sh", {
      diff: "--- a/run.sh\n+++ b/run.sh\n@@ -3 +3,2 @@\n-echo two\n+echo TWO\n+echo three\n"
    })
    expect((await s.run("/workspace/p/run.sh")).stdout).toBe("ONE\nTWO\nthree\n")
    // The session shell's saved cwd (/tmp/.hermes-session/cwd) holds "/workspace".
    const state = await s.searchFiles({ pattern: "workspace", path: "/tmp" })
    expect(paths(state).filter((p) => p.startsWith("/tmp/.hermes-session"))).toEqual([])
  }, 60_000)

  it("a catastrophic regular expression ends at the deadline (ETIMEDOUT), and the session lives on", async () => {
    await s.run("mkdir -p /workspace/r && { printf y; head -c 300 /dev/zero | tr '\\0' a; echo; } > /workspace/r/line")
    await expect(
      s.searchFiles({ pattern: "(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1y", path: "r", timeoutMs: 2_000 })
    ).rejects.toMatchObject({ _tag: "SandboxFileError", operation: "search", code: "ETIMEDOUT" })
    expect(paths(await s.searchFiles({ pattern: "^y", path: "r" }))).toEqual(["/workspace/r/line"])
    // No grep left running in the sandbox.
    const left = await s.run(
      'n=0; for f in /proc/[0-9]*/comm; do read -r c < "$f" 2>/dev/null && [ "$c" = grep ] && n=$((n+1)); done; echo $n'
    )
    expect(left.stdout).toBe("0\n")
  }, 60_000)
})

// gVisor once followed a symlink despite O_NOFOLLOW with O_DIRECTORY (SECURITY.md): grep's and find's walk under runsc too.
describe.skipIf(!RUNTIMES.includes("runsc"))("patchFile and searchFiles under gVisor (runsc)", () => {
  it("symlinks are not followed (one session)", async () => {
    const s = track(await createSession({ runtime: "runsc" }))
    try {
      await symlinksNotFollowed(s)
    } finally {
      await s.close()
    }
  }, 90_000)
})
