/**
 * `daemon status` and `daemon stop` as a client asks them: one frame, one status back
 * (protocol.ts). Undefined when no daemon answers at the socket.
 */
import { connect } from "node:net"
import { type DaemonStatus, encodeFrame, Frame, FrameReader, MAX_REPLY_FRAME_BYTES } from "./protocol.js"

/** How long a daemon may take to answer status or stop. */
const ANSWER_TIMEOUT_MS = 10_000

export const askDaemon = (
  type: typeof Frame.status | typeof Frame.stop,
  path: string
): Promise<DaemonStatus | undefined> =>
  new Promise((settle) => {
    const socket = connect(path)
    const timer = setTimeout(() => socket.destroy(), ANSWER_TIMEOUT_MS)
    let answer: DaemonStatus | undefined
    const reader = new FrameReader(
      MAX_REPLY_FRAME_BYTES,
      (frame, payload) => {
        if (frame === Frame.status) {
          try {
            answer = JSON.parse(payload.toString("utf8")) as DaemonStatus
          } catch {
            // not a daemon of ours
          }
        }
        socket.destroy()
      },
      () => socket.destroy()
    )
    socket.on("connect", () => socket.write(encodeFrame(type)))
    socket.on("data", (chunk: Buffer) => reader.push(chunk))
    socket.on("error", () => {})
    socket.on("close", () => {
      clearTimeout(timer)
      settle(answer)
    })
  })
