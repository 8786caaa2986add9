import { Layer } from "effect"
import { DockerExecutor, DockerSessions } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"
import { RUNTIMES } from "./hostile/support.js"
import { liveTime } from "./support/contractTime.js"
import {
  CONTRACT_PNG,
  type CellStep,
  type SessionWorld,
  type ShellProgram,
  sessionContract
} from "./support/sessionContract.js"

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`

/** The command in bash, its steps in the order of `ShellProgram`. */
const bash = (p: ShellProgram): string =>
  [
    p.stdout === undefined ? undefined : `printf %s ${quote(p.stdout)}`,
    p.stderr === undefined ? undefined : `printf %s ${quote(p.stderr)} >&2`,
    p.cd === undefined ? undefined : `mkdir -p ${quote(p.cd)} && cd ${quote(p.cd)}`,
    ...Object.entries(p.export ?? {}).map(([k, v]) => `export ${k}=${quote(v)}`),
    p.printCwd ? "pwd" : undefined,
    p.printEnv === undefined ? undefined : `printf '%s\\n' "\${${p.printEnv}-}"`,
    p.hang ? "sleep 3600" : undefined,
    p.sleepMs === undefined ? undefined : `sleep ${p.sleepMs / 1000}`,
    p.writeFile === undefined
      ? undefined
      : `mkdir -p "$(dirname ${quote(p.writeFile.path)})" && printf %s ${quote(p.writeFile.content)} > ${quote(p.writeFile.path)}`,
    p.cat === undefined ? undefined : `cat ${quote(p.cat)}`,
    `exit ${p.exitCode ?? 0}`
  ]
    .filter((line) => line !== undefined)
    .join("\n")

const py = (s: string) => JSON.stringify(s)

/** A contract cell in Python (IPython: a string as the last line is the result). */
const python = (...steps: ReadonlyArray<CellStep>): string =>
  steps
    .map((step) => {
      if ("print" in step) return `print(${py(step.print)}, end="", flush=True)`
      if ("set" in step) return `${step.set.name} = ${py(step.set.value)}`
      if ("get" in step) return `print(${step.get})`
      if ("html" in step) return `from IPython.display import display, HTML\ndisplay(HTML(${py(step.html)}))`
      if ("png" in step)
        return `import base64\nfrom IPython.display import display, Image\ndisplay(Image(data=base64.b64decode(${py(CONTRACT_PNG)})))`
      if ("result" in step) return py(step.result)
      if ("raise" in step) return `raise ValueError(${py(step.raise)})`
      if ("sleepMs" in step) return `import time\ntime.sleep(${step.sleepMs / 1000})`
      if ("ignoreSigint" in step) return "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)"
      if ("flood" in step) return `import sys\nsys.stdout.write("x" * ${step.flood})\nsys.stdout.flush()`
      if ("tool" in step)
        return `import hermes_tools, json\nprint(json.dumps(getattr(hermes_tools, ${py(step.tool.name)})(**json.loads(${py(JSON.stringify(step.tool.args))}))))`
      return [
        "import threading, time as _t",
        "def _late():",
        `    _t.sleep(${step.late.afterMs / 1000})`,
        `    print(${py(step.late.text)}, end="", flush=True)`,
        "threading.Thread(target=_late, daemon=True).start()"
      ].join("\n")
    })
    .join("\n")

// The same contract on the real engine (started by .ci/run / scripts/ensure-engine.sh).
const world: SessionWorld = {
  base: Layer.merge(DockerExecutor.runtimeLayer(), MemoryJournal.layer()),
  sessions: (options) => DockerSessions.layer(options),
  command: bash,
  snippet: ({ printCwd, printEnv }) => ({
    language: "python",
    code: [
      "import os",
      ...(printCwd ? ["print(os.getcwd())"] : []),
      ...(printEnv === undefined ? [] : [`print(os.environ.get(${JSON.stringify(printEnv)}, ""))`])
    ].join("\n")
  }),
  cell: python,
  time: liveTime
}
sessionContract("docker", world)
// The cells again under gVisor, where the kernel's supervisor, its freezing and its interrupts meet
// another kernel (the calls' cases are runtime-independent here; the hostile suites run both).
if (RUNTIMES.includes("runsc"))
  sessionContract("docker (runsc), cells", {
    ...world,
    sessions: (options) => DockerSessions.layer({ ...options, runtime: "runsc" }),
    parts: "cells"
  })
