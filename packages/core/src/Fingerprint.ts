/**
 * The fingerprint of a long-lived sandbox's configuration: a SHA-256 over what the container
 * was created with and cannot change afterwards — image (reference AND id, so a rebuilt image
 * counts as a change), limits, mounts, network, OCI runtime, capabilities, user, working
 * directory — and the NAMES of its environment variables.
 *
 * Values are left out on purpose: sessions pass environment values with every call (the
 * exec's environment), so a new value reaches the old container at its next call, and a
 * secret's value never enters a label, not even hashed.
 *
 * A persistent sandbox is labelled with its fingerprint and found again by profile +
 * fingerprint, so a changed configuration is never served by an old container.
 */
import { createHash } from "node:crypto"
import type { SandboxLimits, SandboxSpec } from "./SandboxRuntime.js"

export interface FingerprintInput {
  readonly image: string
  readonly imageId: string
  readonly limits: SandboxLimits
  readonly mounts: SandboxSpec["mounts"]
  readonly envNames: ReadonlyArray<string>
  readonly network: boolean
  readonly runtime: string | undefined
  readonly capAdd: ReadonlyArray<string>
  readonly user: string
  readonly workingDir: string
}

/** The fields in a fixed order, lists sorted: equal configurations give equal text. */
export const canonical = (input: FingerprintInput): string =>
  JSON.stringify({
    v: 1,
    image: input.image,
    imageId: input.imageId,
    limits: {
      memoryBytes: input.limits.memoryBytes,
      nanoCpus: input.limits.nanoCpus,
      pidsLimit: input.limits.pidsLimit,
      tmpBytes: input.limits.tmpBytes,
      workspaceBytes: input.limits.workspaceBytes,
      diskBytes: input.limits.diskBytes ?? null
    },
    mounts: [...input.mounts]
      .map((m) => ({ hostPath: m.hostPath, containerPath: m.containerPath, mode: m.mode }))
      .sort((a, b) => a.containerPath.localeCompare(b.containerPath)),
    envNames: [...new Set(input.envNames)].sort(),
    network: input.network,
    runtime: input.runtime ?? "runc",
    capAdd: [...input.capAdd].sort(),
    user: input.user,
    workingDir: input.workingDir
  })

export const fingerprintOf = (canonicalText: string): string => createHash("sha256").update(canonicalText).digest("hex")

/**
 * A stable UUID-shaped id (version nibble 8: "custom") for a profile's sandbox with this
 * fingerprint. Used as the session id and in the container name, so two processes opening the
 * same persistent sandbox at once collide on the name (409) instead of making two.
 */
export const persistentId = (profile: string, fingerprint: string): string => {
  const h = createHash("sha256").update(`hermes-sandbox/persistent\0${profile}\0${fingerprint}`).digest("hex")
  const variant = ((parseInt(h[16] ?? "0", 16) & 0x3) | 0x8).toString(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** Which top-level fields differ between two canonical texts, e.g. ["limits.memoryBytes: 536870912 -> 268435456"]. */
export const differences = (before: string | undefined, after: string): ReadonlyArray<string> => {
  let a: Record<string, unknown>
  try {
    a = before === undefined ? {} : (JSON.parse(before) as Record<string, unknown>)
  } catch {
    return ["the old container's configuration label is unreadable"]
  }
  const b = JSON.parse(after) as Record<string, unknown>
  if (before === undefined) return ["the old container carries no configuration label"]
  const out: Array<string> = []
  const show = (v: unknown) => JSON.stringify(v)
  for (const key of Object.keys(b)) {
    const x = a[key]
    const y = b[key]
    if (show(x) === show(y)) continue
    if (typeof x === "object" && x !== null && typeof y === "object" && y !== null && !Array.isArray(y)) {
      for (const sub of Object.keys(y)) {
        const xs = (x as Record<string, unknown>)[sub]
        const ys = (y as Record<string, unknown>)[sub]
        if (show(xs) !== show(ys)) out.push(`${key}.${sub}: ${show(xs)} -> ${show(ys)}`)
      }
    } else {
      out.push(`${key}: ${show(x)} -> ${show(y)}`)
    }
  }
  return out.length > 0 ? out : ["the fingerprint differs"]
}
