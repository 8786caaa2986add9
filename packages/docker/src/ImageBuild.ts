/**
 * Builds the hermes-sandbox images by running scripts/build-images.sh (see images/README.md): the
 * language images hermes-sandbox/python:latest, hermes-sandbox/node:latest, hermes-sandbox/bash:latest
 * and, on request (it is about 510 MB), the data-science image hermes-sandbox/python-data:latest.
 *
 * The script and what it builds from (images/: the Dockerfiles, the supervisor's C source) have one
 * source of truth, the repository root. An installed package carries a copy in its assets/ (same
 * layout, copied there when it is packed: packages/docker/scripts/assets.mjs), so images build
 * from node_modules without a checkout.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { ImageNotFound } from "@hermes-sandbox/core/Errors"
import { defaultLanguageRuntimes } from "@hermes-sandbox/core/Language"
import { forEachLine } from "./internal/lines.js"
import { packageRoot } from "./internal/packageRoot.js"

/** The data-science image: Debian's numpy, pandas, matplotlib, scipy, ... (docs/images.md). Optional. */
export const DATA_IMAGE = "hermes-sandbox/python-data:latest"

/**
 * Which images a build makes: "languages" (python, node, bash), "data" ({@link DATA_IMAGE}, always
 * from Debian packages: its base is built offline whatever `base` says) or "all".
 */
export const ImageVariants = ["languages", "data", "all"] as const
export type ImageVariant = (typeof ImageVariants)[number]

export interface BuildImagesOptions {
  /** "languages" (default), "data" or "all". */
  readonly variant?: ImageVariant
  /** "auto" (default): registry bases when reachable, else an offline Debian base built with mmdebstrap. */
  readonly base?: "auto" | "registry" | "offline"
  /** Rebuild the offline base (and re-pull registry bases) even if present. */
  readonly rebuild?: boolean
  /** Every output line of the build (progress, then the summary). */
  readonly onProgress?: (line: string) => void
}

export interface BuildImagesResult {
  /**
   * Which base was used, e.g. "offline (hermes-sandbox/base:bookworm)"; with the data image also
   * its own, e.g. "...; python-data: offline (hermes-sandbox/base-data:bookworm)".
   */
  readonly base: string
  /** The exact image names built, e.g. "hermes-sandbox/python:latest". */
  readonly images: ReadonlyArray<string>
}

/**
 * Where the build script and images/ are found, relative to the package's root, in order: a
 * checkout of the repository (packages/docker -> the root; preferred, so a stale packed copy never
 * shadows the sources), then the package's own assets/.
 */
export const IMAGE_SOURCES_URLS: ReadonlyArray<URL> = [new URL("../../", packageRoot), new URL("assets/", packageRoot)]

const isImageSources = (root: URL): boolean =>
  existsSync(new URL("scripts/build-images.sh", root)) && existsSync(new URL("images/runner/hermes-run.c", root))

/** The directory holding scripts/build-images.sh and images/, or undefined when neither place has them. */
export const imageSources = (): URL | undefined => IMAGE_SOURCES_URLS.find(isImageSources)

/** The build script that {@link buildImages} runs, or undefined when it cannot be found. */
export const buildScript = (): string | undefined => {
  const root = imageSources()
  return root === undefined ? undefined : fileURLToPath(new URL("scripts/build-images.sh", root))
}

/** What a user runs to build the images: the workspace's script in a checkout, the installed bin otherwise. */
export const imageBuildCommand = (variant: ImageVariant = "languages"): string =>
  `${imageSources() === IMAGE_SOURCES_URLS[0] ? "pnpm" : "npx"} hermes-sandbox image build${variant === "languages" ? "" : ` --variant ${variant}`}`

/** The images `hermes-sandbox image build` makes: the three languages' and the data image. */
export const OWN_IMAGES: ReadonlyArray<string> = [
  ...Object.values(defaultLanguageRuntimes).map((r) => r.image),
  DATA_IMAGE
]

/** One of {@link OWN_IMAGES}, named with its tag or without (the engine reads no tag as ":latest"). */
export const isOwnImage = (image: string): boolean =>
  OWN_IMAGES.includes(/:[^/]+$/.test(image) ? image : `${image}:latest`)

/**
 * `image` is not on the engine. One of ours: the command that builds it (the data image is not in
 * the default build). Any other image (`python:3.12-slim`, an image of the user's own): the image
 * build would not make it, so the words say how to get THAT image: pull it, or build it.
 */
export const imageNotFound = (image: string): ImageNotFound => {
  if (isOwnImage(image)) {
    const buildCommand = imageBuildCommand(image.startsWith(DATA_IMAGE.split(":")[0]!) ? "data" : "languages")
    return new ImageNotFound({
      image,
      buildCommand,
      message: `image ${image} is not on the engine; build it with: ${buildCommand}`
    })
  }
  const buildCommand = `docker pull ${image}`
  return new ImageNotFound({
    image,
    buildCommand,
    message:
      `image ${image} is not on the engine, and it is not one of hermes-sandbox's images (hermes-sandbox image build does not make it): ` +
      `pull it (${buildCommand}) or, if it is your own, build it (docker build -t ${image} <its directory>); ` +
      `an image runs as a sandbox only when it is built FROM a hermes-sandbox image (docs/custom-images.md)`
  })
}

export const buildImages = (options: BuildImagesOptions = {}): Promise<BuildImagesResult> =>
  new Promise((resolve, reject) => {
    const script = buildScript()
    if (script === undefined) {
      const looked = IMAGE_SOURCES_URLS.map((u) => fileURLToPath(new URL("scripts/build-images.sh", u))).join(", ")
      reject(new Error(`image build script not found (looked for ${looked}); reinstall @hermes-sandbox/docker`))
      return
    }
    const variant = options.variant ?? "languages"
    const args = [script, "--variant", variant, "--base", options.base ?? "auto"]
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
        reject(new Error(`${imageBuildCommand(variant)} failed: build-images.sh ${how}\n${tail.join("\n")}`))
      }
    })
  })
