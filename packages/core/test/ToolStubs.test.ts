/**
 * The generated hermes_tools modules, run by the real python3 and node against a unix-socket
 * server here that plays the supervisor's side of the tool protocol (images/runner/hermes-run.c).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Fiber } from "effect"
import { execFileSync, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { RESERVED_TOOL_NAMES, type ToolSpec, toolModules } from "../src/tools/stubs.js"
import { TOOL_NAME } from "@hermes-sandbox/core/Tools"

const NO_CHANNEL = "this run has no tool channel (no tools were given to it)"
const CLOSED = "the tool channel closed before the call was answered (the run is ending)"

const webSearch: ToolSpec = {
  name: "web_search",
  description: "Search the web.",
  parameters: {
    type: "object",
    properties: { limit: { type: "integer", default: 5 }, query: { type: "string", description: "what to look for" } },
    required: ["query"]
  }
}
const add: ToolSpec = {
  name: "add",
  description: "Add two numbers.",
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] }
}
const echo: ToolSpec = { name: "echo", description: "Returns its arguments.", parameters: { type: "object" } }

// ---- the code directory and the fake supervisor ---------------------------------------------

const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

/** A code directory holding the modules for both languages. */
const codeDir = (tools: ReadonlyArray<ToolSpec>) =>
  Effect.tap(tempDir("hermes-stubs-"), (dir) =>
    Effect.sync(() => {
      for (const module of [...toolModules("python", tools), ...toolModules("javascript", tools)]) {
        mkdirSync(dirname(join(dir, module.path)), { recursive: true })
        writeFileSync(join(dir, module.path), module.content)
      }
    })
  )

interface Received {
  readonly name: string
  /** The arguments' bytes as sent. */
  readonly raw: Buffer
  readonly args: unknown
}

type Answer = { readonly ok: unknown } | { readonly error: string } | { readonly refused: string } | "close"

interface Channel {
  readonly path: string
  readonly received: Array<Received>
  /** The most connections open at once. */
  readonly maxOpen: () => number
  /** Resolves once `n` requests have arrived in full (none of them answered unless the answerer did). */
  readonly requests: (n: number) => Promise<void>
}

/** The supervisor's side: read a request to EOF, answer with a status byte and a payload, close. */
const fakeChannel = (dir: string, answer: (request: Received, channel: Channel) => Answer | Promise<Answer>) =>
  Effect.acquireRelease(
    Effect.async<{ channel: Channel; server: net.Server }>((resume) => {
      const path = join(dir, "tools.sock")
      let open = 0
      let maxOpen = 0
      const waiters: Array<{ n: number; resolve: () => void }> = []
      const received: Array<Received> = []
      const channel: Channel = {
        path,
        received,
        maxOpen: () => maxOpen,
        requests: (n) =>
          new Promise((resolve) => {
            if (received.length >= n) resolve()
            else waiters.push({ n, resolve })
          })
      }
      const server = net.createServer({ allowHalfOpen: true }, (socket) => {
        open++
        maxOpen = Math.max(maxOpen, open)
        socket.on("close", () => open--)
        socket.on("error", () => {})
        const chunks: Array<Buffer> = []
        socket.on("data", (c) => chunks.push(c))
        socket.on("end", async () => {
          const all = Buffer.concat(chunks)
          const nl = all.indexOf(10)
          const raw = all.subarray(nl + 1)
          const request = { name: all.subarray(0, nl).toString("utf8"), raw, args: JSON.parse(raw.toString("utf8")) }
          received.push(request)
          for (const w of waiters.filter((w) => received.length >= w.n)) w.resolve()
          const reply = await answer(request, channel)
          if (reply === "close") return socket.end()
          const [status, payload] =
            "ok" in reply
              ? ["0", JSON.stringify(reply.ok)]
              : "error" in reply
                ? ["1", reply.error]
                : ["2", reply.refused]
          socket.end(Buffer.from(status + payload, "utf8"))
        })
      })
      server.listen(path, () => resume(Effect.succeed({ channel, server })))
    }),
    ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  ).pipe(Effect.map(({ channel }) => channel))

