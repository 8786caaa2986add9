/**
 * One contract for sessions and persistent sandboxes, written once with the Effect API and run on
 * the fake runtime (session-contract.fake.test.ts) and on the engine (session-contract.docker.test.ts),
 * as the executor contract is (executorContract.ts).
 *
 * A world says how to build a Sessions service over its runtime and journal, how a shell command
 * and a code snippet do a thing, and how time passes. What only one side can show stays in that
 * side's suite: the fake engine's exec count, TestClock-only timing, secrets and the model check
 * in packages/core/test/Session.test.ts; bash itself, files, process trees, hardening, the
 * watchdog, new processes and the Hermes configuration in test/session.e2e.test.ts; file operations
 * against symlinks, FIFOs, odd names and large files in test/session-files.e2e.test.ts.
 */
import { describe, expect } from "@effect/vitest"
import { Clock, Context, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ContainerNamePrefix, Label } from "@hermes-sandbox/core/Labels"
import { SandboxRuntime, Session } from "@hermes-sandbox/core"
import { Sessions, type SessionsOptions } from "@hermes-sandbox/core/Session"
import { Journal } from "@hermes-sandbox/events"
import { checkLifecycle } from "@hermes-sandbox/events/Projection"
import { eventsOf, gone, typesOf } from "./contractChecks.js"
import { type ContractTime, eventually, joinPassing } from "./contractTime.js"

/** What a shell command does, in the order given here; each world writes it in its own vocabulary. */
export interface ShellProgram {
  readonly stdout?: string
  readonly stderr?: string
  /** Changes the working directory (made first if it does not exist). */
  readonly cd?: string
  readonly export?: Readonly<Record<string, string>>
  /** Prints the working directory and a newline. */
  readonly printCwd?: boolean
  /** Prints the variable's value (empty when unset) and a newline. */
  readonly printEnv?: string
  /** Never exits by itself. */
  readonly hang?: boolean
  readonly sleepMs?: number
  /** Writes this file (absolute, or relative to the working directory; parents made). */
  readonly writeFile?: { readonly path: string; readonly content: string }
  /** Prints this file's content. */
  readonly cat?: string
  readonly exitCode?: number
}

/** What a code snippet does: print its working directory, or a variable's value, and a newline. */
export interface SnippetProgram {
  readonly printCwd?: boolean
  readonly printEnv?: string
}

/**
 * One step of a cell of Python, in the order given; each world writes it in its own vocabulary (the
 * fake kernel's steps, or Python).
 */
export type CellStep =
  | { readonly print: string }
  /** `name = "value"`: kept in the kernel's state. */
  | { readonly set: { readonly name: string; readonly value: string } }
  /** `print(name)`: a NameError when the state was lost. */
  | { readonly get: string }
  /** `display(HTML(html))`. */
  | { readonly html: string }
  /** `display(Image(data=PNG))`: a real 1×1 PNG (CONTRACT_PNG). */
  | { readonly png: true }
  /** The last expression: this string, so the result's text/plain is its repr. */
  | { readonly result: string }
  /** `raise ValueError(value)`. */
  | { readonly raise: string }
  /** `time.sleep`: a busy cell (SIGINT ends it with a KeyboardInterrupt). */
  | { readonly sleepMs: number }
  /** `signal.signal(SIGINT, SIG_IGN)`: from now on the kernel ignores interrupts. */
  | { readonly ignoreSigint: true }
  /** Prints this many bytes ("x"s) to stdout. */
  | { readonly flood: number }
  /** A thread that prints `text` `afterMs` from now (after the cell ended: late output). */
  | { readonly late: { readonly afterMs: number; readonly text: string } }
  /** `print(hermes_tools.<name>(**args))`: a tool call from the cell; its result printed (JSON). */
  | { readonly tool: { readonly name: string; readonly args: Readonly<Record<string, unknown>> } }

/** A 1×1 PNG, base64: what a `png` step displays. */
export const CONTRACT_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

