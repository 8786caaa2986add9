/** "5s", "500ms", "2m", "1h", or a bare number of seconds, to milliseconds. */
export const parseDuration = (input: string): number | undefined => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(input)
  if (!match) return undefined
  const value = Number(match[1])
  const unit = match[2] ?? "s"
  const factor = unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000
  return Math.round(value * factor)
}
