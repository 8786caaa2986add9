/**
 * What `hermes-sandbox config show` prints: one line per normalized field, its value and where it
 * came from. Forwarded values are never printed (only their names and origin), nor the values of
 * docker_env variables whose names look secret.
 */
import { Schemas } from "@hermes-sandbox/core"
import type { HermesConfigField, HermesFieldSource, HermesTerminalConfig, LoadedHermesConfig } from "../HermesConfig.js"
import { HERMES_CONFIG_FIELDS, looksSecret } from "./hermesConfigKeys.js"
import { displayPath } from "./hermesOrigin.js"

/** "1g (1073741824 bytes)": the size as it could be written, and the exact count. */
const formatBytes = (bytes: number): string => {
  const size = Schemas.formatSize(bytes)
  return size === String(bytes) ? `${bytes} bytes` : `${size} (${bytes} bytes)`
}

const formatValue = (values: HermesTerminalConfig, field: HermesConfigField): string => {
  switch (field) {
    case "backend":
      return values.backend
    case "image":
      return values.image ?? "(executor default)"
    case "volumes":
      return values.volumes.length === 0
        ? "(none)"
        : values.volumes.map((volume) => `${volume.hostPath} -> ${volume.containerPath} (${volume.mode})`).join(", ")
    case "forwardEnv":
      return values.forwardEnv.length === 0
        ? "(none)"
        : values.forwardEnv.map((forwarded) => `${forwarded.name}=<redacted, from ${forwarded.from}>`).join(", ")
    case "env": {
      const entries = Object.entries(values.env)
      return entries.length === 0
        ? "(none)"
        : entries
            .map(([name, value]) => `${name}=${looksSecret(name) ? "<redacted>" : JSON.stringify(value)}`)
            .join(", ")
    }
    case "cpus":
      return values.cpus === undefined ? "(executor default)" : String(values.cpus)
    case "memoryBytes":
      return values.memoryBytes === undefined ? "(executor default)" : formatBytes(values.memoryBytes)
    case "diskBytes":
      return values.diskBytes === undefined ? "(no limit)" : formatBytes(values.diskBytes)
    case "scope":
      return values.scope
    case "lifetimeSeconds":
      return values.lifetimeSeconds === undefined ? "(no idle reaper)" : `${values.lifetimeSeconds}s`
    case "timeoutMs":
      return values.timeoutMs === undefined ? "(executor default)" : `${values.timeoutMs}ms`
    case "cwd":
      return values.cwd
    case "network":
      return values.network ? "on" : "off"
  }
}

const formatSource = (source: HermesFieldSource): string => {
  switch (source.source) {
    case "default":
      return "default"
    case "file":
      return `${source.where ?? "file"} (terminal.${source.key ?? "?"})`
    case "env":
      return `env ${source.where ?? ""}`
    case "option":
      return `option ${source.where ?? ""}`
  }
}

/** What `hermes-sandbox config show` prints: one line per field with its value and origin; secrets redacted. */
export const formatConfig = (loaded: LoadedHermesConfig): string => {
  const rows = HERMES_CONFIG_FIELDS.map(
    (field) => [field, formatValue(loaded.values, field), formatSource(loaded.sources[field])] as const
  )
  const nameWidth = Math.max(...rows.map(([field]) => field.length))
  const valueWidth = Math.min(48, Math.max(...rows.map(([, value]) => value.length)))
  const lines = [
    `# Hermes terminal config: ${displayPath(loaded.path)}${loaded.fileFound ? "" : " (not found; defaults)"}`
  ]
  for (const [field, value, source] of rows)
    lines.push(`${field.padEnd(nameWidth)}  ${value.padEnd(valueWidth)}  # ${source}`)
  for (const note of loaded.notes) lines.push(`# note: ${note}`)
  for (const warning of loaded.warnings) lines.push(`# warning: ${warning}`)
  return lines.join("\n")
}