/** Answers each call with its own arguments once `n` calls are in, so each caller can check it got its own. */
const echoOnce =
  (n: number) =>
  async (request: Received, channel: Channel): Promise<Answer> => {
    const timeout = new Promise<"timeout">((resolve) => setTimeout(resolve, 15_000, "timeout"))
    const all = await Promise.race([channel.requests(n), timeout])
    return all === "timeout" ? { error: `only ${channel.received.length} calls arrived at once` } : { ok: request.args }
  }

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A real interpreter with the environment the supervisor gives the program. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly dir: string; readonly socket?: string | undefined; readonly cwd?: string }
) =>
  Effect.promise(
    () =>
      new Promise<Ran>((resolve, reject) => {
        const env: Record<string, string | undefined> = {
          ...process.env,
          PYTHONPATH: options.dir,
          NODE_PATH: join(options.dir, "node_modules"),
          HERMES_TOOLS_SOCKET: options.socket
        }
        delete env.NODE_OPTIONS
        if (options.socket === undefined) delete env.HERMES_TOOLS_SOCKET
        const child = spawn(command, [...args], {
          cwd: options.cwd ?? tmpdir(),
          env,
          stdio: ["ignore", "pipe", "pipe"]
        })
        const out: Array<Buffer> = []
        const err: Array<Buffer> = []
        child.stdout.on("data", (c) => out.push(c))
        child.stderr.on("data", (c) => err.push(c))
        child.on("error", reject)
        child.on("close", (code) =>
          resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })
        )
      })
  )

/** The JSON the program printed last, after checking it ran cleanly. */
const lastJson = (ran: Ran): any => {
  expect(ran.stderr).toBe("")
  expect(ran.code).toBe(0)
  return JSON.parse(ran.stdout.trim().split("\n").at(-1)!)
}

const python = (script: string, options: Parameters<typeof run>[2]) =>
  Effect.map(run("python3", ["-c", script], options), lastJson)
const nodeCjs = (script: string, options: Parameters<typeof run>[2]) =>
  Effect.map(run("node", ["-e", script], options), lastJson)
/**
 * A program written to the code directory, as the supervisor writes main.js: ES module
 * resolution (import, import()) finds hermes_tools from there, as it ignores NODE_PATH.
 */
const nodeMain = (file: string, source: string, options: Parameters<typeof run>[2]) =>
  Effect.suspend(() => {
    writeFileSync(join(options.dir, file), source)
    return Effect.map(run("node", [join(options.dir, file)], options), lastJson)
  })

// ---- Python -------------------------------------------------------------------------------------

