/**
 * A program that writes 1 GiB to stdout. The SDK keeps only `outputLimitBytes` (1 MiB by
 * default) and counts the rest as it streams by, so host memory stays bounded; the engine's
 * log driver is "none", so nothing reaches the host's disk either (checked per container: its
 * engine directory and writable layer).
 *
 * The runs here are sequential (one file, no concurrency): the RSS of this test process is
 * the measurement.
 */
import { readdirSync, statSync } from "node:fs"
import Docker from "dockerode"
import { filter, firstValueFrom, take } from "rxjs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { exited, expectOutcome, type HostileExecutor, hostileExecutor, MiB, RUNTIMES } from "./support.js"

const GiB = 1024 * MiB

const docker = new Docker({ socketPath: "/var/run/docker.sock" })

/** Bytes under a directory (0 if absent). */
const dirBytes = (path: string): number => {
  const st = statSync(path, { throwIfNoEntry: false })
  if (st === undefined) return 0
  if (!st.isDirectory()) return st.size
  return readdirSync(path).reduce((n, name) => n + dirBytes(`${path}/${name}`), 0)
}

/**
 * Where a flood could reach the engine's disk, for one container: its directory under
 * /var/lib/docker/containers (a json-file or local log grows there) and its writable layer.
 * Measured per container, not with df: the filesystem is shared with every other suite
 * (a private engine loading an image in parallel once moved df by 400 MB).
 */
const containerDiskBytes = (dirs: { readonly containerDir: string; readonly upperDir: string | undefined }): number =>
  dirBytes(dirs.containerDir) + (dirs.upperDir === undefined ? 0 : dirBytes(dirs.upperDir))

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
    let rssPeak = rssBefore
    let containerId: string | undefined
    let dirs:
      | { readonly containerDir: string; readonly upperDir: string | undefined; readonly logDriver: string }
      | undefined
    let diskPeak = 0
    // The flood's own container: started for it, or claimed by it from the warm pool (whose
    // refills start containers of their own meanwhile).
    let executionId: string | undefined
    void firstValueFrom(
      h.executor.events$.pipe(
        filter((e) => {
          if (e.type === "ExecutionRequested") executionId ??= e.streamId
          return e.streamId === executionId && (e.type === "ContainerStarted" || e.type === "ContainerClaimed")
        }),
        take(1)
      )
    ).then(async (e) => {
      containerId = (e.data as { readonly containerId: string }).containerId
      const info = await docker.getContainer(containerId).inspect()
      dirs = {
        containerDir: `/var/lib/docker/containers/${info.Id}`,
        upperDir: (info.GraphDriver?.Data as { readonly UpperDir?: string } | undefined)?.UpperDir,
        logDriver: info.HostConfig.LogConfig?.Type ?? ""
      }
    })
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss)
      if (dirs !== undefined) diskPeak = Math.max(diskPeak, containerDiskBytes(dirs))
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
    // No log driver, and the container's directory and writable layer held their config files
    // only while the flood ran (a log of it would be 1 GiB).
    expect(containerId).toBeDefined()
    expect(dirs?.logDriver).toBe("none")
    expect(diskPeak).toBeGreaterThan(0)
    expect(diskPeak).toBeLessThan(1 * MiB)
  })

  it("a flood past the cap that runs into its deadline still says it was cut, and counts at least what the supervisor told", async () => {
    // The report ('x') never comes: the sandbox is killed at the deadline. The supervisor told the
    // count as the stream passed the cap and every 200 ms since ('d' frames).
    const limit = 64 * 1024
    const r = await h.run({
      language: "python",
      timeoutMs: 5_000,
      outputLimitBytes: limit,
      code: "import os\nchunk = b'x' * 65536\nwhile True:\n    os.write(1, chunk)\n    os.write(2, chunk)\n"
    })
    expect(r.timedOut).toBe(true)
    for (const [text, bytes, truncated] of [
      [r.stdout, r.stdoutBytes, r.stdoutTruncated],
      [r.stderr, r.stderrBytes, r.stderrTruncated]
    ] as const) {
      expect(truncated).toBe(true)
      expect(text.length).toBe(limit)
      expect(bytes).toBeGreaterThan(4 * limit)
    }
  })

  it("a single 4 MiB print() arrives whole (gVisor's host pipe takes 64 KiB per write)", async () => {
    const r = await h.run({
      language: "python",
      outputLimitBytes: 8 * MiB,
      code: "import sys\nprint('x' * (4 << 20))\nsys.stdout.buffer.write(b'y' * (2 << 20))"
    })
    expectOutcome(r, exited(0))
    expect(r.stdoutBytes).toBe(4 * MiB + 1 + 2 * MiB)
    expect(r.stdoutTruncated).toBe(false)
  })
})
