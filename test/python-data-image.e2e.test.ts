/**
 * hermes-sandbox/python-data (docs/images.md) on the real engine, once per OCI runtime: the image
 * chosen per executor (`images.python`), per request (`image`) and by the CLI (`--image`); pandas
 * in and out through `files` and `collect`; a matplotlib chart on Agg with nothing on stderr (its
 * config and font cache on the /tmp tmpfs, the font list seeded); the same user, supervisor and
 * read-only root as the language images; doctor reporting it.
 *
 * Never skipped: scripts/test.sh (and so CI) builds the image; without it every test here fails
 * with the command that builds it.
 */
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ExecutionResult } from "@hermes-sandbox/core"
import type { SandboxExecutor } from "@hermes-sandbox/docker"
import { DATA_IMAGE, imageBuildCommand, imageNotFound } from "@hermes-sandbox/docker/ImageBuild"
import { dataImageCheck } from "@hermes-sandbox/cli/commands/doctor"
import { RUNTIMES } from "./hostile/support.js"
import { cli } from "./support/cli.js"
import { docker } from "./support/docker.js"
import { testExecutor } from "./support/executor.js"

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")
const fileOf = (r: ExecutionResult, path: string) => {
  const f = (r.files ?? []).find((x) => x.path === path)
  if (f === undefined)
    throw new Error(
      `${path} was not collected: ${JSON.stringify({ skipped: r.skippedFiles, collection: r.collection, stderr: r.stderr })}`
    )
  return f
}

const imagePresent = async (): Promise<boolean> =>
  docker
    .getImage(DATA_IMAGE)
    .inspect()
    .then(
      () => true,
      () => false
    )

const requireImage = async () => {
  if (!(await imagePresent())) {
    throw new Error(
      `${DATA_IMAGE} is not on the engine: build it with '${imageBuildCommand("data")}' (or 'bash scripts/build-images.sh --variant data'; scripts/test.sh builds it)`
    )
  }
}

const SALES_CSV =
  "region,product,units,price\nnorth,apple,10,0.5\nsouth,apple,4,0.5\nnorth,pear,3,1.25\nsouth,pear,8,1.25\nnorth,apple,6,0.5\n"

// Reads the CSV it was given, sums revenue per region, writes it as CSV (and as .xlsx, read back
// through openpyxl), prints the CSV: the output is checked on stdout and in the collected file.
const PANDAS_PROGRAM = String.raw`
import pandas as pd
df = pd.read_csv("data/sales.csv")
df["revenue"] = df["units"] * df["price"]
out = df.groupby("region", as_index=False)[["units", "revenue"]].sum().sort_values("region")
out.to_csv("out/by_region.csv", index=False)
out.to_excel("out/by_region.xlsx", index=False)
back = pd.read_excel("out/by_region.xlsx")
assert back.equals(out.reset_index(drop=True)), back
print(open("out/by_region.csv").read(), end="")
`
const BY_REGION_CSV = "region,units,revenue\nnorth,19,11.75\nsouth,12,12.0\n"

// Plots with the image's defaults only (no matplotlib.use, no MPLCONFIGDIR of its own): the backend
// must be Agg, the font list already in the empty cache directory, and the workspace left with
// the chart alone (no ~/.config or ~/.cache: HOME is /workspace).
const CHART_PROGRAM = String.raw`
import hashlib, os
cache = os.environ["MPLCONFIGDIR"]
seeded = sorted(n for n in os.listdir(cache) if n.startswith("fontlist-")) if os.path.isdir(cache) else []
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 2 * np.pi, 200)
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(x, np.sin(x), label="sin")
ax.set_title("a chart")
ax.legend()
fig.savefig("/workspace/chart.png", dpi=100)
data = open("/workspace/chart.png", "rb").read()
print("backend", matplotlib.get_backend())
print("seeded", ",".join(seeded) or "none")
print("signature", data[:8].hex())
print("size", len(data))
print("sha256", hashlib.sha256(data).hexdigest())
print("workspace", ",".join(sorted(os.listdir("/workspace"))))
`