describe("hermes_tools for Python", () => {
  it.scopedLive("calls by keyword and by position; arguments not given are not sent, unknown ones are", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([webSearch, echo])
      const channel = yield* fakeChannel(dir, (r) => ({ ok: { tool: r.name, got: r.args } }))
      const out = yield* python(
        `
import json
from hermes_tools import web_search, echo, call_tool
print(json.dumps([
  web_search(query="x"),
  web_search("y", 3),
  web_search(query="z", extra=[1, None], **{"odd-name": True}),
  call_tool("web_search", {"query": "w"}),
  call_tool("echo"),
  echo(text="\u00e9\u2713"),
]))`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([
        { tool: "web_search", got: { query: "x" } },
        { tool: "web_search", got: { query: "y", limit: 3 } },
        { tool: "web_search", got: { query: "z", extra: [1, null], "odd-name": true } },
        { tool: "web_search", got: { query: "w" } },
        { tool: "echo", got: {} },
        { tool: "echo", got: { text: "é✓" } }
      ])
      expect(channel.received[0]!.raw.toString()).toBe(`{"query": "x"}`)
      // JSON text in UTF-8, not \u escapes.
      expect(channel.received[5]!.raw.equals(Buffer.from(`{"text": "é✓"}`, "utf8"))).toBe(true)
    })
  )

  it.scopedLive("a tool error is a ToolError and a refusal a ToolRefused, with the exact message", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([webSearch])
      const channel = yield* fakeChannel(dir, (r) =>
        (r.args as any).query === "fail"
          ? { error: "the search engine said: no ✗\nsecond line" }
          : { refused: "unknown tool 'nope'" }
      )
      const out = yield* python(
        `
import json
from hermes_tools import web_search, call_tool, ToolError, ToolRefused
got = []
for call in (lambda: web_search(query="fail"), lambda: call_tool("nope", {})):
    try:
        call()
    except ToolError as e:
        got.append([type(e).__name__, str(e), isinstance(e, ToolRefused), e.__cause__ is None and e.__context__ is None])
print(json.dumps([got, issubclass(ToolRefused, ToolError), issubclass(ToolError, Exception)]))`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([
        [
          ["ToolError", "the search engine said: no ✗\nsecond line", false, true],
          ["ToolRefused", "unknown tool 'nope'", true, true]
        ],
        true,
        true
      ])
      expect(channel.received.map((r) => r.name)).toEqual(["web_search", "nope"])
    })
  )

  it.scopedLive("8 calls from threads are 8 connections open at once, each answered with its own result", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([echo])
      const channel = yield* fakeChannel(dir, echoOnce(8))
      const out = yield* python(
        `
import json, threading
from hermes_tools import echo
results = [None] * 8
def work(i):
    results[i] = echo(i=i)
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })))
      expect(channel.maxOpen()).toBe(8)
    })
  )

  it.scopedLive(
    "a channel that closes without a status, no channel at all, and a socket nobody listens on are ToolErrors",
    () =>
      Effect.gen(function* () {
        const dir = yield* codeDir([echo])
        const channel = yield* fakeChannel(dir, () => "close")
        const script = `
import json
from hermes_tools import echo, ToolError, ToolRefused
try:
    echo()
    print(json.dumps("no error"))
except ToolError as e:
    print(json.dumps([type(e).__name__, str(e)]))`
        expect(yield* python(script, { dir, socket: channel.path })).toEqual(["ToolError", CLOSED])
        expect(yield* python(script, { dir })).toEqual(["ToolError", NO_CHANNEL])
        expect(yield* python(script, { dir, socket: join(dir, "absent.sock") })).toEqual([
          "ToolError",
          "cannot reach the tool channel: No such file or directory"
        ])
        expect(channel.received).toHaveLength(1) // never retried
      })
  )

  it.scopedLive("a refusal sent before the arguments were all read still reaches the code", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([echo])
      const path = join(dir, "tools.sock")
      // Answers as soon as the name line is in, then closes with 4 MiB of arguments unread.
      const server = net.createServer((socket) => {
        socket.on("error", () => {})
        socket.once("data", () => {
          socket.write("2arguments too large", () => socket.destroy())
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(path, () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const out = yield* python(
        `
import json
from hermes_tools import echo, ToolRefused
try:
    echo(big="x" * (4 << 20))
except ToolRefused as e:
    print(json.dumps(str(e)))`,
        { dir, socket: path }
      )
      expect(out).toBe("arguments too large")
    })
  )

  it.scopedLive("argument names Python cannot bind are reachable through **kwargs; tools may shadow the builtins", () =>
    Effect.gen(function* () {
      const shadowing = [
        "open",
        "isinstance",
        "str",
        "dict",
        "type",
        "repr",
        "OSError",
        "ValueError",
        "TypeError",
        "Exception",
        "json",
        "os",
        "socket"
      ]
      const awkward: ToolSpec = {
        name: "awkward",
        description: "Names that are not Python parameters.",
        parameters: {
          type: "object",
          properties: {
            first: {},
            "a-b": {},
            class: {},
            "": {},
            é: {},
            _hermes_more: {},
            _hermes_call_with: {},
            last: {}
          },
          required: ["first", "a-b"]
        }
      }
      const dir = yield* codeDir([awkward, ...shadowing.map((name) => ({ ...echo, name }))])
      const channel = yield* fakeChannel(dir, (r) =>
        r.name === "OSError" ? "close" : r.name === "str" ? { error: "as asked" } : { ok: r.args }
      )
      const out = yield* python(
        `
import inspect, json
import hermes_tools as t
results = [
  str(inspect.signature(t.awkward)),
  t.awkward(1, last=2, **{"a-b": 3, "class": 4, "": 5, "é": 6, "_hermes_more": 7, "_hermes_call_with": 8}),
  t.isinstance(x=1), t.open(), t.dict(), t.type(), t.repr(), t.ValueError(), t.TypeError(), t.Exception(),
  t.json(), t.os(), t.socket(),
  t.call_tool("open", {"path": "p"}),
]
for call in (lambda: t.str(), lambda: t.OSError(), lambda: t.call_tool(1), lambda: t.call_tool("open", [1])):
    try:
        call()
    except Exception as e:
        results.append([type(e).__name__, str(e)])
print(json.dumps(results))`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([
        "(first=<not given>, *, last=<not given>, **_hermes_more)",
        { first: 1, last: 2, "a-b": 3, class: 4, "": 5, é: 6, _hermes_more: 7, _hermes_call_with: 8 },
        { x: 1 },
        ...Array(10).fill({}),
        { path: "p" },
        ["ToolError", "as asked"],
        ["ToolError", CLOSED],
        ["TypeError", "call_tool: the name must be a str, not int"],
        ["TypeError", "call_tool: args must be a dict, not list"]
      ])
    })
  )

  it.effect(
    "is Python 3.9 grammar and imports nothing but builtins, os and the C modules _socket and _json (socket and json only as fallbacks)",
    () =>
      Effect.sync(() => {
        const [module] = toolModules("python", [webSearch, add, echo, ...hostileTools(HOSTILE)])
        const check = `
import ast, json, sys
tree = ast.parse(sys.stdin.read(), feature_version=(3, 9))
print(json.dumps(sorted({a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names})))`
        expect(
          JSON.parse(execFileSync("python3", ["-c", check], { input: module!.content, encoding: "utf8" }))
        ).toEqual(["_json", "_socket", "builtins", "json", "os", "socket"])
      })
  )

  it.effect(
    "a call loads neither socket.py nor json (nor enum, re): the C modules encode and decode exactly as json.dumps / json.loads",
    () =>
      Effect.sync(() => {
        const [module] = toolModules("python", [add])
        const dir = mkdtempSync(join(tmpdir(), "hermes-stubs-cjson-"))
        try {
          writeFileSync(join(dir, "hermes_tools.py"), module!.content)
          const check = String.raw`
import sys, math
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
import hermes_tools as h
values = [{}, {"a": 1, "b": [1.5, -2e300, 10**30, True, None, "x"]}, {"ü": "é\u2028\n\"\\", "nested": {"k": [[], {}]}}, {"s": "\ud800"}]
encoded = [h._hermes_encode(v, False) if v.get("s") is None else h._hermes_encode(v, True) for v in values]
texts = ['{"a":1}', '[1,2.5,"x",null,true,false]', '"\\u00fc"', '{"big":123456789012345678901234567890}']
decoded = [h._hermes_decode(t) for t in texts + ['1e400']]
loaded = sorted(m for m in set(sys.modules) - before if m in ("socket", "json", "enum", "re"))
import json
assert encoded == [json.dumps(v, ensure_ascii=v.get("s") is not None, allow_nan=False) for v in values], encoded
assert decoded[:4] == [json.loads(t) for t in texts]
assert math.isinf(decoded[4])
for bad in (float("nan"), float("inf")):
    try:
        h._hermes_encode({"x": bad}, False); print("encoded", bad)
    except ValueError:
        pass
try:
    h._hermes_encode({"x": object()}, False); print("encoded an object")
except TypeError:
    pass
try:
    h._hermes_decode('{"a": 1} trailing'); print("decoded trailing bytes")
except ValueError:
    pass
print(loaded)
`
          expect(execFileSync("python3", ["-c", check, dir], { encoding: "utf8" }).trim()).toBe("[]")
        } finally {
          rmSync(dir, { recursive: true, force: true })
        }
      })
  )

  it.effect("every keyword of this python3 is a reserved tool name", () =>
    Effect.sync(() => {
      const keywords: Array<string> = JSON.parse(
        execFileSync("python3", ["-c", "import json, keyword; print(json.dumps(keyword.kwlist))"], { encoding: "utf8" })
      )
      expect(keywords.filter((k) => !RESERVED_TOOL_NAMES.has(k))).toEqual([])
    })
  )
})

// ---- JavaScript ---------------------------------------------------------------------------------

describe("hermes_tools for JavaScript", () => {
  it.scopedLive("one object per call, callTool, ToolError and ToolRefused with the exact message", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([add, echo])
      const channel = yield* fakeChannel(dir, (r) =>
        r.name === "add"
          ? { ok: (r.args as any).a + (r.args as any).b }
          : r.name === "echo"
            ? { ok: r.args }
            : r.name === "fails"
              ? { error: "it broke: ✗" }
              : { refused: `unknown tool '${r.name}'` }
      )
      const out = yield* nodeCjs(
        `
const { add, echo, callTool, ToolError, ToolRefused } = require("hermes_tools");
(async () => {
  const results = [await add({ a: 1, b: 2 }), await echo(), await echo({ text: "é✓", skip: undefined }), await callTool("echo", { n: [1, null] })];
  for (const call of [() => callTool("fails", {}), () => callTool("nope"), () => add(1, 2), () => callTool("echo", [1])]) {
    try {
      await call();
      results.push("no error");
    } catch (e) {
      results.push([e.name, e.message, e instanceof ToolError, e instanceof ToolRefused, e instanceof Error]);
    }
  }
  console.log(JSON.stringify(results));
})();`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([
        3,
        {},
        { text: "é✓" },
        { n: [1, null] },
        ["ToolError", "it broke: ✗", true, false, true],
        ["ToolRefused", "unknown tool 'nope'", true, true, true],
        ["TypeError", "the arguments of add are one object, as in add({ ... }), not number", false, false, true],
        ["TypeError", "the arguments of echo are one object, as in echo({ ... }), not an array", false, false, true]
      ])
      expect(channel.received.map((r) => r.name)).toEqual(["add", "echo", "echo", "echo", "fails", "nope"])
      expect(channel.received[2]!.raw.equals(Buffer.from(`{"text":"é✓"}`, "utf8"))).toBe(true)
    })
  )

  it.scopedLive("Promise.all of 8 calls is 8 connections open at once, each answered with its own result", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([echo])
      const channel = yield* fakeChannel(dir, echoOnce(8))
      const out = yield* nodeCjs(
        `
const { echo } = require("hermes_tools");
Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => echo({ i }))).then((r) => console.log(JSON.stringify(r)));`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })))
      expect(channel.maxOpen()).toBe(8)
    })
  )

  it.scopedLive("named imports from an ES module, require and import() from CommonJS", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([add, webSearch])
      const channel = yield* fakeChannel(dir, (r) => ({ ok: r.name }))
      const esm = yield* nodeMain(
        "main.mjs",
        `import { add, web_search, callTool, ToolError, ToolRefused } from "hermes_tools";
