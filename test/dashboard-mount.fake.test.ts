/**
 * The dashboard mounted on the MCP HTTP server (`mcp --http --dashboard`: serveHttp's `mount`, the
 * CLI's dashboard/server.ts), on the fake runtime, with the official SDK's Client over real HTTP:
 * the page and the API under /dashboard/ behind the server's own Host/Origin checks and tokens, the
 * server's own journal followed, and an execution's collected images served from its artifact store
 * with their type (an SVG under a policy that runs nothing), to the credential whose MCP session ran
 * it only, until the store lets them go. The browser sees the standalone dashboard
 * (test/dashboard.e2e.test.ts); this is the mount's image path at the HTTP level.
 */
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fakeProgram } from "@hermes-sandbox/core/testing"
import { type HttpServing, McpSandbox, serveHttp } from "@hermes-sandbox/mcp"
import { dashboardMount } from "../packages/cli/src/dashboard/server.js"
import { fakeServices } from "../packages/mcp/test/support/fakeMcp.js"
import { connectHttp } from "./support/mcpHttpClient.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef01"
/** A client that is not one of the dashboard's viewers (mcp --dashboard-client names alice and bob). */
const CAROL = "carol-token-0123456789abcdef"
/** A PNG's signature and IHDR (1x1): what the artifact store's sniffing calls image/png. */
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082",
  "hex"
)
const SVG = `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><rect width="4" height="4"/></svg>`

let sandbox: McpSandbox
let serving: HttpServing
let base: string

beforeAll(async () => {
  sandbox = await McpSandbox.open({ limits: { defaultTimeoutS: 30 } }, fakeServices())
  const mount = await dashboardMount({
    path: "/dashboard",
    journal: sandbox.journal,
    journalName: "memory",
    files: sandbox.files,
    viewers: new Set(["alice", "bob"])
  })
  serving = await serveHttp(sandbox, { clients: { alice: ALICE, bob: BOB, carol: CAROL }, mount })
  base = serving.url.replace(/\/mcp$/, "/dashboard")
})
afterAll(async () => {
  await serving?.close()
  await sandbox?.close()
})

interface Reply {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Buffer
}
const get = (url: string, headers: Record<string, string> = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
    })
    req.on("error", reject)
    req.end()
  })
const as = (token: string) => ({ authorization: `Bearer ${token}` })

describe("the dashboard mounted on the MCP HTTP server (fake runtime)", () => {
  it("serves an execution's collected images to its credential, with their types, while the store holds them", async () => {
    const alice = await connectHttp(serving.url, ALICE, "dashboard-mount")
    const files = { "chart.png": PNG, "drawing.svg": Buffer.from(SVG), "notes.txt": Buffer.from("hi") }
    const result = await alice.client.callTool({
      name: "execute_code",
      arguments: {
        language: "python",
        code: fakeProgram({ stdout: "drawn\n" }),
        files: Object.entries(files).map(([path, content]) => ({
          path,
          content: content.toString("base64"),
          encoding: "base64"
        })),
        collect: ["**"],
        images: "none"
      }
    })
    expect(result.isError).not.toBe(true)
    const id = String((result.structuredContent as { execution_id?: unknown }).execution_id)
    const detailUrl = `${base}/api/executions/${encodeURIComponent(id)}`
    const fileUrl = (path: string) => `${detailUrl}/files/${encodeURIComponent(path)}`

    // The page, under the mount (its URLs relative), without a token; /dashboard goes to /dashboard/.
    const bare = await get(base)
    expect([bare.status, bare.headers.location]).toEqual([308, "/dashboard/"])
    const page = await get(`${base}/`)
    expect(page.status).toBe(200)
    expect(page.body.toString()).toContain(`<script src="dashboard.js" defer>`)
    expect(page.headers["content-security-policy"]).toContain("img-src 'self' blob:")
    expect((await get(`${base}/dashboard.js`)).status).toBe(200)
    // The API: the server's token and checks.
    expect((await get(`${base}/api/overview`)).status).toBe(401)
    expect((await get(`${base}/api/overview`, { ...as(ALICE), origin: "https://evil.example" })).status).toBe(403)
    expect((await get(`${base}/api/overview`, { ...as(ALICE), host: "evil.example:80" })).status).toBe(403)
    expect((await get(`${base}/`, { host: "evil.example:80" })).status).toBe(403)
    // A client of the MCP server that is not one of the dashboard's viewers sees none of it.
    const carol = await get(`${base}/api/overview`, as(CAROL))
    expect([carol.status, carol.body.toString()]).toEqual([403, expect.stringContaining("--dashboard-client")])

    // The server's own journal, followed: the run shows up.
    await expect.poll(async () => (await get(detailUrl, as(ALICE))).status, { timeout: 10_000, interval: 50 }).toBe(200)
    const detail = JSON.parse((await get(detailUrl, as(ALICE))).body.toString())
    expect(detail.store).toBe("here")
    expect(detail.files).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: "chart.png", mime: "image/png", held: true, image: true }),
        expect.objectContaining({ path: "drawing.svg", mime: "image/svg+xml", held: true, image: true }),
        expect.objectContaining({ path: "notes.txt", held: true, image: false })
      ])
    )

    const png = await get(fileUrl("chart.png"), as(ALICE))
    expect(png.status).toBe(200)
    expect(png.headers["content-type"]).toBe("image/png")
    expect(png.headers["x-content-type-options"]).toBe("nosniff")
    expect(png.body.equals(PNG)).toBe(true)
    // An SVG runs nothing even opened by itself: a sandboxed policy, served as an attachment.
    const svg = await get(fileUrl("drawing.svg"), as(ALICE))
    expect([svg.status, svg.headers["content-type"], svg.body.toString()]).toEqual([200, "image/svg+xml", SVG])
    expect(svg.headers["content-security-policy"]).toMatch(/default-src 'none'.*sandbox/)
    expect(svg.headers["content-disposition"]).toBe("attachment")
    // Not an image: not served. Not there: 404.
    expect((await get(fileUrl("notes.txt"), as(ALICE))).status).toBe(415)
    expect((await get(fileUrl("other.png"), as(ALICE))).status).toBe(404)
    // Without the token, or with another client's: refused.
    expect((await get(fileUrl("chart.png"))).status).toBe(401)
    const bob = await get(fileUrl("chart.png"), as(BOB))
    expect(bob.status).toBe(404)
    expect(bob.body.toString()).toContain("another client's")
    expect((await get(fileUrl("chart.png"), as(CAROL))).status).toBe(403)
    expect((await get(detailUrl, as(CAROL))).status).toBe(403)
    expect(JSON.parse((await get(detailUrl, as(BOB))).body.toString()).files[0].held).toBe(false)

    // Alice's MCP session ends: the store forgets its files, the page says so.
    await alice.close()
    await expect.poll(async () => (await get(fileUrl("chart.png"), as(ALICE))).status).toBe(404)
    expect(JSON.parse((await get(detailUrl, as(ALICE))).body.toString()).files[0].held).toBe(false)
  })
})
