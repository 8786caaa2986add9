/**
 * The daemon client's entry (bundle/daemon-client.cjs, which the installed bin's launcher loads
 * for `run` before the full CLI): a run goes to the daemon when its socket is there and this
 * user's (socketPath.ts) and it answers and takes the run; undefined otherwise, and the launcher
 * runs the full CLI. Checking the socket costs a stat; the client's modules load only after it.
 */
import { enterCallerDirectory } from "../callerDirectory.js"
import { ignoreBrokenPipes } from "../signals.js"
import { trustedSocket } from "./socketPath.js"

export const runViaDaemon = async (argv: ReadonlyArray<string>): Promise<number | undefined> => {
  if (argv.includes("--no-daemon")) return undefined
  const socket = trustedSocket()
  if (socket === undefined) return undefined
  enterCallerDirectory()
  const { runThroughDaemon } = await import("./client.js")
  const pipes = ignoreBrokenPipes()
  const code = await runThroughDaemon(argv, socket)
  // Handed back: the full CLI sets up its own.
  if (code === undefined) pipes()
  return code
}