import * as all from "hermes_tools";
console.log(JSON.stringify([await add({ a: 1, b: 2 }), await web_search({ query: "q" }), await callTool("add", {}),
  typeof ToolError, typeof ToolRefused, Object.keys(all).filter((k) => k !== "module.exports").sort()]));`,
        { dir, socket: channel.path }
      )
      expect(esm).toEqual([
        "add",
        "web_search",
        "add",
        "function",
        "function",
        ["ToolError", "ToolRefused", "add", "callTool", "default", "web_search"]
      ])
      const cjs = yield* nodeMain(
        "main.js",
        `
(async () => {
  const required = require("hermes_tools");
  const imported = await import("hermes_tools");
  console.log(JSON.stringify([await required.add({}), await imported.web_search({}), imported.add === required.add, imported.default === required]));
})();`,
        { dir, socket: channel.path }
      )
      expect(cjs).toEqual(["add", "web_search", true, true])
      // require from anywhere else, through NODE_PATH as the supervisor sets it.
      expect(
        yield* nodeCjs(`require("hermes_tools").add({}).then((r) => console.log(JSON.stringify(r)))`, {
          dir,
          socket: channel.path
        })
      ).toBe("add")
    })
  )

  it.scopedLive(
    "a channel that closes without a status, no channel at all, and a socket nobody listens on are ToolErrors",
    () =>
      Effect.gen(function* () {
        const dir = yield* codeDir([echo])
        const channel = yield* fakeChannel(dir, () => "close")
        const script = `
