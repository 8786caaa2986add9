/**
 * A real, throwaway PostgreSQL for the tests and benches: a cluster initialised under a
 * temporary directory from Debian's `postgresql` package, listening on 127.0.0.1 only (on a
 * free port) and on a unix socket inside that directory, with a password login over TCP.
 *
 * `startCluster()` returns once the server accepts connections; `stop()` shuts it down (fast
 * shutdown, SIGKILL of its process group after 10 s) and deletes the directory. A detached
 * shell keeps watch on the process that started it: should that process die without
 * stopping the cluster (SIGKILL, a crash), the shell kills the cluster and deletes the
 * directory, so no server outlives a test run.
 *
 * initdb refuses to run as root: as root, the cluster runs as the `postgres` system user
 * (which the package creates), through `setpriv`.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** The environment variable through which the global setup hands the cluster's URL to test workers. */
export const PG_URL_ENV = "HERMES_SANDBOX_TEST_PG_URL"

export interface Cluster {
  /** `postgres://hermes:<password>@127.0.0.1:<port>/postgres`, a superuser. */
  readonly url: string
  readonly port: number
  readonly dir: string
  readonly stop: () => Promise<void>
  /** Synchronous last resort (an `exit` handler): SIGKILL the cluster's processes, delete the directory. */
  readonly kill: () => void
}

export interface ClusterOptions {
  /**
   * fsync commits to disk (default false: tests need no durability across a power loss and
   * run faster without it; a benchmark wants true, as a production server has).
   */
  readonly fsync?: boolean
}

const SEARCHED = ["/usr/lib/postgresql"]

/** The directory of initdb/postgres/psql: Debian's /usr/lib/postgresql/<major>/bin (newest), else PATH's. */
export const binDir = (): string => {
  for (const root of SEARCHED) {
    if (!fs.existsSync(root)) continue
    const majors = fs
      .readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
    for (const major of majors) {
      const bin = path.join(root, major, "bin")
      if (fs.existsSync(path.join(bin, "initdb")) && fs.existsSync(path.join(bin, "postgres"))) return bin
    }
  }
  const found = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim()
  if (found !== "") return path.dirname(fs.realpathSync(found))
  throw new Error(
    "PostgreSQL's initdb was not found (looked in /usr/lib/postgresql/*/bin and PATH): the tests start a throwaway " +
      "PostgreSQL cluster. Install it: apt-get install -y postgresql (Debian/Ubuntu; it brings postgresql-client)."
  )
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const isRoot = () => process.getuid?.() === 0

/** argv run as the cluster's owner: the `postgres` user when we are root, else ourselves. */
const asOwner = (argv: ReadonlyArray<string>): [string, Array<string>] =>
  isRoot()
    ? ["setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", ...argv]]
    : [argv[0]!, argv.slice(1)]

