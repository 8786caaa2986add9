/** Docker-style sizes ("512m", "1g", "64k", "1073741824") to bytes. */
const UNITS: Record<string, number> = { "": 1, b: 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3 }

/** Bytes for a size given as a number of bytes or a Docker-style string; undefined when it does not parse. */
export const parseSize = (input: string | number): number | undefined => {
  // A number is a count of bytes: a whole one (the engine and the journal take integers only).
  if (typeof input === "number") return Number.isSafeInteger(input) && input >= 0 ? input : undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]{0,2})\s*$/.exec(input)
  if (!match) return undefined
  const unit = UNITS[(match[2] ?? "").toLowerCase()]
  if (unit === undefined) return undefined
  return Math.floor(Number(match[1]) * unit)
}

export const formatSize = (bytes: number): string => {
  for (const [unit, factor] of [["g", 1024 ** 3], ["m", 1024 ** 2], ["k", 1024]] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`
  }
  return `${bytes}`
}

export const MiB = 1024 * 1024