const { echo, ToolError } = require("hermes_tools");
echo().then(() => console.log(JSON.stringify("no error")), (e) => console.log(JSON.stringify([e.name, e.message, e instanceof ToolError])));`
        expect(yield* nodeCjs(script, { dir, socket: channel.path })).toEqual(["ToolError", CLOSED, true])
        expect(yield* nodeCjs(script, { dir })).toEqual(["ToolError", NO_CHANNEL, true])
        const absent = join(dir, "absent.sock")
        expect(yield* nodeCjs(script, { dir, socket: absent })).toEqual([
          "ToolError",
          `cannot reach the tool channel: connect ENOENT ${absent}`,
          true
        ])
        expect(channel.received).toHaveLength(1) // never retried
      })
  )

  it.scopedLive("more calls at once than the channel's listen backlog holds wait for it instead of failing", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir([echo])
      const path = join(dir, "tools.sock")
      // A channel with a backlog of 1 that accepts nothing until told: a non-blocking connect to a
      // full backlog fails with EAGAIN, which the module waits out (nothing was sent yet).
      const server = spawn(
        "python3",
        [
          "-c",
          `
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
print("listening", flush=True)
sys.stdin.readline()
while True:
    c, _ = s.accept()
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.sendall(b"0" + data.split(b"\\n", 1)[1])
    c.close()
