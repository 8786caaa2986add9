// An MCP client in a process of its own (plain Node, the SDK from the test package), so a test
// can SIGKILL it mid-call: it spawns the server given in argv[2] (JSON: command, args, env, tool
// arguments; optionally a terminal command run first, which opens the session sandbox), prints
// one JSON line per step on stdout ({serverPid}, {sessionId}, {calling}, then {result}). The
// server's stderr is its own stderr, or (serverStderr: "pipe") a pipe the client holds, as
// clients that keep a server's log do: it breaks when the client dies. It asks for no progress, as many clients do: the
// server then writes nothing to stdout during the run, so only the end of its stdin tells it the
// client is gone (with progress, a failing stdout write would tell it too).
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"

const { command, args, env, terminal, call, serverStderr = "inherit" } = JSON.parse(process.argv[2] ?? "{}")
const say = (line) => process.stdout.write(`${JSON.stringify(line)}\n`)

const transport = new StdioClientTransport({ command, args, env, stderr: serverStderr })
const client = new Client({ name: "e2e-child-client", version: "1.0.0" })
await client.connect(transport)
say({ serverPid: transport.pid })
if (terminal !== undefined) {
  const opened = await client.callTool({ name: "terminal", arguments: { command: terminal } })
  say({ sessionId: opened.structuredContent?.session_id })
}
say({ calling: true })
const result = await client.callTool({ name: "execute_code", arguments: call }, undefined, { timeout: 300_000 })
say({ result })
await client.close()
