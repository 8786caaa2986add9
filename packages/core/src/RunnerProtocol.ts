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
}

export const encodeRunnerPayload = (payload: RunnerPayload): Uint8Array => {
  const header = encoder.encode(
    `HERMES/${RUNNER_PROTOCOL_VERSION} ${JSON.stringify({
      language: payload.language,
      code: payload.code.byteLength,
      files: payload.files.map(([path, content]) => [path, content.byteLength])
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
