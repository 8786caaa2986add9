/**
 * Why did a container exit? The wait response gives the exit code, not who caused it: an
 * engine that stops or restarts kills its containers (SIGTERM, then SIGKILL), and so does
 * `docker stop/kill`; such an exit is an infrastructure failure, not the program's result.
 *
 * The engine says so in its event stream: a `kill` event precedes the container's `die`.
 * One long-lived `GET /events` subscription (kill and die of this project's containers)
 * serves every execution of the runtime, instead of one event-log query per exit, which
 * cost a request and engine work per execution and could not be trusted anyway: the engine
 * replays only its last 256 events, and a query that reaches an engine restarted in the
 * meantime finds an empty log and "confirms" a kill as the program's own exit.
 *
 * A witness is registered before the container starts. The engine (20.10) sends the
 * stream's headers only with its first event, so "the subscription is live" cannot be
 * observed; instead each subscription asks for a replay from a little before it was sent
 * (`since`), which covers every event of a container that starts after the request left. The
 * subscription stays open while witnesses are open (and a moment after the last one), so
 * under load one request serves many executions. If the stream breaks while a witness is
 * open (the engine went away), that witness can no longer tell, and says so.
 */
import type Docker from "dockerode"
import { Label, ProjectName } from "@hermes-sandbox/core/Labels"
import { containerOf, type EngineEvent, streamEvents } from "./engineEvents.js"

export type Testimony =
  /** The container died and no kill was logged before it: the exit is the program's own. */
  | { readonly _tag: "OwnExit" }
  /** The engine logged a kill (of this signal) before the container died. */
  | { readonly _tag: "Killed"; readonly signal: string }
  /** The event stream broke while the container was watched: nobody can tell any more. */
  | { readonly _tag: "Unknown"; readonly reason: string }

export interface ExitWitness {
  /** Settles at the container's `die` event, or when the stream breaks. */
  readonly testimony: Promise<Testimony>
  /** Stop watching (the verdict is in, or the container is gone). Idempotent. */
  readonly release: () => void
  /** The signal of a kill the engine logged for the container so far (before its `die`, or without one yet). */
  readonly killSeen: () => string | undefined
}

interface Watch {
  killSignal: string | undefined
  readonly settle: (t: Testimony) => void
}

/** How far back a new subscription replays: the request may reach the engine after the watched container started. */
const REPLAY_MS = 2_000
/** How long an idle subscription stays open after its last witness, for the next execution. */
const LINGER_MS = 1_000

export class ExitWitnesses {
  private readonly watches = new Map<string, Watch>()
  private subscription: AbortController | undefined
  private lingering: ReturnType<typeof setTimeout> | undefined
  private closed = false

  constructor(
    private readonly docker: Docker,
    /** The engine's clock minus ours (for `since`). */
    private readonly clockOffsetMs: number
  ) {}

  /** Watch a container that has not started yet (its events from now on are seen). */
  watch(id: string): ExitWitness {
    let settle!: (t: Testimony) => void
    const testimony = new Promise<Testimony>((resolve) => {
      settle = resolve
    })
    if (this.closed) {
      settle({ _tag: "Unknown", reason: "the runtime was closed" })
      return { testimony, release: () => {}, killSeen: () => undefined }
    }
    const watch: Watch = { killSignal: undefined, settle }
    this.watches.set(id, watch)
    this.subscribe()
    return { testimony, release: () => this.forget(id, watch), killSeen: () => watch.killSignal }
  }

  /** Close the subscription; open witnesses learn that nobody can tell any more. */
  close(): void {
    this.closed = true
    this.unsubscribe("the runtime was closed")
  }

  private forget(id: string, watch: Watch): void {
    if (this.watches.get(id) !== watch) return
    this.watches.delete(id)
    this.lingerIfIdle()
  }

  private lingerIfIdle(): void {
    if (this.watches.size > 0 || this.subscription === undefined || this.lingering !== undefined) return
    this.lingering = setTimeout(() => {
      this.lingering = undefined
      if (this.watches.size === 0) this.unsubscribe("idle")
    }, LINGER_MS)
    this.lingering.unref()
  }

  private unsubscribe(reason: string): void {
    if (this.lingering !== undefined) clearTimeout(this.lingering)
    this.lingering = undefined
    const subscription = this.subscription
    this.subscription = undefined
    subscription?.abort()
    this.broken(reason)
  }

  private subscribe(): void {
    if (this.lingering !== undefined) {
      clearTimeout(this.lingering)
      this.lingering = undefined
    }
    if (this.subscription !== undefined) return
    const subscription = new AbortController()
    this.subscription = subscription
    streamEvents(
      this.docker,
      {
        filter: { actions: ["kill", "die"], label: `${Label.project}=${ProjectName}` },
        sinceMs: Date.now() + this.clockOffsetMs - REPLAY_MS,
        signal: subscription.signal
      },
      (event) => {
        if (this.subscription === subscription) this.onEvent(event)
      },
      (error) => {
        if (this.subscription !== subscription) return
        this.subscription = undefined
        this.broken(
          error === undefined
            ? "the engine ended its event stream (it may be stopping or restarting)"
            : `the engine's event stream failed: ${error}`
        )
      }
    )
  }

  private onEvent(event: EngineEvent): void {
    const id = containerOf(event)
    const watch = id === undefined ? undefined : this.watches.get(id)
    if (watch === undefined) return
    if (event.Action === "kill") watch.killSignal ??= event.Actor?.Attributes?.["signal"] ?? "?"
    if (event.Action === "die") {
      this.forget(id!, watch)
      watch.settle(watch.killSignal === undefined ? { _tag: "OwnExit" } : { _tag: "Killed", signal: watch.killSignal })
    }
  }

  private broken(reason: string): void {
    const open = [...this.watches.values()]
    this.watches.clear()
    for (const w of open) w.settle({ _tag: "Unknown", reason })
  }
}
