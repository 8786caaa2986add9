/**
 * Which host paths must never be bind-mounted into a sandbox without an explicit
 * `allowDangerousMounts`: one check for every path that takes mounts (session options, the
 * Effect API, the Hermes configuration's `docker_volumes`).
 */
import * as fs from "node:fs"
import * as nodePath from "node:path"

/** Where Docker engines put their socket. */
export const DOCKER_SOCKETS: ReadonlyArray<string> = ["/var/run/docker.sock", "/run/docker.sock"]

/** The socket a `DOCKER_HOST=unix://…` names, resolved; undefined for other endpoints. */
export const dockerHostSocket = (dockerHost: string | undefined = process.env.DOCKER_HOST): string | undefined =>
  dockerHost?.startsWith("unix://") ? nodePath.resolve(dockerHost.slice("unix://".length)) : undefined

/**
 * Why mounting this host path would hand the sandbox the host; undefined when it is fine. The path
 * as written and its real path (symlinks resolved) are both judged: "/" itself, a Docker socket
 * (the usual ones, `DOCKER_HOST`'s, or any socket named docker.sock), or a directory that contains
 * one (`/var`, `/run`, `/var/run`).
 */
export const mountDanger = (
  hostPath: string,
  extraSocket: string | undefined = dockerHostSocket()
): string | undefined => {
  let real = hostPath
  try {
    real = fs.realpathSync(hostPath)
  } catch {
    // Does not exist (yet): judge the path as written.
  }
  const sockets = [...DOCKER_SOCKETS, ...(extraSocket === undefined ? [] : [extraSocket])]
  for (const written of new Set([hostPath, real])) {
    const candidate = written.length > 1 ? written.replace(/\/+$/, "") : written
    if (candidate === "/") return "it mounts the host's root directory"
    for (const socket of sockets) {
      if (candidate === socket) return "it mounts the Docker socket (full control of the host)"
      if (socket.startsWith(`${candidate}/`))
        return `it contains the Docker socket ${socket} (full control of the host)`
    }
    if (nodePath.basename(candidate) === "docker.sock") {
      try {
        if (fs.statSync(candidate).isSocket()) return "it mounts a Docker socket (full control of the host)"
      } catch {
        // not there: nothing to protect
      }
    }
  }
  return undefined
}
