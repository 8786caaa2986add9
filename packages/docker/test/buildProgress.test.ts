/**
 * `hermes-sandbox image build` (scripts/build-images.sh) shows that it is alive through its long
 * steps: mmdebstrap's phase lines as they start, and while a step is silent, a line every
 * HERMES_IMAGES_HEARTBEAT_S seconds naming it (a user who saw nothing for 9 minutes pressed Ctrl-C).
 * The script's own functions, sourced (it returns after defining them), driven by fake commands
 * that stay silent until the test has seen the heartbeat: nothing here depends on how fast the
 * host is, only on the heartbeat coming while the step is silent.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { IMAGE_SOURCES_URLS } from "../src/ImageBuild.js"

const script = fileURLToPath(new URL("scripts/build-images.sh", IMAGE_SOURCES_URLS[0]!))
const dir = mkdtempSync(join(tmpdir(), "hermes-build-progress-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/**
 * Runs `body` in bash with the script's functions sourced and a 1 s heartbeat; `release` (a file
 * the fake command waits for) is created as soon as a line matches `heartbeat`.
 */
const sourced = (body: string, heartbeat: RegExp, release: string) =>
  new Promise<{ code: number | null; lines: Array<string>; released: boolean }>((resolve, reject) => {
    const child = spawn("bash", ["-c", `source ${JSON.stringify(script)}\n${body}`], {
      env: { ...process.env, HERMES_IMAGES_HEARTBEAT_S: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let released = false
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString()
      if (!released && out.split("\n").some((l) => heartbeat.test(l))) {
        released = true
        writeFileSync(release, "")
      }
    })
    let err = ""
    child.stderr.on("data", (d: Buffer) => (err += d.toString()))
    child.on("error", reject)
    child.on("close", (code) => {
      if (err !== "") reject(new Error(`stderr: ${err}`))
      else resolve({ code, lines: out.split("\n").filter((l) => l !== ""), released })
    })
  })

const waitFor = (file: string) => `while [ ! -e ${JSON.stringify(file)} ]; do sleep 0.1; done`

describe("build-images.sh's progress", () => {
  it("quietly: relays mmdebstrap's phase lines, says every heartbeat that a silent phase still runs, returns the exit status", async () => {
    const release = join(dir, "mm-release")
    const fake = join(dir, "fake-mmdebstrap.sh")
    writeFileSync(
      fake,
      [
        'echo "I: automatically chosen mode: root"',
        'echo "apt noise that is no phase"',
        'echo "I: downloading packages with apt..."',
        waitFor(release),
        'echo "I: extracting archives..."',
        "exit 3"
      ].join("\n")
    )
    const log = join(dir, "mm.log")
    const r = await sourced(
      `quietly mmdebstrap ${JSON.stringify(log)} bash ${JSON.stringify(fake)} || echo "rc=$?"`,
      /mmdebstrap: still downloading packages with apt \(\d+ s in it\)$/,
      release
    )
    expect(r.released).toBe(true)
    expect(r.code).toBe(0)
    const shown = r.lines.map((l) => l.replace(/^\[images \+\d+\.\ds\] {3}/, ""))
    expect(r.lines.slice(0, -1).every((l) => /^\[images \+\d+\.\ds\] {3}mmdebstrap: /.test(l))).toBe(true)
    expect(shown[0]).toBe("mmdebstrap: automatically chosen mode: root")
    expect(shown[1]).toBe("mmdebstrap: downloading packages with apt")
    const still = shown.findIndex((l) => l.startsWith("mmdebstrap: still downloading packages with apt"))
    const extracting = shown.indexOf("mmdebstrap: extracting archives")
    expect(still).toBeGreaterThan(1)
    expect(extracting).toBeGreaterThan(still)
    expect(shown).not.toContain("mmdebstrap: apt noise that is no phase")
    expect(r.lines.at(-1)).toBe("rc=3")
  })

  it("build_progress: shows the steps that do work, not the cached ones, and names a silent step while it runs", async () => {
    const release = join(dir, "build-release")
    const producer = [
      'echo "Step 1/4 : ARG BASE"',
      'echo "Step 2/4 : FROM base"',
      'echo " ---> 1234"',
      'echo "Step 3/4 : COPY runner /opt/hermes"',
      'echo " ---> Using cache"',
      'echo "Step 4/4 : RUN python3 -m compileall -q /usr/lib"',
      waitFor(release),
      'echo " ---> Running in abc"',
      'echo "Successfully built 5678"'
    ].join("\n")
    const r = await sourced(
      `{ ${producer}\n} | build_progress hermes-sandbox/python-data:latest`,
      /still building hermes-sandbox\/python-data:latest: Step 4\/4 : RUN python3 -m compileall -q \/usr\/lib \(\d+ s in it\)$/,
      release
    )
    expect(r.released).toBe(true)
    expect(r.code).toBe(0)
    const shown = r.lines.map((l) => l.replace(/^\[images \+\d+\.\ds\] {3}/, ""))
    // The FROM step is shown once its image id follows, the cached COPY not at all; the RUN step is
    // named by the heartbeat while it runs, then shown when its output begins.
    expect(shown.filter((l) => !l.startsWith("still building"))).toEqual([
      "Step 2/4 : FROM base",
      "Step 4/4 : RUN python3 -m compileall -q /usr/lib"
    ])
    expect(shown.findIndex((l) => l.startsWith("still building"))).toBe(1)
  })
})
