/**
 * A hand-written SVG chart of latency distributions: one empirical CDF line per
 * variant on a logarithmic time axis (so a 60 ms exec and a 1 s start fit on one
 * chart), with a box plot strip per variant underneath (whiskers p5-p95, box
 * p25-p75, tick at p50).
 */
import { percentile } from "./stats.js"

export interface Series {
  readonly label: string
  readonly values: ReadonlyArray<number>
}

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
const fmt = (n: number) => (Math.round(n * 10) / 10).toString()

const niceTicks = (lo: number, hi: number): Array<number> => {
  const out: Array<number> = []
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e
      if (v >= lo && v <= hi) out.push(v)
    }
  }
  return out
}

export const latencyChart = (series: ReadonlyArray<Series>, title: string, subtitle: string): string => {
  const data = series.filter((s) => s.values.length > 0)
  const width = 960
  const left = 70
  const right = 340
  const top = 60
  const cdfHeight = 320
  const boxRow = 22
  const boxTop = top + cdfHeight + 80
  const height = boxTop + boxRow * data.length + 40
  const plotW = width - left - right
  const all = data.flatMap((s) => s.values)
  const lo = Math.max(1, Math.min(...all) * 0.8)
  const hi = Math.max(...all) * 1.25
  const x = (v: number) =>
    left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW
  const y = (q: number) => top + cdfHeight - q * cdfHeight
  const out: Array<string> = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`
  )
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`)
  out.push(`<text x="${left}" y="24" font-size="16" font-weight="bold">${esc(title)}</text>`)
  out.push(`<text x="${left}" y="42" fill="#555">${esc(subtitle)}</text>`)
  // Grid and axes.
  for (const t of niceTicks(lo, hi)) {
    out.push(
      `<line x1="${fmt(x(t))}" y1="${top}" x2="${fmt(x(t))}" y2="${boxTop + boxRow * data.length}" stroke="#e5e5e5"/>`
    )
    out.push(
      `<text x="${fmt(x(t))}" y="${top + cdfHeight + 16}" text-anchor="middle" fill="#333">${t >= 1000 ? `${t / 1000} s` : `${t} ms`}</text>`
    )
  }
  for (const q of [0, 0.25, 0.5, 0.75, 1]) {
    out.push(
      `<line x1="${left}" y1="${fmt(y(q))}" x2="${left + plotW}" y2="${fmt(y(q))}" stroke="${q === 0.5 ? "#cfcfcf" : "#eeeeee"}"/>`
    )
    out.push(`<text x="${left - 8}" y="${fmt(y(q) + 4)}" text-anchor="end" fill="#333">${q * 100}%</text>`)
  }
  out.push(
    `<line x1="${left}" y1="${fmt(y(0.95))}" x2="${left + plotW}" y2="${fmt(y(0.95))}" stroke="#bbbbbb" stroke-dasharray="4 3"/>`
  )
  out.push(`<text x="${left + 4}" y="${fmt(y(0.95) - 3)}" fill="#777" font-size="10">p95</text>`)
  out.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${cdfHeight}" fill="none" stroke="#999"/>`)
  out.push(
    `<text x="${left + plotW / 2}" y="${top + cdfHeight + 34}" text-anchor="middle" fill="#333">latency per execution (log scale)</text>`
  )
  out.push(
    `<text transform="translate(18 ${top + cdfHeight / 2}) rotate(-90)" text-anchor="middle" fill="#333">fraction of executions ≤ x</text>`
  )
  // CDF lines (step functions).
  data.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!
    const sorted = [...s.values].sort((a, b) => a - b)
    const pts: Array<string> = [`${fmt(x(sorted[0]!))},${fmt(y(0))}`]
    sorted.forEach((v, k) => {
      pts.push(`${fmt(x(v))},${fmt(y(k / sorted.length))}`)
      pts.push(`${fmt(x(v))},${fmt(y((k + 1) / sorted.length))}`)
    })
    out.push(`<polyline points="${pts.join(" ")}" fill="none" stroke="${color}" stroke-width="2"/>`)
    const ly = top + 10 + i * 20
    out.push(
      `<line x1="${left + plotW + 16}" y1="${ly}" x2="${left + plotW + 40}" y2="${ly}" stroke="${color}" stroke-width="3"/>`
    )
    out.push(`<text x="${left + plotW + 46}" y="${ly + 4}">${esc(s.label)}</text>`)
  })
  // Box plots.
  out.push(
    `<text x="${left}" y="${boxTop - 10}" fill="#333">box: p25–p75, bar: p50, whiskers: p5–p95, dots: beyond</text>`
  )
  data.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!
    const cy = boxTop + i * boxRow + boxRow / 2
    const [p5, p25, p50, p75, p95] = [5, 25, 50, 75, 95].map((p) => percentile(s.values, p)) as [
      number,
      number,
      number,
      number,
      number
    ]
    out.push(`<line x1="${fmt(x(p5))}" y1="${cy}" x2="${fmt(x(p95))}" y2="${cy}" stroke="${color}"/>`)
    out.push(
      `<rect x="${fmt(x(p25))}" y="${cy - 7}" width="${fmt(Math.max(1, x(p75) - x(p25)))}" height="14" fill="${color}" fill-opacity="0.25" stroke="${color}"/>`
    )
    out.push(
      `<line x1="${fmt(x(p50))}" y1="${cy - 8}" x2="${fmt(x(p50))}" y2="${cy + 8}" stroke="${color}" stroke-width="3"/>`
    )
    for (const v of s.values)
      if (v < p5 || v > p95) out.push(`<circle cx="${fmt(x(v))}" cy="${cy}" r="2" fill="${color}"/>`)
    out.push(`<text x="${left + plotW + 16}" y="${cy + 4}">${esc(s.label)}: p50 ${Math.round(p50)} ms</text>`)
  })
  out.push(`</svg>`)
  return out.join("\n") + "\n"
}
