/**
 * The sandboxes a caller's cells ran in, one after another (docs/design/kernel.md §6). A caller that
 * opens a new session when its sandbox is gone — createSession's `reopenWhenIdleExpired`, an MCP
 * session's sandbox after its idle expiry — runs its next cell in a fresh kernel: what the earlier
 * cells left in the old one is gone, although the new session itself lost nothing and so cannot say
 * it. A lineage runs each cell telling the session whether that is so (`CellOptions.stateLostBefore`),
 * so the result's `stateLost` and its `CellExecuted` say the same.
 *
 *   const cells = CellLineage.make()
 *   yield* cells.runCell(session, { code })   // stateLost when the last cell ran in another session
 */
import { Effect } from "effect"
import type { CellResult } from "./CellResult.js"
import type { CellOptions, CellRequest, Session, SessionCallError, SessionCellError } from "./Session.js"

export interface CellLineage {
  /** Would a cell in session `sessionId` run in another sandbox than the last cell whose result returned? */
  readonly replaced: (sessionId: string) => boolean
  /**
   * One cell in `session`, saying `stateLost` (result and journal) when the last cell whose result
   * returned ran in another session. The lineage's cells run one at a time, so the second of two
   * cells sent together to a new sandbox does not say it again.
   */
  readonly runCell: (
    session: Session,
    request: CellRequest,
    options?: CellOptions
  ) => Effect.Effect<CellResult, SessionCellError>
  /** `session.restartKernel`: the caller asked for a fresh state, so nothing earlier is lost to report (as core's own rule). */
  readonly restartKernel: (session: Session) => Effect.Effect<void, SessionCallError>
  /** The caller asked for a new sandbox (MCP's reset_session): nothing earlier is lost to report. */
  readonly forget: () => void
}

export const make = (): CellLineage => {
  /** The session of the last cell whose result returned (a cell that failed told the caller nothing). */
  let last: string | undefined
  const lock = Effect.unsafeMakeSemaphore(1)
  const replaced = (sessionId: string) => last !== undefined && last !== sessionId
  return {
    replaced,
    runCell: (session, request, options = {}) =>
      lock.withPermits(1)(
        Effect.suspend(() =>
          session
            .runCell(request, replaced(session.sessionId) ? { ...options, stateLostBefore: true } : options)
            .pipe(Effect.tap(() => Effect.sync(() => void (last = session.sessionId))))
        )
      ),
    restartKernel: (session) =>
      lock.withPermits(1)(Effect.tap(session.restartKernel, () => Effect.sync(() => void (last = undefined)))),
    forget: () => void (last = undefined)
  }
}
