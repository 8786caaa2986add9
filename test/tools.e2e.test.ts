/**
 * Tool calls from sandboxed code on the real engine (issue 18): Python, JavaScript and bash call
 * host tools over the supervisor's in-sandbox socket, relayed on the sandbox's own stdio. Attack
 * first: forged frames on stdout and stderr, the supervisor's fds and memory, floods of calls and
 * of connections, a program that never ends during a call; then every limit, the journal holding
 * exactly the calls made, aborts and deadlines cancelling handlers, and sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ExecutionResult, ToolContext, Tools } from "@hermes-sandbox/core"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import { createSession } from "@hermes-sandbox/docker"
import { testExecutor } from "./support/executor.js"
import { RUNTIMES } from "./hostile/support.js"

interface Seen {
  readonly type: string
  readonly streamId: string
  readonly data: Record<string, unknown>
}

/** Resolves once `n` calls are being served at once; a call that waits longer than 20 s fails. */
const barrier = (n: number) => {
  let arrived = 0
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  let maxAtOnce = 0
  let now = 0
  return {
    wait: async () => {
      now++
      maxAtOnce = Math.max(maxAtOnce, now)
      if (++arrived >= n) open()
      try {
        await Promise.race([
          opened,
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`only ${arrived} of ${n} calls arrived together`)), 20_000)
          )
        ])
      } finally {
        now--
      }
    },
    maxAtOnce: () => maxAtOnce
  }
}

const addTool = {
  description: "Add two numbers",
  parameters: {
    type: "object",
    properties: { a: { type: "number" }, b: { type: "number" } },
    required: ["a", "b"],
    additionalProperties: false
  },
  handler: ({ a, b }: { a: number; b: number }) => a + b
}

