/** `hermes-sandbox image build`: builds the language images, or the data image (`--variant`), with progress. */
import { buildImages, type ImageVariant } from "@hermes-sandbox/docker/ImageBuild"

export const imageBuild = async (options: {
  base?: "auto" | "registry" | "offline"
  variant?: ImageVariant
  rebuild?: boolean
}): Promise<number> => {
  const result = await buildImages({
    base: options.base ?? "auto",
    variant: options.variant ?? "languages",
    rebuild: options.rebuild === true,
    onProgress: (line) => process.stderr.write(`${line}\n`)
  })
  process.stdout.write(`base: ${result.base}\n${result.images.map((i) => `built: ${i}`).join("\n")}\n`)
  return 0
}
