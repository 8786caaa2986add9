/**
 * `hermes-sandbox run [FILE|-]`: run a program in a single-use sandbox,
 * streaming its output, and exit with its exit code (124 on timeout, 125 when
 * the sandbox itself failed). On a terminal the program's output is sanitized
 * and the CLI's own lines are marked (terminal.ts); elsewhere both are as before.
 * `--collect PATTERN --out DIR` writes the files the run sent back under DIR (collectedFiles.ts)
 * and lists them on standard error, which keeps standard output the program's.
 * `--upstream-config FILE` connects upstream MCP servers (as `mcp` does) whose tools the program
 * calls (`from hermes_tools import ...`); they are closed when the run ends, however it ends.
 * With a daemon answering (daemon/client.ts), a run it fits never gets here: see the bundle's launcher.
 */
import type { ExecuteRequest } from "@hermes-sandbox/core"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import type { Upstreams } from "@hermes-sandbox/mcp"
import { formatEvent } from "../formatEvent.js"
import { prepareRun, type RunOptions } from "../runRequest.js"
import { type ProgramOutput, programOutput, runAndReport } from "../runOutput.js"
import { type SignalScope, trapSignals } from "../signals.js"
import { writeCliLine } from "../terminal.js"
import { connectUpstreamsOf, offeredLines, readUpstreamConfig } from "../upstreamOptions.js"

export type { RunOptions } from "../runRequest.js"

export const run = async (file: string | undefined, options: RunOptions): Promise<number> => {
  // Everything the command line can get wrong is found before the SDK loads (usage errors stay fast).
  const { request, executorOptions, hermes, toolLimits } = prepareRun(file, options)

  const { createExecutor, fromHermesConfig } = await import("@hermes-sandbox/docker")
  // The configuration's warnings, once (createExecutor applies the same file and says nothing).
  if (hermes !== undefined)
    for (const warning of fromHermesConfig(hermes).loaded.warnings) writeCliLine(`warning: ${warning}`)

  // The program's output, sanitized on a terminal; whether the terminal's cursor is at a line's
  // start, so that the CLI's own lines (marked there) begin one.
  const program = programOutput()
  const signals = trapSignals()
  let upstreams: Upstreams.Upstreams | undefined
  try {
    upstreams = await upstreamsOf(options)
    const tools =
      upstreams === undefined || upstreams.servers.length === 0
        ? {}
        : { tools: upstreams.tools, ...(toolLimits === undefined ? {} : { toolLimits }) }
    return await runIn(await createExecutor(executorOptions), { ...request, ...tools }, options, program, signals)
  } finally {
    // After the executor (runIn closes it, ending the run's tool calls), so no call finds its
    // upstream gone; each process started for one ends here, also after SIGINT/SIGTERM.
    await upstreams?.close()
    signals.dispose()
  }
}

/**
 * --upstream-config's servers, connected (only then is the MCP client code loaded): the file's
 * warnings on standard error; what they offer only with --events, standard error staying the program's.
 */
const upstreamsOf = async (options: RunOptions): Promise<Upstreams.Upstreams | undefined> => {
  const config = await readUpstreamConfig(options)
  if (config === undefined) return undefined
  for (const warning of config.warnings) writeCliLine(`warning: ${warning}`)
  const upstreams = await connectUpstreamsOf(options, config)
  if (upstreams.servers.length === 0 || options.events === true)
    for (const line of offeredLines(options, upstreams.servers, "the program")) writeCliLine(line)
  return upstreams
}

/** The run on `executor`, which it closes (--events: its lifecycle on standard error as it happens). */
const runIn = async (
  executor: SandboxExecutor,
  request: ExecuteRequest,
  options: RunOptions,
  program: ProgramOutput,
  signals: SignalScope
): Promise<number> => {
  const subscription = options.events
    ? executor.events$.subscribe((e) => {
        if (process.stderr.isTTY !== true) {
          process.stderr.write(`${formatEvent(e)}\n`)
          return
        }
        writeCliLine(formatEvent(e), program.atLineStart())
        program.lineStarted()
      })
    : undefined
  try {
    return await runAndReport((hooks) => executor.executeCode(request, hooks), request, options, program, signals)
  } finally {
    await executor.close()
    subscription?.unsubscribe()
  }
}
