// The resolve hook of recordLoads.mjs (runs on the loader's thread).
import { appendFileSync } from "node:fs"

let file
export const initialize = (data) => {
  file = data.file
}
export const resolve = async (specifier, context, next) => {
  const resolved = await next(specifier, context)
  appendFileSync(file, `${context.parentURL ?? "<main>"}\t${resolved.url}\n`)
  return resolved
}
