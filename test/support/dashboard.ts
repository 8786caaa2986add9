/**
 * The dashboard for the browser test and its benchmark: `hermes-sandbox dashboard` started as a user
 * starts it (support/cli.ts's command: the installed bin in the real-engine tiers), and Debian's
 * chromium driven by playwright-core (never a browser download).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { type Browser, chromium } from "playwright-core"
import { cliCommand } from "./cli.js"

export const CHROMIUM = "/usr/bin/chromium"

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })

export interface Dashboard {
  /** http://127.0.0.1:PORT/ */
  readonly url: string
  readonly port: number
  readonly pid: number
  /** Everything it wrote on standard error so far. */
  readonly stderr: () => string
  /** SIGTERM, then its exit (SIGKILL after 10 s). */
  readonly stop: () => Promise<number | null>
}

/** Starts `hermes-sandbox dashboard --journal JOURNAL --token-file FILE --port 0` and waits for its address. */
export const startDashboard = (journal: string, tokenFile: string, command = cliCommand): Promise<Dashboard> =>
  new Promise((resolve, reject) => {
    const [bin, ...args] = command
    const child: ChildProcess = spawn(
      bin!,
      [...args, "dashboard", "--journal", journal, "--token-file", tokenFile, "--port", "0"],
      { stdio: ["ignore", "ignore", "pipe"] }
    )
    let stderr = ""
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
      const code = await exited
      clearTimeout(timer)
      return code
    }
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString("utf8")
      const match = /serving at (http:\/\/127\.0\.0\.1:([0-9]+)\/)/.exec(stderr)
      if (match !== null)
        resolve({ url: match[1]!, port: Number(match[2]), pid: child.pid!, stderr: () => stderr, stop })
    })
    child.once("exit", (code) => reject(new Error(`the dashboard exited (${code}) before serving: ${stderr}`)))
  })
