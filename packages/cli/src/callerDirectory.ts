/**
 * Relative paths on the command line are the caller's. `pnpm hermes-sandbox ...` (the
 * workspace's script) runs the CLI from the workspace root whatever directory it was typed in,
 * and says where that was in INIT_CWD; there, the CLI moves back to it before reading any path,
 * so FILE, --file, --stdin, --config, --env-file, --journal and relative HERMES_* variables all
 * resolve as the user meant. Started any other way (an installed bin, node, a script that cd's
 * first) the working directory already is the caller's and is left alone.
 */
import { dirname } from "node:path"

export const enterCallerDirectory = (env: NodeJS.ProcessEnv = process.env): void => {
  const initCwd = env["INIT_CWD"]
  const packageJson = env["npm_package_json"]
  if (
    env["npm_lifecycle_event"] !== "hermes-sandbox" ||
    initCwd === undefined ||
    initCwd === "" ||
    packageJson === undefined
  )
    return
  // Only where the package manager put us: a script that changed directory itself meant it.
  if (process.cwd() !== dirname(packageJson)) return
  process.chdir(initCwd)
}
