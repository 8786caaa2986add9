/**
 * The wire protocol between `hermes-sandbox run` and its local daemon (SECURITY.md, "The CLI's
 * local daemon"): frames on a unix socket, each a 4-byte big-endian length (of what follows),
 * one type byte and a payload. Plain Node only: the client side must not load Effect or the SDK.
 *
 * A connection carries one exchange. The client sends one of:
 * - `run` (JSON: the executor options the client would use, the request): the daemon answers
 *   `noFit` (the client runs it itself), or `accepted` once the execution is requested, then
 *   `stdout`/`stderr` chunks (raw bytes) and one `result` (JSON) or `failure` (JSON); the client
 *   may send `cancel` (a reason) meanwhile, and closing the connection cancels too.
 * - `status`: one `status` (JSON) back.
 * - `stop`: one `status` back, then the daemon drains its pool and exits.
 */
import { resolve } from "node:path"

/** A request frame the daemon reads at most (larger requests the client runs itself). */
export const MAX_REQUEST_FRAME_BYTES = 16 * 1024 * 1024
/** A frame from the daemon the client accepts at most (output chunks are far smaller; a result is capped by the SDK). */
export const MAX_REPLY_FRAME_BYTES = 64 * 1024 * 1024
/** How long a connection may take to send its request. */
export const REQUEST_TIMEOUT_MS = 10_000
/** Connections served at once; more are closed unanswered (their clients run directly). */
export const MAX_CONNECTIONS = 64
/** Output a client has not read yet, past which its run is interrupted rather than held in the daemon. */
export const MAX_CLIENT_BACKLOG_BYTES = 8 * 1024 * 1024
/** The protocol's version: a daemon of another version answers noFit. */
export const PROTOCOL_VERSION = 1

export const Frame = {
  run: 0x52, // R
  cancel: 0x43, // C
  status: 0x53, // S
  stop: 0x51, // Q
  noFit: 0x4e, // N
  accepted: 0x41, // A
  stdout: 0x4f, // O
  stderr: 0x45, // E
  result: 0x58, // X
  failure: 0x46 // F
} as const

/** One frame's bytes. */
export const encodeFrame = (type: number, payload: Uint8Array | string = ""): Buffer => {
  const body = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload
  const frame = Buffer.allocUnsafe(5 + body.byteLength)
  frame.writeUInt32BE(1 + body.byteLength, 0)
  frame[4] = type
  frame.set(body, 5)
  return frame
}

/**
 * Frames out of a byte stream, split across chunks or not. A length over `maxFrameBytes` is a
 * violation reported once (`onViolation`); nothing after it is read.
 */
export class FrameReader {
  private chunks: Array<Buffer> = []
  private buffered = 0
  private broken = false

  constructor(
    private readonly maxFrameBytes: number,
    private readonly onFrame: (type: number, payload: Buffer) => void,
    private readonly onViolation: (reason: string) => void
  ) {}

  push(chunk: Buffer): void {
    if (this.broken) return
    this.chunks.push(chunk)
    this.buffered += chunk.byteLength
    while (this.buffered >= 4) {
      // The header first; the body is joined only once it is all here (no copy per chunk).
      if (this.chunks[0]!.byteLength < 4) this.chunks = [Buffer.concat(this.chunks)]
      const length = this.chunks[0]!.readUInt32BE(0)
      if (length < 1 || length > this.maxFrameBytes + 1) {
        this.broken = true
        this.chunks = []
        this.onViolation(`a frame of ${length} bytes (at most ${this.maxFrameBytes + 1})`)
        return
      }
      if (this.buffered < 4 + length) return
      const whole = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks)
      const type = whole[4]!
      const payload = whole.subarray(5, 4 + length)
      const rest = whole.subarray(4 + length)
      this.chunks = rest.byteLength === 0 ? [] : [rest]
      this.buffered = rest.byteLength
      this.onFrame(type, payload)
      if (this.broken) return
    }
  }

  /** Stop reading (the connection is done with). */
  stop(): void {
    this.broken = true
    this.chunks = []
  }
}

/**
 * The executor options of a run that must be the daemon's for the daemon to serve it: what the
 * pool was made with and where its events go. Both sides compute it the same way.
 */
