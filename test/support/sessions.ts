/** Sessions a test opened, removed after each test whatever happened to them. */
import type { SandboxSession } from "@hermes-sandbox/docker"
import { docker } from "./docker.js"

export const sessionTracker = () => {
  const created = new Set<string>()
  return {
    track: <S extends SandboxSession>(s: S): S => {
      created.add(s.containerName)
      return s
    },
    /** A sandbox known only by name (made by another process). */
    trackName: (containerName: string) => void created.add(containerName),
    removeTracked: async () => {
      await Promise.all(
        [...created].map((name) =>
          docker
            .getContainer(name)
            .remove({ force: true })
            .catch(() => {})
        )
      )
      created.clear()
    }
  }
}
