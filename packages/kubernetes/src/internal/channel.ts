/**
 * One WebSocket stream to a pod's container (attach or exec), channel protocol v4: every binary
 * message starts with its channel (0 stdin, 1 stdout, 2 stderr, 3 the status, as a v1.Status).
 *
 * v4 has no way to close stdin alone (v5 has; Kubernetes 1.20 speaks only v4): the stream carries
 * stdin, stdout and stderr together, and closing it closes all three. So the supervisor never needs
 * its stdin to end (runner feature `stdin`, SandboxRuntime.stdinEnds false), and the stream is
 * closed by the container's end, not by us. Measured on 1.20 + containerd 1.6 (docs/scale-out.md):
 * a second attach without stdin closes a stdinOnce container's stdin, so there is exactly one.
 */
import type { KubeConfig } from "@kubernetes/client-node"
import WebSocket from "ws"

export interface ChannelHandlers {
  readonly stdout: (chunk: Uint8Array) => void
  readonly stderr: (chunk: Uint8Array) => void
}

export interface Channel {
  /** Send bytes to stdin; resolves once handed to the socket. */
  readonly write: (data: Uint8Array) => Promise<void>
  /** Resolves when the stream ends (the container's end, or the connection lost): the status, if one came. */
  readonly closed: Promise<ChannelEnd>
  /** Close the stream (stdin, stdout and stderr together). Idempotent. */
  readonly close: () => void
}

export interface ChannelEnd {
  /** The v1.Status the server sent on channel 3 (exec: the process's end), if any. */
  readonly status?: {
    readonly status?: string
    readonly reason?: string
    readonly message?: string
    readonly details?: unknown
  }
  readonly code: number
  readonly reason: string
}

/** Stdin is sent in pieces: one message per piece, each prefixed with its channel byte. */
const STDIN_PIECE = 64 * 1024

/** The exit code of an exec's v1.Status: 0 on Success, the `ExitCode` cause's on NonZeroExitCode. */
export const exitCodeOf = (end: ChannelEnd): number | undefined => {
  const s = end.status
  if (s === undefined) return undefined
  if (s.status === "Success") return 0
  const causes = (s.details as { causes?: Array<{ reason?: string; message?: string }> } | undefined)?.causes ?? []
  const code = Number(causes.find((c) => c.reason === "ExitCode")?.message)
  return Number.isInteger(code) ? code : undefined
}

export const openChannel = async (
  kc: KubeConfig,
  path: string,
  query: URLSearchParams,
  handlers: ChannelHandlers,
  signal?: AbortSignal
): Promise<Channel> => {
  const cluster = kc.getCurrentCluster()
  if (cluster === null) throw new Error("the kubeconfig has no current cluster")
  const options: WebSocket.ClientOptions = {}
  await kc.applyToHTTPSOptions(options)
  const url = `${cluster.server.replace(/^http/, "ws")}${path}?${query}`
  const ws = new WebSocket(url, ["v4.channel.k8s.io"], options)
  let status: ChannelEnd["status"]
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    if (!isBinary || data.length === 0) return
    const body = data.subarray(1)
    if (data[0] === 1) handlers.stdout(body)
    else if (data[0] === 2) handlers.stderr(body)
    else if (data[0] === 3) {
      try {
        status = JSON.parse(body.toString("utf8"))
      } catch {
        status = { status: "Failure", message: body.toString("utf8").slice(0, 200) }
      }
    }
  })
  const closed = new Promise<ChannelEnd>((resolve) =>
    ws.once("close", (code, reason) =>
      resolve({ ...(status === undefined ? {} : { status }), code, reason: `${reason}` })
    )
  )
  await new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      ws.terminate()
      reject(signal?.reason ?? new Error("aborted"))
    }
    signal?.addEventListener("abort", onAbort, { once: true })
    ws.once("open", () => {
      signal?.removeEventListener("abort", onAbort)
      resolve()
    })
    ws.once("error", (error) => {
      signal?.removeEventListener("abort", onAbort)
      reject(error)
    })
    // An upgrade refused with a body (404: the pod is gone; 400: not running) says why.
    ws.once("unexpected-response", (_request, response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (c: Buffer) => chunks.length < 16 && chunks.push(c))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8").slice(0, 500)
        let message = text
        try {
          message = (JSON.parse(text) as { message?: string }).message ?? text
        } catch {}
        reject(Object.assign(new Error(message || `HTTP ${response.statusCode}`), { statusCode: response.statusCode }))
      })
    })
  })
  ws.on("error", () => {}) // after open, a lost connection shows as `close`
  return {
    write: async (data) => {
      for (let at = 0; at < data.byteLength; at += STDIN_PIECE) {
        const piece = data.subarray(at, Math.min(data.byteLength, at + STDIN_PIECE))
        const message = Buffer.allocUnsafe(piece.byteLength + 1)
        message[0] = 0
        message.set(piece, 1)
        await new Promise<void>((resolve, reject) =>
          ws.send(message, { binary: true }, (error) => (error ? reject(error) : resolve()))
        )
      }
    },
    closed,
    close: () => {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000)
    }
  }
}
