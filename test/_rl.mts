import { createExecutor } from "@hermes-sandbox/docker"
const ex = await createExecutor({ socketPath: "/tmp/rl/docker.sock", watchdog: false, sweepOnStart: false, limitsUnsupported: "warn" })
try { const r = await ex.executeCode({ language: "python", code: "b = bytearray(700 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('allocated 700 MiB under a 512 MiB limit')" }); console.log(JSON.stringify({ exitCode: r.exitCode, oom: r.oomKilled, out: r.stdout })) } catch (e: any) { console.log(e._tag, e.message) }
await ex.close()
