import { Layer } from "effect"
import { DockerExecutor, DockerSessions } from "@hermes-sandbox/docker"
import { MemoryJournal } from "@hermes-sandbox/events"
import { liveTime } from "./support/contractTime.js"
import { type ShellProgram, sessionContract } from "./support/sessionContract.js"

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

// The same contract on the real engine (started by .ci/run / scripts/ensure-engine.sh).
sessionContract("docker", {
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
  time: liveTime
})
