/** `hermes-sandbox config show`: the effective Hermes `terminal:` configuration and where each value came from. */
import { formatConfig, loadHermesConfigAsync } from "@hermes-sandbox/docker/HermesConfig"

export const config = async (options: { config?: string; envFile?: string }): Promise<number> => {
  const loaded = await loadHermesConfigAsync({
    ...(options.config === undefined ? {} : { path: options.config }),
    ...(options.envFile === undefined ? {} : { envFile: options.envFile })
  })
  // Warnings once, on standard error: the report on standard output leaves them out.
  process.stdout.write(`${formatConfig({ ...loaded, warnings: [] })}\n`)
  for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`)
  return 0
}
