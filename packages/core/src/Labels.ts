/**
 * Labels every sandbox container carries. They are how an executor recognises
 * its own containers, how the sweep and the watchdog decide a container is an
 * orphan (owner gone, or deadline passed), and how a persistent sandbox is found
 * again after a restart.
 */
import * as ProcessIdentity from "./ProcessIdentity.js"

export const LabelPrefix = "org.hermes-sandbox"

export const Label = {
  project: `${LabelPrefix}.project`,
  executor: `${LabelPrefix}.executor`,
  execution: `${LabelPrefix}.execution`,
  /** Epoch seconds after which the container is certainly garbage. */
  deadline: `${LabelPrefix}.deadline`,
  ownerPid: `${LabelPrefix}.owner-pid`,
  ownerHost: `${LabelPrefix}.owner-host`,
  /** Process start time of the owner, so a recycled pid is not mistaken for the owner. */
  ownerStarted: `${LabelPrefix}.owner-started`,
  language: `${LabelPrefix}.language`,
  scope: `${LabelPrefix}.scope`,
  session: `${LabelPrefix}.session`,
  fingerprint: `${LabelPrefix}.fingerprint`,
  pool: `${LabelPrefix}.pool`,
  /** Session/persistent: what the fingerprint covers (image, limits, mounts, env NAMES), as JSON, for messages. */
  fingerprintSpec: `${LabelPrefix}.fingerprint-spec`,
  /** Persistent: the profile it serves (found again by profile + fingerprint). */
  profile: `${LabelPrefix}.profile`,
  /** Session/persistent: idle seconds after which it may be reaped (Docker labels cannot move, so this is a duration, not a date). */
  idleSeconds: `${LabelPrefix}.idle-seconds`
} as const

export const ProjectName = "hermes-sandbox"
export const ContainerNamePrefix = "hermes-sandbox-"

let owner: Readonly<Record<string, string>> | undefined
/**
 * The labels naming this process as a container's owner (pid, host, start time): the startup sweep
 * and the watchdog remove the container once the owner is provably gone. One object, made once:
 * spread it, do not change it.
 */
export const ownerLabels = (): Readonly<Record<string, string>> =>
  (owner ??= {
    [Label.ownerPid]: String(ProcessIdentity.self.pid),
    [Label.ownerHost]: ProcessIdentity.self.host,
    [Label.ownerStarted]: ProcessIdentity.self.started
  })

/**
 * The `deadline` label of a container that may legitimately live `lifetimeMs` from `nowMs`: epoch
 * seconds, plus `marginS` seconds. Wall-clock time on purpose, not Clock: other processes read it
 * (the sweep, the reaper, the watchdog), and past it the container is garbage.
 */
export const deadlineLabel = (lifetimeMs: number, marginS: number, nowMs: number = Date.now()): string =>
  String(Math.ceil((nowMs + lifetimeMs) / 1000) + marginS)

/** The margin of a deadline that is not fixed by the user (a run's, a session's): generous, so a slow engine is never cut short. */
export const DEADLINE_MARGIN_S = 300
