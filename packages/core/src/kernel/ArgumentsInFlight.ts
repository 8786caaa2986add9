/**
 * Tool-call arguments held by this host process at once, over every run of every executor in it:
 * a call's bytes are held from its announcement ('t') until its handler ends. One run holds at most
 * maxInFlight × maxArgumentBytes; without a bound across runs, eight runs with eight dense 1 MiB
 * calls each held 1–1.6 GB (hostile review 2, #3: JSON parses to up to ~20× its size; the values
 * bound of tools/toolArguments.ts caps that per call). Past the bound a call is refused (host-busy)
 * and its bytes are counted as they arrive, never kept.
 */
import * as Schemas from "../Schemas.js"

/** The process-wide default: 64 MiB of arguments in flight. */
export const HOST_ARGUMENT_BYTES = 64 * Schemas.MiB

export class ArgumentsInFlight {
  private held = 0
  constructor(readonly maxBytes: number) {}

  /** Hold `bytes` if they fit under the bound; false (nothing held) otherwise. */
  tryHold(bytes: number): boolean {
    if (this.held + bytes > this.maxBytes) return false
    this.held += bytes
    return true
  }

  release(bytes: number): void {
    this.held = Math.max(0, this.held - bytes)
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held
  }
}

/** The one every tool channel of this process shares unless given another (tests). */
export const hostArgumentsInFlight = new ArgumentsInFlight(HOST_ARGUMENT_BYTES)
