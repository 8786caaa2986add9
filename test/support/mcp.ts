/**
 * The built `hermes-sandbox mcp` as MCP clients start it, in plain Node, no TypeScript loader: the
 * installed bin (packages/cli/bundle/hermes-sandbox.cjs, the package's `bin`) where the tier names
 * it (HERMES_SANDBOX_TEST_CLI_BIN, as for the CLI suites: support/cli.ts), else
 * packages/cli/dist/bin.js (the sibling packages' dist/ through the workspace's export condition).
 * Both are built by `pnpm build`, which `pnpm test` runs first. A server's start through the bin
 * costs ~0.4 CPU-s, through dist/bin.js (~300 modules) ~0.9.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { cliCommand } from "./cli.js"

const root = new URL("../..", import.meta.url).pathname
export const builtBin = `${root}packages/cli/dist/bin.js`
const installedBin = (process.env["HERMES_SANDBOX_TEST_CLI_BIN"] ?? "") !== ""

/** The built CLI in plain Node (command and its leading arguments): the installed bin, else dist/bin.js. */
export const builtCliCommand = (): ReadonlyArray<string> => {
  if (installedBin) return cliCommand
  if (!existsSync(builtBin)) throw new Error(`${builtBin} is missing: run \`pnpm build\` first`)
  return [process.execPath, "--conditions=hermes-sandbox-dist", builtBin]
}

/** command + args that start the built MCP server with `args` after `mcp`. */
export const mcpServerCommand = (
  args: ReadonlyArray<string> = []
): { readonly command: string; readonly args: Array<string> } => {
  const [command, ...leading] = builtCliCommand()
  return { command: command!, args: [...leading, "mcp", ...args] }
}

export interface HttpServerProcess {
  readonly child: ChildProcess
  /** http://127.0.0.1:PORT/mcp, as the server printed it. */
  readonly url: string
  /** What it printed on standard error so far. */
  readonly stderr: () => string
  /** SIGINT, then its exit code. */
  readonly stop: () => Promise<number | null>
}

/** Start `hermes-sandbox mcp --http ...args` and wait for the line with its URL. */
export const startHttpServer = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Promise<HttpServerProcess> =>
  new Promise((resolve, reject) => {
    const { command, args: full } = mcpServerCommand(["--http", ...args])
    const child = spawn(command, full, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stderr = ""
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    const timer = setTimeout(() => reject(new Error(`no URL printed within 30 s; stderr: ${stderr}`)), 30_000)
    child.stderr!.on("data", (d) => {
      stderr += d
      const url = /at (http:\/\/\S+\/mcp)/.exec(stderr)?.[1]
      if (url !== undefined) {
        clearTimeout(timer)
        resolve({
          child,
          url,
          stderr: () => stderr,
          stop: async () => {
            if (child.exitCode === null) child.kill("SIGINT")
            return exited
          }
        })
      }
    })
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`the server exited (${code}) before printing its URL; stderr: ${stderr}`))
    })
  })

/** The MCP Inspector's CLI (a client this project did not write), installed in the test package. */
export const inspectorBin = `${root}test/node_modules/.bin/mcp-inspector`

/** Run `mcp-inspector --cli ...args` to its end (killed after 60 s): its exit code and output. */
export const runInspector = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv }
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(inspectorBin, ["--cli", ...args], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`the inspector did not finish within 60 s; stdout: ${stdout}; stderr: ${stderr}`))
    }, 60_000)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
