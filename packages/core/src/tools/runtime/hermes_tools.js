// hermes_tools' runtime: the client of the supervisor's tool channel. hermes-sandbox generates the
// module for each run (CommonJS, node_modules/hermes_tools/index.js): a comment naming the tools,
// then this file as it is, then one exported function per tool, each calling callTool
// (packages/core/src/tools/stubs.ts).
// biome-ignore lint/suspicious/noRedundantUseStrict: CommonJS (the module's package.json says "type": "commonjs"); Biome takes any .js file for ESM.
"use strict"
const net = require("node:net")

/** A tool call failed: the tool threw (the message is its message), timed out, returned too much, or the run is ending. */
class ToolError extends Error {
  constructor(message) {
    super(message)
    this.name = "ToolError"
  }
}

/** The host refused a call without running the tool: unknown tool, invalid arguments, no calls left in this run's budget, or arguments too large. */
class ToolRefused extends ToolError {
  constructor(message) {
    super(message)
    this.name = "ToolRefused"
  }
}

/**
 * Call the host tool named name with args (one object, sent as JSON; undefined for none) and
 * resolve to its result (parsed JSON). Rejects with ToolError if the tool fails and ToolRefused if
 * the host refuses the call. A call is never retried.
 */
async function callTool(name, args) {
  if (typeof name !== "string") throw new TypeError("callTool: the name must be a string, not " + typeof name)
  if (name.includes("\n")) throw new TypeError("a tool name has no newline: " + JSON.stringify(name))
  if (args === undefined) args = {}
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    throw new TypeError(
      "the arguments of " +
        name +
        " are one object, as in " +
        name +
        "({ ... }), not " +
        (args === null ? "null" : Array.isArray(args) ? "an array" : typeof args)
    )
  }
  const path = process.env.HERMES_TOOLS_SOCKET
  if (!path) throw new ToolError("this run has no tool channel (no tools were given to it)")
  const request = Buffer.concat([Buffer.from(name + "\n", "utf8"), Buffer.from(JSON.stringify(args), "utf8")])
  return decode(await exchange(path, request))
}

/** One call's connection: the request out, everything until EOF back. */
function exchange(path, request) {
  return new Promise((resolve, reject) => {
    const attempt = (delay) => {
      const socket = net.createConnection({ path })
      const chunks = []
      let connected = false
      let failure
      socket.on("connect", () => {
        connected = true
        socket.end(request)
      })
      socket.on("data", (chunk) => chunks.push(chunk))
      // After the connection, an error (the channel stopped reading, or closed) ends the reply:
      // whatever arrived is the answer, nothing at all means the channel closed.
      socket.on("error", (error) => {
        failure = error
      })
      socket.on("close", () => {
        if (connected) return resolve(Buffer.concat(chunks))
        // A full listen backlog (more calls than the channel takes at once): a non-blocking
        // connect fails where Python's blocks. Nothing was sent, so this is no retry of a call.
        if (failure !== undefined && failure.code === "EAGAIN")
          return void setTimeout(attempt, delay, Math.min(delay * 2, 50))
        reject(new ToolError("cannot reach the tool channel: " + (failure !== undefined ? failure.message : "closed")))
      })
    }
    attempt(1)
  })
}

function decode(reply) {
  if (reply.length === 0)
    throw new ToolError("the tool channel closed before the call was answered (the run is ending)")
  const status = reply[0]
  const payload = reply.subarray(1).toString("utf8")
  if (status === 0x30) {
    try {
      return JSON.parse(payload)
    } catch (error) {
      throw new ToolError("the tool channel sent a result that is not JSON: " + error.message)
    }
  }
  if (status === 0x31) throw new ToolError(payload)
  if (status === 0x32) throw new ToolRefused(payload)
  throw new ToolError("the tool channel sent an unknown status " + status)
}

// Each export on its own line, so Node's named-export detection for CommonJS sees every name
// and 'import { web_search } from "hermes_tools"' works from an ES module.
exports.callTool = callTool
exports.ToolError = ToolError
exports.ToolRefused = ToolRefused
