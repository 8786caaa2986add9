/**
 * A session's file operations on the host: the path rule (resolveSandboxPath) and the checks on
 * the supervisor's reply (kernel/FileOpReply.ts through makeSupervisedRun) — a frame the operation
 * does not answer with, out of order, or not shaped as hermes-run.c writes it is a violation. The
 * operations end to end: the sessions contract (fake and engine), test/session-files.e2e.test.ts.
 */
import { createHash } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Option } from "effect"
import { encodeFrame, type FileOp } from "@hermes-sandbox/core/RunnerProtocol"
import { Session } from "@hermes-sandbox/core"
import { makeSupervisedRun, type SupervisedRun } from "../src/kernel/SupervisedRun.js"

const { resolveSandboxPath } = Session

describe("resolveSandboxPath", () => {
  it("resolves relative paths against /workspace and normalizes; refuses what is outside the roots, '..', NUL and oversize", () => {
    expect(resolveSandboxPath("a.txt")).toEqual({ path: "/workspace/a.txt" })
    expect(resolveSandboxPath("./d//e/./f/")).toEqual({ path: "/workspace/d/e/f" })
    expect(resolveSandboxPath(".")).toEqual({ path: "/workspace" })
    expect(resolveSandboxPath("/tmp")).toEqual({ path: "/tmp" })
    expect(resolveSandboxPath("/tmp/x\ny é")).toEqual({ path: "/tmp/x\ny é" })
    expect(resolveSandboxPath("/workspace/back\\slash")).toEqual({ path: "/workspace/back\\slash" })
    for (const bad of [
      "",
      "/",
      "/etc/passwd",
      "/tmpx",
      "/workspacex/a",
      "/proc/1/environ",
      "../x",
      "/workspace/../etc",
      "a/../b",
      "nul\0",
      42,
      undefined
    ]) {
      expect(resolveSandboxPath(bad)).toHaveProperty("problem")
    }
    expect(resolveSandboxPath("/etc/passwd")).toEqual({ problem: expect.stringContaining("/workspace, /tmp") })
    expect(resolveSandboxPath(`${"d/".repeat(2100)}f`)).toEqual({ problem: expect.stringContaining("PATH_MAX") })
    expect(resolveSandboxPath("n".repeat(256))).toEqual({ problem: expect.stringContaining("NAME_MAX") })
    expect(resolveSandboxPath("é".repeat(127))).toEqual({ path: `/workspace/${"é".repeat(127)}` })
  })
})

const words = (w: string, name: string | Buffer = "") =>
  Buffer.concat([Buffer.from(w), Buffer.isBuffer(name) ? name : Buffer.from(name)])

/** Feed frames of the run's key; the report if one settled. */
const feed = (run: SupervisedRun, frames: ReadonlyArray<readonly [string, Uint8Array | string]>) =>
  Effect.gen(function* () {
    for (const [type, payload] of frames) run.receiver.stdout(encodeFrame(run.key, type, payload))
    return Option.getOrUndefined(
      yield* Deferred.poll(run.report).pipe(
        Effect.flatMap((o) => (Option.isSome(o) ? Effect.asSome(o.value) : Effect.succeedNone))
      )
    )
  })

const write: FileOp = { op: "write", path: "/workspace/a", content: new Uint8Array(3), mode: 0o644 }
const read = (offset: number, limit: number): FileOp => ({ op: "read", path: "/workspace/a", offset, limit })
const exited = { _tag: "Exited", exit: { exitCode: 0, stdoutBytes: 0, stderrBytes: 0, outsideSignal: 0 } }

