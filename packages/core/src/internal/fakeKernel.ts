/**
 * The fake runtime's `hermes-run --kernel python` (docs/design/kernel.md §3): the kernel's header,
 * then the kernel commands on stdin, answered in the real supervisor's frames ('g', 'C', 'o'/'e'/'d',
 * 'M'/'m', 'N', 'Z', 'L', 'G') so a session's cells run on the fake under the TestClock.
 *
 * A cell's code is a small program, `#!cell [steps]` (fakeCell): each step prints, displays, sets
 * the result, raises, sleeps, ignores SIGINT, kills the kernel, leaves a thread that prints later,
 * or keeps state (`set` / `get`) across cells. Code that is no `#!cell` line runs as an empty cell.
 * Like the supervisor, the fake enforces the header's bounds (the stream cap, the record bounds:
 * 'N' too-large / count / total) and the interrupt's escalation (SIGINT; within the grace the cell
 * ends with a KeyboardInterrupt, else the domain is killed: 'Z' none, 'G' interrupt-timeout).
 */
import { Deferred, Effect, Fiber, FiberSet } from "effect"
import {
  decodeKernelCommand,
  type DecodedKernelHeader,
  decodeKernelHeader,
  encodeFrame,
  MAX_FRAME_PAYLOAD,
  RUNNER_PROTOCOL_ERROR_EXIT
} from "../RunnerProtocol.js"
import { LIMIT } from "../RunnerProtocolTable.js"
import type { FakeStdin } from "./fakeProgram.js"

/** One step of a fake cell. */
export type FakeCellStep =
  | { readonly print: string }
  | { readonly stderr: string }
  /** `display(...)`: a display_data record ({data, metadata}); `raw`: the record's bytes as they are. */
  | { readonly display: Readonly<Record<string, unknown>>; readonly metadata?: Readonly<Record<string, unknown>> }
  | { readonly result: Readonly<Record<string, unknown>>; readonly metadata?: Readonly<Record<string, unknown>> }
  | { readonly rawRecord: { readonly kind: "R" | "D" | "X"; readonly text: string } }
  /** An exception: an 'X' record, the cell ends `error` (nothing after it runs). */
  | { readonly raise: { readonly name: string; readonly value: string; readonly traceback?: ReadonlyArray<string> } }
  /** Busy for this long (an interrupt ends it with a KeyboardInterrupt, unless SIGINT is ignored). */
  | { readonly sleep: number }
  /** From here on, this kernel ignores SIGINT (an interrupt has to kill it). */
  | { readonly ignoreSigint: true }
  /** The kernel dies (a signal, or the OOM killer): 'Z' none, 'G' crashed. */
  | { readonly die: { readonly signal?: number; readonly oom?: boolean } }
  /** Variables kept across cells. */
  | { readonly set: Readonly<Record<string, string>> }
  /** Prints the variable's value and a newline; unset: a NameError. */
  | { readonly get: string }
  /** A thread that prints `text` `afterMs` after this point: between cells its bytes are late output. */
  | { readonly late: { readonly afterMs: number; readonly text: string } }
  /** The kernel ends the cell (`done ok`) and keeps running: the rest of the steps run after the cell's end. */
  | { readonly doneThenBusy: true }
  /**
   * `hermes_tools.<tool>(**args)`: relayed as the supervisor relays a call ('t' + 'a'), answered by the
   * host's `R` line on stdin; prints `<status> <payload>` and a newline (status 0: the result's JSON).
   */
  | { readonly toolCall: { readonly tool: string; readonly args?: unknown } }
  /** The supervisor's channel carries a frame without the key (a forged write into its stdout). */
  | { readonly forgeFrame: true }
  /** The supervisor dies without a word (killed by the domain): the exec ends, no 'G'. */
  | { readonly killSupervisor: true }
  /** The supervisor is stopped (SIGSTOP by the domain): nothing more comes, the exec does not end. */
  | { readonly stopSupervisor: true }

const PREFIX = "#!cell "

/** The code that makes the fake kernel run these steps as a cell. */
export const fakeCell = (...steps: ReadonlyArray<FakeCellStep>): string => `${PREFIX}${JSON.stringify(steps)}\n`

