/** Helpers for real-engine tests: talk to the engine directly to check what the SDK did. */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, renameSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Docker from "dockerode"

export const docker = new Docker({ socketPath: "/var/run/docker.sock" })

/** Names of hermes-sandbox-* containers that exist now, in any state (those of one executor when given). */
/** `exceptPooled`: leave out a warm pool's sandboxes (its refills run whenever they like, beside the test). */
export const sandboxContainers = async (
  of: { readonly executorId?: string; readonly exceptPooled?: boolean } = {}
): Promise<Array<string>> =>
  (
    await docker.listContainers({
      all: true,
      filters: {
        name: ["hermes-sandbox-"],
        ...(of.executorId === undefined ? {} : { label: [`org.hermes-sandbox.executor=${of.executorId}`] })
      }
    })
  )
    .filter((c) => of.exceptPooled !== true || c.Labels?.["org.hermes-sandbox.pool"] === undefined)
    .map((c) => (c.Names[0] ?? "").replace(/^\//, ""))

export const containerExists = async (name: string): Promise<boolean> => {
  try {
    await docker.getContainer(name).inspect()
    return true
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return false
    throw error
  }
}

export const waitFor = async (check: () => Promise<boolean>, timeoutMs: number, intervalMs = 100): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, intervalMs))
  }
  return check()
}

/** Where copyImages keeps the shared engine's images as `docker save` wrote them, by image ids. */
export const SAVED_IMAGES_PREFIX = "hermes-sandbox-test-images-"

/**
 * Copy images from the shared engine into a private one (`docker load`). The tarball is saved once
 * per set of image ids and kept in the temporary directory for the engines started after it (a
 * save costs the shared engine ~3 CPU-s of a 250 MB image: six private engines load the same one);
 * test/global-setup.ts removes it at the end of the run.
 */
export const copyImages = (images: ReadonlyArray<string>, socketPath: string): void => {
  const ids = execFileSync("docker", ["image", "inspect", "--format", "{{.Id}}", ...images], { encoding: "utf8" })
  const key = createHash("sha256")
    .update(`${images.join(" ")}\n${ids}`)
    .digest("hex")
    .slice(0, 16)
  const tarball = join(tmpdir(), `${SAVED_IMAGES_PREFIX}${key}.tar`)
  if (!existsSync(tarball)) {
    // Files of other workers save the same set side by side: each writes its own, then renames it.
    const partial = `${tarball}.${process.pid}.partial`
    execFileSync("docker", ["save", "-o", partial, ...images], { stdio: "pipe", timeout: 300_000 })
    renameSync(partial, tarball)
  }
  execFileSync("docker", ["-H", `unix://${socketPath}`, "load", "-i", tarball], { stdio: "pipe", timeout: 300_000 })
}
