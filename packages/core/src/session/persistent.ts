/**
 * Finding a persistent sandbox again: by its profile's labels and its fingerprint. A match is
 * reconnected (restarted if the engine stopped it); one of another configuration is replaced
 * (journaled) or refused; one past its maximum lifetime is removed and a new one made; a create
 * that lost the race to another process (the name is taken) takes that process's sandbox.
 */
import { Clock, Effect, Option } from "effect"
import type { JournalError, JournalEvent } from "@hermes-sandbox/events"
import { invalidRequest, type SandboxError, SessionConfigMismatch, type InvalidRequest } from "../Errors.js"
import * as Fingerprint from "../Fingerprint.js"
import { ContainerNamePrefix, Label, ProjectName } from "../Labels.js"
import type { Removals } from "../kernel/Removals.js"
import type { SandboxCreated, SandboxInfo, SandboxRuntime } from "../SandboxRuntime.js"
import * as SessionReaper from "../SessionReaper.js"

export interface FindDeps {
  readonly runtime: SandboxRuntime["Type"]
  readonly removals: Removals
  readonly append: (streamId: string, event: JournalEvent) => Effect.Effect<void, JournalError>
  readonly appendQuietly: (streamId: string, ...events: ReadonlyArray<JournalEvent>) => Effect.Effect<void>
  /** Held by a handle of this process. */
  readonly held: (sessionId: string) => boolean
}

export interface FindInput<S> {
  readonly profile: string
  readonly policy: "replace" | "refuse"
  readonly sessionId: string
  readonly fingerprint: { readonly canonical: string; readonly fingerprint: string }
  readonly imageId: string
  /** The caller's labels, for SessionOpened. */
  readonly tags: Readonly<Record<string, string>> | undefined
  /** Its idle limit (the plan's lifetimeMs), for SessionOpened and SessionReconnected. */
  readonly idleMs: number | undefined
  /** Create, start and record a new one (kernel/Sandbox.ts). */
  readonly create: Effect.Effect<SandboxCreated, SandboxError | JournalError>
  /** Its labels' deadline (ms), for the new one. */
  readonly newDeadlineMs: number | undefined
  /** Make the handle of the sandbox found or made. */
  readonly handle: (
    container: SandboxCreated,
    reconnected: boolean,
    replaced: ReadonlyArray<string>,
    deadlineMs: number | undefined
  ) => Effect.Effect<S>
}

/** SessionOpened's and SessionReconnected's deadline and idle limit, those known. */
const deadlineFields = (deadline: number | undefined, idleMs: number | undefined) => ({
  ...(deadline === undefined ? {} : { deadline }),
  ...(idleMs === undefined ? {} : { idleMs })
})