`,
          path
        ],
        { stdio: ["pipe", "pipe", "inherit"] }
      )
      yield* Effect.addFinalizer(() => Effect.sync(() => server.kill()))
      yield* Effect.promise(() => new Promise((resolve) => server.stdout.once("data", resolve)))
      const client = yield* Effect.fork(
        nodeCjs(
          `
const { echo } = require("hermes_tools");
Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((i) => echo({ i }))).then((r) => console.log(JSON.stringify(r)));`,
          { dir, socket: path }
        )
      )
      yield* waitForQueue(path, 2)
      yield* Effect.sleep("300 millis")
      server.stdin.write("go\n")
      expect(yield* Fiber.join(client)).toEqual([0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })))
    })
  )
})

/** Until `n` connections wait in the listen queue at `path` (`ss` shows it; without `ss`, a second). */
const waitForQueue = (path: string, n: number) =>
  Effect.promise(async () => {
    for (let i = 0; i < 200; i++) {
      let out: string
      try {
        out = execFileSync("ss", ["-xlH", "src", path], { encoding: "utf8" })
      } catch {
        return new Promise((resolve) => setTimeout(resolve, 1000))
      }
      if (Number(out.trim().split(/\s+/)[2]) >= n) return
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    throw new Error(`${n} connections never waited at ${path}`)
  })

// ---- any text a tool brings ----------------------------------------------------------------------

const HOSTILE = [
  `"""`,
  `'''`,
  `"); import os; os._exit(7) #`,
  `*/ process.exit(7); /*`,
  `\\`,
  `ends with a backslash \\`,
  `line one\nline two\n\n`,
  "\r\nCR LF\rCR",
  "${process.exit(7)} `backticks`",
  "\u2028\u2029 separators, \u202e bidi \u2066",
  "\u0000 NUL \u0007 bell \u001b[31m escape",
  "\ud800 lone surrogate \udfff",
  "astral 𝕏 😀",
  `\\N{BULLET} \\x41 \\u0041 {0} %s`,
  `exports.pwned = 1;\n__import__("os")._exit(7)`
]

/** Tools whose description, argument names and argument texts are all hostile. */
const hostileTools = (texts: ReadonlyArray<string>): ReadonlyArray<ToolSpec> =>
  texts.map((text, i) => ({
    name: `tool_${i}`,
    description: text,
    parameters: {
      type: "object",
      properties: {
        [text]: { type: text, description: text, default: text, enum: [text] },
        plain: { description: text, items: { type: text }, type: ["array", text] }
      },
      required: [text, "plain", text]
    }
  }))

describe("hermes_tools with hostile text", () => {
  // Generated strings too: any UTF-16, lone surrogates and controls included.
  const texts = [...HOSTILE, ...fc.sample(fc.string({ unit: "binary", maxLength: 40 }), { numRuns: 40, seed: 18 })]
  const tools = hostileTools(texts)

  it.scopedLive("Python imports the module and each docstring begins with the description, exactly", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir(tools)
      const channel = yield* fakeChannel(dir, (r) => ({ ok: r.args }))
      // What each docstring begins with: the description, its line ends as \n (or a stand-in for an empty one).
      const expected = tools.map((t) =>
        t.description.trim() === "" ? `The host tool ${t.name}.` : t.description.replace(/\r\n?/g, "\n")
      )
      writeFileSync(join(dir, "expected.json"), JSON.stringify(expected))
      const out = yield* python(
        `
import json
import hermes_tools
expected = json.load(open(${JSON.stringify(join(dir, "expected.json"))}))
bad = [i for i, text in enumerate(expected) if not getattr(hermes_tools, "tool_%d" % i).__doc__.startswith(text)]
print(json.dumps([bad, sorted(hermes_tools.__all__), hermes_tools.tool_3(plain=1)]))`,
        { dir, socket: channel.path }
      )
      expect(out).toEqual([
        [],
        [...tools.map((t) => t.name), "ToolError", "ToolRefused", "call_tool"].sort(),
        { plain: 1 }
      ])
    })
  )

  it.scopedLive("JavaScript loads the module with exactly the tools' exports, and nothing in it ran", () =>
    Effect.gen(function* () {
      const dir = yield* codeDir(tools)
      const channel = yield* fakeChannel(dir, (r) => ({ ok: r.args }))
      const out = yield* nodeMain(
        "main.js",
        `
const m = require("hermes_tools");
import("hermes_tools").then(async (ns) => console.log(JSON.stringify([Object.keys(m).sort(), Object.keys(ns).filter((k) => k !== "default" && k !== "module.exports").sort(), await m.tool_3({ plain: 1 })])));`,
        { dir, socket: channel.path }
      )
      const names = [...tools.map((t) => t.name), "ToolError", "ToolRefused", "callTool"].sort()
      expect(out).toEqual([names, names, { plain: 1 }])
    })
  )
})

// ---- the generator itself --------------------------------------------------------------------------

describe("toolModules", () => {
  it.effect("bash needs no module; the JavaScript module is CommonJS in its own package", () =>
    Effect.sync(() => {
      expect(toolModules("bash", [add])).toEqual([])
      expect(toolModules("python", [add]).map((m) => m.path)).toEqual(["hermes_tools.py"])
      const js = toolModules("javascript", [add])
      expect(js.map((m) => m.path)).toEqual([
        "node_modules/hermes_tools/package.json",
        "node_modules/hermes_tools/index.js"
      ])
      expect(JSON.parse(js[0]!.content)).toMatchObject({ name: "hermes_tools", type: "commonjs", main: "index.js" })
      expect(js[1]!.content).toMatch(/^exports\.add = async function add\(args\) \{$/m)
    })
  )

  it.effect("refuses a name that is invalid, reserved or repeated", () =>
    Effect.sync(() => {
      for (const name of [
        "class",
        "call_tool",
        "callTool",
        "ToolError",
        "ToolRefused",
        "None",
        "default",
        "then",
        "__proto__",
        "_hermes_call",
        "1x",
        "a-b",
        "",
        "x".repeat(65)
      ]) {
        expect(() => toolModules("python", [{ ...add, name }])).toThrow(/invalid, reserved or repeated/)
      }
      expect(() => toolModules("javascript", [add, add])).toThrow(/invalid, reserved or repeated/)
      for (const name of RESERVED_TOOL_NAMES) expect(TOOL_NAME.test(name)).toBe(true)
    })
  )
})
