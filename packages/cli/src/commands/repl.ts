/**
 * `hermes-sandbox repl [--image IMAGE] [--out DIR]`: an interactive Python prompt on a session's
 * kernel (docs/design/kernel.md §13), for people at a terminal. A session sandbox is opened with
 * its kernel started at once (kernel.eager); each complete input (replInput.ts: blocks until an empty line,
 * brackets and triple quotes until they close) is one cell. What the cell prints streams as it
 * comes; then its displays, `Out[n]: ` and the last expression's `text/plain`, its traceback, and the
 * CLI's own lines (a timeout, lost state, cut output), marked as such.
 *
 * Everything the cell sends is untrusted (SECURITY.md, Kernels: cells as one trust domain): on a
 * terminal it passes through the sanitizer (terminal.ts), so no escape sequence reaches it; images
 * go to --out only as `cell-<n>-<i>.png|jpg`, 1 GiB per REPL (replImages.ts); HTML, SVG and the
 * other rich types are never rendered, only their `text/plain` printed.
 *
 * Ctrl-C during a cell interrupts the cell (KeyboardInterrupt; the kernel is killed if it does not
 * stop within the grace, and the result says the state was lost); at the prompt it clears the
 * input. Ctrl-D (or SIGTERM / SIGHUP) ends the REPL and removes the sandbox.
 */
import { createInterface, type Interface } from "node:readline"
import { Cause, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import { type CellResult, SandboxRuntime } from "@hermes-sandbox/core"
import { DEFAULT_SESSION_IMAGE, type Session, Sessions } from "@hermes-sandbox/core/Session"
import { DockerSessions } from "@hermes-sandbox/docker"
import { JournalLocation, MemoryJournal } from "@hermes-sandbox/events"
import { checkOutDir } from "../collectedFiles.js"
import { UsageError } from "../errors.js"
import { ExitCode } from "../exitCodes.js"
import { ReplImages } from "../replImages.js"
import { needsMore } from "../replInput.js"
import { durationOption } from "../sandboxOptions.js"
import { cliLine, TerminalSanitizer } from "../terminal.js"

export interface ReplOptions {
  readonly image?: string
  readonly out?: string
  readonly timeout?: string
  readonly memory?: string
  readonly runtime?: string
  readonly journal?: string | boolean
}

/** The image when none is given: the data-science one when it is built, else the session default. */
const DATA_IMAGE = "hermes-sandbox/python-data:latest"
/** What the REPL writes: the cell's text sanitized on a terminal, the CLI's own lines marked there. */
class Screen {
  readonly tty = process.stdout.isTTY === true
  private atLineStart = true
  private out = new TerminalSanitizer()
  private err = new TerminalSanitizer()

  /** The cell's own bytes (stdout or stderr), as they come. */
  cell(stream: "stdout" | "stderr", chunk: Uint8Array): void {
    const target = stream === "stdout" ? process.stdout : process.stderr
    const text = this.tty ? (stream === "stdout" ? this.out : this.err).push(chunk) : chunk
    if ((typeof text === "string" ? text.length : text.byteLength) === 0) return
    target.write(text)
    const last = typeof text === "string" ? text.charCodeAt(text.length - 1) : text[text.byteLength - 1]
    this.atLineStart = last === 0x0a
  }

  /** Text from the cell (a value's repr, a traceback), whole. */
  text(text: string, stream: "stdout" | "stderr" = "stdout"): void {
    this.cell(stream, Buffer.from(text.endsWith("\n") ? text : `${text}\n`, "utf8"))
  }

  /** A line of the REPL's own, with a cell's words in it (sanitized; one line). */
  own(message: string): void {
    process.stderr.write(cliLine(message.replaceAll("\n", " "), { tty: this.tty, atLineStart: this.atLineStart }))
    this.atLineStart = true
  }

  /** The end of a cell: what the sanitizers held back, and the cursor at a line's start for the prompt. */
  endCell(): void {
    for (const [s, target] of [
      [this.out, process.stdout],
      [this.err, process.stderr]
    ] as const) {
      const rest = s.end()
      if (rest !== "") target.write(rest)
    }
    this.out = new TerminalSanitizer()
    this.err = new TerminalSanitizer()
    if (!this.atLineStart) process.stdout.write("\n")
    this.atLineStart = true
  }
}

export const repl = async (options: ReplOptions): Promise<number> => {
  if (process.stdin.isTTY !== true)
    throw new UsageError(
      "repl reads from a terminal, and standard input is not one (to run a program use `run`; for cells from code, a session's runCell)"
    )
  const timeoutMs = durationOption("--timeout", options.timeout)
  if (options.out !== undefined) checkOutDir(options.out)

  const journal =
    options.journal === false
      ? MemoryJournal.layer()
      : JournalLocation.layer(options.journal === true ? undefined : options.journal)
  const layer = DockerSessions.layer({
    ...(options.runtime === undefined ? {} : { runtime: options.runtime })
  }).pipe(Layer.provide(journal))
  // Diagnostics to standard error, errors only: the prompt is the user's (a kernel that cannot
  // start is the first cell's error, KernelUnavailable).
  const logging = Layer.merge(
    Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)),
    Logger.minimumLogLevel(LogLevel.Error)
  )
  const runtime = ManagedRuntime.make(Layer.merge(layer.pipe(Layer.provide(logging)), logging))
  const screen = new Screen()
  let session: Session | undefined
  try {
    const opened = await runtime.runPromiseExit(
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const engine = yield* SandboxRuntime
        const image =
          options.image ??
          (yield* engine.resolveImage(DATA_IMAGE).pipe(
            Effect.as(DATA_IMAGE),
            Effect.orElseSucceed(() => DEFAULT_SESSION_IMAGE)
          ))
        return yield* sessions.open({
          image,
          // The kernel starts now, while the person types the first cell (that cell waits for it).
          kernel: { eager: true },
          tags: { "cli.command": "repl" },
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
          ...(options.memory === undefined ? {} : { memory: options.memory })
        })
      })
    )
    if (Exit.isFailure(opened)) throw squash(opened.cause)
    session = opened.value
    screen.own(
      `Python in sandbox ${session.containerName} (no network; its files under /workspace). Ctrl-C interrupts a cell, Ctrl-D ends the session and removes the sandbox.`
    )
    return await loop(runtime, session, screen, options.out)
  } finally {
    const open = session
    if (open !== undefined) await runtime.runPromise(open.close).catch(() => {})
    await runtime.dispose()
  }
}

