/**
 * The files execute_code collected, kept after the result so that a client reads them as
 * resources (sandbox://executions/{id}/files/{path}): a result carries images inline only when
 * small, and some clients drop images, so every file is also a link to this. Also the images
 * run_python's cells displayed (sandbox://cells/{id}/{name}), for results that name them instead
 * of sending them (images: link).
 *
 * Bounded for the whole server, not per MCP session (a session could otherwise be opened per
 * call): each execution's files are kept `retentionMs`, and past `maxBytes` in all the oldest
 * executions' files are evicted first. Host memory holds at most `maxBytes` of content here.
 * The MCP session that ran the execution is kept with its files: over HTTP only it may read them.
 */
import type { CollectedFile } from "@hermes-sandbox/core/Artifacts"

export interface FileStoreLimits {
  readonly maxBytes: number
  readonly retentionMs: number
}

/**
 * Whose files: an execute_code run's (collected), a run_python cell's (its images), or a run's
 * whole output when its result was cut (execute_code's or terminal's: `stdout`, `stderr`).
 */
export type StoredKind = "execution" | "cell" | "output"

export interface StoredExecution {
  /** The run's execution id, or the cell's id. */
  readonly executionId: string
  readonly kind: StoredKind
  /** The MCP session that ran it. */
  readonly owner: string
  readonly storedAt: number
  readonly files: ReadonlyMap<string, CollectedFile>
  readonly bytes: number
}

export class FileStore {
  /** Oldest first (a Map keeps insertion order); by kind and id (a run's collected files and its output are kept apart). */
  private readonly executions = new Map<string, StoredExecution>()
  private held = 0
  private readonly sweep: ReturnType<typeof setInterval>

  constructor(
    readonly limits: FileStoreLimits,
    private readonly now: () => number = Date.now
  ) {
    // Expired files are dropped when the store is used, and by this sweep when it is not.
    this.sweep = setInterval(() => this.expire(), Math.max(1000, Math.min(limits.retentionMs, 60_000)))
    this.sweep.unref()
  }

  /** Bytes of content held now. */
  get bytes(): number {
    this.expire()
    return this.held
  }

  /**
   * Keep one execution's files, evicting the oldest executions' until they fit. Files that
   * cannot fit even alone are not kept (false): the caller says so rather than link to nothing.
   */
  put(
    executionId: string,
    owner: string,
    files: ReadonlyArray<CollectedFile>,
    kind: StoredKind = "execution"
  ): boolean {
    this.expire()
    const bytes = files.reduce((sum, f) => sum + f.content.byteLength, 0)
    if (files.length === 0 || bytes > this.limits.maxBytes) return false
    this.drop(keyOf(kind, executionId))
    for (const [key] of this.executions) {
      if (this.held + bytes <= this.limits.maxBytes) break
      this.drop(key)
    }
    this.executions.set(keyOf(kind, executionId), {
      executionId,
      kind,
      owner,
      storedAt: this.now(),
      files: new Map(files.map((f) => [f.path, f])),
      bytes
    })
    this.held += bytes
    return true
  }

  /** One execution's kept files of a kind, or undefined when none are (never kept, expired or evicted). */
  get(executionId: string, kind: StoredKind = "execution"): StoredExecution | undefined {
    this.expire()
    return this.executions.get(keyOf(kind, executionId))
  }

  /** The executions whose files are kept, oldest first. */
  list(): ReadonlyArray<StoredExecution> {
    this.expire()
    return [...this.executions.values()]
  }

  /** Forget the files of one MCP session (it ended: over HTTP no one else may read them). */
  forget(owner: string): void {
    for (const [key, e] of this.executions) if (e.owner === owner) this.drop(key)
  }

  /** Forget everything (the server is closing). */
  clear(): void {
    clearInterval(this.sweep)
    this.executions.clear()
    this.held = 0
  }

  private expire(): void {
    const oldestKept = this.now() - this.limits.retentionMs
    for (const [key, e] of this.executions) {
      if (e.storedAt > oldestKept) break
      this.drop(key)
    }
  }

  private drop(key: string): void {
    const e = this.executions.get(key)
    if (e === undefined) return
    this.executions.delete(key)
    this.held -= e.bytes
  }
}

const keyOf = (kind: StoredKind, executionId: string) => `${kind} ${executionId}`
