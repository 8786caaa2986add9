/**
 * A vitest reporter that makes the suite's cost visible: at the end of a run it prints the 15
 * slowest test files (import + tests and hooks). With HERMES_SANDBOX_TEST_TIMES=FILE it appends one
 * line per file (`seconds<TAB>project<TAB>file<TAB>collect<TAB>tests`) to FILE instead, and a script
 * running several vitest invocations (scripts/test-tiers.sh) ranks them all at its end with
 * `tsx test/support/slowestFiles.ts FILE`.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs"
import { relative } from "node:path"
import { pathToFileURL } from "node:url"
import type { Reporter, TestModule } from "vitest/node"

export const SHOWN = 15

export interface FileTime {
  readonly seconds: number
  readonly project: string
  readonly file: string
  readonly collectSeconds: number
  readonly testsSeconds: number
}

const seconds = (ms: number) => Math.round(ms / 100) / 10

/** The table printed at the end of a run: the slowest files first. */
export const slowestTable = (times: ReadonlyArray<FileTime>, shown = SHOWN): string => {
  const top = [...times].sort((a, b) => b.seconds - a.seconds).slice(0, shown)
  const width = Math.max(0, ...top.map((t) => t.project.length))
  return [
    `${top.length} slowest test files (import + tests, seconds):`,
    ...top.map((t) => `  ${t.seconds.toFixed(1).padStart(7)}  ${t.project.padEnd(width)}  ${t.file}`)
  ].join("\n")
}

export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    const times: Array<FileTime> = modules.map((m) => {
      const d = m.diagnostic()
      return {
        seconds: seconds(d.collectDuration + d.duration),
        project: m.project.name,
        file: relative(process.cwd(), m.moduleId),
        collectSeconds: seconds(d.collectDuration),
        testsSeconds: seconds(d.duration)
      }
    })
    const out = process.env["HERMES_SANDBOX_TEST_TIMES"]
    if (out !== undefined && out !== "") {
      appendFileSync(
        out,
        times.map((t) => `${t.seconds}\t${t.project}\t${t.file}\t${t.collectSeconds}\t${t.testsSeconds}\n`).join("")
      )
    } else if (times.length > 0) {
      process.stdout.write(`\n${slowestTable(times)}\n`)
    }
  }
}

/** The lines HERMES_SANDBOX_TEST_TIMES collected, read back. */
export const readTimes = (file: string): Array<FileTime> =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [s, project, path, collect, tests] = l.split("\t")
      return {
        seconds: Number(s),
        project: project!,
        file: path!,
        collectSeconds: Number(collect),
        testsSeconds: Number(tests)
      }
    })

/** The files that cost the most CPU (test/support/fileCpu.ts's lines: `seconds<TAB>project<TAB>file`), with their sum. */
export const heaviestTable = (lines: string, shown = SHOWN): string => {
  const rows = lines
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [s, project, file] = l.split("\t")
      return { seconds: Number(s), project: project!, file: file! }
    })
  const total = rows.reduce((sum, r) => sum + r.seconds, 0)
  const top = rows.sort((a, b) => b.seconds - a.seconds).slice(0, shown)
  const width = Math.max(0, ...top.map((t) => t.project.length))
  return [
    `${top.length} test files that cost the most CPU (their workers and the processes they waited for; ${Math.round(total)} CPU-s over ${rows.length} files):`,
    ...top.map((t) => `  ${t.seconds.toFixed(1).padStart(7)}  ${t.project.padEnd(width)}  ${t.file}`)
  ].join("\n")
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const [file, cpu] = process.argv.slice(2)
  if (file === undefined) {
    process.stderr.write("usage: tsx test/support/slowestFiles.ts TIMES-FILE [CPU-FILE]\n")
    process.exit(2)
  }
  process.stdout.write(`${slowestTable(readTimes(file))}\n`)
  if (cpu !== undefined && existsSync(cpu)) process.stdout.write(`\n${heaviestTable(readFileSync(cpu, "utf8"))}\n`)
}