export interface FitKey {
  readonly version: number
  readonly network: boolean
  readonly runtime: string | null
  readonly limitsUnsupported: "fail" | "warn"
  /** The audit trail (--record-code): a daemon records no code, so such a run is run directly. */
  readonly recordCode: boolean
  /** "memory", "default", or the journal's absolute path or URL. */
  readonly journal: string
  /** The variables that choose the engine, its credentials, the default journal and the host's id, as the process sees them. */
  readonly env: Readonly<Record<string, string>>
}

/**
 * The environment a run's engine and journal come from (EngineEndpoint's DOCKER_* and docker
 * context, ssh's agent, the default journal's place, the host id): a client whose values differ
 * from the daemon's would reach another engine or journal, so it runs directly.
 */
export const FIT_ENV = [
  "DOCKER_HOST",
  "DOCKER_CONTEXT",
  "DOCKER_CONFIG",
  "DOCKER_CERT_PATH",
  "DOCKER_TLS_VERIFY",
  "DOCKER_TLS",
  "SSH_AUTH_SOCK",
  "HERMES_SANDBOX_ALLOW_INSECURE_TCP",
  "HERMES_SANDBOX_JOURNAL",
  "HERMES_SANDBOX_HOST_ID",
  "XDG_STATE_HOME",
  "HOME"
] as const

const fitEnv = (env: NodeJS.ProcessEnv): Record<string, string> =>
  Object.fromEntries(FIT_ENV.flatMap((name) => (env[name] === undefined ? [] : [[name, env[name]!]])))

export const fitKey = (
  options: {
    readonly network?: boolean | undefined
    /** The OCI runtime's name, or a Kubernetes choice (its options as JSON make the key). */
    readonly runtime?: string | { readonly kubernetes: unknown } | undefined
    readonly limitsUnsupported?: "fail" | "warn" | undefined
    readonly recordCode?: boolean | undefined
    readonly journal: string
  },
  env: NodeJS.ProcessEnv = process.env
): FitKey => ({
  version: PROTOCOL_VERSION,
  network: options.network === true,
  runtime:
    typeof options.runtime === "object"
      ? `kubernetes ${JSON.stringify(options.runtime.kubernetes)}`
      : (options.runtime ?? null),
  limitsUnsupported: options.limitsUnsupported ?? "fail",
  recordCode: options.recordCode === true,
  journal: options.journal,
  env: fitEnv(env)
})

/** `--journal` / `--no-journal` as the fit key says it: a relative path is the caller's working directory's. */
export const journalKey = (journal: string | boolean | undefined): string =>
  journal === false
    ? "memory"
    : typeof journal === "string"
      ? /^postgres(ql)?:\/\//.test(journal)
        ? journal
        : resolve(journal)
      : "default"

export const sameFit = (a: FitKey, b: FitKey): boolean =>
  a.version === b.version &&
  a.network === b.network &&
  a.runtime === b.runtime &&
  a.limitsUnsupported === b.limitsUnsupported &&
  a.recordCode === b.recordCode &&
  a.journal === b.journal &&
  typeof a.env === "object" &&
  typeof b.env === "object" &&
  a.env !== null &&
  b.env !== null &&
  FIT_ENV.every((name) => a.env[name] === b.env[name])

/** A request as it travels: the SDK's ExecuteRequest, its files' bytes as base64. */
export interface WireRequest {
  readonly language: string
  readonly code: string
  readonly timeoutMs?: number
  readonly memory?: string
  readonly cpus?: number
  readonly stdin?: string
  readonly env?: Readonly<Record<string, string>>
  readonly files?: Readonly<Record<string, string>>
  readonly image?: string
}

export interface RunMessage {
  readonly fit: FitKey
  readonly request: WireRequest
}

/** What `daemon status` reports. */
export interface DaemonStatus {
  readonly pid: number
  readonly socket: string
  readonly fit: FitKey
  readonly pool: { readonly size: number; readonly languages: ReadonlyArray<string>; readonly idleTtlMs?: number }
  /** The limits and image the pool was made with, where the daemon's command line set them. */
  readonly shape: {
    readonly image?: string
    readonly memory?: string
    readonly cpus?: number
    readonly timeoutMs?: number
  }
  readonly warm: Readonly<Record<string, number>>
  readonly inFlight: number
  /** Runs served since the daemon started, and runs handed back (noFit). */
  readonly served: number
  readonly handedBack: number
  readonly startedAt: string
}
