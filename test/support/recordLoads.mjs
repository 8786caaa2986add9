// `node --import ./test/support/recordLoads.mjs …`: appends one line per module the process loads to
// the file named by HERMES_RECORD_LOADS, "<importer>\t<loaded>" (file URLs, or node:… builtins):
// ES modules through a resolve hook (node:module register; the hooks run on their own thread), and
// CommonJS require() calls through Module._resolveFilename on the main thread. For
// test/runtime-path.engine.test.ts (what a built package's runtime path loads) and bench analysis.
import { appendFileSync } from "node:fs"
import Module, { register } from "node:module"
import { pathToFileURL } from "node:url"

const file = process.env.HERMES_RECORD_LOADS
if (file !== undefined && file !== "") {
  register("./recordLoadsHooks.mjs", import.meta.url, { data: { file } })
  const resolveFilename = Module._resolveFilename
  Module._resolveFilename = function (request, parent, ...rest) {
    const resolved = resolveFilename.call(this, request, parent, ...rest)
    const loaded = resolved.startsWith("/") ? pathToFileURL(resolved).href : `node:${resolved.replace(/^node:/, "")}`
    const importer = parent?.filename ? pathToFileURL(parent.filename).href : "<main>"
    appendFileSync(file, `${importer}\t${loaded}\n`)
    return resolved
  }
}