/** A failure as the typed error itself (what main reports), not Effect's wrapper. */
const squash = (cause: Cause.Cause<unknown>): unknown =>
  Option.getOrElse(Cause.failureOption(cause), () => Cause.squash(cause))

/** The prompt's life: returns the exit code once Ctrl-D (or a signal) ends it. */
const loop = (
  runtime: ManagedRuntime.ManagedRuntime<Sessions, unknown>,
  session: Session,
  screen: Screen,
  out: string | undefined
): Promise<number> =>
  new Promise((resolve) => {
    const rl: Interface = createInterface({ input: process.stdin, output: process.stdout, terminal: true })
    const typed: Array<string> = []
    /** Lines typed while a cell ran: Python's typeahead, read once it ends. */
    const ahead: Array<string> = []
    let running: AbortController | undefined
    let ended: number | undefined
    const images = new ReplImages(out)
    /** The last result said the state was lost. */
    let lossShown = false

    const prompt = () => {
      rl.setPrompt(typed.length === 0 ? ">>> " : "... ")
      rl.prompt()
    }
    /** The REPL ends with `code`; a running cell is interrupted (`abort`: a signal) or let finish (Ctrl-D typed ahead). */
    const finish = (code: number, abort: boolean) => {
      if (ended !== undefined) return
      ended = code
      if (abort) running?.abort("the REPL is ending")
      if (running === undefined) done()
    }
    /** The prompt's end (once no cell runs): the signals are the process's again. */
    const done = () => {
      for (const [signal, on] of handlers) process.off(signal, on)
      rl.close()
      resolve(ended ?? ExitCode.ok)
    }

    const show = (r: CellResult) => {
      if (r.lateOutput !== undefined) {
        screen.own(
          `printed between cells by a thread or process an earlier cell left running (${r.lateOutput.bytes} bytes${r.lateOutput.truncated ? ", cut" : ""}):`
        )
        screen.text(r.lateOutput.text)
      }
      let i = 0
      for (const d of r.displays) {
        const named = images.name(d, r.executionCount, ++i)
        const plain = Object.hasOwn(d.data, "text/plain") ? d.data["text/plain"] : undefined
        if (named !== undefined) screen.own(named)
        else if (plain !== undefined) screen.text(plain)
        else screen.own(`[display: ${Object.keys(d.data).slice(0, 8).join(", ")}; not shown here]`)
      }
      if (r.result !== undefined) {
        const named = images.name(r.result, r.executionCount, ++i)
        const plain = Object.hasOwn(r.result.data, "text/plain") ? r.result.data["text/plain"] : undefined
        if (plain !== undefined) screen.text(`Out[${r.executionCount}]: ${plain}`)
        if (named !== undefined) screen.own(`Out[${r.executionCount}]: ${named}`)
      }
      if (r.error !== undefined)
        screen.text(
          r.error.traceback.length > 0 ? r.error.traceback.join("\n") : `${r.error.name}: ${r.error.value}`,
          "stderr"
        )
      const notes: Array<string> = []
      if (r.status === "timeout")
        notes.push(
          `the cell timed out and was interrupted${r.stateLost ? "; the kernel did not stop and was killed" : ""}`
        )
      if (r.status === "interrupted" && r.stateLost)
        notes.push("the kernel did not stop for the interrupt and was killed")
      if (r.status === "crashed")
        notes.push(r.oomKilled ? "the kernel ran out of memory and was killed" : "the kernel died")
      // Said once: the kernel's first cell after a loss the previous result reported says it again (core's rule).
      if (r.stateLost && !(lossShown && r.kernel.started))
        notes.push("state lost: variables and imports from earlier cells are gone")
      lossShown = r.stateLost
      if (r.stdoutTruncated || r.stderrTruncated)
        notes.push(`output cut: the cell wrote ${r.stdoutBytes} bytes to stdout and ${r.stderrBytes} to stderr`)
      if (r.displaysOmitted.count > 0)
        notes.push(
          `${r.displaysOmitted.count} output(s) not returned (${Object.entries(r.displaysOmitted.reasons)
            .map(([k, v]) => `${k}: ${v}`)
            .join(", ")})`
        )
      for (const note of notes) screen.own(note)
    }

    const runCell = async (code: string) => {
      const controller = new AbortController()
      running = controller
      const exit = await runtime.runPromiseExit(
        session.runCell(
          { code },
          {
            signal: controller.signal,
            onStdout: (c) => screen.cell("stdout", c),
            onStderr: (c) => screen.cell("stderr", c)
          }
        )
      )
      running = undefined
      screen.endCell()
      if (Exit.isSuccess(exit)) {
        show(exit.value)
        screen.endCell()
        return
      }
      const error = squash(exit.cause) as { _tag?: string; message?: string }
      screen.own(`${error._tag ?? "Error"}: ${error.message ?? String(error)}`)
      // Nothing more can run: no kernel in this image, or the session is gone.
      if (error._tag === "KernelUnavailable" || error._tag === "SessionEnded") finish(ExitCode.sandboxFailed, false)
    }

    const onLine = async (line: string): Promise<void> => {
      typed.push(line)
      if (needsMore(typed)) return prompt()
      const code = typed.join("\n")
      typed.length = 0
      if (code.trim() !== "") await runCell(code)
      if (ended !== undefined) return done()
      // What was typed meanwhile, line by line, as if typed now.
      const next = ahead.shift()
      if (next !== undefined) return onLine(next)
      prompt()
    }

    const interrupt = () => {
      if (running !== undefined) {
        if (running.signal.aborted)
          screen.own("still interrupting: the kernel is killed if it does not stop within its grace")
        running.abort("Ctrl-C")
        return
      }
      // At the prompt: the input so far is dropped, as Python's prompt does.
      typed.length = 0
      rl.write(null, { ctrl: true, name: "e" })
      rl.write(null, { ctrl: true, name: "u" })
      process.stdout.write("\nKeyboardInterrupt\n")
      prompt()
    }

    rl.on("line", (line) => {
      if (running !== undefined || ahead.length > 0) ahead.push(line)
      else void onLine(line)
    })
    rl.on("SIGINT", interrupt)
    // Ctrl-D at an empty prompt (or standard input's end).
    rl.on("close", () => {
      if (ended === undefined) {
        if (running === undefined) process.stdout.write("\n")
        finish(ExitCode.ok, false)
      }
    })
    const handlers: Array<[NodeJS.Signals, () => void]> = [
      ["SIGINT", interrupt],
      ["SIGTERM", () => finish(ExitCode.sigterm, true)],
      // The terminal went away (128 + SIGHUP's 1).
      ["SIGHUP", () => finish(129, true)]
    ]
    for (const [signal, on] of handlers) process.on(signal, on)
    prompt()
  })