/** Under the caller's persistent lock: the profile's sandbox, reconnected, replaced or made. */
export const findOrCreate = <S>(
  deps: FindDeps,
  input: FindInput<S>
): Effect.Effect<S, InvalidRequest | SandboxError | SessionConfigMismatch | JournalError> =>
  Effect.gen(function* () {
    const { profile, sessionId, imageId } = input
    const { canonical, fingerprint } = input.fingerprint
    if (deps.held(sessionId)) {
      return yield* Effect.fail(
        invalidRequest("profile", profile, "a profile not already open in this process (close the other handle first)")
      )
    }
    const found = yield* deps.runtime.list({
      [Label.project]: ProjectName,
      [Label.scope]: "persistent",
      [Label.profile]: profile
    })
    const others = found.filter((c) => c.labels[Label.fingerprint] !== fingerprint)
    if (others.length > 0 && input.policy === "refuse") {
      const first = others[0]!
      const diff = Fingerprint.differences(first.labels[Label.fingerprintSpec], canonical)
      return yield* new SessionConfigMismatch({
        profile,
        containerName: first.name,
        differences: diff,
        message:
          `the persistent sandbox ${first.name} of profile ${JSON.stringify(profile)} was made with another configuration (${diff.join("; ")}); ` +
          `destroy it, or open with onConfigChange: "replace"`
      })
    }
    const replaced: Array<string> = []
    for (const old of others) {
      const oldId = old.labels[Label.session] ?? old.name.slice(ContainerNamePrefix.length)
      const diff = Fingerprint.differences(old.labels[Label.fingerprintSpec], canonical)
      // Loud on purpose: whatever its /workspace held is gone with it (onConfigChange: "refuse" keeps it).
      yield* Effect.logError(
        `persistent sandbox ${old.name} (profile ${profile}) was made with another configuration; it is REMOVED, with its files, and replaced ` +
          `(${diff.join("; ")}); open with onConfigChange: "refuse" to keep it`
      )
      yield* deps.appendQuietly(oldId, {
        type: "SessionReplaced",
        data: { sessionId: oldId, profile, containerName: old.name, differences: diff, replacedBy: sessionId }
      })
      yield* deps.removals.removeNow(old)
      yield* deps.appendQuietly(
        oldId,
        {
          type: "ContainerDestroyed",
          data: { containerName: old.name, containerId: old.id, reason: "session-closed" }
        },
        { type: "SessionClosed", data: { sessionId: oldId, reason: `configuration changed: ${diff.join("; ")}` } }
      )
      replaced.push(old.name)
    }
    const reconnect = (c: SandboxInfo) =>
      Effect.gen(function* () {
        if (c.status === "exited" || c.status === "created") {
          // The engine restarted (or the sandbox was stopped): its tmpfs state is gone, its identity is not.
          yield* deps.runtime.start(c)
        } else if (c.status !== "running") {
          return Option.none()
        }
        const deadlineMs = SessionReaper.deadlineOf(c.labels, c.createdAt)
        yield* deps.append(sessionId, {
          type: "SessionReconnected",
          data: { sessionId, containerName: c.name, ...deadlineFields(deadlineMs, input.idleMs) }
        })
        return Option.some(yield* input.handle({ id: c.id, name: c.name, imageId }, true, replaced, deadlineMs))
      })
    const match = found.find((c) => c.labels[Label.fingerprint] === fingerprint)
    if (match !== undefined) {
      // Past its maximum lifetime it is not served again: removed, and a new one made.
      const matchDeadline = SessionReaper.deadlineOf(match.labels, match.createdAt)
      const expired = matchDeadline !== undefined && (yield* Clock.currentTimeMillis) > matchDeadline
      const again = expired ? Option.none() : yield* reconnect(match)
      if (Option.isSome(again)) return again.value
      yield* deps.removals.removeNow(match)
      if (expired) {
        yield* deps.appendQuietly(
          sessionId,
          {
            type: "ContainerDestroyed",
            data: { containerName: match.name, containerId: match.id, reason: "orphan-reaped" }
          },
          { type: "SessionClosed", data: { sessionId, reason: "max-lifetime passed" } }
        )
      }
    }
    yield* deps.append(sessionId, {
      type: "SessionOpened",
      data: {
        sessionId,
        scope: "persistent",
        containerName: `${ContainerNamePrefix}${sessionId}`,
        ...(input.tags === undefined ? {} : { tags: input.tags }),
        ...deadlineFields(input.newDeadlineMs, input.idleMs)
      }
    })
    const created = yield* input.create.pipe(Effect.either)
    if (created._tag === "Right") return yield* input.handle(created.right, false, replaced, input.newDeadlineMs)
    // Another process created it a moment ago (the name is taken): take that one.
    if (created.left._tag === "ContainerFailed" && created.left.reason === "conflict") {
      const raced = (yield* deps.runtime.list({ [Label.project]: ProjectName, [Label.session]: sessionId }))[0]
      if (raced !== undefined) {
        const again = yield* reconnect(raced)
        if (Option.isSome(again)) return again.value
      }
    }
    return yield* Effect.fail(created.left)
  })
