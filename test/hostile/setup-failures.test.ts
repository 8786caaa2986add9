/**
 * Requests whose setup cannot succeed in the sandbox: a path segment the filesystem refuses,
 * a file list too large to hand over, a file that is also a directory, an environment the
 * kernel's execve refuses, files or code larger than the tmpfs they go to, files that alone
 * exceed the memory limit. Without the SDK's checks each of these reached the engine and came
 * back as a *result* (the runner's exit 126, docker-init's "argument list too long" exit 1, an
 * OOM kill) that reads as the program's own end (hostile review 1, finding 13). Each must now
 * be an InvalidRequest naming the field, before any container exists; the limits' other side
 * (what still fits) runs for real.
 */
import { describe, expect, it } from "vitest"
import type { ExecuteRequest } from "@hermes-sandbox/core"
import { createSession } from "@hermes-sandbox/docker"
import { containerExists } from "../support/docker.js"
import { exited, expectOutcome, type HostileExecutor, MiB, RUNTIMES, useHostileExecutor } from "./support.js"

const KiB = 1024

/** The request is refused with InvalidRequest on `field` (a prefix of it), and no execution began. */
const expectRefused = async (h: HostileExecutor, request: ExecuteRequest, field: string | RegExp) => {
  const before = h.created.length
  const began: Array<string> = []
  const subscription = h.executor.events$.subscribe((e) => {
    if (e.type === "ExecutionRequested") began.push(e.streamId)
  })
  const outcome = await h.run(request).then(
    (r) => ({
      result: {
        exitCode: r.exitCode,
        oomKilled: r.oomKilled,
        stdout: r.stdout.slice(-300),
        stderr: r.stderr.slice(-300)
      }
    }),
    (e: unknown) => ({ error: e as { _tag?: string; field?: string; message?: string; allowed?: string } })
  )
  subscription.unsubscribe()
  expect(outcome, "the request must be refused, not run").not.toHaveProperty("result")
  const error = (outcome as { error: { _tag?: string; field?: string; message?: string; allowed?: string } }).error
  expect(error._tag, error.message).toBe("InvalidRequest")
  if (typeof field === "string") expect(error.field?.startsWith(field), error.field).toBe(true)
  else expect(error.field).toMatch(field)
  expect(error.message).toContain(error.field)
  expect(error.allowed?.length).toBeGreaterThan(0)
  expect(began, "no execution may begin").toEqual([])
  expect(h.created.length, "no container may be created").toBe(before)
  return error
}

const python = (code: string, extra: Partial<ExecuteRequest> = {}): ExecuteRequest => ({
  language: "python",
  code,
  ...extra
})

