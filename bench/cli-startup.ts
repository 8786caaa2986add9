/**
 * The CLI's time to result: `hermes-sandbox run --json -` with `print(1)` on standard input, the
 * whole process (spawn to exit), as a script or an agent launching it sees it. Engine and images
 * must be ready (`pnpm hermes-sandbox doctor`); the built variants need `pnpm build` first.
 *
 *   npx tsx bench/cli-startup.ts [--runs 20] [--variant bundle] [--variant dist] ... [--command 'label=node other/bin.js']
 *
 * Variants (all by default; each round runs them in turn, after one unmeasured warm-up each):
 * - bundle: `node packages/cli/bundle/hermes-sandbox.cjs`, the package's bin, what an installed
 *   `hermes-sandbox` runs: the bundled CLI (packages/cli/scripts/bundle.mjs) through its launcher
 *   and V8 code cache (scripts/launcher.cjs; the warm-up writes the cache if there is none)
 * - dist: `node --conditions=hermes-sandbox-dist packages/cli/dist/bin.js`, tsc's output in plain
 *   Node, one module file at a time; the condition picks the sibling packages' dist/ inside the
 *   workspace (what the bin was before the bundle)
 * - tsx: `node --import tsx packages/cli/src/bin.ts`, the sources through tsx's loader
 * - pnpm: `npx -y pnpm@10.34.0 -s hermes-sandbox`, the workspace's script (-s: no banner on stdout)
 *
 * --command adds any other command line (split on spaces; run from the repository root), e.g. a
 * build made another way, or `env NODE_DISABLE_COMPILE_CACHE=1 node packages/cli/bundle/hermes-sandbox.cjs`
 * (the bundle without its code cache), under its label.
 *
 * Each run must print one JSON result with stdout "1\n" and exit 0, or the bench stops.
 * Prints min / median / max per variant in milliseconds, and a Markdown table.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { median } from "./stats.js"

const root = fileURLToPath(new URL("..", import.meta.url))

const Builtin = {
  bundle: [process.execPath, "packages/cli/bundle/hermes-sandbox.cjs"],
  dist: [process.execPath, "--conditions=hermes-sandbox-dist", "packages/cli/dist/bin.js"],
  tsx: [process.execPath, "--import", "tsx", "packages/cli/src/bin.ts"],
  pnpm: ["npx", "-y", "pnpm@10.34.0", "-s", "hermes-sandbox"]
} as const satisfies Record<string, ReadonlyArray<string>>

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    variant: { type: "string", multiple: true },
    command: { type: "string", multiple: true }
  }
})
const runs = Number(values.runs)
const Variants: Record<string, ReadonlyArray<string>> = { ...Builtin }
for (const c of values.command ?? []) {
  const at = c.indexOf("=")
  if (at <= 0) throw new Error(`--command: expected label=command line, got ${c}`)
  Variants[c.slice(0, at)] = c
    .slice(at + 1)
    .split(" ")
    .map((a) => (a === "node" ? process.execPath : a))
}
const chosen = [
  ...(values.variant ?? (values.command === undefined ? Object.keys(Builtin) : [])),
  ...(values.command ?? []).map((c) => c.slice(0, c.indexOf("=")))
]
for (const v of chosen)
  if (!(v in Variants)) throw new Error(`unknown variant ${v}; one of ${Object.keys(Builtin).join(", ")}`)
type Variant = string

/** One whole process: spawn, write the program, wait for exit; milliseconds. */
const once = (variant: Variant): Promise<number> =>
  new Promise((resolve, reject) => {
    const [command = "", ...args] = Variants[variant]!
    const started = performance.now()
    const child = spawn(command, [...args, "run", "--json", "-"], { cwd: root, stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("error", reject)
    child.on("close", (code) => {
      const elapsed = performance.now() - started
      let result: { stdout?: string } | undefined
      try {
        result = JSON.parse(stdout)
      } catch {
        result = undefined
      }
      if (code !== 0 || result?.stdout !== "1\n") {
        reject(
          new Error(`${variant}: exit ${code}, stdout ${JSON.stringify(stdout)}, stderr ${JSON.stringify(stderr)}`)
        )
      } else resolve(elapsed)
    })
    child.stdin.end("print(1)\n")
  })

const times: Record<string, Array<number>> = {}
for (const v of chosen) {
  await once(v)
  times[v] = []
}
for (let round = 0; round < runs; round++) {
  for (const v of chosen) times[v]!.push(await once(v))
}

const ms = (x: number) => `${Math.round(x)}`
process.stdout.write(`| command | min | median | max | runs |\n| --- | ---: | ---: | ---: | ---: |\n`)
for (const v of chosen) {
  const t = times[v]!
  process.stdout.write(
    `| \`${Variants[v]!.map((a) => (a === process.execPath ? "node" : a)).join(" ")} run --json -\` | ${ms(Math.min(...t))} ms | ${ms(median(t))} ms | ${ms(Math.max(...t))} ms | ${t.length} |\n`
  )
}
