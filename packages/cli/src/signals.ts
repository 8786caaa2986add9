/**
 * SIGINT/SIGTERM: interrupt what runs, let finalizers remove the containers
 * and close the journal, then exit 130/143. A second signal at least a second
 * later exits at once (the watchdog still removes the containers); one sooner
 * is the same signal delivered twice — by the terminal to the process group
 * and forwarded again by npx/tsx — and must not cut the cleanup short.
 *
 * Standard output closed by its reader (`| head`: EPIPE, since Node ignores SIGPIPE) stops the
 * command the same way, quietly: nobody reads what it would print.
 */
import { ExitCode } from "./exitCodes.js"
import { cliLine } from "./terminal.js"

export interface SignalScope {
  readonly signal: AbortSignal
  /** The exit code the received signal asks for, if one was received. */
  readonly exitCode: () => number | undefined
  /** Whether standard output's reader went away. */
  readonly stdoutClosed: () => boolean
  readonly dispose: () => void
}

/** An EPIPE (or the write-after-destroy that follows it) on a standard stream. */
export const isBrokenPipe = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code
  return code === "EPIPE" || code === "ERR_STREAM_DESTROYED"
}

/**
 * For the whole process: a standard stream whose reader went away is not an error (no stack
 * trace). Commands that keep writing stop through trapSignals' stdoutClosed. Returns its undoing.
 */
export const ignoreBrokenPipes = (): (() => void) => {
  const onError = (error: unknown) => {
    if (!isBrokenPipe(error)) throw error
  }
  for (const stream of [process.stdout, process.stderr]) stream.on("error", onError)
  return () => {
    for (const stream of [process.stdout, process.stderr]) stream.off("error", onError)
  }
}

export const trapSignals = (): SignalScope => {
  const controller = new AbortController()
  let code: number | undefined
  let firstAt = 0
  let closed = false
  const handler = (name: NodeJS.Signals) => () => {
    if (code !== undefined) {
      if (Date.now() - firstAt >= 1_000) process.exit(code)
      return
    }
    firstAt = Date.now()
    code = name === "SIGINT" ? ExitCode.sigint : ExitCode.sigterm
    const message = `${name}: stopping; removing sandboxes…`
    process.stderr.write(
      process.stderr.isTTY === true
        ? cliLine(message, { tty: true, atLineStart: false })
        : `\nhermes-sandbox: ${message}\n`
    )
    controller.abort(name)
  }
  const onInt = handler("SIGINT")
  const onTerm = handler("SIGTERM")
  const onStdoutError = (error: unknown) => {
    if (!isBrokenPipe(error) || closed) return
    closed = true
    controller.abort("standard output closed")
  }
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  process.stdout.on("error", onStdoutError)
  return {
    signal: controller.signal,
    exitCode: () => code ?? (closed ? ExitCode.brokenPipe : undefined),
    stdoutClosed: () => closed,
    dispose: () => {
      process.off("SIGINT", onInt)
      process.off("SIGTERM", onTerm)
      process.stdout.off("error", onStdoutError)
    }
  }
}
