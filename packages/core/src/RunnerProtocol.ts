/**
 * How a program reaches the runner inside the container: one header line,
 * then the code, then each supplied file, then the program's own stdin.
 *
 *   HERMES/1 {"language":"python","code":<bytes>,"files":[["path",<bytes>],...]}\n
 *   <code><file 1>...<file n><stdin...>
 *
 * The runner (images/runner/) reads exactly these byte counts without
 * buffering, so not one byte of the program's stdin is consumed by it.
 */
import { randomBytes } from "node:crypto"
import type { Language } from "./Language.js"

export const RUNNER_PROTOCOL_VERSION = 1
/** The exit code the runner uses when the header or payload is malformed. */
export const RUNNER_PROTOCOL_ERROR_EXIT = 126

const encoder = new TextEncoder()

export interface RunnerPayload {
  readonly language: Language
  readonly code: Uint8Array
  readonly files: ReadonlyArray<readonly [path: string, content: Uint8Array]>
  readonly stdin: Uint8Array
  /**
   * Ask the runner to report the program's end itself: after the program's output it writes
   * `\x1eHERMES-DONE <report> <exit code>\n` on stdout and stderr (see CompletionScanner).
   */
  readonly report?: string | undefined
}

export const encodeRunnerPayload = (payload: RunnerPayload): Uint8Array => {
  const header = encoder.encode(
    `HERMES/${RUNNER_PROTOCOL_VERSION} ${JSON.stringify({
      language: payload.language,
      code: payload.code.byteLength,
      files: payload.files.map(([path, content]) => [path, content.byteLength]),
      ...(payload.report === undefined ? {} : { report: payload.report })
    })}\n`
  )
  const parts = [header, payload.code, ...payload.files.map(([, content]) => content), payload.stdin]
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

/** A fresh nonce for a run's completion marker. */
export const makeReportNonce = (): string => randomBytes(16).toString("hex")

/** The bytes that open a completion marker for this nonce. */
export const completionMarker = (nonce: string): Uint8Array => encoder.encode(`\x1eHERMES-DONE ${nonce} `)

/**
 * Watches one output stream for the runner's completion marker. Output before the
 * marker is delivered as it arrives, except for a tail short enough to be the start
 * of a marker split across chunks; the marker itself is never delivered. Once the
 * marker is complete, `onDone` gets the exit code and later bytes are dropped.
 */
export class CompletionScanner {
  private held: Buffer = Buffer.alloc(0)
  private readonly marker: Buffer
  /** The reported exit code, once the marker was seen. */
  done: number | undefined

  constructor(
    marker: Uint8Array,
    private readonly deliver: (chunk: Uint8Array) => void,
    private readonly onDone: (exitCode: number) => void
  ) {
    this.marker = Buffer.from(marker)
  }

  readonly push = (chunk: Uint8Array): void => {
    if (this.done !== undefined) return
    const data = this.held.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.held, chunk])
    const at = data.indexOf(this.marker)
    if (at >= 0) {
      if (at > 0) this.deliver(data.subarray(0, at))
      const end = data.indexOf(10, at + this.marker.length)
      if (end < 0) {
        this.held = Buffer.from(data.subarray(at)) // the marker's end has not arrived yet
        return
      }
      const code = Number(data.subarray(at + this.marker.length, end).toString("latin1"))
      this.held = Buffer.alloc(0)
      this.done = Number.isInteger(code) ? code : 1
      this.onDone(this.done)
      return
    }
    // Keep the longest tail that could still become the marker.
    let keep = Math.min(this.marker.length - 1, data.length)
    while (keep > 0 && !this.marker.subarray(0, keep).equals(data.subarray(data.length - keep))) keep--
    if (data.length > keep) this.deliver(data.subarray(0, data.length - keep))
    this.held = keep === 0 ? Buffer.alloc(0) : Buffer.from(data.subarray(data.length - keep))
  }

  /** The stream ended without a marker: deliver what was held back. */
  readonly flush = (): void => {
    if (this.done === undefined && this.held.length > 0) this.deliver(this.held)
    this.held = Buffer.alloc(0)
  }
}
