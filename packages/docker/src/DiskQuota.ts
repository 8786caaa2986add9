/**
 * Can the engine cap a container's writable layer (`diskSize`, the Engine API's
 * `StorageOpt.size`)? Only overlay2 on XFS mounted with project quotas (`pquota`) can, and the
 * Engine API does not say whether the mount has them: `docker info` shows "overlay2" on "xfs"
 * either way (XFS mounts without quotas by default). So the storage driver rules out what it can,
 * and for overlay2 on XFS the engine's answer to a create with a quota is the authority.
 */
import type Docker from "dockerode"

export type DiskQuotaSupport =
  /** The storage cannot apply a quota (the reason names it, e.g. "overlay2 on extfs"). */
  | { readonly _tag: "Unsupported"; readonly storage: string }
  /** overlay2 on XFS: it can, if the filesystem is mounted with pquota; only a create tells. */
  | { readonly _tag: "IfMountedWithPquota" }

interface EngineInfo {
  readonly Driver?: string
  readonly DriverStatus?: ReadonlyArray<readonly [string, string]> | null
}

export const fromInfo = (info: EngineInfo): DiskQuotaSupport => {
  const driver = info.Driver ?? "unknown"
  const backing = info.DriverStatus?.find(([k]) => k === "Backing Filesystem")?.[1] ?? "unknown"
  return driver === "overlay2" && backing === "xfs"
    ? { _tag: "IfMountedWithPquota" }
    : { _tag: "Unsupported", storage: `${driver} on ${backing}` }
}

/** How the storage is described once the engine has refused a quota on overlay2 on XFS. */
export const XFS_WITHOUT_PQUOTA = "overlay2 on xfs mounted without pquota"

/** The engine's words when it refuses a create's `StorageOpt.size` (moby's overlay2 driver, 20.10 and later). */
export const isQuotaRefusal = (engineMessage: string): boolean =>
  /storage-opt is supported only for|storage opt(ion)?s? (is |are )?not supported/i.test(engineMessage)

/**
 * What makes quotas work on this engine, naming its data root as the engine reports it
 * (`docker info`'s DockerRootDir; /var/lib/docker is only the default).
 */
export const quotaFix = (dataRoot: string | undefined): string =>
  `put the engine's data root (${dataRoot === undefined || dataRoot === "" ? "DockerRootDir in 'docker info'" : dataRoot}) on XFS mounted with pquota, with the overlay2 storage driver`

export const unsupportedMessage = (storage: string): string =>
  `a disk quota was asked for but the engine's storage (${storage}) cannot apply one; it needs overlay2 on XFS mounted with pquota`

/**
 * Ask the engine (for `doctor`): create, never start, a container of `image` with a 1 GiB quota,
 * and remove it. True when the engine accepted the quota.
 */
export const probe = async (docker: Docker, image: string, name: string): Promise<boolean> => {
  let container: Docker.Container
  try {
    container = await docker.createContainer({
      name,
      Image: image,
      Cmd: ["true"],
      HostConfig: { StorageOpt: { size: String(1 << 30) } }
    })
  } catch (error) {
    const e = error as { json?: { message?: string } | null; message?: string }
    if (isQuotaRefusal(e.json?.message ?? e.message ?? "")) return false
    throw error
  }
  await container.remove({ force: true, v: true })
  return true
}