describe("a file operation's reply", () => {
  it.effect("a write: 'k' counting its bytes, then 'x'", () =>
    Effect.gen(function* () {
      const run = yield* makeSupervisedRun(0, {}, undefined, write)
      expect(
        yield* feed(run, [
          ["k", "written 3"],
          ["x", "0 0 0 0"]
        ])
      ).toEqual(exited)
      expect(run.reply?.outcome).toEqual({ _tag: "Done" })
    })
  )

  it.effect("a listing: entries of any bytes (newlines, non-UTF-8), then its count", () =>
    Effect.gen(function* () {
      const run = yield* makeSupervisedRun(0, {}, undefined, { op: "list", path: "/workspace" })
      const report = yield* feed(run, [
        ["n", words("f 12 644 1764612000 ", "a\nb")],
        ["n", words("d 60 755 -5 ", Buffer.from([0xff, 0x41]))],
        ["n", words("l 11 777 0 ", "link")],
        ["k", "listed 4 1"],
        ["x", "0 0 0 0"]
      ])
      expect(report).toEqual(exited)
      expect(run.reply?.outcome).toEqual({ _tag: "Listed", count: 4, more: true })
      expect(
        run.reply?.entries.map((e) => [e.name.toString("latin1"), e.kind, e.size, e.mode, e.mtimeSeconds])
      ).toEqual([
        ["a\nb", "file", 12, 0o644, 1764612000],
        ["\xffA", "directory", 60, 0o755, -5],
        ["link", "symlink", 11, 0o777, 0]
      ])
    })
  )

  it.effect("a read of a range: the 'f' frame announces the whole size, the share from the offset follows", () =>
    Effect.gen(function* () {
      const content = Buffer.from(Array.from({ length: 50 }, (_, i) => i + 100))
      const run = yield* makeSupervisedRun(0, {}, undefined, read(100, 50))
      expect(
        yield* feed(run, [
          ["f", words("600 256 ", "a")],
          ["c", content.subarray(0, 20)],
          ["c", content.subarray(20)],
          ["F", "50"],
          ["x", "0 0 0 0"]
        ])
      ).toEqual(exited)
      expect(run.reply?.file?.announcedSize).toBe(256)
      const got = run.reply?.file?.files[0]
      expect(got).toMatchObject({ size: 50, mode: 0o600, sha256: createHash("sha256").update(content).digest("hex") })
      expect(Buffer.from(got!.content).equals(content)).toBe(true)
      // Past the end: an empty share.
      const past = yield* makeSupervisedRun(0, {}, undefined, read(1000, 50))
      expect(
        yield* feed(past, [
          ["f", words("644 256 ", "a")],
          ["F", "0"],
          ["x", "0 0 0 0"]
        ])
      ).toEqual(exited)
      expect(past.reply?.file?.files[0]?.size).toBe(0)
    })
  )

  it.effect(
    "a failure: 'r' with its errno name; after a refused write, the supervisor's 'E' (its unread content) is its exit, not a setup failure",
    () =>
      Effect.gen(function* () {
        const run = yield* makeSupervisedRun(0, {}, undefined, write)
        const report = yield* feed(run, [
          ["r", "ELOOP link is a symlink (not followed)"],
          ["E", "unknown header line 'abc'"]
        ])
        expect(report).toMatchObject({ _tag: "Exited", exit: { exitCode: 126 } })
        expect(run.reply?.outcome).toEqual({
          _tag: "Failed",
          code: "ELOOP",
          message: "link is a symlink (not followed)"
        })
        // Any other 'E' is what it says.
        const other = yield* makeSupervisedRun(0, {}, undefined, read(0, 10))
        expect(
          yield* feed(other, [
            ["r", "ENOENT No such file or directory"],
            ["E", "whatever"]
          ])
        ).toMatchObject({ _tag: "SetupFailed" })
        const early = yield* makeSupervisedRun(0, {}, undefined, write)
        expect(yield* feed(early, [["E", "unknown header line 'write'"]])).toMatchObject({ _tag: "SetupFailed" })
      })
  )

  it.effect("a frame the operation does not answer with, out of order or misshapen is a violation", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [FileOp | undefined, ReadonlyArray<readonly [string, Uint8Array | string]>]> =
        [
          // No file operation asked for: none of its frames.
          [undefined, [["k", "removed"]]],
          [undefined, [["r", "ENOENT x"]]],
          [undefined, [["n", "f 1 644 0 a"]]],
          // The wrong reply for the operation, or a wrong count.
          [write, [["k", "written 4"]]],
          [write, [["k", "removed"]]],
          [write, [["n", "f 1 644 0 a"]]],
          [write, [["f", "644 3 a"]]],
          [{ op: "remove", path: "/workspace/a" }, [["k", "written 3"]]],
          [
            { op: "list", path: "/workspace" },
            [
              ["n", "f 1 644 0 a"],
              ["k", "listed 0 0"]
            ]
          ],
          [{ op: "list", path: "/workspace" }, [["n", "x 1 644 0 a"]]],
          [{ op: "list", path: "/workspace" }, [["n", "f 1 644 0 "]]],
          [{ op: "list", path: "/workspace" }, [["n", "f 1 644 0 a/b"]]],
          [{ op: "list", path: "/workspace" }, [["k", "listed 1 2"]]],
          [read(0, 10), [["k", "done"]]],
          [read(0, 10), [["s", "symlink 4 a"]]],
          // A file operation runs no program.
          [write, [["o", "out"]]],
          [{ op: "remove", path: "/workspace/a" }, [["e", "err"]]],
          // Out of order: a second reply, a failure inside a file, a file after a failure.
          [
            write,
            [
              ["k", "written 3"],
              ["k", "written 3"]
            ]
          ],
          [
            write,
            [
              ["r", "EIO x"],
              ["k", "written 3"]
            ]
          ],
          [
            read(0, 10),
            [
              ["f", "644 5 a"],
              ["r", "EIO x"]
            ]
          ],
          [
            read(0, 10),
            [
              ["r", "EIO x"],
              ["f", "644 5 a"]
            ]
          ],
          // Misshapen failures; more than the read's limit; the end without a reply.
          [write, [["r", "enoent lower case"]]],
          [write, [["r", "no errno"]]],
          [
            read(0, 4),
            [
              ["f", "644 10 a"],
              ["c", "12345"]
            ]
          ],
          [
            read(0, 10),
            [
              ["f", "644 10 a"],
              ["c", "12"],
              ["F", "3"]
            ]
          ],
          [write, [["x", "0 0 0 0"]]],
          [
            read(0, 10),
            [
              ["f", "644 10 a"],
              ["x", "0 0 0 0"]
            ]
          ]
        ]
      for (const [op, frames] of cases) {
        const run = yield* makeSupervisedRun(0, {}, undefined, op)
        const report = yield* feed(run, frames)
        expect({ op: op?.op, frames, report: report?._tag }).toEqual({ op: op?.op, frames, report: "Violation" })
      }
    })
  )
})