describe.each(RUNTIMES)("tool calls from sandboxed code (real engine, %s)", (runtime) => {
  let executor: SandboxExecutor
  const events: Array<Seen> = []
  const of = (r: ExecutionResult, type?: string) =>
    events.filter((e) => e.streamId === r.executionId && (type === undefined || e.type === type))
  const toolEvents = (r: ExecutionResult) => of(r).filter((e) => e.type.startsWith("ToolCall"))

  beforeAll(async () => {
    executor = await testExecutor({ timeoutMs: 30_000, maxConcurrency: 4, awaitRemoval: true, runtime })
    executor.events$.subscribe((e) => events.push(e as unknown as Seen))
  })
  afterAll(async () => {
    await executor.close()
  })

  it("python: keyword and positional calls, call_tool, a tool error as ToolError with the handler's message, a refusal as ToolRefused", async () => {
    const tools: Tools = {
      add: addTool,
      web_search: {
        description: "Search the web",
        parameters: {
          type: "object",
          properties: { query: { type: "string" }, limit: { type: "integer" } },
          required: ["query"]
        },
        handler: ({ query, limit }: { query: string; limit?: number }) => ({
          data: { web: [{ url: `https://example.invalid/${query}`, title: query, limit: limit ?? null }] }
        })
      },
      fail: {
        description: "Always fails",
        handler: () => {
          throw new Error("the upstream said no")
        }
      }
    }
    const r = await executor.executeCode({
      language: "python",
      tools,
      code: String.raw`
from hermes_tools import add, web_search, call_tool, fail, ToolError, ToolRefused
print(add(a=1, b=2), add(3, 4))
r = web_search(query="x")
print(r["data"]["web"][0]["url"], r["data"]["web"][0]["limit"])
print(call_tool("add", {"a": 10, "b": 5}))
try:
    fail()
except ToolError as e:
    print("error:", e, "| refused:", isinstance(e, ToolRefused))
try:
    add(a="one", b=2)
except ToolRefused as e:
    print("refused:", e)
try:
    call_tool("nope", {})
except ToolRefused as e:
    print("unknown:", e)
`
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines[0]).toBe("3 7")
    expect(lines[1]).toBe("https://example.invalid/x None")
    expect(lines[2]).toBe("15")
    expect(lines[3]).toBe("error: the upstream said no | refused: False")
    expect(lines[4]).toMatch(/^refused: invalid arguments for add: arguments\.a must be number/)
    expect(lines[5]).toMatch(/^unknown: no tool named "nope"/)
    // No host stack trace reaches the code.
    expect(r.stdout).not.toMatch(/\bat .*\.(ts|js):\d+/)
    expect(r.toolCallsMade).toBe(5)
    const seen = toolEvents(r)
    expect(seen.filter((e) => e.type === "ToolCallRequested")).toHaveLength(7)
    expect(seen.filter((e) => e.type === "ToolCallCompleted")).toHaveLength(4)
    expect(seen.filter((e) => e.type === "ToolCallFailed").map((e) => e.data.reason)).toEqual(["error"])
    expect(
      seen
        .filter((e) => e.type === "ToolCallRefused")
        .map((e) => e.data.reason)
        .sort()
    ).toEqual(["invalid-arguments", "unknown-tool"])
    // Arguments are not journaled unless asked for: their size and sha256 are.
    const first = seen.find((e) => e.type === "ToolCallRequested")!
    expect(first.data.arguments).toBeUndefined()
    expect(first.data.argumentsSha256).toMatch(/^[0-9a-f]{64}$/)
    // Every call's events come before the terminal one.
    const all = of(r).map((e) => e.type)
    expect(all.lastIndexOf("ToolCallCompleted")).toBeLessThan(all.indexOf("ContainerExited"))
  })

  it("javascript: require and dynamic import give one async function per tool taking one object; ToolError and ToolRefused", async () => {
    const r = await executor.executeCode({
      language: "javascript",
      tools: {
        add: addTool,
        fail: {
          handler: async () => {
            throw new Error("nope from the host")
          }
        }
      },
      code: String.raw`
const { add, callTool, ToolError, ToolRefused } = require("hermes_tools")
;(async () => {
  console.log(await add({ a: 1, b: 2 }))
  const m = await import("hermes_tools")
  console.log(await m.add({ a: 20, b: 22 }), await callTool("add", { a: 1, b: 1 }))
  try { await m.fail({}) } catch (e) { console.log(e instanceof ToolError, e.name, e.message) }
  try { await add({ a: 1 }) } catch (e) { console.log(e instanceof ToolRefused, e.message.startsWith("invalid arguments for add")) }
})()
`
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim().split("\n")).toEqual(["3", "42 2", "true ToolError nope from the host", "true true"])
    expect(r.toolCallsMade).toBe(4)
  })

  it("bash: hermes-tool NAME JSON prints the result; a tool error exits 1, a refusal 2, with the message on stderr", async () => {
    const r = await executor.executeCode({
      language: "bash",
      tools: { add: addTool, fail: { handler: () => Promise.reject(new Error("bad day")) } },
      code: `hermes-tool add '{"a": 2, "b": 40}'
echo '{"a": 1, "b": 1}' | hermes-tool add -
hermes-tool fail; echo "fail=$?"
hermes-tool nope '{}'; echo "nope=$?"
x=$(hermes-tool add '{"a": 5, "b": 5}'); echo "x=$x"`
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim().split("\n")).toEqual(["42", "2", "fail=1", "nope=2", "x=10"])
    expect(r.stderr).toContain("bad day")
    expect(r.stderr).toContain('no tool named "nope"')
  })

  it("8 concurrent calls from Python threads and from Promise.all are served at once", async () => {
    for (const [language, code] of [
      [
        "python",
        "import threading\nfrom hermes_tools import meet\nout = []\nts = [threading.Thread(target=lambda i=i: out.append(meet(i=i))) for i in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))"
      ],
      [
        "javascript",
        "const { meet } = require('hermes_tools')\nPromise.all([0,1,2,3,4,5,6,7].map((i) => meet({ i }))).then((r) => console.log(JSON.stringify(r.sort((a, b) => a - b))))"
      ]
    ] as const) {
      const b = barrier(8)
      const r = await executor.executeCode({
        language,
        code,
        tools: { meet: { handler: async ({ i }: { i: number }) => (await b.wait(), i) } },
        toolLimits: { maxInFlight: 8 }
      })
      expect(r.exitCode, r.stderr).toBe(0)
      expect(r.stdout.replaceAll(" ", "").trim()).toBe("[0,1,2,3,4,5,6,7]")
      expect(b.maxAtOnce()).toBe(8)
    }
  })

  it("maxInFlight: more calls than it allows wait inside the sandbox; no more than that are ever served at once", async () => {
    let now = 0
    let max = 0
    const r = await executor.executeCode({
      language: "python",
      code: "import threading\nfrom hermes_tools import slow\nts = [threading.Thread(target=slow) for i in range(6)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint('done')",
      tools: {
        slow: {
          handler: async () => {
            now++
            max = Math.max(max, now)
            await new Promise((r) => setTimeout(r, 300))
            now--
            return null
          }
        }
      },
      toolLimits: { maxInFlight: 2 }
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe("done")
    expect(max).toBe(2)
    expect(r.toolCallsMade).toBe(6)
  })

  it("the budget: past maxCalls every call is refused (refusals do not count) and the code sees it", async () => {
    const r = await executor.executeCode({
      language: "python",
      code: String.raw`
from hermes_tools import add, ToolRefused
for i in range(5):
    try:
        print(add(a=i, b=0))
    except ToolRefused as e:
        print("refused", e)
try:
    add(a="x", b=0)
except ToolRefused as e:
    print("invalid")
`,
      tools: { add: addTool },
      toolLimits: { maxCalls: 3 }
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines.slice(0, 3)).toEqual(["0", "1", "2"])
    expect(lines[3]).toMatch(/^refused tool call limit reached \(3 calls per execution\)/)
    expect(lines[4]).toMatch(/^refused tool call limit reached/)
    expect(lines[5]).toBe("invalid")
    expect(r.toolCallsMade).toBe(3)
    const refused = toolEvents(r)
      .filter((e) => e.type === "ToolCallRefused")
      .map((e) => e.data.reason)
    expect(refused).toEqual(["budget-exhausted", "budget-exhausted", "invalid-arguments"])
  })

  it("a handler that hangs past callTimeoutMs: the code gets a tool error, the handler's signal is aborted, the run goes on", async () => {
    let aborted: string | undefined
    const r = await executor.executeCode({
      language: "python",
      code: "from hermes_tools import hang, add, ToolError\ntry:\n    hang()\nexcept ToolError as e:\n    print('timeout:', e)\nprint(add(a=1, b=1))",
      tools: {
        add: addTool,
        hang: {
          handler: (_: unknown, { signal }: ToolContext) =>
            new Promise((resolve) =>
              signal.addEventListener("abort", () => {
                aborted = String(signal.reason)
                resolve(null)
              })
            )
        }
      },
      toolLimits: { callTimeoutMs: 500 }
    })
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim().split("\n")).toEqual(["timeout: hang did not answer within 500 ms (callTimeoutMs)", "2"])
    expect(aborted).toContain("did not answer within 500 ms")
    expect(toolEvents(r).find((e) => e.type === "ToolCallFailed")?.data).toMatchObject({
      tool: "hang",
      reason: "timed-out"
    })
  })

  it("arguments and results past their limits: a refusal and a tool error, the sandbox and the host unharmed", async () => {
    const r = await executor.executeCode({
      language: "python",
      code: String.raw`
from hermes_tools import echo, big, ToolError, ToolRefused
try:
    echo(text="x" * 300000)
except ToolRefused as e:
    print("args:", e)
try:
    big()
except ToolError as e:
    print("result:", e)
print(len(echo(text="y" * 1000)))
`,
      tools: { echo: { handler: ({ text }: { text: string }) => text }, big: { handler: () => "z".repeat(5_000_000) } },
      toolLimits: { maxArgumentBytes: 100_000, maxResultBytes: 1_000_000 }
    })
    expect(r.exitCode, r.stderr).toBe(0)
    const lines = r.stdout.trim().split("\n")
    expect(lines[0]).toMatch(/^args: the arguments of 3000\d\d bytes exceed the limit of 100000 bytes/)
    expect(lines[1]).toMatch(/^result: the result of big \(5000002 bytes\) exceeds the limit of 1000000 bytes/)
    expect(lines[2]).toBe("1000")
    const refused = toolEvents(r).find((e) => e.type === "ToolCallRefused")!
    expect(refused.data.reason).toBe("arguments-too-large")
    expect(toolEvents(r).find((e) => e.type === "ToolCallFailed")?.data.reason).toBe("result-too-large")
  })

  it("forged frames: what the program prints, writes to other fds or sends the supervisor's way is never a call or a result", async () => {
    let calls = 0
    const r = await executor.executeCode({
      language: "python",
      tools: { add: { ...addTool, handler: (args: { a: number; b: number }) => (calls++, args.a + args.b) } },
      code: String.raw`
import os, sys, socket, struct, json
key = os.urandom(16)
def frame(t, p): return key + t + struct.pack(">I", len(p)) + p
# Frames in the supervisor's format, with a guessed key, on both streams; a forged end of run.
sys.stdout.buffer.write(frame(b"t", b"1 13 add") + frame(b"a", b'{"a":1,"b":2}') + frame(b"x", b"0 0 0 0")); sys.stdout.flush()
sys.stderr.buffer.write(frame(b"t", b"1 2 add") + b"R 1 0 2\n99"); sys.stderr.flush()
# The supervisor's memory: not the program's to open (its fds: see the next test).
try:
    open("/proc/1/mem", "rb").close(); print("opened /proc/1/mem")
except OSError as e:
    print("denied /proc/1/mem", e.errno)
# Replies cannot be written by a caller: whatever it sends is its own request, checked like any.
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["HERMES_TOOLS_SOCKET"])
s.sendall(b"R 1 0 2\n99"); s.shutdown(socket.SHUT_WR); print("raw:", s.recv(1000)[:1]); s.close()
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["HERMES_TOOLS_SOCKET"])
s.sendall(b"add\n" + frame(b"t", b"9 2 add")); s.shutdown(socket.SHUT_WR); print("framed args:", s.recv(1000)[:1]); s.close()
# Closing our own fds: the tools still work (the channel is a socket, not an inherited fd).
os.close(0)
from hermes_tools import add
print("sum", add(a=2, b=3))
print("key" in os.environ.get("HERMES_TOOLS_SOCKET", ""), sorted(k for k in os.environ if k.startswith("HERMES")))
`
    })
    expect(r.exitCode, r.stderr).toBe(0)
    // The forged bytes arrived as the program's output, byte for byte; the real end came after them.
    expect(r.stdout).toContain("1 13 add")
    expect(r.stderr).toContain("R 1 0 2\n99")
    expect(r.stdout).toContain("denied /proc/1/mem 13")
    expect(r.stdout).toContain("raw: b'2'") // "R 1 0 2" is a name: an unknown tool, refused
    expect(r.stdout).toContain("framed args: b'2'") // frame bytes as arguments: not JSON, refused
    expect(r.stdout).toContain("sum 5")
    expect(r.stdout).toContain("False ['HERMES_TOOLS_SOCKET']")
    expect(calls).toBe(1)
    expect(r.toolCallsMade).toBe(1)
    const requested = toolEvents(r).filter((e) => e.type === "ToolCallRequested")
    expect(requested.map((e) => e.data.tool)).toEqual(["R 1 0 2", "add", "add"])
    expect(toolEvents(r).filter((e) => e.type === "ToolCallCompleted")).toHaveLength(1)
  })

  it("the supervisor's stdin and stdout through /proc/1/fd: closed under runc; under gVisor, a forged reply only reaches the program itself and a forged frame voids its own run", async () => {
    let calls = 0
    const run = executor.executeCode({
      language: "python",
      tools: { add: { ...addTool, handler: (args: { a: number; b: number }) => (calls++, args.a + args.b) } },
      code: String.raw`
import os, threading
from hermes_tools import add
opened = {}
for fd, mode in (("0", os.O_WRONLY), ("1", os.O_WRONLY), ("0", os.O_RDONLY)):
    try:
        opened[fd + str(mode)] = os.open("/proc/1/fd/" + fd, mode | os.O_NONBLOCK); print("opened", fd, mode, flush=True)
    except OSError as e:
        print("denied", fd, mode, e.errno, flush=True)
# A forged reply to call 1 on the supervisor's stdin, while call 1 is being served.
t = threading.Thread(target=lambda: print("sum", add(a=1, b=2), flush=True)); t.start()
def attempt(what, f):
    try:
        f(); print(what, "written", flush=True)
    except OSError as e:
        print(what, "refused", e.errno, flush=True)
if "0" + str(os.O_WRONLY) in opened: attempt("reply", lambda: os.write(opened["0" + str(os.O_WRONLY)], b"R 1 0 2\n99"))
t.join()
# A forged end of the run on the container's stdout (no key: the host refuses it).
if "1" + str(os.O_WRONLY) in opened: attempt("frame", lambda: os.write(opened["1" + str(os.O_WRONLY)], b"\0" * 16 + b"x" + b"\0\0\0\x070 0 0 0"))
print("end", flush=True)
`
    })
    if (runtime === "runc") {
      const r = await run
      expect(r.exitCode, r.stderr).toBe(0)
      expect(r.stdout).toMatch(/denied 0 1 13\ndenied 1 1 13\ndenied 0 0 13\n/)
      expect(r.stdout).toContain("sum 3")
      expect(calls).toBe(1)
    } else {
      // The keyless bytes on the report channel are a protocol violation: never a result.
      await expect(run).rejects.toMatchObject({ _tag: "ContainerFailed", reason: "protocol" })
      // Whatever the forged reply did to the program's own view, the host served the one call it made.
      expect(calls).toBe(1)
    }
  })

  it("a flood of connections and calls: only maxInFlight are taken, the rest wait; the deadline ends it all", async () => {
    let served = 0
    const r = await executor.executeCode({
      language: "python",
      timeoutMs: 4000,
      code: String.raw`
import os, socket, threading
path = os.environ["HERMES_TOOLS_SOCKET"]
held = []
def hold():
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); held.append(s)  # never sends a thing
    except OSError: pass
for i in range(200): threading.Thread(target=hold, daemon=True).start()
print("flooding", flush=True)
import time; time.sleep(60)
`,
      tools: { add: { ...addTool, handler: (a: { a: number; b: number }) => (served++, a.a + a.b) } },
      toolLimits: { maxInFlight: 4 }
    })
    expect(r.timedOut).toBe(true)
    expect(r.stdout).toContain("flooding")
    expect(served).toBe(0)
    expect(toolEvents(r)).toHaveLength(0)
  })

  it("the deadline during a call: the run times out on time, the handler's signal is aborted, ToolCallFailed (cancelled) precedes the terminal event", async () => {
    let aborted = false
    const t0 = Date.now()
    const r = await executor.executeCode({
      language: "python",
      timeoutMs: 3000,
      code: "from hermes_tools import forever\nprint('calling', flush=True)\nforever()",
      tools: {
        forever: {
          handler: (_: unknown, { signal }: ToolContext) =>
            new Promise(() => signal.addEventListener("abort", () => (aborted = true)))
        }
      }
    })
    expect(r.timedOut).toBe(true)
    expect(Date.now() - t0).toBeLessThan(20_000)
    expect(aborted).toBe(true)
    const types = of(r).map((e) => e.type)
    expect(types.indexOf("ToolCallFailed")).toBeGreaterThan(types.indexOf("ToolCallRequested"))
    expect(types.indexOf("ToolCallFailed")).toBeLessThan(types.indexOf("ExecutionTimedOut"))
    expect(of(r, "ToolCallFailed")[0]?.data.reason).toBe("cancelled")
  })

  it("an abort during a call cancels the handler and removes the container", async () => {
    let aborted = false
    let started!: () => void
    const inCall = new Promise<void>((resolve) => (started = resolve))
    const controller = new AbortController()
    let executionId = ""
    const run = executor.executeCode(
      {
        language: "python",
        code: "from hermes_tools import forever\nforever()",
        tools: {
          forever: {
            handler: (_: unknown, { signal }: ToolContext) => (
              started(), new Promise(() => signal.addEventListener("abort", () => (aborted = true)))
            )
          }
        }
      },
      { signal: controller.signal, onExecutionId: (id) => (executionId = id) }
    )
    await inCall
    controller.abort("enough")
    await expect(run).rejects.toMatchObject({ _tag: "ExecutionAborted" })
    expect(aborted).toBe(true)
    const types = events.filter((e) => e.streamId === executionId).map((e) => e.type)
    expect(types.indexOf("ToolCallFailed")).toBeLessThan(types.indexOf("ExecutionInterrupted"))
    expect(types).toContain("ContainerDestroyed")
  })

  it("a tool channel that cannot start fails the run loudly before the program runs (never a tool-less run)", async () => {
    // A code directory whose socket path is longer than a unix socket's: the channel cannot be bound.
    let called = false
    let executionId = ""
    const run = executor.executeCode(
      {
        language: "python",
        code: "open('/workspace/ran', 'w')",
        env: { HERMES_CODE_DIR: `/tmp/${"d".repeat(120)}` },
        tools: { add: { ...addTool, handler: () => (called = true) } }
      },
      { onExecutionId: (id) => (executionId = id) }
    )
    await expect(run).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "setup",
      message: expect.stringContaining("tool socket")
    })
    expect(called).toBe(false)
    const types = events.filter((e) => e.streamId === executionId).map((e) => e.type)
    expect(types).toContain("ExecutionFailed")
    expect(types.filter((t) => t.startsWith("ToolCall"))).toEqual([])
  })

  it("callers that go away mid-call (a killed process) free their slots: later calls are still served", async () => {
    let aborted = 0
    const r = await executor.executeCode({
      language: "bash",
      code: `timeout 1 hermes-tool slow; timeout 1 hermes-tool slow; hermes-tool add '{"a": 1, "b": 1}'`,
      tools: {
        add: addTool,
        slow: {
          handler: (_: unknown, { signal }: ToolContext) =>
            new Promise((resolve) => signal.addEventListener("abort", () => (aborted++, resolve(null))))
        }
      },
      toolLimits: { maxInFlight: 2, callTimeoutMs: 4000 },
      timeoutMs: 25_000
    })
    expect(r.timedOut).toBe(false)
    expect(r.stdout.trim()).toBe("2")
    expect(aborted).toBe(2)
    // runc: the supervisor sees the hang-up at once ('q'): the handlers are cancelled and the slots freed.
    // gVisor reports no POLLHUP for a closed unix socket: a slot is freed when its handler ends, here
    // the first at its per-call timeout; the second is still running when the run ends (settled then).
    const reasons = toolEvents(r)
      .filter((e) => e.type === "ToolCallFailed")
      .map((e) => e.data.reason)
    expect(reasons).toEqual(runtime === "runc" ? ["cancelled", "cancelled"] : ["timed-out", "cancelled"])
  })

  it("a flood of refused calls ends the run with ContainerFailed (tool-calls) instead of filling the journal", async () => {
    let executionId = ""
    const run = executor.executeCode(
      {
        language: "python",
        code: "from hermes_tools import call_tool, ToolRefused\nwhile True:\n    try:\n        call_tool('nope', {})\n    except ToolRefused:\n        pass",
        tools: { add: addTool },
        // The cap, not the speed, is under test: on a starved machine under gVisor the 1,000 calls
        // took longer than the executor's 30 s (ci43); a few seconds on a quiet one.
        timeoutMs: 100_000
      },
      { onExecutionId: (id) => (executionId = id) }
    )
    await expect(run).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "tool-calls",
      message: expect.stringContaining("refused tool calls (at most 1000 per run)")
    })
    const mine = events.filter((e) => e.streamId === executionId)
    const refused = mine.filter((e) => e.type === "ToolCallRefused").length
    expect(refused).toBeGreaterThanOrEqual(1000)
    expect(refused).toBeLessThan(1100)
    expect(mine.filter((e) => e.type === "ToolCallRequested").length).toBe(refused)
    expect(mine.map((e) => e.type)).toContain("ExecutionFailed")
  }, 150_000)

  it("the run's journal budget: recorded arguments past maxJournalBytes end the run with ContainerFailed (journal-budget), and the journal says so (hostile review 2, #1)", async () => {
    let executionId = ""
    const run = executor.executeCode(
      {
        language: "python",
        // 200 KB of arguments per call, recorded: the 2 MiB budget holds about nine.
        code: "from hermes_tools import call_tool\npad = 'x' * 200000\nfor i in range(40):\n    call_tool('echo', {'pad': pad})",
        tools: { echo: { parameters: { type: "object" }, handler: () => "ok" } },
        toolLimits: { maxCalls: 100, maxJournalBytes: 2 * 1024 * 1024 },
        recordToolArguments: true
      },
      { onExecutionId: (id) => (executionId = id) }
    )
    await expect(run).rejects.toMatchObject({
      _tag: "ContainerFailed",
      reason: "journal-budget",
      message: expect.stringContaining("than a run may (10000 events, 2097152 bytes")
    })
    const mine = events.filter((e) => e.streamId === executionId)
    const requested = mine.filter((e) => e.type === "ToolCallRequested")
    expect(requested.length).toBeGreaterThan(3)
    expect(requested.length).toBeLessThan(11)
    const toolBytes = mine
      .filter((e) => e.type.startsWith("ToolCall"))
      .reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0)
    expect(toolBytes).toBeLessThanOrEqual(2 * 1024 * 1024)
    const failed = mine.find((e) => e.type === "ExecutionFailed")
    expect(JSON.stringify(failed?.data)).toContain("journal-budget")
  })

  it("the host's bound on arguments in flight over all runs (64 MiB): with four calls of 15 MB held, a fifth is refused host-busy and its bytes are not kept; the four are then served (hostile review 2, #3)", async () => {
    // The handlers hold their calls until the refusal is seen, so the fifth arrives with 60 MB held.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const fallback = setTimeout(() => release(), 45_000) // no refusal: the assertions below fail
    let entered = 0
    const seen = executor.events$.subscribe((e) => {
      const event = e as unknown as Seen
      if (event.type === "ToolCallRefused" && event.data.reason === "host-busy") release()
    })
    try {
      const r = await executor.executeCode({
        language: "python",
        code: String.raw`
import threading
from hermes_tools import hold, ToolRefused
pad = "x" * 15000000
out = []
def call():
    try:
        out.append("served " + hold(pad=pad))
    except ToolRefused as e:
        out.append("refused " + str(e))
threads = [threading.Thread(target=call) for _ in range(5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for line in sorted(out):
    print(line)
`,
        tools: { hold: { parameters: { type: "object" }, handler: async () => (entered++, await released, "ok") } },
        toolLimits: { maxArgumentBytes: 16 * 1024 * 1024, maxInFlight: 8, callTimeoutMs: 60_000 },
        timeoutMs: 60_000
      })
      expect(r.exitCode, r.stderr).toBe(0)
      const lines = r.stdout.trim().split("\n")
      expect(lines.slice(0, 1)).toEqual([
        expect.stringMatching(
          /^refused the host holds \d+ bytes of tool arguments in flight over all its runs \(at most 67108864\); this call of 150000\d\d bytes was not taken/
        )
      ])
      expect(lines.slice(1)).toEqual(["served ok", "served ok", "served ok", "served ok"])
      expect(entered).toBe(4)
      expect(
        toolEvents(r)
          .filter((e) => e.type === "ToolCallRefused")
          .map((e) => e.data.reason)
      ).toEqual(["host-busy"])
    } finally {
      clearTimeout(fallback)
      seen.unsubscribe()
    }
  }, 120_000)

  it("recordToolArguments: the arguments are journaled when the user opts in", async () => {
    const r = await executor.executeCode({
      language: "bash",
      code: `hermes-tool add '{"a": 1, "b": 2}'`,
      tools: { add: addTool },
      recordToolArguments: true
    })
    expect(r.stdout.trim()).toBe("3")
    expect(of(r, "ToolCallRequested")[0]?.data.arguments).toEqual({ a: 1, b: 2 })
  })
})