/** Preload names the fake cannot import (a real kernel's preload failure). */
const failsToImport = (name: string) => name.startsWith("nosuch")

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export interface FakeKernelIo {
  readonly stdin: FakeStdin
  /** The exec's stdout (frames), unless detached. */
  readonly send: (bytes: Uint8Array) => void
  readonly stderr: (bytes: Uint8Array) => void
  /** A fresh pid for the kernel. */
  readonly pid: number
}

/** The kernel supervisor's life: returns its exit code (never, when it is stopped). */
export const runFakeKernel = (io: FakeKernelIo): Effect.Effect<number> =>
  Effect.gen(function* () {
    // The kernel's threads (a cell's, its leftovers, the grace's timer) die with it.
    const threads = yield* FiberSet.make<unknown, never>()
    const parsed = yield* io.stdin.until((bytes, ended) => {
      const h = decodeKernelHeader(bytes)
      return h === "incomplete" ? (ended ? "eof" : undefined) : (h ?? "bad")
    })
    if (parsed === "eof" || parsed === "bad") {
      io.stderr(encoder.encode("hermes-run: stdin does not hold a kernel's header\n"))
      return RUNNER_PROTOCOL_ERROR_EXIT
    }
    const header: DecodedKernelHeader = parsed.header
    const key = header.key
    let at = parsed.next
    const frame = (type: string, payload: Uint8Array | string) => io.send(encodeFrame(key, type, payload))
    const data = (type: string, bytes: Uint8Array) => {
      for (let i = 0; i < bytes.byteLength; i += MAX_FRAME_PAYLOAD)
        frame(type, bytes.subarray(i, i + MAX_FRAME_PAYLOAD))
    }
    const vars = new Map<string, string>()
    let ignoreSigint = false
    let idleBytes = 0
    let lateSent = 0
    /** The kernel's end: once set, the supervisor has framed 'G' (or died) and exits with it. */
    const finished = yield* Deferred.make<number>()
    /** The cell running now. */
    let cell:
      | {
          readonly id: string
          readonly interrupt: Deferred.Deferred<void>
          out: { total: number; told: boolean }
          err: { total: number; told: boolean }
          records: number
          recordBytes: number
          forwarded: number
          skipped: number
          fiber?: Fiber.RuntimeFiber<void>
        }
      | undefined
    let stopped = false
    /** The running cell's tool channel: its header, its calls' ids and the replies the host sent. */
    let channel: { nextId: number; readonly waiting: Map<number, Deferred.Deferred<string>> } | undefined

    const gone = (code: number, signal: number, oom: boolean, cause: string) =>
      Effect.sync(() => {
        if (!stopped) frame("G", `${code} ${signal} ${oom ? 1 : 0} ${cause}`)
      }).pipe(Effect.zipRight(Deferred.succeed(finished, 0)))

    const write = (stream: "o" | "e", text: string) => {
      const bytes = encoder.encode(text)
      if (cell === undefined) {
        // A thread between cells: the idle pipe ('L', 64 KiB per idle time, all counted in the next 'C').
        idleBytes += bytes.byteLength
        const room = LIMIT.kernelLateBytes - lateSent
        if (room > 0) data("L", bytes.subarray(0, room))
        lateSent += Math.min(room, bytes.byteLength)
        return
      }
      const s = stream === "o" ? cell.out : cell.err
      const room = Math.max(0, header.capBytes - s.total)
      if (room > 0) data(stream, bytes.subarray(0, room))
      s.total += bytes.byteLength
      if (s.total > header.capBytes && !s.told) {
        s.told = true
        frame("d", `${stream} ${s.total}`)
      }
    }

    /** A record as the supervisor frames it, within the header's bounds. */
    const record = (kind: "R" | "D" | "X", text: string) => {
      if (cell === undefined) return frame("N", `${kind} ${encoder.encode(text).byteLength} late`)
      const bytes = encoder.encode(text)
      const n = bytes.byteLength
      const skip =
        n > header.display.bundleBytes
          ? "too-large"
          : cell.forwarded >= header.display.count
            ? "count"
            : cell.recordBytes + n > header.display.totalBytes
              ? "total"
              : undefined
      if (skip !== undefined) {
        cell.skipped++
        return frame("N", `${kind} ${n} ${skip}`)
      }
      cell.forwarded++
      cell.recordBytes += n
      frame("M", `${kind} ${n}`)
      data("m", bytes)
    }

    const end = (status: "ok" | "error" | "none") => {
      const c = cell!
      cell = undefined
      // The tool listener closes with the cell: calls still waiting are gone ('q').
      for (const id of channel?.waiting.keys() ?? []) frame("q", String(id))
      channel = undefined
      lateSent = 0
      frame("Z", `${c.id} ${status} ${c.out.total} ${c.err.total} ${c.forwarded} ${c.skipped}`)
    }

    /** A cell's steps; returns how it ends (or never, when the kernel dies or is stopped). */
    const runSteps = (
      steps: ReadonlyArray<FakeCellStep>,
      interrupt: Deferred.Deferred<void>
    ): Effect.Effect<"ok" | "error" | "detached"> =>
      Effect.gen(function* () {
        for (let i = 0; i < steps.length; i++) {
          const step = steps[i]!
          if ("print" in step) write("o", step.print)
          else if ("stderr" in step) write("e", step.stderr)
          else if ("display" in step) record("D", JSON.stringify({ data: step.display, metadata: step.metadata ?? {} }))
          else if ("result" in step) record("R", JSON.stringify({ data: step.result, metadata: step.metadata ?? {} }))
          else if ("rawRecord" in step) record(step.rawRecord.kind, step.rawRecord.text)
          else if ("raise" in step) {
            record(
              "X",
              JSON.stringify({
                ename: step.raise.name,
                evalue: step.raise.value,
                traceback: step.raise.traceback ?? []
              })
            )
            return "error" as const
          } else if ("set" in step) for (const [k, v] of Object.entries(step.set)) vars.set(k, v)
          else if ("get" in step) {
            const v = vars.get(step.get)
            if (v === undefined) {
              record(
                "X",
                JSON.stringify({ ename: "NameError", evalue: `name '${step.get}' is not defined`, traceback: [] })
              )
              return "error" as const
            }
            write("o", `${v}\n`)
          } else if ("ignoreSigint" in step) ignoreSigint = true
          else if ("late" in step) {
            const { afterMs, text } = step.late
            yield* FiberSet.run(
              threads,
              Effect.sleep(afterMs).pipe(Effect.zipRight(Effect.sync(() => write("o", text))))
            )
          } else if ("sleep" in step) {
            // SIGINT ends the sleep with a KeyboardInterrupt, unless the kernel ignores it.
            const woke = yield* Effect.raceFirst(
              Effect.as(Effect.sleep(step.sleep), "slept" as const),
              ignoreSigint ? Effect.never : Effect.as(Deferred.await(interrupt), "interrupted" as const)
            )
            if (woke === "interrupted") {
              record("X", JSON.stringify({ ename: "KeyboardInterrupt", evalue: "", traceback: ["KeyboardInterrupt"] }))
              return "error" as const
            }
          } else if ("die" in step) {
            // Under a cell its end comes first ('Z' none); at idle (after doneThenBusy) only 'G'.
            if (cell !== undefined) end("none")
            yield* gone(
              step.die.oom ? 137 : 128 + (step.die.signal ?? 9),
              step.die.signal ?? 9,
              step.die.oom === true,
              "crashed"
            )
            return yield* Effect.never
          } else if ("doneThenBusy" in step) {
            // "done" now; the rest runs on, outside the cell (its output: late, then the next cell's).
            const rest = steps.slice(i + 1)
            end("ok")
            const never = yield* Deferred.make<void>()
            yield* FiberSet.run(threads, runSteps(rest, never))
            return "detached" as const
          } else if ("toolCall" in step) {
            if (channel === undefined) {
              write("o", "1 this run has no tool channel (no tools were given to it)\n")
              continue
            }
            const id = channel.nextId++
            const args = encoder.encode(JSON.stringify(step.toolCall.args ?? {}))
            const reply = yield* Deferred.make<string>()
            channel.waiting.set(id, reply)
            frame("t", `${id} ${args.byteLength} ${step.toolCall.tool}`)
            data("a", args)
            // Waiting on the socket: SIGINT ends it with a KeyboardInterrupt, as in Python.
            const answer = yield* Effect.raceFirst(
              Deferred.await(reply),
              ignoreSigint ? Effect.never : Effect.as(Deferred.await(interrupt), undefined)
            )
            if (answer === undefined) {
              record("X", JSON.stringify({ ename: "KeyboardInterrupt", evalue: "", traceback: ["KeyboardInterrupt"] }))
              return "error" as const
            }
            write("o", `${answer}\n`)
          } else if ("forgeFrame" in step) {
            io.send(encodeFrame("00".repeat(16), "x", "0 0 0 0"))
            return yield* Effect.never
          } else if ("killSupervisor" in step) {
            stopped = true
            yield* Deferred.succeed(finished, 137)
            return yield* Effect.never
          } else if ("stopSupervisor" in step) {
            stopped = true
            return yield* Effect.never
          }
        }
        return "ok" as const
      })

    const failures = header.preload.filter(failsToImport)
    frame("g", [String(io.pid), String(1000 + io.pid), ...failures].join(" "))

    const startCell = (id: string, code: Uint8Array, tools: boolean) =>
      Effect.gen(function* () {
        channel = tools ? { nextId: 1, waiting: new Map() } : undefined
        const text = decoder.decode(code)
        const first = text.split("\n", 1)[0] ?? ""
        const steps: ReadonlyArray<FakeCellStep> = first.startsWith(PREFIX)
          ? JSON.parse(first.slice(PREFIX.length))
          : []
        const interrupt = yield* Deferred.make<void>()
        frame("C", `${id} ${idleBytes}`)
        idleBytes = 0
        cell = {
          id,
          interrupt,
          out: { total: 0, told: false },
          err: { total: 0, told: false },
          records: 0,
          recordBytes: 0,
          forwarded: 0,
          skipped: 0
        }
        const current = cell
        current.fiber = yield* FiberSet.run(
          threads,
          Effect.gen(function* () {
            const status = yield* runSteps(steps, interrupt)
            if (status !== "detached" && cell === current) end(status)
          })
        )
      })

    /** An interrupt of the running cell: SIGINT; within the grace it ends (KeyboardInterrupt), else the domain dies. */
    const interruptCell = (id: string) =>
      Effect.gen(function* () {
        const c = cell
        if (c === undefined || c.id !== id) return
        yield* Deferred.succeed(c.interrupt, undefined)
        yield* FiberSet.run(
          threads,
          Effect.gen(function* () {
            yield* Effect.sleep(header.graceMs)
            if (cell !== c || stopped) return
            if (c.fiber !== undefined) yield* Fiber.interrupt(c.fiber)
            end("none")
            yield* gone(137, 9, false, "interrupt-timeout")
          })
        )
      })

    const readCommand = io.stdin.until((bytes, ended) => {
      const r = decodeKernelCommand(bytes, at)
      if (r === "incomplete") return ended ? ("eof" as const) : undefined
      return r ?? ("bad" as const)
    })

    for (;;) {
      const next = yield* Effect.raceFirst(
        readCommand,
        Effect.map(Deferred.await(finished), (code) => ({ finished: code }))
      )
      if (typeof next === "object" && "finished" in next) {
        if (stopped && next.finished === 0) return yield* Effect.never
        return next.finished
      }
      if (stopped) return yield* Effect.never
      if (next === "eof" || next === "bad" || (next.command.command === "cell" && cell !== undefined)) {
        // stdin's end is `restart`; a malformed command is the supervisor's failure ('E', then 'G').
        if (next !== "eof") frame("E", "hermes-run: a malformed kernel command")
        if (cell?.fiber !== undefined) yield* Fiber.interrupt(cell.fiber)
        if (cell !== undefined) end("none")
        yield* gone(137, 9, false, next === "eof" ? "requested" : "supervisor")
        return next === "eof" ? 0 : RUNNER_PROTOCOL_ERROR_EXIT
      }
      at = next.next
      const c = next.command
      if (c.command === "cell") yield* startCell(c.cellId, c.code, c.tools !== undefined)
      else if (c.command === "R") {
        const waiting = channel?.waiting.get(c.id)
        if (waiting !== undefined) {
          channel!.waiting.delete(c.id)
          yield* Deferred.succeed(waiting, `${c.status} ${decoder.decode(c.payload)}`)
        }
      } else if (c.command === "interrupt") yield* interruptCell(c.cellId)
      else {
        if (cell?.fiber !== undefined) yield* Fiber.interrupt(cell.fiber)
        if (cell !== undefined) end("none")
        yield* gone(137, 9, false, "requested")
        return 0
      }
    }
  }).pipe(Effect.scoped)
