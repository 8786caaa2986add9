/**
 * One execution through the Promise API as a plain-Node ES module (no TypeScript, no loader): the
 * compiled packages (test/compiled.e2e.test.ts) and the installed ones (test/installed.e2e.test.ts)
 * run it, and it prints {exitCode, stdout, types} as one JSON line.
 */
export const PROMISE_API_PROGRAM = `import { createExecutor } from "@hermes-sandbox/docker"
const executor = await createExecutor({ sweepOnStart: false, watchdog: false })
const types = []
executor.events$.subscribe((e) => types.push(e.type))
const result = await executor.executeCode({ language: "python", code: "print(6*7)" })
await executor.close()
console.log(JSON.stringify({ exitCode: result.exitCode, stdout: result.stdout, types }))
`