describe("tool calls: executor defaults, invalid tools, sessions (real engine)", () => {
  it("executor-level tools serve every run; a request's own tools replace them; {} gives none", async () => {
    const executor = await testExecutor({ timeoutMs: 30_000, awaitRemoval: true, tools: { add: addTool } })
    try {
      const a = await executor.executeCode({
        language: "python",
        code: "from hermes_tools import add\nprint(add(a=2, b=2))"
      })
      expect(a.stdout.trim()).toBe("4")
      const b = await executor.executeCode({
        language: "python",
        code: "import hermes_tools\nprint(hasattr(hermes_tools, 'add'), hasattr(hermes_tools, 'mul'))",
        tools: { mul: { handler: () => 0 } }
      })
      expect(b.stdout.trim()).toBe("False True")
      const c = await executor.executeCode({
        language: "python",
        code: "import os\nprint(os.environ.get('HERMES_TOOLS_SOCKET'))\ntry:\n    import hermes_tools\nexcept ImportError:\n    print('no module')",
        tools: {}
      })
      expect(c.stdout.trim().split("\n")).toEqual(["None", "no module"])
      expect(c.toolCallsMade).toBeUndefined()
    } finally {
      await executor.close()
    }
  })

  it("invalid tools are refused before any sandbox exists, naming the tool", async () => {
    const executor = await testExecutor({ timeoutMs: 30_000 })
    try {
      await expect(
        executor.executeCode({ language: "python", code: "1", tools: { "bad-name": addTool } })
      ).rejects.toMatchObject({ _tag: "InvalidRequest", field: "tools.bad-name" })
      await expect(
        executor.executeCode({ language: "python", code: "1", tools: { class: addTool } })
      ).rejects.toMatchObject({ _tag: "InvalidRequest", field: "tools.class" })
      await expect(
        executor.executeCode({ language: "python", code: "1", tools: { f: { handler: 42 } as never } })
      ).rejects.toMatchObject({ _tag: "InvalidRequest", field: "tools.f" })
      await expect(
        executor.executeCode({
          language: "python",
          code: "1",
          tools: { f: { handler: () => 1, parameters: { type: "nonsense" } } }
        })
      ).rejects.toMatchObject({ _tag: "InvalidRequest", field: "tools.f.parameters" })
      await expect(
        executor.executeCode({
          language: "python",
          code: "1",
          tools: { add: addTool },
          toolLimits: { maxInFlight: 1000 }
        })
      ).rejects.toMatchObject({ _tag: "InvalidRequest" })
    } finally {
      await executor.close()
    }
  })

  it("session.runCode: tools in a session call, journaled in the call's stream; the next call without tools has none", async () => {
    const session = await createSession({ timeoutMs: 30_000 })
    try {
      const r = await session.runCode({
        language: "python",
        code: "from hermes_tools import add\nprint(add(a=20, b=22))",
        tools: { add: addTool }
      })
      expect(r.exitCode, r.stderr).toBe(0)
      expect(r.stdout.trim()).toBe("42")
      expect(r.toolCallsMade).toBe(1)
      const b = await session.runCode({
        language: "bash",
        code: "echo ${HERMES_TOOLS_SOCKET:-none}; hermes-tool add '{}'; echo rc=$?"
      })
      expect(b.stdout.trim().split("\n")).toEqual(["none", "rc=3"])
      expect(b.stderr).toContain("this run has no tool channel")
    } finally {
      await session.close()
    }
  })
})
