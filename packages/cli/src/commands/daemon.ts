/**
 * `hermes-sandbox daemon start|stop|status|serve`: a local daemon holding a warm pool, so that
 * `hermes-sandbox run` skips the SDK's start and the sandbox's create and start (daemon/server.ts;
 * SECURITY.md, "The CLI's local daemon"). `start` runs `serve` in the background, its output in
 * daemon.log next to the socket, and returns once the socket answers.
 */
import { spawn } from "node:child_process"
import { closeSync, existsSync, openSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Languages } from "@hermes-sandbox/core/Language"
import { UsageError } from "../errors.js"
import { ExitCode } from "../exitCodes.js"
import { askDaemon } from "../daemon/control.js"
import { type DaemonStatus, fitKey, Frame, journalKey } from "../daemon/protocol.js"
import { ensureDaemonDirectory, socketPath, trustedSocket } from "../daemon/socketPath.js"
import { durationOption, executorOptionsOf, numberOption, type SandboxCommandOptions } from "../sandboxOptions.js"
import { writeCliLine } from "../terminal.js"

export interface DaemonOptions extends SandboxCommandOptions {
  readonly image?: string
  readonly memory?: string
  readonly cpus?: string
  readonly timeout?: string
  readonly poolSize?: string
  readonly language?: ReadonlyArray<string>
  readonly idleTtl?: string
  readonly json?: boolean
}

/** How long `start` waits for the socket to answer (the executor's start: an engine call or two). */
const START_TIMEOUT_MS = 60_000

const poolOf = (options: DaemonOptions) => {
  const size = numberOption("--pool-size", options.poolSize, true) ?? 2
  const languages = options.language ?? ["python"]
  for (const l of languages)
    if (!(Languages as ReadonlyArray<string>).includes(l))
      throw new UsageError(`--language: one of ${Languages.join(", ")}, got ${JSON.stringify(l)}`)
  const idleTtlMs = durationOption("--idle-ttl", options.idleTtl)
  return {
    size,
    languages: [...new Set(languages)] as Array<(typeof Languages)[number]>,
    ...(idleTtlMs === undefined ? {} : { idleTtlMs })
  }
}

/** The flags `serve` is given by `start`: the same ones, as given. */
const forwarded = (argv: ReadonlyArray<string>): Array<string> => {
  const at = argv.indexOf("start", argv.indexOf("daemon"))
  return at < 0 ? [] : argv.slice(at + 1).filter((a) => a !== "--json")
}

const describe = (s: DaemonStatus): string =>
  `pid ${s.pid}, socket ${s.socket}; pool ${s.pool.languages.map((l) => `${l}×${s.pool.size}`).join(", ")} (ready: ${
    Object.entries(s.warm)
      .map(([l, n]) => `${l} ${n}`)
      .join(", ") || "none"
  })${Object.keys(s.shape ?? {}).length === 0 ? "" : ` ${JSON.stringify(s.shape)}`}; ${s.inFlight} running, ${s.served} served, ${s.handedBack} handed back; network ${s.fit.network ? "on" : "none"}, journal ${s.fit.journal}`

/** --image, -m, -c, -t: the pool's, which a served run must ask for too (server.ts, shapedRequest). */
const shapeOf = (options: DaemonOptions) => {
  const cpus = options.cpus === undefined ? undefined : Number(options.cpus)
  if (options.cpus !== undefined && !Number.isFinite(cpus))
    throw new UsageError(`--cpus: expected a number, got ${JSON.stringify(options.cpus)}`)
  const timeoutMs = durationOption("--timeout", options.timeout)
  return {
    ...(options.image === undefined ? {} : { image: options.image }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
    ...(cpus === undefined ? {} : { cpus }),
    ...(timeoutMs === undefined ? {} : { timeoutMs })
  }
}

export const daemonServe = async (options: DaemonOptions): Promise<number> => {
  const pool = poolOf(options)
  const shape = shapeOf(options)
  const executorOptions = executorOptionsOf(options, undefined)
  const { serve } = await import("../daemon/server.js")
  await serve({
    executorOptions,
    fit: fitKey({
      network: executorOptions.network,
      runtime: executorOptions.runtime,
      limitsUnsupported: executorOptions.limitsUnsupported,
      recordCode: executorOptions.recordCode,
      journal: journalKey(options.journal)
    }),
    pool,
    shape,
    onListening: (path) => process.stderr.write(`hermes-sandbox daemon: pid ${process.pid} serving on ${path}\n`)
  })
  return ExitCode.ok
}

export const daemonStart = async (options: DaemonOptions, argv: ReadonlyArray<string>): Promise<number> => {
  // Usage errors here, not in the background.
  poolOf(options)
  shapeOf(options)
  const running = await askDaemon(Frame.status, socketPath())
  if (running !== undefined) {
    writeCliLine(`a daemon is already running: ${describe(running)}`)
    return ExitCode.ok
  }
  const dir = ensureDaemonDirectory()
  const log = join(dir, "daemon.log")
  const fd = openSync(log, "w", 0o600)
  const child = spawn(
    process.execPath,
    [...process.execArgv, process.argv[1]!, "daemon", "serve", ...forwarded(argv)],
    {
      detached: true,
      stdio: ["ignore", fd, fd]
    }
  )
  closeSync(fd)
  let exited: number | null | undefined
  child.once("exit", (code) => {
    exited = code
  })
  child.unref()
  const deadline = Date.now() + START_TIMEOUT_MS
  while (Date.now() < deadline && exited === undefined) {
    const path = trustedSocket()
    const status = path === undefined ? undefined : await askDaemon(Frame.status, path)
    if (status !== undefined) {
      if (options.json === true) process.stdout.write(`${JSON.stringify(status)}\n`)
      else writeCliLine(`daemon started: ${describe(status)}`)
      return ExitCode.ok
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  const tail = existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").slice(-10).join("\n") : ""
  writeCliLine(
    `the daemon did not start${exited === undefined ? ` within ${START_TIMEOUT_MS / 1000} s` : ` (exit ${exited})`}${tail === "" ? "" : `:\n${tail}`}`
  )
  if (exited === undefined) child.kill("SIGTERM")
  return ExitCode.sandboxFailed
}

export const daemonStatus = async (options: DaemonOptions): Promise<number> => {
  const path = trustedSocket()
  const status = path === undefined ? undefined : await askDaemon(Frame.status, path)
  if (status === undefined) {
    if (options.json === true) process.stdout.write(`${JSON.stringify({ running: false })}\n`)
    else writeCliLine("no daemon is running")
    return ExitCode.notFound
  }
  if (options.json === true) process.stdout.write(`${JSON.stringify({ running: true, ...status })}\n`)
  else process.stdout.write(`${describe(status)}\n`)
  return ExitCode.ok
}

export const daemonStop = async (options: DaemonOptions): Promise<number> => {
  const path = trustedSocket()
  const status = path === undefined ? undefined : await askDaemon(Frame.stop, path)
  if (status === undefined || path === undefined) {
    writeCliLine("no daemon is running")
    return ExitCode.notFound
  }
  // Stopped once its socket is gone (its pool drained: every container removed).
  const deadline = Date.now() + START_TIMEOUT_MS
  while (existsSync(path) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  while (Date.now() < deadline) {
    try {
      process.kill(status.pid, 0)
    } catch {
      break
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  if (options.json === true) process.stdout.write(`${JSON.stringify({ stopped: true, pid: status.pid })}\n`)
  else writeCliLine(`daemon stopped (pid ${status.pid}; ${status.served} runs served)`)
  return ExitCode.ok
}
