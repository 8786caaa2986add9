/**
 * A program that writes 1 GiB to stdout. The SDK keeps only `outputLimitBytes` (1 MiB by
 * default) and counts the rest as it streams by, so host memory stays bounded; the engine's
 * log driver is "none", so nothing reaches the host's disk either.
 *
 * The runs here are sequential (one file, no concurrency): the RSS of this test process is
 * the measurement.
 */
import { execFileSync } from "node:child_process"
import { readdirSync, statSync } from "node:fs"
import { filter, firstValueFrom, take } from "rxjs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { exited, expectOutcome, type HostileExecutor, hostileExecutor, MiB, RUNTIMES } from "./support.js"

const GiB = 1024 * MiB

/** Bytes used on the filesystem holding the engine's data. */
const dockerDiskUsed = (): number =>
  Number(execFileSync("df", ["-B1", "--output=used", "/var/lib/docker"], { encoding: "utf8" }).trim().split("\n")[1])

/**
 * The filesystem is shared with everything else on the host (other suites create containers,
 * images get built), so the df comparison allows some noise; a log of this flood would be 1 GiB.
 * The precise check is the container's own directory under /var/lib/docker/containers.
 */
const DISK_TOLERANCE = 256 * MiB

/** Bytes in the engine's directory for one container (where a json-file log would grow). */
const containerDirBytes = (id: string): number => {
  const walk = (path: string): number => {
    const st = statSync(path, { throwIfNoEntry: false })
    if (st === undefined) return 0
    if (!st.isDirectory()) return st.size
    return readdirSync(path).reduce((n, name) => n + walk(`${path}/${name}`), 0)
  }
  return walk(`/var/lib/docker/containers/${id}`)
}

describe.each(RUNTIMES)("output floods are capped by the SDK (%s)", (runtime) => {
  let h: HostileExecutor
  beforeAll(async () => {
    h = await hostileExecutor(runtime, { timeoutMs: 120_000 })
    await h.run({ language: "python", code: "print('warm')" }) // load the SDK's code paths before measuring
  })
  afterAll(async () => {
    await h.finish()
  })

  it("1 GiB of stdout: result truncated to the cap, every byte counted, host RSS and disk unchanged", async () => {
    const rssBefore = process.memoryUsage().rss
    const diskBefore = dockerDiskUsed()
    let rssPeak = rssBefore
    let containerId: string | undefined
    let containerDirPeak = 0
    void firstValueFrom(h.executor.events$.pipe(filter((e) => e.type === "ContainerStarted"), take(1))).then((e) => {
      containerId = e.data.containerId
    })
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss)
      if (containerId !== undefined) containerDirPeak = Math.max(containerDirPeak, containerDirBytes(containerId))
    }, 25)
    const r = await h
      .run({
        language: "python",
        // os.write in a loop: every byte is really written, whatever size each write(2) accepts.
        code: String.raw`
import os, sys
chunk = memoryview(b"x" * (1 << 20))
for _ in range(1024):
    rest = chunk
    while rest:
        rest = rest[os.write(1, rest):]
print("done", file=sys.stderr)
`
      })
      .finally(() => clearInterval(sampler))
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss)
    expectOutcome(r, exited(0))
    expect(r.stdoutBytes).toBe(GiB)
    expect(r.stdoutTruncated).toBe(true)
    expect(r.stdout.length).toBe(MiB)
    expect(r.stdout).toMatch(/^x+$/)
    expect(r.stderr).toBe("done\n")
    expect(r.stderrTruncated).toBe(false)
    // Well under 1 GiB: the cap plus the stream's buffers and the garbage collector's slack.
    expect(rssPeak - rssBefore).toBeLessThan(256 * MiB)
    expect(Math.abs(dockerDiskUsed() - diskBefore)).toBeLessThan(DISK_TOLERANCE)
    // The container's directory held its config files only (no log) while the flood ran.
    expect(containerId).toBeDefined()
    expect(containerDirPeak).toBeGreaterThan(0)
    expect(containerDirPeak).toBeLessThan(1 * MiB)
  })

  it("a single 4 MiB print() arrives whole (gVisor's host pipe takes 64 KiB per write)", async () => {
    const r = await h.run({ language: "python", outputLimitBytes: 8 * MiB, code: "import sys\nprint('x' * (4 << 20))\nsys.stdout.buffer.write(b'y' * (2 << 20))" })
    expectOutcome(r, exited(0))
    expect(r.stdoutBytes).toBe(4 * MiB + 1 + 2 * MiB)
    expect(r.stdoutTruncated).toBe(false)
  })
})
