/**
 * Builds the hermes-sandbox language images by running scripts/build-images.sh (see images/README.md):
 * hermes-sandbox/python:latest, hermes-sandbox/node:latest, hermes-sandbox/bash:latest.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { forEachLine } from "./internal/lines.js"

export interface BuildImagesOptions {
  /** "auto" (default): registry bases when reachable, else an offline Debian base built with mmdebstrap. */
  readonly base?: "auto" | "registry" | "offline"
  /** Rebuild the offline base (and re-pull registry bases) even if present. */
  readonly rebuild?: boolean
  /** Every output line of the build (progress, then the summary). */
  readonly onProgress?: (line: string) => void
}

export interface BuildImagesResult {
  /** Which base was used, e.g. "offline (hermes-sandbox/base:bookworm)". */
  readonly base: string
  /** The exact image names built, e.g. "hermes-sandbox/python:latest". */
  readonly images: ReadonlyArray<string>
}

export const BUILD_SCRIPT_URL = new URL("../../../scripts/build-images.sh", import.meta.url)

/** What a user runs, from the repository root, to build the images. */
export const imageBuildCommand = (): string => "pnpm hermes-sandbox image build"

export const buildImages = (options: BuildImagesOptions = {}): Promise<BuildImagesResult> =>
  new Promise((resolve, reject) => {
    const script = fileURLToPath(BUILD_SCRIPT_URL)
    if (!existsSync(script)) {
      reject(new Error(`image build script not found at ${script} (run from a checkout of the repository)`))
      return
    }
    const args = [script, "--base", options.base ?? "auto"]
    if (options.rebuild === true) args.push("--rebuild")
    const child = spawn("bash", args, { stdio: ["ignore", "pipe", "pipe"] })

    let base: string | undefined
    const images: Array<string> = []
    const tail: Array<string> = []
    const onLine = (line: string) => {
      const b = /^\[images\] base: (.+)$/.exec(line)
      if (b) base = b[1]
      const i = /^\[images\] image (\S+)/.exec(line)
      if (i) images.push(i[1]!)
      tail.push(line)
      if (tail.length > 30) tail.shift()
      options.onProgress?.(line)
    }
    forEachLine(child.stdout, onLine)
    forEachLine(child.stderr, onLine)

    child.on("error", (e) => reject(new Error(`cannot run ${script}: ${e.message}`)))
    child.on("close", (code, signal) => {
      if (code === 0 && base !== undefined && images.length > 0) {
        resolve({ base, images })
      } else {
        const how = signal ? `was killed by ${signal}` : `exited with ${code}`
        reject(new Error(`${imageBuildCommand()} failed: build-images.sh ${how}\n${tail.join("\n")}`))
      }
    })
  })
