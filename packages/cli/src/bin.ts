#!/usr/bin/env node
// Plain Node: the published bin is dist/bin.js (publishConfig). In the workspace, `pnpm
// hermes-sandbox` runs this file through tsx, or `node --conditions=hermes-sandbox-dist
// packages/cli/dist/bin.js` runs the build.
import { enterCallerDirectory } from "./callerDirectory.js"
import { main } from "./main.js"
import { ignoreBrokenPipes } from "./signals.js"

enterCallerDirectory()
ignoreBrokenPipes()
main(process.argv).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`hermes-sandbox: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 125
  }
)
