/** Run the `hermes-sandbox` command line as a user does (through tsx's loader), with its exit code and output. */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"

const root = new URL("../..", import.meta.url).pathname
export const cliBin = `${root}packages/cli/src/bin.ts`
// tsx by its path, not by name: `--import tsx` resolves from the working directory, which may be
// a folder outside the workspace (the CLI works from any directory).
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export interface CliOptions {
  readonly stdin?: string
  readonly env?: Record<string, string>
  /** The working directory (default: the repository root). */
  readonly cwd?: string
  /** The command to start instead of tsx on the sources (e.g. the built bin in plain Node). */
  readonly command?: ReadonlyArray<string>
}

/**
 * HERMES_SANDBOX_TEST_CLI_BIN runs the CLI suites against a build in plain Node instead: the
 * installed bin (packages/cli/bundle/hermes-sandbox.cjs, which the real-engine tiers use:
 * vitest.config.ts) or packages/cli/dist/bin.js (the sibling packages' dist/ too, by the
 * workspace's export condition). Through tsx, each start costs ~2.5 s of CPU; the bin, ~0.25 s.
 */
const built = process.env["HERMES_SANDBOX_TEST_CLI_BIN"]
const builtPath = built === undefined || built === "" ? undefined : new URL(built, `file://${root}`).pathname
if (builtPath !== undefined && !existsSync(builtPath))
  throw new Error(`${builtPath} is missing: run \`pnpm build\` first`)
export const cliCommand: ReadonlyArray<string> =
  builtPath === undefined
    ? [process.execPath, "--import", tsx, cliBin]
    : [process.execPath, "--conditions=hermes-sandbox-dist", builtPath]

export const cli = (args: Array<string>, options: CliOptions = {}) =>
  new Promise<CliResult>((resolve) => {
    // node --import tsx rather than npx tsx: npx prints npm's own warnings on stderr when run under
    // pnpm (npm_config_* in the environment), which would mix into the CLI's stderr under test.
    const [command, ...commandArgs] = options.command ?? cliCommand
    const child = spawn(command!, [...commandArgs, ...args], {
      cwd: options.cwd ?? root,
      env: { ...process.env, ...options.env }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.on("error", () => {})
    child.stdin.end(options.stdin ?? "")
  })
