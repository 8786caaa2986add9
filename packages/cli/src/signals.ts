/**
 * SIGINT/SIGTERM: interrupt what runs, let finalizers remove the containers
 * and close the journal, then exit 130/143. A second signal at least a second
 * later exits at once (the watchdog still removes the containers); one sooner
 * is the same signal delivered twice — by the terminal to the process group
 * and forwarded again by npx/tsx — and must not cut the cleanup short.
 */
import { ExitCode } from "./exitCodes.js"
import { cliLine } from "./terminal.js"

export interface SignalScope {
  readonly signal: AbortSignal
  /** The exit code the received signal asks for, if one was received. */
  readonly exitCode: () => number | undefined
  readonly dispose: () => void
}

export const trapSignals = (): SignalScope => {
  const controller = new AbortController()
  let code: number | undefined
  let firstAt = 0
  const handler = (name: NodeJS.Signals) => () => {
    if (code !== undefined) {
      if (Date.now() - firstAt >= 1_000) process.exit(code)
      return
    }
    firstAt = Date.now()
    code = name === "SIGINT" ? ExitCode.sigint : ExitCode.sigterm
    const message = `${name}: stopping; removing sandboxes…`
    process.stderr.write(process.stderr.isTTY === true ? cliLine(message, { tty: true, atLineStart: false }) : `\nhermes-sandbox: ${message}\n`)
    controller.abort(name)
  }
  const onInt = handler("SIGINT")
  const onTerm = handler("SIGTERM")
  process.on("SIGINT", onInt)
  process.on("SIGTERM", onTerm)
  return {
    signal: controller.signal,
    exitCode: () => code,
    dispose: () => {
      process.off("SIGINT", onInt)
      process.off("SIGTERM", onTerm)
    }
  }
}
