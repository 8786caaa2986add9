/** Helpers for real-engine tests: talk to the engine directly to check what the SDK did. */
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
