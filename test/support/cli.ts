/** Run the `hermes-sandbox` command line as a user does (through tsx's loader), with its exit code and output. */
import { spawn } from "node:child_process"

const root = new URL("../..", import.meta.url).pathname

export const cli = (args: Array<string>, options: { stdin?: string; env?: Record<string, string> } = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // node --import tsx rather than npx tsx: npx prints npm's own warnings on stderr when run under
    // pnpm (npm_config_* in the environment), which would mix into the CLI's stderr under test.
    const child = spawn(process.execPath, ["--import", "tsx", "packages/cli/src/bin.ts", ...args], { cwd: root, env: { ...process.env, ...options.env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(options.stdin ?? "")
  })
