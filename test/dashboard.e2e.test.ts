/**
 * `hermes-sandbox dashboard` in a real browser: Debian's chromium, headless, driven by
 * playwright-core (test/support/dashboard.ts). The page is opened with the token in its fragment;
 * then a real Docker run (python, with a hostile file name, tool name and output) starts and the
 * page shows it running, then among the recent executions, live; its history opens by keyboard; the
 * charts are drawn; nothing the sandbox chose runs as markup; a request without the token and one
 * from a foreign Origin are refused. A screenshot is kept under test-artifacts/ (path printed).
 * Then the same page mounted on the MCP HTTP server (`mcp --http --dashboard`): a run of an MCP
 * client's execute_code that collects a PNG shows the image itself in its detail (fetched with the
 * token into a blob URL), from the server's artifact store.
 */
import * as fs from "node:fs"
import { request } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createExecutor, type SandboxExecutor } from "@hermes-sandbox/docker"
import { type Dashboard, launchChromium, startDashboard } from "./support/dashboard.js"
import { startHttpServer } from "./support/mcp.js"
import { connectHttp } from "./support/mcpHttpClient.js"

const TOKEN = "dashboard-e2e-token-0123456789abcdef"
const HOSTILE_FILE = `<img src=x onerror="window.pwned='file'">.txt`
const HOSTILE_TOOL = `<img src=x onerror="window.pwned='tool'">`
const HOSTILE_OUTPUT = `<script>window.pwned='output'</script>`
const root = new URL("..", import.meta.url).pathname

const status = (port: number, headers: Record<string, string>): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/api/overview", headers: { host: `127.0.0.1:${port}`, ...headers } },
      (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      }
    )
    req.on("error", reject)
    req.end()
  })