const facts = (stdout: string) =>
  new Map(
    stdout
      .trim()
      .split("\n")
      .map((l) => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)])
  )

describe("the data image's build command", () => {
  it("a missing hermes-sandbox/python-data names 'image build --variant data', the language images the default build", () => {
    expect(imageNotFound(DATA_IMAGE).buildCommand).toMatch(/hermes-sandbox image build --variant data$/)
    expect(imageNotFound(DATA_IMAGE).message).toContain("--variant data")
    expect(imageNotFound("hermes-sandbox/python:latest").buildCommand).toMatch(/hermes-sandbox image build$/)
  })
})

describe.each(RUNTIMES)("hermes-sandbox/python-data (real engine, %s)", (runtime) => {
  let perExecutor: SandboxExecutor
  let plain: SandboxExecutor
  beforeAll(async () => {
    await requireImage()
    perExecutor = await testExecutor({ images: { python: DATA_IMAGE }, timeoutMs: 60_000, awaitRemoval: true, runtime })
    plain = await testExecutor({ timeoutMs: 60_000, awaitRemoval: true, runtime })
  })
  afterAll(async () => {
    await perExecutor?.close()
    await plain?.close()
  })

  it("per executor (images.python): pandas reads a CSV from files and writes a transformed CSV and .xlsx, collected", async () => {
    const r = await perExecutor.executeCode({
      language: "python",
      code: `import os\nos.makedirs("out")\n${PANDAS_PROGRAM}`,
      files: { "data/sales.csv": SALES_CSV },
      collect: ["out/*"]
    })
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toBe(BY_REGION_CSV)
    expect(Buffer.from(fileOf(r, "out/by_region.csv").content).toString("utf8")).toBe(BY_REGION_CSV)
    // An .xlsx is a zip: "PK\x03\x04".
    expect(Buffer.from(fileOf(r, "out/by_region.xlsx").content.subarray(0, 4)).toString("hex")).toBe("504b0304")
  })

  it("per request (image): a matplotlib chart on Agg, nothing on stderr, the font list seeded, the PNG collected intact", async () => {
    const r = await plain.executeCode({
      language: "python",
      image: DATA_IMAGE,
      code: CHART_PROGRAM,
      collect: ["chart.png"]
    })
    // No "Matplotlib created a temporary config/cache directory" (a non-writable config dir), no
    // "building the font cache", no backend warning: stderr is empty.
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const f = facts(r.stdout)
    expect(f.get("backend")).toBe("agg")
    expect(f.get("seeded")).toMatch(/^fontlist-v\d+\.json$/)
    expect(f.get("signature")).toBe("89504e470d0a1a0a")
    const size = Number(f.get("size"))
    expect(size).toBeGreaterThan(10_000) // a 600x400 line chart with text: ~20-30 KB
    expect(size).toBeLessThan(500_000)
    expect(f.get("workspace")).toBe("chart.png")
    const png = fileOf(r, "chart.png")
    expect(png).toMatchObject({ size, sha256: f.get("sha256"), mime: "image/png" })
    expect(sha256(png.content)).toBe(f.get("sha256"))
    expect(Buffer.from(png.content.subarray(0, 8)).toString("hex")).toBe("89504e470d0a1a0a")
  })

  it("runs as uid 1001 on a read-only root, the supervisor execute-only, no setuid file; its libraries import", async () => {
    const r = await perExecutor.executeCode({
      language: "python",
      code: String.raw`
import os, stat, subprocess
print("ids", os.getuid(), os.getgid())
# Each mount's own options (gVisor's statvfs does not report ST_RDONLY); the last mount at a point wins.
mounts = {l.split()[4]: l.split()[5].split(",")[0] for l in open("/proc/self/mountinfo")}
print("mounts", " ".join(mounts[p] for p in ("/", "/tmp", "/workspace")))
try:
    open("/usr/hermes-test", "w")
    print("usr writable")
except OSError as e:
    print("usr", e.strerror)
open("/tmp/ok", "w").write("x")
print("tmp writable")
s = os.stat("/opt/hermes/hermes-run")
print("supervisor", oct(stat.S_IMODE(s.st_mode)), s.st_uid)
found = subprocess.run(["find", "/", "-xdev", "-type", "f", "(", "-perm", "-4000", "-o", "-perm", "-2000", ")"], capture_output=True, text=True).stdout.split()
print("setuid", len(found))
import numpy, scipy, pandas, matplotlib, PIL, openpyxl, seaborn, sklearn, statsmodels.api, sympy, tabulate, lxml.etree, scipy.stats, scipy.optimize
print("numpy", numpy.__version__)
print("scipy", scipy.__version__)
print("pandas", pandas.__version__)
print("sklearn", sklearn.__version__)
print("lstsq", "%g" % numpy.linalg.lstsq(numpy.array([[1.0, 0], [1, 1], [1, 2]]), numpy.array([1.0, 3, 5]), rcond=None)[0][1])
print("ttest", "%.4f" % scipy.stats.ttest_ind([1, 2, 3, 4], [2, 3, 4, 5]).pvalue)
`
    })
    expect(r.stderr).toBe("")
    expect(r.exitCode).toBe(0)
    const f = facts(r.stdout)
    expect(f.get("ids")).toBe("1001 1001")
    expect(f.get("mounts")).toBe("ro rw rw")
    // gVisor checks the permission before the mount's read-only flag.
    expect(runtime === "runc" ? ["Read-only file system"] : ["Read-only file system", "Permission denied"]).toContain(
      f.get("usr")
    )
    expect(f.get("tmp")).toBe("writable")
    expect(f.get("supervisor")).toBe("0o711 0")
    expect(f.get("setuid")).toBe("0")
    expect(f.get("numpy")).toMatch(/^\d+\.\d+/)
    expect(f.get("scipy")).toMatch(/^\d+\.\d+/)
    expect(f.get("pandas")).toMatch(/^\d+\.\d+/)
    expect(f.get("sklearn")).toMatch(/^\d+\.\d+/)
    expect(f.get("lstsq")).toBe("2") // the slope of 1, 3, 5
    expect(f.get("ttest")).toBe("0.3153")
  })
})