describe.each(RUNTIMES)("setup failures are InvalidRequest, not results (%s)", (runtime) => {
  const h = useHostileExecutor(runtime)

  describe("files", () => {
    it("a 256-byte path segment is refused; 255 bytes (also as UTF-8) is written", async () => {
      const e = await expectRefused(h, python("print(1)", { files: { [`d/${"x".repeat(256)}`]: "x" } }), "files[")
      expect(e.allowed).toMatch(/255 bytes/)
      await expectRefused(h, python("print(1)", { files: { [`${"é".repeat(128)}`]: "x" } }), "files[") // 256 bytes in UTF-8
      const name = "é".repeat(127) + "x" // 255 bytes
      const r = await h.run(
        python(`import os\nprint(len(os.listdir('.')[0].encode()), open(${JSON.stringify(name)}).read())`, {
          files: { [name]: "ok" }
        })
      )
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe("255 ok\n")
    })

    it("a whole path over 4095 bytes is refused; 4095 bytes is written", async () => {
      const seg = "s".repeat(254) + "/" // 255 bytes with its slash
      const atLimit = seg.repeat(16) + "f".repeat(4095 - 16 * 255) // 4095 bytes
      expect(Buffer.byteLength(atLimit)).toBe(4095)
      await expectRefused(h, python("print(1)", { files: { [atLimit + "g"]: "x" } }), "files[")
      const r = await h.run(python(`print(open(${JSON.stringify(atLimit)}).read())`, { files: { [atLimit]: "deep" } }))
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe("deep\n")
    })

    it("a file list whose paths total more than 1 MiB is refused (300 paths of about 3.8 KB)", async () => {
      const files: Record<string, string> = {}
      for (let i = 0; i < 300; i++) files[`${String(i).padStart(3, "0")}/${"p".repeat(250)}/`.repeat(15) + "f"] = "x"
      await expectRefused(h, python("print(1)", { files }), "files")
    })

    it("a file that is also a directory is refused, in either order", async () => {
      const a = await expectRefused(h, python("print(1)", { files: { a: "file", "a/b": "inside" } }), "files[")
      expect(a.message).toContain('"a"')
      const d = await expectRefused(h, python("print(1)", { files: { "d/e": "inside", d: "file" } }), "files[")
      expect(d.message).toContain('"d"')
      await expectRefused(h, python("print(1)", { files: { "x/y/z": "deep", "x/y": "file" } }), "files[")
    })

    it("the same path spelled differently ('a//b', './a') is refused", async () => {
      await expectRefused(h, python("print(1)", { files: { "a/b": "1", "a//b": "2" } }), 'files["a//b"]')
      await expectRefused(h, python("print(1)", { files: { a: "1", "./a": "2" } }), 'files["./a"]')
    })
  })

  it("files that alone exceed the memory limit (their tmpfs pages count against it) are refused", async () => {
    const files = { "a.bin": new Uint8Array(5 * MiB), "b.bin": new Uint8Array(5 * MiB) }
    await expectRefused(h, python("print(1)", { memory: "8m", files }), "files")
  })

  describe("environment", () => {
    it("a 3 MiB env value is refused", async () => {
      const e = await expectRefused(h, python("print(1)", { env: { BIG: "v".repeat(3 * MiB) } }), "env.BIG")
      expect(e.message).not.toContain("vvvv")
    })

    it("NAME=value of 131072 bytes (MAX_ARG_STRLEN) is refused; 131071 bytes reaches the program", async () => {
      await expectRefused(h, python("print(1)", { env: { LONG: "v".repeat(131072 - "LONG=".length) } }), "env.LONG")
      const r = await h.run(
        python("import os\nprint(len(os.environ['LONG']))", { env: { LONG: "v".repeat(131071 - "LONG=".length) } })
      )
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe(`${131071 - 5}\n`)
    })

    it("an environment over 1 MiB in all is refused (24 values of 100 KiB, over the kernel's 2 MiB); 1 MiB in all runs", async () => {
      const many = (n: number, size: number) =>
        Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, "v".repeat(size)]))
      await expectRefused(h, python("print(1)", { env: many(24, 100 * KiB) }), "env")
      // 8 values of 131064 bytes: 8 * ("V0=" + value + NUL) = 1,048,544 bytes, just under 1 MiB.
      const r = await h.run(
        python("import os\nprint(sum(len(v) for k, v in os.environ.items() if k.startswith('V')))", {
          env: many(8, 128 * KiB - 8)
        })
      )
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe(`${8 * (128 * KiB - 8)}\n`)
    })
  })
})

describe.each(RUNTIMES)("setup failures against the executor's sizes (%s)", (runtime) => {
  const h = useHostileExecutor(runtime, { workspaceSize: "1m", tmpSize: "1m", maxCodeBytes: 4 * MiB })

  describe("sizes", () => {
    it("files larger than the /workspace tmpfs are refused; what fits is written", async () => {
      await expectRefused(h, python("print(1)", { files: { "big.bin": new Uint8Array(2 * MiB) } }), "files")
      // tmpfs counts whole pages: 300 one-byte files take 300 pages (1.2 MB) of a 1 MiB tmpfs.
      const pages = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`f${i}`, "x"]))
      await expectRefused(h, python("print(1)", { files: pages }), "files")
      const r = await h.run(
        python("import os\nprint(os.path.getsize('fits.bin'))", { files: { "fits.bin": new Uint8Array(900 * KiB) } })
      )
      expectOutcome(r, exited(0))
      expect(r.stdout).toBe(`${900 * KiB}\n`)
    })

    it("code larger than the /tmp tmpfs is refused", async () => {
      await expectRefused(h, python(`#${"x".repeat(2 * MiB)}\nprint(1)`), "code")
    })
  })
})

describe("setup failures on the session path", () => {
  it("a per-call env value over MAX_ARG_STRLEN is refused before the exec; the session still serves", async () => {
    const s = await createSession()
    try {
      const error = await s.run("echo hi", { timeoutMs: 20_000, env: { BIG: "v".repeat(3 * MiB) } }).then(
        (r) => ({ _tag: "result", exitCode: r.exitCode, stderr: r.stderr.slice(-300) }),
        (e: unknown) => e
      )
      expect(error).toMatchObject({ _tag: "InvalidRequest", field: "env.BIG" })
      const total = await s
        .run("echo hi", {
          timeoutMs: 20_000,
          env: Object.fromEntries(Array.from({ length: 24 }, (_, i) => [`V${i}`, "v".repeat(100 * KiB)]))
        })
        .then(
          (r) => ({ _tag: "result", exitCode: r.exitCode, stderr: r.stderr.slice(-300) }),
          (e: unknown) => e
        )
      expect(total).toMatchObject({ _tag: "InvalidRequest", field: "env" })
      expect(await s.run("echo hi")).toMatchObject({ exitCode: 0, stdout: "hi\n" })
    } finally {
      await s.close()
      expect(await containerExists(s.containerName)).toBe(false)
    }
  })
})
