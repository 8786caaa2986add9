/**
 * Where the daemon listens, and whether a place there can be trusted (SECURITY.md, "The CLI's
 * local daemon"): `$XDG_RUNTIME_DIR/hermes-sandbox/` (a per-user directory by the XDG spec), else
 * `/tmp/hermes-sandbox-<uid>/`; the directory mode 0700 and the invoking user's, the socket the
 * invoking user's. In /tmp another user could have made the directory first, and a socket another
 * user placed would receive this user's code and answer with whatever it likes: both sides check.
 */
import { lstatSync, mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { isAbsolute, join } from "node:path"

export const SOCKET_NAME = "daemon.sock"

const uid = (): number => process.getuid?.() ?? -1

/** The daemon's directory for this user (not created). */
export const daemonDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const runtime = env["XDG_RUNTIME_DIR"]
  if (runtime !== undefined && isAbsolute(runtime)) return join(runtime, "hermes-sandbox")
  return join(tmpdir(), `hermes-sandbox-${uid()}`)
}

export const socketPath = (env: NodeJS.ProcessEnv = process.env): string => join(daemonDirectory(env), SOCKET_NAME)

/** Why `dir` cannot hold this user's daemon socket, or undefined when it can (a real directory, its owner's alone). */
export const untrustedDirectory = (dir: string): string | undefined => {
  const s = lstatSync(dir)
  if (!s.isDirectory()) return `${dir} is not a directory`
  if (uid() >= 0 && s.uid !== uid()) return `${dir} belongs to uid ${s.uid}, not to this user (${uid()})`
  if ((s.mode & 0o077) !== 0)
    return `${dir} is accessible to others (mode ${(s.mode & 0o777).toString(8)}; 700 expected)`
  return undefined
}

/** The daemon's directory, made 0700 if missing; throws when it exists but cannot be trusted. */
export const ensureDaemonDirectory = (env: NodeJS.ProcessEnv = process.env): string => {
  const dir = daemonDirectory(env)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const why = untrustedDirectory(dir)
  if (why !== undefined) throw new Error(`refusing the daemon's directory: ${why}`)
  return dir
}

/**
 * The socket to connect to, when it may be trusted: it exists, is a socket and this user's, in a
 * directory of this user's alone. Undefined otherwise (the client then runs without the daemon).
 */
export const trustedSocket = (env: NodeJS.ProcessEnv = process.env): string | undefined => {
  const path = socketPath(env)
  try {
    if (untrustedDirectory(daemonDirectory(env)) !== undefined) return undefined
    const s = lstatSync(path)
    if (!s.isSocket() || (uid() >= 0 && s.uid !== uid())) return undefined
    return path
  } catch {
    return undefined
  }
}
