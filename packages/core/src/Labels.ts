/**
 * Labels every sandbox container carries. They are how an executor recognises
 * its own containers, how the sweep and the watchdog decide a container is an
 * orphan (owner gone, or deadline passed), and how a persistent sandbox is found
 * again after a restart.
 */
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
