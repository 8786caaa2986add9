#!/usr/bin/env -S npx tsx
import { main } from "./main.js"

main(process.argv).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`hermes-sandbox: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 125
  }
)