describe("hermes-sandbox/python-data from the CLI and doctor", () => {
  beforeAll(requireImage)

  it("run --image selects it", async () => {
    // A host of its own: its startup sweep leaves other files' orphans alone and quiet (as test/cli-bundle.e2e.test.ts).
    const r = await cli(
      [
        "run",
        "--no-journal",
        "--image",
        DATA_IMAGE,
        "-e",
        "import pandas as pd\nprint(pd.DataFrame({'a': [1, 2, 3]})['a'].sum())"
      ],
      { env: { HERMES_SANDBOX_HOST_ID: `python-data-${process.pid}` } }
    )
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.stdout).toBe("6\n")
  })

  it("doctor reports it present with its size, its labels are the language images'", async () => {
    const r = await cli(["doctor", "--json"])
    expect(r.code).toBe(0)
    const checks = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean; required: boolean; detail: string }>
    expect(checks.find((c) => c.name === "image python-data")).toMatchObject({
      ok: true,
      required: false,
      detail: expect.stringMatching(/^hermes-sandbox\/python-data:latest \(\d+ MB\)/)
    })
    const labels = (await docker.getImage(DATA_IMAGE).inspect()).Config.Labels
    expect(labels).toMatchObject({
      "org.hermes-sandbox.image": "python-data",
      "org.hermes-sandbox.runner-protocol": "2",
      "org.hermes-sandbox.runner": "/opt/hermes/hermes-run"
    })
  })

  it("doctor: an absent data image is a warning with the build command, never a failure", async () => {
    const check = await dataImageCheck(docker, "hermes-sandbox-test/python-data-absent:none")
    expect(check).toMatchObject({
      name: "image python-data",
      ok: false,
      required: false,
      fix: imageBuildCommand("data")
    })
    expect(check.fix).toContain("--variant data")
    expect(check.detail).toContain("absent")
  })
})
