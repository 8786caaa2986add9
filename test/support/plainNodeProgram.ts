import { readFileSync } from "node:fs"

/**
 * One execution through the Promise API as a plain-Node ES module (no TypeScript, no loader): the
 * compiled packages (test/compiled.e2e.test.ts) and the installed ones (test/installed.e2e.test.ts)
 * run it, and it prints {exitCode, stdout, types} as one JSON line. They run the README's
 * plain-JavaScript snippet too.
 */
export const PROMISE_API_PROGRAM = `import { createExecutor } from "@hermes-sandbox/docker"
const executor = await createExecutor({ sweepOnStart: false, watchdog: false })
const types = []
executor.events$.subscribe((e) => types.push(e.type))
const result = await executor.executeCode({ language: "python", code: "print(6*7)" })
await executor.close()
console.log(JSON.stringify({ exitCode: result.exitCode, stdout: result.stdout, types }))
`

/**
 * The README's plain-JavaScript snippet (its one ```js block, under "Use it") as written: what a
 * Node 20 user copies into main.mjs. It prints each event's type, then `result <exitCode> <stdout as JSON>`.
 */
export const README_PLAIN_NODE_PROGRAM: string = (() => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
  const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!)
  if (blocks.length !== 1) throw new Error(`README.md: expected one \`\`\`js block, found ${blocks.length}`)
  return blocks[0]!
})()