export interface SessionWorld {
  /** The runtime and journal of one case: its services run over them, and the checks read them. */
  readonly base: Layer.Layer<SandboxRuntime | Journal.Journal, unknown>
  /** A Sessions service with these options over the base ("the next process" is a second one). */
  readonly sessions: (options: SessionsOptions) => Layer.Layer<Sessions, unknown, SandboxRuntime | Journal.Journal>
  readonly command: (program: ShellProgram) => string
  readonly snippet: (program: SnippetProgram) => { readonly language: string; readonly code: string }
  /** A cell's code (runCell). */
  readonly cell: (...steps: ReadonlyArray<CellStep>) => string
  readonly time: ContractTime
  /**
   * Whether the runtime binds host directories (default true). Kubernetes does not: a hostPath
   * volume would hand a node's directory over, so a session with mounts is refused there.
   */
  readonly bindMounts?: boolean
  /** Which cases: all (default), or only the cells' (a second OCI runtime runs those again). */
  readonly parts?: "all" | "cells"
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** The command in bash, its steps in the order of `ShellProgram` (the project's images). */
export const bashCommand = (p: ShellProgram): string =>
  [
    p.stdout === undefined ? undefined : `printf %s ${quote(p.stdout)}`,
    p.stderr === undefined ? undefined : `printf %s ${quote(p.stderr)} >&2`,
    p.cd === undefined ? undefined : `mkdir -p ${quote(p.cd)} && cd ${quote(p.cd)}`,
    ...Object.entries(p.export ?? {}).map(([k, v]) => `export ${k}=${quote(v)}`),
    p.printCwd ? "pwd" : undefined,
    p.printEnv === undefined ? undefined : `printf '%s\\n' "\${${p.printEnv}-}"`,
    p.hang ? "sleep 3600" : undefined,
    p.sleepMs === undefined ? undefined : `sleep ${p.sleepMs / 1000}`,
    p.writeFile === undefined
      ? undefined
      : `mkdir -p "$(dirname ${quote(p.writeFile.path)})" && printf %s ${quote(p.writeFile.content)} > ${quote(p.writeFile.path)}`,
    p.cat === undefined ? undefined : `cat ${quote(p.cat)}`,
    `exit ${p.exitCode ?? 0}`
  ]
    .filter((line) => line !== undefined)
    .join("\n")

const py = (s: string) => JSON.stringify(s)

/** A contract cell in Python (IPython: a string as the last line is the result). */
export const pythonCell = (...steps: ReadonlyArray<CellStep>): string =>
  steps
    .map((step) => {
      if ("print" in step) return `print(${py(step.print)}, end="", flush=True)`
      if ("set" in step) return `${step.set.name} = ${py(step.set.value)}`
      if ("get" in step) return `print(${step.get})`
      if ("html" in step) return `from IPython.display import display, HTML\ndisplay(HTML(${py(step.html)}))`
      if ("png" in step)
        return `import base64\nfrom IPython.display import display, Image\ndisplay(Image(data=base64.b64decode(${py(CONTRACT_PNG)})))`
      if ("result" in step) return py(step.result)
      if ("raise" in step) return `raise ValueError(${py(step.raise)})`
      if ("sleepMs" in step) return `import time\ntime.sleep(${step.sleepMs / 1000})`
      if ("ignoreSigint" in step) return "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"
      if ("flood" in step) return `import sys\nsys.stdout.write("x" * ${step.flood})\nsys.stdout.flush()`
      if ("tool" in step)
        return `import hermes_tools, json\nprint(json.dumps(getattr(hermes_tools, ${py(step.tool.name)})(**json.loads(${py(JSON.stringify(step.tool.args))}))))`
      return [
        "import threading, time as _t",
        "def _late():",
        `    _t.sleep(${step.late.afterMs / 1000})`,
        `    print(${py(step.late.text)}, end="", flush=True)`,
        "threading.Thread(target=_late, daemon=True).start()"
      ].join("\n")
    })
    .join("\n")

/** A snippet in Python printing what is asked. */
export const pythonSnippet = ({ printCwd, printEnv }: SnippetProgram) => ({
  language: "python",
  code: [
    "import os",
    ...(printCwd ? ["print(os.getcwd())"] : []),
    ...(printEnv === undefined ? [] : [`print(os.environ.get(${JSON.stringify(printEnv)}, ""))`])
  ].join("\n")
})

const runId = `${process.pid}-${Date.now().toString(36)}`

export const sessionContract = (name: string, world: SessionWorld) => {
  const { time } = world
  const test = time.it
  /** A case of calls, files and lifecycles: not registered when the world runs the cells only. */
  const callTest: typeof test = world.parts === "cells" ? ((() => undefined) as unknown as typeof test) : test
  const sh = world.command

  /** Services over one base (one engine, one journal); every one is closed with the case at the latest. */
  const withBase = <A, E>(
    f: (ctx: {
      readonly open: (
        options?: SessionsOptions
      ) => Effect.Effect<
        { readonly sessions: Sessions["Type"]; readonly close: Effect.Effect<void> },
        unknown,
        Scope.Scope
      >
      readonly runtime: SandboxRuntime["Type"]
      readonly journal: Journal.Journal["Type"]
      /** A profile of this case's own; its persistent sandboxes are removed when the case ends. */
      readonly profile: (suffix: string) => Effect.Effect<string, never, Scope.Scope>
    }) => Effect.Effect<A, E, Scope.Scope>
  ) =>
    Effect.gen(function* () {
      const base = yield* Layer.build(world.base)
      const runtime = Context.get(base, SandboxRuntime)
      const open = (options: SessionsOptions = {}) =>
        Effect.gen(function* () {
          const scope = yield* Scope.make()
          const close = Scope.close(scope, Exit.void)
          yield* Effect.addFinalizer(() => close)
          const context = yield* Layer.buildWithScope(world.sessions(options), scope).pipe(Effect.provide(base))
          return { sessions: Context.get(context, Sessions), close }
        })
      const profile = (suffix: string) =>
        Effect.as(
          Effect.addFinalizer(() =>
            runtime.list({ [Label.profile]: `c-${suffix}-${runId}` }).pipe(
              Effect.flatMap((left) => Effect.forEach(left, (c) => runtime.remove(c), { discard: true })),
              Effect.ignore
            )
          ),
          `c-${suffix}-${runId}`
        )
      return yield* f({ open, runtime, journal: Context.get(base, Journal.Journal), profile })
    })

  /** The fingerprint's record of what the sandbox was created with (its label), as data. */
  const createdWith = (runtime: SandboxRuntime["Type"], sessionId: string) =>
    Effect.map(runtime.list({ [Label.session]: sessionId }), (found) => {
      expect(found).toHaveLength(1)
      return JSON.parse(found[0]!.labels[Label.fingerprintSpec]!) as {
        mounts: unknown
        limits: { memoryBytes: number }
      }
    })

  describe(`Sessions contract: ${name}`, () => {
    callTest(
      "carries the working directory and exported variables from call to call (also after exit N); snippets see them; close removes the sandbox",
      () =>
        withBase(({ journal, open, runtime }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            expect(s.containerName).toBe(`${ContainerNamePrefix}${s.sessionId}`)
            expect(s.containerName).toMatch(/^hermes-sandbox-[0-9a-f-]{36}$/)
            const first = yield* s.run(
              sh({ cd: "/tmp/project", export: { GREETING: "hello world" }, stdout: "moved\n" })
            )
            expect(first).toMatchObject({
              exitCode: 0,
              stdout: "moved\n",
              stderr: "",
              timedOut: false,
              sessionId: s.sessionId,
              containerName: s.containerName
            })
            const exit3 = yield* s.run(sh({ cd: "/tmp/project/sub", stderr: "bad\n", exitCode: 3 }))
            expect(exit3).toMatchObject({ exitCode: 3, stderr: "bad\n" })
            expect((yield* s.run(sh({ printCwd: true }))).stdout).toBe("/tmp/project/sub\n")
            expect((yield* s.run(sh({ printEnv: "GREETING" }))).stdout).toBe("hello world\n")
            // A code snippet sees the same directory and variables.
            expect((yield* s.runCode(world.snippet({ printCwd: true }))).stdout).toBe("/tmp/project/sub\n")
            expect(yield* s.runCode(world.snippet({ printEnv: "GREETING" }))).toMatchObject({
              exitCode: 0,
              stdout: "hello world\n"
            })

            yield* s.close
            expect(yield* gone(runtime, s.containerName)).toBe(true)
            expect(yield* typesOf(journal, s.sessionId)).toEqual([
              "SessionOpened",
              "ContainerCreated",
              "ContainerStarted",
              "ContainerDestroyed",
              "SessionClosed"
            ])
            expect(yield* typesOf(journal, first.executionId)).toEqual(["ExecutionRequested", "ContainerExited"])
            const requested = (yield* eventsOf(journal)).filter((e) => e.type === "ExecutionRequested")
            expect(requested).toHaveLength(6)
            for (const e of requested) expect(e.data).toMatchObject({ scope: "session", sessionId: s.sessionId })
            expect(requested.find((e) => e.streamId === first.executionId)?.data).toMatchObject({ language: "bash" })
            const error = yield* Effect.flip(s.run(sh({ stdout: "after close" })))
            expect(error).toMatchObject({ _tag: "SessionEnded", sessionId: s.sessionId, reason: "closed" })
            yield* s.close // idempotent
          })
        ),
      60_000
    )

    callTest(
      "two sessions never share a sandbox, its directory or its variables; closing the service ends both",
      () =>
        withBase(({ open, runtime }) =>
          Effect.gen(function* () {
            const { close, sessions } = yield* open()
            const [a, b] = yield* Effect.all([sessions.open(), sessions.open()], { concurrency: 2 })
            expect(a.containerName).not.toBe(b.containerName)
            yield* a.run(sh({ cd: "/tmp", export: { WHO: "a" } }))
            expect((yield* b.run(sh({ printCwd: true }))).stdout).toBe("/workspace\n")
            expect((yield* b.run(sh({ printEnv: "WHO" }))).stdout).toBe("\n")
            expect((yield* a.run(sh({ printEnv: "WHO" }))).stdout).toBe("a\n")
            expect([yield* gone(runtime, a.containerName), yield* gone(runtime, b.containerName)]).toEqual([
              false,
              false
            ])
            yield* close
            expect([yield* gone(runtime, a.containerName), yield* gone(runtime, b.containerName)]).toEqual([true, true])
          })
        ),
      60_000
    )

    callTest(
      "parallel calls on one session run one at a time, in order, with no crossed directory or variables",
      () =>
        withBase(({ open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            const n = 8
            const fiber = yield* Effect.fork(
              Effect.forEach(
                Array.from({ length: n }, (_, i) => i),
                (i) =>
                  s.run(
                    sh({
                      cd: `/workspace/d${i}`,
                      export: { MINE: String(i) },
                      sleepMs: 50,
                      printCwd: true,
                      printEnv: "MINE"
                    })
                  ),
                { concurrency: "unbounded" }
              )
            )
            const results = yield* joinPassing(time, fiber, 10)
            expect(results.map((r) => r.stdout)).toEqual(
              Array.from({ length: n }, (_, i) => `/workspace/d${i}\n${i}\n`)
            )
            // Every call started after the previous one finished.
            for (let i = 1; i < results.length; i++) {
              expect(Date.parse(results[i]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(results[i - 1]!.finishedAt))
            }
          })
        ),
      60_000
    )

    callTest(
      "the host-side deadline kills the call (137, timedOut, its output so far); the session stays usable",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open({ timeoutMs: 1_500 })
            const t0 = yield* Clock.currentTimeMillis
            const r = yield* joinPassing(time, yield* Effect.fork(s.run(sh({ stdout: "started\n", hang: true }))))
            const elapsed = (yield* Clock.currentTimeMillis) - t0
            expect(r).toMatchObject({ timedOut: true, exitCode: 137, stdout: "started\n" })
            expect(elapsed).toBeGreaterThanOrEqual(1_500)
            expect(elapsed).toBeLessThan(6_000)
            expect(yield* typesOf(journal, r.executionId)).toEqual(["ExecutionRequested", "ExecutionTimedOut"])
            expect((yield* s.run(sh({ stdout: "next\n" }))).stdout).toBe("next\n")
          })
        ),
      60_000
    )

    callTest(
      "interrupting a call records it and leaves the session open",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            let executionId = ""
            let up = false
            const fiber = yield* Effect.fork(
              s.run(sh({ stdout: "up\n", hang: true }), {
                onExecutionId: (id) => void (executionId = id),
                onStdout: () => void (up = true)
              })
            )
            yield* eventually(
              time,
              "the call printed",
              Effect.sync(() => up)
            )
            yield* Fiber.interrupt(fiber)
            expect(yield* typesOf(journal, executionId)).toEqual(["ExecutionRequested", "ExecutionInterrupted"])
            expect((yield* s.status).open).toBe(true)
            expect((yield* s.run(sh({ stdout: "ok" }))).stdout).toBe("ok")
          })
        ),
      60_000
    )

    callTest(
      "expires after lifetimeSeconds without a call (every call resets the timer): removed, and the journal says why",
      () =>
        withBase(({ journal, open, runtime }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            // Margins of 1.5 s either side: the engine's time is live, and the host may be loaded.
            const s = yield* sessions.open({ lifetimeSeconds: 3 })
            yield* s.run(sh({ stdout: "hi" }))
            yield* time.pass(1_500)
            expect((yield* s.run(sh({ stdout: "still here" }))).stdout).toBe("still here")
            yield* time.pass(1_500)
            expect((yield* s.status).open).toBe(true)
            yield* eventually(
              time,
              "the session expired",
              Effect.map(s.status, (st) => !st.open),
              10_000,
              100
            )
            expect(yield* s.status).toMatchObject({ open: false, endReason: "idle-expired" })
            // The cleanup runs in the background.
            yield* eventually(time, "the sandbox is gone", gone(runtime, s.containerName), 15_000)
            yield* eventually(
              time,
              "the session stream is closed",
              Effect.map(typesOf(journal, s.sessionId), (t) => t.includes("SessionClosed")),
              5_000
            )
            expect(yield* typesOf(journal, s.sessionId)).toEqual([
              "SessionOpened",
              "ContainerCreated",
              "ContainerStarted",
              "SessionIdleExpired",
              "ContainerDestroyed",
              "SessionClosed"
            ])
            const destroyed = (yield* eventsOf(journal, s.sessionId)).find((e) => e.type === "ContainerDestroyed")
            expect(destroyed?.data).toMatchObject({ reason: "idle-expired" })
            expect(yield* Effect.flip(s.run(sh({ stdout: "late" })))).toMatchObject({
              _tag: "SessionEnded",
              reason: "idle-expired"
            })
          })
        ),
      60_000
    )

    callTest(
      world.bindMounts === false
        ? "mounts: the Docker socket and / are refused unless forced; a runtime without bind mounts refuses every one"
        : "mounts are read-only unless rw; the Docker socket and / are refused unless forced",
      () =>
        withBase(({ journal, open, runtime }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const socket = yield* Effect.flip(
              sessions.open({ mounts: [{ hostPath: "/var/run/docker.sock", containerPath: "/var/run/docker.sock" }] })
            )
            expect(socket).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
            expect(socket.message).toContain("Docker socket")
            const root = yield* Effect.flip(sessions.open({ mounts: [{ hostPath: "/", containerPath: "/host" }] }))
            expect(root).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
            expect(root.message).toContain("root directory")
            const rootRw = yield* Effect.flip(
              sessions.open({ mounts: [{ hostPath: "/", containerPath: "/host", mode: "rw" }] })
            )
            expect(rootRw).toMatchObject({ _tag: "InvalidRequest", field: "mounts[0].hostPath" })
            // Refused before any sandbox exists.
            expect((yield* eventsOf(journal)).map((e) => e.type)).not.toContain("SessionOpened")
            if (world.bindMounts === false) {
              const refused = yield* Effect.flip(
                sessions.open({ mounts: [{ hostPath: "/", containerPath: "/host" }], allowDangerousMounts: true })
              )
              expect(refused).toMatchObject({ _tag: "ContainerFailed" })
              expect(refused.message).toContain("bind mounts are not available")
              // Refused at the create, before any pod: the session's lifecycle closed with it.
              expect((yield* eventsOf(journal)).map((e) => e.type)).toEqual(["SessionOpened", "SessionClosed"])
              return
            }
            const forced = yield* sessions.open({
              mounts: [{ hostPath: "/", containerPath: "/host" }],
              allowDangerousMounts: true
            })
            yield* forced.close

            const dir = yield* Effect.acquireRelease(
              Effect.sync(() => mkdtempSync(join(tmpdir(), "hs-contract-"))),
              (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
            )
            const s = yield* sessions.open({
              mounts: [
                { hostPath: dir, containerPath: "/data" },
                { hostPath: dir, containerPath: "/out", mode: "rw" }
              ]
            })
            expect((yield* createdWith(runtime, s.sessionId)).mounts).toEqual([
              { hostPath: dir, containerPath: "/data", mode: "ro" },
              { hostPath: dir, containerPath: "/out", mode: "rw" }
            ])
            yield* s.close
          })
        ),
      60_000
    )

    callTest(
      "file operations: all 256 byte values round-trip, offset/limit page through a file, list and remove; calls and snippets see the same files",
      () =>
        withBase(({ open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            const all = Uint8Array.from({ length: 256 }, (_, i) => i)
            expect(yield* s.writeFile("bin/all.bin", all, { mode: 0o600 })).toEqual({
              path: "/workspace/bin/all.bin",
              bytesWritten: 256
            })
            const whole = yield* s.readFile("/workspace/bin/all.bin")
            expect(Buffer.from(whole.content).equals(Buffer.from(all))).toBe(true)
            expect(whole).toMatchObject({
              path: "/workspace/bin/all.bin",
              size: 256,
              offset: 0,
              bytesRead: 256,
              truncated: false,
              mode: 0o600
            })
            expect(whole.sha256).toBe(createHash("sha256").update(all).digest("hex"))
            // Rewritten without a mode: it keeps its 0600; a new file without one gets 0644.
            yield* s.writeFile("bin/all.bin", all)
            expect((yield* s.readFile("bin/all.bin", { limit: 0 })).mode).toBe(0o600)
            yield* s.writeFile("bin/new.txt", "new")
            expect((yield* s.readFile("bin/new.txt", { limit: 0 })).mode).toBe(0o644)
            yield* s.removeFile("bin/new.txt")
            // Paging: a piece, the tail, past the end, nothing (metadata only).
            const piece = yield* s.readFile("bin/all.bin", { offset: 100, limit: 50 })
            expect([...piece.content]).toEqual([...all.subarray(100, 150)])
            expect(piece).toMatchObject({ size: 256, offset: 100, bytesRead: 50, truncated: true })
            expect(piece.sha256).toBe(createHash("sha256").update(all.subarray(100, 150)).digest("hex"))
            expect(yield* s.readFile("bin/all.bin", { offset: 250, limit: 50 })).toMatchObject({
              offset: 250,
              bytesRead: 6,
              truncated: false
            })
            expect(yield* s.readFile("bin/all.bin", { offset: 1000 })).toMatchObject({
              offset: 256,
              bytesRead: 0,
              truncated: false
            })
            expect(yield* s.readFile("bin/all.bin", { limit: 0 })).toMatchObject({
              size: 256,
              bytesRead: 0,
              truncated: true
            })
            // A call reads what writeFile wrote; readFile reads what a call and a snippet wrote.
            yield* s.writeFile("notes/a.txt", "héllo ✓\n")
            expect((yield* s.run(sh({ cat: "/workspace/notes/a.txt" }))).stdout).toBe("héllo ✓\n")
            yield* s.run(sh({ writeFile: { path: "/tmp/from-call.txt", content: "made by a call\n" } }))
            expect(Buffer.from((yield* s.readFile("/tmp/from-call.txt")).content).toString()).toBe("made by a call\n")
            yield* s.runCode({ ...world.snippet({}), files: { "snip/in.txt": "from files" } })
            expect(Buffer.from((yield* s.readFile("snip/in.txt")).content).toString()).toBe("from files")
            // Relative paths resolve against /workspace, not against the shell's directory.
            yield* s.run(sh({ cd: "/tmp/elsewhere" }))
            expect(Buffer.from((yield* s.readFile("notes/a.txt")).content).toString()).toBe("héllo ✓\n")

            const root = yield* s.listFiles()
            expect(root).toMatchObject({ path: "/workspace", truncated: false, omitted: 0 })
            expect(
              root.entries.filter((e) => ["bin", "notes", "snip"].includes(e.name)).map((e) => [e.name, e.kind])
            ).toEqual([
              ["bin", "directory"],
              ["notes", "directory"],
              ["snip", "directory"]
            ])
            const bin = yield* s.listFiles("bin")
            expect(bin.entries).toEqual([
              {
                name: "all.bin",
                kind: "file",
                size: 256,
                mode: 0o600,
                modifiedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/)
              }
            ])
            expect(yield* Effect.flip(s.removeFile("notes"))).toMatchObject({
              _tag: "SandboxFileError",
              operation: "remove",
              path: "/workspace/notes",
              code: "ENOTEMPTY"
            })
            yield* s.removeFile("bin/all.bin")
            expect((yield* s.listFiles("bin")).entries).toEqual([])
            expect(yield* Effect.flip(s.readFile("bin/all.bin"))).toMatchObject({
              _tag: "FileNotFound",
              operation: "read",
              path: "/workspace/bin/all.bin"
            })
            yield* s.removeFile("bin") // an empty directory
            expect(yield* Effect.flip(s.listFiles("bin"))).toMatchObject({ _tag: "FileNotFound", operation: "list" })
            yield* s.close
            expect(yield* Effect.flip(s.readFile("notes/a.txt"))).toMatchObject({
              _tag: "SessionEnded",
              reason: "closed"
            })
          })
        ),
      60_000
    )

    callTest(
      "file operations: a missing file is FileNotFound; a path outside /workspace and /tmp, '..' or a limit passed is an InvalidRequest before anything runs",
      () =>
        withBase(({ open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            expect(yield* Effect.flip(s.readFile("missing.txt"))).toMatchObject({
              _tag: "FileNotFound",
              operation: "read",
              path: "/workspace/missing.txt"
            })
            expect(yield* Effect.flip(s.readFile("no/such/dir/file"))).toMatchObject({ _tag: "FileNotFound" })
            expect(yield* Effect.flip(s.removeFile("/tmp/missing"))).toMatchObject({
              _tag: "FileNotFound",
              operation: "remove"
            })
            for (const path of [
              "/etc/passwd",
              "/tmpfoo/x",
              "/",
              "/workspace/../etc/passwd",
              "../etc/passwd",
              "a/../../etc/passwd",
              "",
              "nul\0byte"
            ]) {
              const refused = yield* Effect.flip(s.readFile(path))
              expect(refused).toMatchObject({ _tag: "InvalidRequest", field: "path", value: path })
            }
            const outside = yield* Effect.flip(s.writeFile("/etc/passwd", "x"))
            expect(outside.message).toContain("/etc/passwd")
            expect(outside.message).toContain("/workspace, /tmp")
            expect(yield* Effect.flip(s.listFiles("/proc"))).toMatchObject({ _tag: "InvalidRequest", field: "dir" })
            expect(yield* Effect.flip(s.readFile("a.txt", { limit: Session.MAX_READ_LIMIT_BYTES + 1 }))).toMatchObject({
              _tag: "InvalidRequest",
              field: "limit"
            })
            expect(yield* Effect.flip(s.readFile("a.txt", { offset: -1 }))).toMatchObject({
              _tag: "InvalidRequest",
              field: "offset"
            })
            expect(
              yield* Effect.flip(s.writeFile("big.bin", new Uint8Array(Session.MAX_WRITE_BYTES + 1)))
            ).toMatchObject({ _tag: "InvalidRequest", field: "content" })
            expect(yield* Effect.flip(s.writeFile("setuid", "x", { mode: 0o4755 }))).toMatchObject({
              _tag: "InvalidRequest",
              field: "mode"
            })
            // Refused before anything ran: nothing was written.
            expect((yield* s.listFiles()).entries.map((e) => e.name)).not.toContain("big.bin")
            // The roots themselves are directories.
            expect(yield* Effect.flip(s.readFile("/workspace"))).toMatchObject({
              _tag: "SandboxFileError",
              code: "EISDIR"
            })
            yield* s.writeFile("plain.txt", "x")
            expect(yield* Effect.flip(s.listFiles("plain.txt"))).toMatchObject({
              _tag: "SandboxFileError",
              operation: "list",
              code: "ENOTDIR"
            })
            expect(yield* Effect.flip(s.writeFile("plain.txt/below", "x"))).toMatchObject({
              _tag: "SandboxFileError",
              operation: "write",
              code: "ENOTDIR"
            })
            expect(yield* s.status).toMatchObject({ open: true, pending: 0 })
          })
        ),
      60_000
    )

    callTest(
      "file operations are serialized with the session's calls, first come first served",
      () =>
        withBase(({ open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            // A call that holds the session while it sleeps, then writes a file: a file operation
            // asked for meanwhile runs after it, and sees the file.
            let started = false
            const call = yield* Effect.fork(
              s.run(
                sh({
                  stdout: "started\n",
                  sleepMs: 500,
                  writeFile: { path: "/workspace/order.txt", content: "written by the call" }
                }),
                {
                  onStdout: () => void (started = true)
                }
              )
            )
            yield* eventually(
              time,
              "the call started",
              Effect.sync(() => started)
            )
            const read = yield* joinPassing(time, yield* Effect.fork(s.readFile("order.txt")))
            expect(Buffer.from(read.content).toString()).toBe("written by the call")
            expect((yield* Fiber.join(call)).exitCode).toBe(0)

            // Eight at once, each writing then reading back through a call: nothing crossed, nothing lost.
            const n = 8
            const fiber = yield* Effect.fork(
              Effect.forEach(
                Array.from({ length: n }, (_, i) => i),
                (i) =>
                  Effect.gen(function* () {
                    yield* s.writeFile(`par/${i}.txt`, `content ${i}`)
                    const seen = (yield* s.run(sh({ cat: `/workspace/par/${i}.txt` }))).stdout
                    const back = Buffer.from((yield* s.readFile(`par/${i}.txt`)).content).toString()
                    return [seen, back]
                  }),
                { concurrency: "unbounded" }
              )
            )
            const results = yield* joinPassing(time, fiber, 10)
            expect(results).toEqual(Array.from({ length: n }, (_, i) => [`content ${i}`, `content ${i}`]))
            expect((yield* s.listFiles("par")).entries.map((e) => e.name)).toEqual(
              Array.from({ length: n }, (_, i) => `${i}.txt`)
            )
            expect((yield* s.status).pending).toBe(0)
          })
        ),
      60_000
    )

    callTest(
      "persistent: a new service finds the sandbox again by its labels, with its state; another profile is another sandbox",
      () =>
        withBase(({ journal, open, profile, runtime }) =>
          Effect.gen(function* () {
            const dev = yield* profile("dev")
            const first = yield* open()
            const p = yield* first.sessions.openPersistent({ profile: dev })
            expect(p).toMatchObject({ scope: "persistent", reconnected: false })
            yield* p.run(sh({ cd: "/tmp/state", export: { INSTALLED: "yes" } }))
            yield* first.close // detaches: the sandbox stays
            expect(yield* gone(runtime, p.containerName)).toBe(false)

            const second = yield* open()
            const again = yield* second.sessions.openPersistent({ profile: dev })
            expect(again).toMatchObject({
              reconnected: true,
              containerName: p.containerName,
              sessionId: p.sessionId,
              fingerprint: p.fingerprint
            })
            expect((yield* again.run(sh({ printCwd: true }))).stdout).toBe("/tmp/state\n")
            expect((yield* again.run(sh({ printEnv: "INSTALLED" }))).stdout).toBe("yes\n")
            expect(yield* typesOf(journal, p.sessionId)).toEqual([
              "SessionOpened",
              "ContainerCreated",
              "ContainerStarted",
              "SessionClosed",
              "SessionReconnected"
            ])
            const other = yield* second.sessions.openPersistent({ profile: yield* profile("ops") })
            expect(other.containerName).not.toBe(p.containerName)
            yield* other.destroy
            yield* again.destroy
            expect([yield* gone(runtime, p.containerName), yield* gone(runtime, other.containerName)]).toEqual([
              true,
              true
            ])
          })
        ),
      60_000
    )

    callTest(
      "persistent: a changed configuration replaces the old sandbox (default) or is refused, naming what changed; env values are not configuration",
      () =>
        withBase(({ journal, open, profile, runtime }) =>
          Effect.gen(function* () {
            const dev = yield* profile("fp")
            const { sessions } = yield* open()
            const ofProfile = Effect.map(runtime.list({ [Label.profile]: dev }), (list) => list.map((c) => c.name))
            const p = yield* sessions.openPersistent({ profile: dev, memory: "256m", env: { A: "1" } })
            yield* p.close
            // Values are not fingerprinted (they travel with each call): same names, new value = same sandbox.
            const sameNames = yield* sessions.openPersistent({ profile: dev, memory: "256m", env: { A: "2" } })
            expect(sameNames.reconnected).toBe(true)
            expect((yield* sameNames.run(sh({ printEnv: "A" }))).stdout).toBe("2\n")
            yield* sameNames.close
            const refused = yield* Effect.flip(
              sessions.openPersistent({ profile: dev, memory: "128m", env: { A: "1" }, onConfigChange: "refuse" })
            )
            expect(refused).toMatchObject({
              _tag: "SessionConfigMismatch",
              profile: dev,
              containerName: p.containerName
            })
            if (refused._tag === "SessionConfigMismatch")
              expect(refused.differences).toEqual(["limits.memoryBytes: 268435456 -> 134217728"])
            expect(yield* ofProfile).toEqual([p.containerName])
            const replaced = yield* sessions.openPersistent({
              profile: dev,
              memory: "128m",
              env: { A: "1", B: "new name" }
            })
            expect(replaced).toMatchObject({ reconnected: false, replaced: [p.containerName] })
            expect(replaced.containerName).not.toBe(p.containerName)
            // Said loudly in the old sandbox's stream: what changed and what replaced it, before its removal.
            const oldStream = yield* eventsOf(journal, p.sessionId)
            expect(oldStream.map((e) => e.type).slice(-3)).toEqual([
              "SessionReplaced",
              "ContainerDestroyed",
              "SessionClosed"
            ])
            expect(oldStream.at(-3)?.data).toEqual({
              sessionId: p.sessionId,
              profile: dev,
              containerName: p.containerName,
              differences: ["limits.memoryBytes: 268435456 -> 134217728", `envNames: ["A"] -> ["A","B"]`],
              replacedBy: replaced.sessionId
            })
            expect(yield* ofProfile).toEqual([replaced.containerName])
            expect((yield* createdWith(runtime, replaced.sessionId)).limits.memoryBytes).toBe(128 * 1024 * 1024)
            yield* replaced.destroy
            expect(yield* gone(runtime, replaced.containerName)).toBe(true)
          })
        ),
      60_000
    )

    callTest(
      "persistent: the reaper removes one idle longer than lifetimeSeconds that nobody holds",
      () =>
        withBase(({ journal, open, profile, runtime }) =>
          Effect.gen(function* () {
            const idle = yield* profile("idle")
            const first = yield* open({ reapOnStart: false })
            // Long enough that a second service starts (and reaps once) well within it, on a loaded host too.
            const p = yield* first.sessions.openPersistent({ profile: idle, lifetimeSeconds: 5 })
            yield* p.run(sh({ stdout: "x" }))
            yield* first.close
            const second = yield* open({ reapOnStart: false })
            expect((yield* second.sessions.reap).removed).not.toContain(p.containerName)
            yield* time.pass(5_500)
            expect((yield* second.sessions.reap).removed).toContain(p.containerName)
            expect(yield* gone(runtime, p.containerName)).toBe(true)
            expect((yield* typesOf(journal, p.sessionId)).slice(-3)).toEqual([
              "SessionIdleExpired",
              "ContainerDestroyed",
              "SessionClosed"
            ])
          })
        ),
      60_000
    )

    // --- cells on the session's Python kernel (issue 28, docs/design/kernel.md §17) ----------------

    test(
      "cells keep state; the last expression is the result; displays (HTML, a real PNG) in order; an exception is an error and keeps the state",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            const first = yield* s.runCell({
              code: world.cell({ set: { name: "x", value: "41" } }, { print: "set\n" })
            })
            expect(first).toMatchObject({
              sessionId: s.sessionId,
              status: "ok",
              executionCount: 1,
              stdout: "set\n",
              stateLost: false,
              oomKilled: false,
              kernel: { generation: 1, started: true },
              displays: [],
              displaysOmitted: { count: 0 }
            })
            const second = yield* s.runCell({
              code: world.cell({ get: "x" }, { html: "<b>hi</b>" }, { png: true }, { result: "done" })
            })
            expect(second).toMatchObject({
              status: "ok",
              executionCount: 2,
              stdout: "41\n",
              stateLost: false,
              kernel: { id: first.kernel.id, generation: 1, started: false }
            })
            expect(second.result?.data["text/plain"]).toBe("'done'")
            expect(second.displays).toHaveLength(2)
            expect(second.displays[0]!.data["text/html"]).toBe("<b>hi</b>")
            expect(second.displays[1]!.data["image/png"]!.replace(/\s/g, "")).toBe(CONTRACT_PNG)
            const failed = yield* s.runCell({ code: world.cell({ raise: "no good" }) })
            expect(failed).toMatchObject({ status: "error", executionCount: 3, stateLost: false })
            expect(failed.error).toMatchObject({ name: "ValueError", value: "no good", truncated: false })
            expect((yield* s.runCell({ code: world.cell({ get: "x" }) })).stdout).toBe("41\n")
            // The session's stream: the kernel's start and each cell, sizes and digests only.
            const events = yield* eventsOf(journal, s.sessionId)
            const types = events.map((e) => e.type)
            expect(types.filter((t) => t === "KernelStarted")).toHaveLength(1)
            const cells = events.flatMap((e) => (e.type === "CellExecuted" ? [e.data] : []))
            expect(cells.map((c) => [c.executionCount, c.status])).toEqual([
              [1, "ok"],
              [2, "ok"],
              [3, "error"],
              [4, "ok"]
            ])
            expect(cells[1]!.outputs.map((o) => [o.kind, o.mime.map((m) => m.type).includes("text/plain")])).toEqual([
              ["display", true],
              ["display", true],
              ["result", true]
            ])
            const code = world.cell({ set: { name: "x", value: "41" } }, { print: "set\n" })
            expect(cells[0]).toMatchObject({
              cellId: first.cellId,
              codeBytes: Buffer.byteLength(code),
              codeSha256: createHash("sha256").update(code).digest("hex")
            })
            expect(JSON.stringify(events)).not.toContain("no good")
            expect(checkLifecycle(events)).toEqual([])
          })
        ),
      120_000
    )

    test(
      "a cell's output is capped as a call's; a timeout interrupts it and keeps the state; run and cells share the session",
      () =>
        withBase(({ open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open({ outputLimitBytes: 1000 })
            const flood = yield* s.runCell({ code: world.cell({ flood: 5000 }, { set: { name: "y", value: "7" } }) })
            expect(flood).toMatchObject({ status: "ok", stdoutBytes: 5000, stdoutTruncated: true })
            expect(flood.stdout).toBe("x".repeat(1000))
            const slow = yield* Effect.fork(
              s.runCell({ code: world.cell({ print: "before\n" }, { sleepMs: 600_000 }), timeoutMs: 1500 })
            )
            const timedOut = yield* joinPassing(time, slow)
            expect(timedOut).toMatchObject({ status: "timeout", stateLost: false, stdout: "before\n" })
            expect(timedOut.error?.name).toBe("KeyboardInterrupt")
            // A call between cells does not end the kernel.
            expect((yield* s.run(sh({ stdout: "between" }))).stdout).toBe("between")
            expect(yield* s.runCell({ code: world.cell({ get: "y" }) })).toMatchObject({
              status: "ok",
              stdout: "7\n",
              stateLost: false,
              kernel: { generation: 1 }
            })
          })
        ),
      120_000
    )

    test(
      "a cell that ignores SIGINT is killed at its deadline: stateLost on it and on the next cell, which runs in a new kernel",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open({ kernel: { interruptGraceMs: 500 } })
            yield* s.runCell({ code: world.cell({ set: { name: "z", value: "1" } }) })
            const stuck = yield* Effect.fork(
              s.runCell({ code: world.cell({ ignoreSigint: true }, { sleepMs: 600_000 }), timeoutMs: 1000 })
            )
            const killed = yield* joinPassing(time, stuck)
            expect(killed).toMatchObject({ status: "timeout", stateLost: true, kernel: { generation: 1 } })
            const next = yield* s.runCell({ code: world.cell({ get: "z" }) })
            expect(next).toMatchObject({
              status: "error",
              stateLost: true,
              executionCount: 1,
              kernel: { generation: 2, started: true }
            })
            expect(next.error?.name).toBe("NameError")
            // Said once it was returned.
            expect(yield* s.runCell({ code: world.cell({ print: "ok\n" }) })).toMatchObject({ stateLost: false })
            const restarted = (yield* eventsOf(journal, s.sessionId)).flatMap((e) =>
              e.type === "KernelRestarted" ? [e.data] : []
            )
            expect(restarted).toEqual([
              expect.objectContaining({
                kernelId: killed.kernel.id,
                generation: 1,
                reason: "timeout",
                cellId: killed.cellId
              })
            ])
          })
        ),
      120_000
    )

    test(
      "restartKernel discards the state without stateLost; an abort interrupts a cell; late output is labelled, never a cell's stdout",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            yield* s.runCell({ code: world.cell({ set: { name: "w", value: "1" } }) })
            yield* s.restartKernel
            const after = yield* s.runCell({ code: world.cell({ get: "w" }) })
            expect(after).toMatchObject({ status: "error", stateLost: false, kernel: { generation: 2, started: true } })
            const controller = new AbortController()
            const running = yield* Effect.fork(
              s.runCell({ code: world.cell({ sleepMs: 600_000 }), timeoutMs: 600_000 }, { signal: controller.signal })
            )
            yield* time.pass(200)
            controller.abort()
            expect(yield* joinPassing(time, running)).toMatchObject({ status: "interrupted", stateLost: false })
            yield* s.runCell({ code: world.cell({ print: "now\n" }, { late: { afterMs: 300, text: "later\n" } }) })
            yield* time.pass(1500)
            const next = yield* s.runCell({ code: world.cell({ print: "next\n" }) })
            expect(next.stdout).toBe("next\n")
            expect(next.lateOutput).toMatchObject({ text: "later\n", bytes: 6, truncated: false })
            const reasons = (yield* eventsOf(journal, s.sessionId)).flatMap((e) =>
              e.type === "KernelRestarted" ? [e.data.reason] : []
            )
            expect(reasons).toEqual(["requested"])
          })
        ),
      120_000
    )

    test(
      "tool calls from a cell: served by the cell's tools, journaled in the session's stream with its cellId before its CellExecuted",
      () =>
        withBase(({ journal, open }) =>
          Effect.gen(function* () {
            const { sessions } = yield* open()
            const s = yield* sessions.open()
            const add = {
              description: "Adds two numbers",
              parameters: {
                type: "object",
                properties: { a: { type: "number" }, b: { type: "number" } },
                required: ["a", "b"]
              },
              handler: ({ a, b }: { a: number; b: number }) => a + b
            }
            const r = yield* s.runCell({
              code: world.cell({ tool: { name: "add", args: { a: 2, b: 3 } } }, { print: "after\n" }),
              tools: { add }
            })
            expect(r).toMatchObject({ status: "ok", toolCallsMade: 1 })
            expect(r.stdout).toContain("5")
            expect(r.stdout.endsWith("after\n")).toBe(true)
            const events = yield* eventsOf(journal, s.sessionId)
            const tail = events.filter((e) => e.type.startsWith("ToolCall") || e.type === "CellExecuted")
            expect(tail.map((e) => [e.type, (e.data as { cellId?: string }).cellId])).toEqual([
              ["ToolCallRequested", r.cellId],
              ["ToolCallCompleted", r.cellId],
              ["CellExecuted", r.cellId]
            ])
            expect(checkLifecycle(events)).toEqual([])
          })
        ),
      120_000
    )
  })
}
