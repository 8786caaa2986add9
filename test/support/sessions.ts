/** Sessions a test opened, removed after each test whatever happened to them. */
import type { ChildProcess } from "node:child_process"
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

/** The first line a child process prints on stdout (a fixture's report), or a rejection if it exits first. */
export const firstLine = (child: ChildProcess): Promise<string> =>
  new Promise<string>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString()
      if (out.includes("\n")) resolve(out.split("\n")[0]!)
    })
    child.on("exit", () => reject(new Error(`child exited early: ${out}`)))
  })
