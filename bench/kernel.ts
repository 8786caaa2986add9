/**
 * pnpm bench:kernel — a session's Python kernel against the runs around it (issue 28, "Measured"),
 * each as a ratio within one run, timed on the host through the Promise API:
 *
 *   - an idle cell `1+1` on a running kernel, against one exec round trip into the same sandbox
 *     (`session.run("true")`: a `docker exec` of the supervisor, what every session call costs);
 *   - a session's first cell (createSession + kernel start + `1+1`), against a one-shot cold
 *     `print(1)` (`executeCode`), rounds interleaved; and the same first cell from a pool of sessions
 *     (`createSessions({ pool: { size: 1 } })`: `sessions.open()` + `1+1`, the pool refilled between
 *     rounds, outside the measurement);
 *   - a cell that draws one matplotlib figure and returns it (a display, `image/png`) on
 *     hermes-sandbox/python-data: p50, p95 and the bytes returned.
 *
 *   pnpm bench:kernel [--runs 20] [--first-runs 6] [--data-image hermes-sandbox/python-data:latest]
 */
import { loadavg } from "node:os"
import { createExecutor, createSession, createSessions } from "@hermes-sandbox/docker"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback
}
const RUNS = Number(arg("runs", "20"))
const FIRST_RUNS = Number(arg("first-runs", "6"))
const DATA_IMAGE = arg("data-image", "hermes-sandbox/python-data:latest")

const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
const timed = async <A>(f: () => Promise<A>): Promise<[number, A]> => {
  const t0 = performance.now()
  const a = await f()
  return [performance.now() - t0, a]
}
const check = (what: string, ok: boolean, detail: unknown) => {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(detail)}`)
}

const rows: Array<[string, ReadonlyArray<number>, string]> = []
const started = loadavg()[0]!

// 1. Idle cells against exec round trips, in the same sandbox, in alternating blocks.
{
  const session = await createSession()
  try {
    const warm = await session.runCell({ code: "1+1" })
    check("first cell", warm.status === "ok", warm)
    const cells: Array<number> = []
    const execs: Array<number> = []
    // In blocks, cells back to back then calls back to back: a call freezes the kernel's domain
    // and resumes it (SECURITY.md, Kernels), so a cell right after a call is not an idle cell.
    for (let block = 0; block < 4; block++) {
      for (let i = -1; i < RUNS / 4; i++) {
        const [c, cell] = await timed(() => session.runCell({ code: "1+1" }))
        check("cell", cell.result?.data["text/plain"] === "2", cell)
        if (i >= 0) cells.push(c)
      }
      for (let i = -1; i < RUNS / 4; i++) {
        const [e, run] = await timed(() => session.run("true"))
        check("run", run.exitCode === 0, run)
        if (i >= 0) execs.push(e)
      }
    }
    rows.push(['exec round trip, `session.run("true")`', execs, "1.00×"])
    rows.push(["idle cell `1+1`, `session.runCell`", cells, `${(pct(cells, 50) / pct(execs, 50)).toFixed(3)}×`])
  } finally {
    await session.close()
  }
}

// 2. A session's first cell against a one-shot cold print(1), interleaved.
{
  const executor = await createExecutor()
  const pool = await createSessions({ pool: { size: 1 } })
  try {
    const firsts: Array<number> = []
    const pooled: Array<number> = []
    const colds: Array<number> = []
    const poolReady = async () => {
      while ((await pool.poolReady()) < 1) await new Promise((r) => setTimeout(r, 20))
    }
    for (let i = -1; i < FIRST_RUNS; i++) {
      const [c, r] = await timed(() => executor.executeCode({ language: "python", code: "print(1)" }))
      check("cold print(1)", r.stdout === "1\n", r)
      const [f] = await timed(async () => {
        const session = await createSession()
        try {
          const cell = await session.runCell({ code: "1+1" })
          check("first cell", cell.result?.data["text/plain"] === "2", cell)
        } finally {
          // Closing is not part of the first cell's wait: it runs after the measured part ends.
          void session.close()
        }
      })
      // Let the last session's removal finish outside the next measurement.
      await new Promise((r) => setTimeout(r, 500))
      await poolReady()
      const [p] = await timed(async () => {
        const session = await pool.open()
        try {
          const cell = await session.runCell({ code: "1+1" })
          check("pooled first cell", cell.result?.data["text/plain"] === "2" && !cell.kernel.started, cell)
        } finally {
          void session.close()
        }
      })
      if (i >= 0) firsts.push(f), colds.push(c), pooled.push(p)
      await new Promise((r) => setTimeout(r, 500))
      await poolReady()
    }
    rows.push(["one-shot cold `print(1)`, `executeCode`", colds, "1.00×"])
    rows.push([
      "a session's first cell (createSession + kernel start + `1+1`)",
      firsts,
      `${(pct(firsts, 50) / pct(colds, 50)).toFixed(2)}×`
    ])
    rows.push([
      "a pooled session's first cell (`sessions.open()` from a pool of 1 + `1+1`)",
      pooled,
      `${(pct(pooled, 50) / pct(colds, 50)).toFixed(2)}×`
    ])
  } finally {
    await pool.close()
    await executor.close()
  }
}

// 3. A figure per cell on the data image.
let figureBytes: Array<number> = []
{
  const session = await createSession({ image: DATA_IMAGE, kernel: { preload: ["matplotlib.pyplot"] } })
  try {
    await session.runCell({ code: "import matplotlib.pyplot as plt" })
    const times: Array<number> = []
    for (let i = -2; i < RUNS; i++) {
      const [t, cell] = await timed(() =>
        session.runCell({
          code: `plt.figure(figsize=(6, 4))\nplt.plot([x * x for x in range(${i + 3} * 10)])\nplt.title("cell ${i}")`
        })
      )
      const png = cell.displays.find((d) => d.data["image/png"] !== undefined)
      check("figure", cell.status === "ok" && png !== undefined, { ...cell, displays: cell.displays.length })
      if (i >= 0) times.push(t), figureBytes.push(Buffer.byteLength(JSON.stringify(cell)))
    }
    rows.push(["a cell drawing one figure (python-data, returned as image/png)", times, ""])
  } finally {
    await session.close()
  }
}

console.log(
  `pnpm bench:kernel -- --runs ${RUNS} --first-runs ${FIRST_RUNS}   (${new Date().toISOString()}, load ${started.toFixed(2)} at the start)\n`
)
console.log("| what (host-timed, Promise API) | n | p50 (ms) | p95 (ms) | p50 ratio |")
console.log("| --- | ---: | ---: | ---: | ---: |")
for (const [name, xs, ratio] of rows)
  console.log(`| ${name} | ${xs.length} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 95).toFixed(1)} | ${ratio} |`)
figureBytes = figureBytes.sort((a, b) => a - b)
console.log(
  `\nThe figure cell's result, as JSON: p50 ${pct(figureBytes, 50)} bytes (min ${figureBytes[0]}, max ${figureBytes.at(-1)}), the PNG base64 in it.`
)