describe("the dashboard in chromium", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hermes-dashboard-e2e-"))
  const journal = path.join(dir, "journal.sqlite")
  const tokenFile = path.join(dir, "token")
  let executor: SandboxExecutor
  let dashboard: Dashboard
  let browser: Browser
  let page: Page
  const pageErrors: Array<string> = []

  beforeAll(async () => {
    fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 })
    // One executor for the file, recording into the journal the dashboard follows.
    executor = await createExecutor({ journal: { path: journal }, recordCode: true })
    dashboard = await startDashboard(journal, tokenFile)
    browser = await launchChromium()
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    page.on("pageerror", (e) => pageErrors.push(String(e)))
    page.on("dialog", (d) => {
      pageErrors.push(`a dialog opened: ${d.message()}`)
      void d.dismiss()
    })
  })
  afterAll(async () => {
    await browser?.close()
    // SIGTERM: the CLI's exit code for it (128 + 15), after closing the server and the journal.
    expect(await dashboard?.stop()).toBe(143)
    await executor?.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("shows a run started after it opened, live; its history by keyboard; its charts; refuses strangers", async () => {
    await page.goto(`${dashboard.url}#token=${TOKEN}`)
    await expect.poll(() => page.locator("#status").textContent()).toMatch(/live at event/)
    // The token left the address bar (it stays in the tab's sessionStorage).
    expect(page.url()).not.toContain(TOKEN)
    const before = Number(await page.locator("body").getAttribute("data-position"))

    const run = executor.executeCode({
      language: "python",
      code: [
        "import time",
        `open(${JSON.stringify(HOSTILE_FILE)}, "w").write("hi")`,
        "from hermes_tools import call_tool, ToolRefused",
        "try:",
        `    call_tool(${JSON.stringify(HOSTILE_TOOL)}, {})`,
        "except ToolRefused as e:",
        "    pass",
        "time.sleep(2)",
        `print(${JSON.stringify(HOSTILE_OUTPUT)})`
      ].join("\n"),
      tools: { add: { handler: ({ a, b }: { a: number; b: number }) => a + b } },
      collect: ["*.txt"],
      timeoutMs: 60_000
    })
    // Running now, with its deadline, while it sleeps.
    const running = page.locator("#running tbody tr", { hasText: "execution" })
    await running.first().waitFor({ timeout: 30_000 })
    await expect.poll(() => running.first().locator("td").nth(5).textContent()).toMatch(/^\d{4}-\d\d-\d\d .* \(in /)
    const result = await run
    expect(result.exitCode, result.stderr).toBe(0)
    expect(result.stdout).toBe(`${HOSTILE_OUTPUT}\n`)

    // Among the recent executions, without a reload.
    const row = page.locator(`#executions tbody tr[data-id="${result.executionId}"]`)
    await row.waitFor({ timeout: 30_000 })
    expect(Number(await page.locator("body").getAttribute("data-position"))).toBeGreaterThan(before)
    await expect.poll(() => row.locator("td.outcome").textContent()).toContain("ok")

    // The history by keyboard: focus the row (Tab order), Enter.
    await row.focus()
    await page.keyboard.press("Enter")
    const history = page.locator("#history li")
    await history.first().waitFor()
    // The focus moved to the history's section.
    await page.locator("#detail:focus").waitFor()
    const types = await page.locator("#history li .type").allTextContents()
    expect(types[0]).toBe("ExecutionRequested")
    expect(types).toEqual(
      expect.arrayContaining(["ContainerCreated", "ToolCallRequested", "ToolCallRefused", "ArtifactsCollected"])
    )
    // What the sandbox chose is shown as text, never run as markup.
    expect(await page.locator("#detail .files td.path").allTextContents()).toEqual([HOSTILE_FILE])
    expect(await page.locator("#detail .tool-calls td.tool").allTextContents()).toEqual([HOSTILE_TOOL])
    // recordCode: its code and output, as recorded.
    expect(types).toEqual(expect.arrayContaining(["CodeRecorded", "OutputRecorded"]))
    expect(await page.locator("#history li[data-type=OutputRecorded] pre.stdout").textContent()).toBe(
      `${HOSTILE_OUTPUT}\n`
    )
    expect(await page.locator("#history li[data-type=CodeRecorded] pre.code").textContent()).toContain(HOSTILE_OUTPUT)
    expect(await page.evaluate("typeof window.pwned")).toBe("undefined")
    expect(await page.locator("img, script:not([src])").count()).toBe(0)

    // Escape closes it and gives the focus back to the row.
    await page.keyboard.press("Escape")
    await page.locator(`#executions tr[data-id="${result.executionId}"]:focus`).waitFor()

    // The charts: bars by outcome, p50 and p95 lines for each phase, the pool's rate.
    expect(await page.locator("#chart-outcomes svg rect.bar").count()).toBeGreaterThan(0)
    expect(await page.locator("#chart-outcomes .legend li").allTextContents()).toContain("\u2713 ok (1)")
    expect(await page.locator("#chart-latency svg path.series").count()).toBe(10)
    expect(await page.locator("#chart-latency figcaption").allTextContents()).toEqual(
      expect.arrayContaining([expect.stringMatching(/^run: latest p50 \d/), "claim: latest p50 \u2014, p95 \u2014"])
    )
    expect(await page.locator("#chart-pool .legend-text").textContent()).toMatch(/0 claims of 1/)

    const artifacts = path.join(root, "test-artifacts")
    fs.mkdirSync(artifacts, { recursive: true })
    const shot = path.join(artifacts, `dashboard-${Date.now()}.png`)
    await page.screenshot({ path: shot, fullPage: true })
    console.log(`dashboard screenshot: ${shot}`)

    // Strangers: the page's own origin without the token, a foreign Origin with it.
    expect(await page.evaluate(() => fetch("/api/overview").then((r) => r.status))).toBe(401)
    expect(await status(dashboard.port, {})).toBe(401)
    expect(await status(dashboard.port, { authorization: `Bearer ${TOKEN}`, origin: "http://evil.example" })).toBe(403)
    expect(await status(dashboard.port, { authorization: `Bearer ${TOKEN}` })).toBe(200)
    expect(pageErrors).toEqual([])
    expect(dashboard.stderr()).not.toContain(TOKEN)
  })

  it("mounted on the MCP server (mcp --http --dashboard): an execution's collected PNG is shown", async () => {
    const server = await startHttpServer(["--dashboard", "--token-file", tokenFile, "--no-journal"])
    let mcp: Awaited<ReturnType<typeof connectHttp>> | undefined
    try {
      // Printed right after the MCP endpoint's line (which startHttpServer waits for).
      await expect.poll(() => server.stderr()).toContain("/dashboard/#token=<the bearer token>")
      mcp = await connectHttp(server.url, TOKEN, "dashboard-e2e")
      // A 2x2 PNG written by the program and collected.
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAEUlEQVR4nGP4z8DwH4QZYAwAR8oH+WdZbrcAAAAASUVORK5CYII="
      const result = await mcp.client.callTool({
        name: "execute_code",
        arguments: {
          language: "python",
          code: `import base64\nopen("dot.png", "wb").write(base64.b64decode(${JSON.stringify(png)}))`,
          collect: ["*.png"],
          images: "none"
        }
      })
      expect(result.isError, JSON.stringify(result.content)).not.toBe(true)
      const id = String((result.structuredContent as { execution_id?: unknown }).execution_id)

      const mounted = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
      mounted.on("pageerror", (e) => pageErrors.push(String(e)))
      await mounted.goto(`${server.url.replace(/\/mcp$/, "/dashboard/")}#token=${TOKEN}`)
      const row = mounted.locator(`#executions tbody tr[data-id="${id}"]`)
      await row.waitFor({ timeout: 30_000 })
      await row.click()
      const img = mounted.locator("#detail .files img.collected")
      await img.waitFor({ timeout: 15_000 })
      // Decoded by the browser from a blob: URL (the token went as a header, not in the URL).
      expect(await img.getAttribute("src")).toMatch(/^blob:/)
      await expect
        .poll(() =>
          img.evaluate((i) => {
            const decoded = i as unknown as { complete: boolean; naturalWidth: number }
            return [decoded.complete, decoded.naturalWidth]
          })
        )
        .toEqual([true, 2])
      expect(await mounted.locator("#detail .files td.path").allTextContents()).toEqual(["dot.png"])
      await mounted.close()
      expect(pageErrors).toEqual([])
      expect(server.stderr()).not.toContain(TOKEN)
    } finally {
      await mcp?.close()
      expect(await server.stop()).toBe(130)
    }
  })
})