export const startCluster = async (options: ClusterOptions = {}): Promise<Cluster> => {
  const bin = binDir()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-pg-"))
  const data = path.join(dir, "data")
  const password = randomBytes(12).toString("hex")
  const pwfile = path.join(dir, "pwfile")
  fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 })
  if (isRoot()) {
    // The owner must reach the directory, its socket and the password file.
    fs.chmodSync(dir, 0o755)
    execFileSync("chown", ["postgres:postgres", dir, pwfile])
  }
  let stopping: Promise<void> | undefined
  let child: ReturnType<typeof spawn> | undefined
  const remove = () => fs.rmSync(dir, { recursive: true, force: true })
  try {
    const [initdb, initArgs] = asOwner([
      path.join(bin, "initdb"),
      "-D",
      data,
      "-U",
      "hermes",
      `--pwfile=${pwfile}`,
      "--auth-host=scram-sha-256",
      "--auth-local=trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions"
    ])
    const init = spawnSync(initdb, initArgs, { encoding: "utf8" })
    if (init.status !== 0)
      throw new Error(`initdb failed (${init.status ?? init.signal}):\n${init.stderr}${init.stdout}`)

    for (let attempt = 0; ; attempt++) {
      const port = await freePort()
      const [postgres, args] = asOwner([
        path.join(bin, "postgres"),
        "-D",
        data,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        `fsync=${options.fsync === true ? "on" : "off"}`,
        "-c",
        `synchronous_commit=${options.fsync === true ? "on" : "off"}`,
        "-c",
        `full_page_writes=${options.fsync === true ? "on" : "off"}`,
        "-c",
        "max_connections=300",
        "-c",
        "shared_buffers=128MB",
        "-c",
        "log_min_messages=warning",
        "-c",
        "logging_collector=off"
      ])
      // Its own process group, so stop (and the watcher) can kill the backends with it.
      const started = spawn(postgres, args, { detached: true, stdio: ["ignore", "ignore", "pipe"] })
      child = started
      let stderr = ""
      started.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-8192)))
      const exited = new Promise<number | null>((resolve) => started.once("exit", (code) => resolve(code)))
      const ready = await waitReady(data, exited)
      if (ready) {
        const pgid = started.pid!
        watchParent(pgid, dir)
        const stop = () => {
          stopping ??= (async () => {
            try {
              process.kill(pgid, "SIGINT") // fast shutdown: roll back, disconnect, checkpoint
            } catch {
              // already gone
            }
            const gone = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)])
            try {
              process.kill(-pgid, "SIGKILL")
            } catch {
              // the group is gone
            }
            if (!gone) await exited
            remove()
          })()
          return stopping
        }
        const kill = () => {
          try {
            process.kill(-pgid, "SIGKILL")
          } catch {
            // the group is gone
          }
          remove()
        }
        return { url: `postgres://hermes:${password}@127.0.0.1:${port}/postgres`, port, dir, stop, kill }
      }
      try {
        process.kill(-started.pid!, "SIGKILL")
      } catch {
        // gone
      }
      await exited
      // Another process may have taken the port between our probe and the server's bind.
      if (attempt >= 3 || !/could not (bind|create listen)/i.test(stderr)) {
        throw new Error(`postgres did not start:\n${stderr}`)
      }
    }
  } catch (error) {
    if (child?.pid !== undefined) {
      try {
        process.kill(-child.pid, "SIGKILL")
      } catch {
        // gone
      }
    }
    remove()
    throw error
  }
}

/** Ready once postmaster.pid's status line says so (PostgreSQL writes "ready" there when it accepts connections). */
const waitReady = async (data: string, exited: Promise<number | null>): Promise<boolean> => {
  let done = false
  void exited.then(() => (done = true))
  const deadline = Date.now() + 60_000
  while (!done && Date.now() < deadline) {
    try {
      const lines = fs.readFileSync(path.join(data, "postmaster.pid"), "utf8").split("\n")
      if (lines[7]?.trim() === "ready") return true
    } catch {
      // not written yet
    }
    await sleep(25)
  }
  return false
}

/**
 * A detached shell that outlives us: once our pid is gone it kills the cluster's process group
 * and removes the directory. (The paths travel in the environment, so `pgrep -f postgres` does
 * not match the shell.)
 */
const watchParent = (pgid: number, dir: string) => {
  const watcher = spawn(
    "sh",
    ["-c", 'while kill -0 "$WATCHED" 2>/dev/null; do sleep 1; done; kill -KILL -"$GROUP" 2>/dev/null; rm -rf "$DIR"'],
    {
      detached: true,
      stdio: "ignore",
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", WATCHED: String(process.pid), GROUP: String(pgid), DIR: dir }
    }
  )
  watcher.unref()
}

const psql = (url: string, sql: string) => {
  const result = spawnSync(path.join(binDir(), "psql"), [url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], {
    encoding: "utf8"
  })
  if (result.status !== 0) throw new Error(`psql failed: ${result.stderr}`)
  return result.stdout
}

/** The cluster's admin URL, from the global setup (vitest) or the environment. */
export const clusterUrl = (): string => {
  const url = process.env[PG_URL_ENV]
  if (url === undefined || url === "") {
    throw new Error(
      `${PG_URL_ENV} is not set: the PostgreSQL tests run under vitest's global setup (test/postgres-global-setup.ts)`
    )
  }
  return url
}

/** The same server, another database. */
export const withDatabase = (url: string, database: string): string => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

/**
 * Creates a fresh database (a unique name with `prefix`) on the cluster and returns its URL, so
 * that each test file (or test) has its own and files run in parallel.
 */
export const createDatabase = (prefix: string, adminUrl: string = clusterUrl()): string => {
  const name = `${prefix
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, "_")
    .slice(0, 40)}_${randomBytes(4).toString("hex")}`
  psql(adminUrl, `CREATE DATABASE "${name}"`)
  return withDatabase(adminUrl, name)
}
