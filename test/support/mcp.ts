/**
 * The built `hermes-sandbox mcp` as MCP clients start it: plain Node on packages/cli/dist/bin.js
 * (built by `pnpm build`, which `pnpm test` runs first; the sibling packages' dist/ through the
 * workspace's export condition), no TypeScript loader.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"

const root = new URL("../..", import.meta.url).pathname
export const builtBin = `${root}packages/cli/dist/bin.js`

/** command + args that start the built MCP server with `args` after `mcp`. */
export const mcpServerCommand = (args: ReadonlyArray<string> = []): { readonly command: string; readonly args: Array<string> } => {
  if (!existsSync(builtBin)) throw new Error(`${builtBin} is missing: run \`pnpm build\` first`)
  return { command: process.execPath, args: ["--conditions=hermes-sandbox-dist", builtBin, "mcp", ...args] }
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
export const startHttpServer = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<HttpServerProcess> =>
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
