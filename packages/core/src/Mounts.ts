/**
 * Which host paths must never be bind-mounted into a sandbox without an explicit
 * `allowDangerousMounts`: one check for every path that takes mounts (session options, the
 * Effect API, the Hermes configuration's `docker_volumes`). A mount names a path on the engine's
 * machine, so the check judges it against the engine the runtime talks to (SandboxRuntime.engine).
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import type { EngineHost } from "./SandboxRuntime.js"

/** Where Docker engines put their socket. */
export const DOCKER_SOCKETS: ReadonlyArray<string> = ["/var/run/docker.sock", "/run/docker.sock"]

/** The socket a `DOCKER_HOST=unix://…` names, resolved; undefined for other endpoints. */
export const dockerHostSocket = (dockerHost: string | undefined = process.env.DOCKER_HOST): string | undefined =>
  dockerHost?.startsWith("unix://") ? nodePath.resolve(dockerHost.slice("unix://".length)) : undefined

const realpath = (path: string): string | undefined => {
  try {
    return fs.realpathSync(path)
  } catch {
    // Does not exist (yet).
    return undefined
  }
}

/** A socket path as given (resolved) and its real path (symlinks resolved), when it exists. */
const socketPaths = (socket: string | undefined): ReadonlyArray<string> => {
  if (socket === undefined || socket === "") return []
  const resolved = nodePath.resolve(socket)
  const real = realpath(resolved)
  return real === undefined || real === resolved ? [resolved] : [resolved, real]
}

const withoutTrailingSlash = (path: string): string => (path.length > 1 ? path.replace(/\/+$/, "") || "/" : path)

/** "/", a socket, or a directory holding one; `leaf` judges a path not matched otherwise (docker.sock). */
const judge = (
  paths: Iterable<string>,
  sockets: ReadonlyArray<string>,
  leaf: (candidate: string) => string | undefined
): string | undefined => {
  for (const written of paths) {
    const candidate = withoutTrailingSlash(written)
    if (candidate === "/") return "it mounts the host's root directory"
    for (const socket of sockets) {
      if (candidate === socket) return "it mounts the Docker socket (full control of the host)"
      if (socket.startsWith(`${candidate}/`))
        return `it contains the Docker socket ${socket} (full control of the host)`
    }
    if (nodePath.basename(candidate) === "docker.sock") {
      const danger = leaf(candidate)
      if (danger !== undefined) return danger
    }
  }
  return undefined
}

/**
 * Why mounting this host path would hand the sandbox the host; undefined when it is fine: "/"
 * itself, a Docker socket, or a directory that contains one (`/var`, `/run`, `/var/run`, the
 * directory of the engine's socket).
 *
 * `engine` is the engine the mount is for (SandboxRuntime.engine); a string is a local engine's
 * socket, and the default a local engine on `DOCKER_HOST`'s socket.
 *
 * - A local engine: the path as written and its real path (this machine's symlinks resolved) are
 *   judged against the usual sockets, `DOCKER_HOST`'s, the engine's own (as given and its real
 *   path), and any socket file named docker.sock.
 * - A remote engine: its filesystem is not this machine's, so the path is judged as written
 *   (`..` and repeated slashes folded, no symlink resolved) against the usual sockets and any path
 *   named docker.sock, and the reason says the engine is remote.
 */
export const mountDanger = (
  hostPath: string,
  engine: EngineHost | string | undefined = dockerHostSocket()
): string | undefined => {
  if (typeof engine === "object" && engine.kind === "remote") {
    const danger = judge([nodePath.posix.normalize(hostPath)], DOCKER_SOCKETS, () => "it names a Docker socket")
    return danger === undefined
      ? undefined
      : `${danger}; the engine is remote (${engine.endpoint}): the path was judged as written, its host's symlinks unseen`
  }
  const sockets = [
    ...new Set([
      ...DOCKER_SOCKETS,
      ...(typeof engine === "object" ? [...socketPaths(engine.socketPath), ...socketPaths(dockerHostSocket())] : []),
      ...(typeof engine === "string" ? socketPaths(engine) : [])
    ])
  ]
  const real = realpath(hostPath)
  return judge(new Set([hostPath, ...(real === undefined ? [] : [real])]), sockets, (candidate) => {
    try {
      if (fs.statSync(candidate).isSocket()) return "it mounts a Docker socket (full control of the host)"
    } catch {
      // not there: nothing to protect
    }
    return undefined
  })
}
