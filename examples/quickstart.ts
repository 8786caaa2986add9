/**
 * The main job: run a few snippets, each in its own single-use hardened
 * container, and print every lifecycle event as it is recorded.
 *
 *   npx tsx examples/quickstart.ts        (or: bash scripts/demo.sh on a fresh machine)
 */
import { createExecutor } from "@hermes-sandbox/docker"
import { formatEvent } from "@hermes-sandbox/cli/formatEvent"

await using executor = await createExecutor({ timeoutMs: 10_000 })
const subscription = executor.events$.subscribe((event) => console.log(`  event  ${formatEvent(event)}`))

const snippets = [
  { title: "python", request: { language: "python", code: "print(6*7)" } },
  { title: "javascript", request: { language: "javascript", code: "console.log([1, 2, 3].map((x) => x * x))" } },
  {
    title: "bash with stdin",
    request: { language: "bash", code: 'read who; echo "hello, $who"; exit 3', stdin: "sandbox\n" }
  },
  {
    title: "a busy loop past its 2 s timeout",
    request: { language: "python", code: "while True: pass", timeoutMs: 2_000 }
  }
] as const

for (const { title, request } of snippets) {
  console.log(`\n▶ ${title}`)
  const r = await executor.executeCode(request)
  console.log(`  result exit=${r.exitCode} timedOut=${r.timedOut} ${r.durationMs} ms in ${r.containerName}`)
  if (r.stdout) console.log(`  stdout ${JSON.stringify(r.stdout)}`)
}
// close() returns once every container is removed, so the last ContainerDestroyed is printed too.
await executor.close()
subscription.unsubscribe()
