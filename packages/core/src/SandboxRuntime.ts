/**
 * The port between the executor and a container engine. It speaks in
 * sandboxes, not in Docker calls; `@hermes-sandbox/docker` implements it over
 * dockerode and `FakeRuntime` implements it in memory, and one contract suite
 * runs against both so the fake cannot drift from the engine.
 */
import { Context, Effect, type Option } from "effect"
import { ContainerFailed, type SandboxError } from "./Errors.js"
import { missingFeatures, missingFeaturesMessage } from "./RunnerProtocol.js"
import type { RunnerFeature } from "./RunnerProtocolTable.js"

/** What the executor asks for. Hardening defaults are the runtime's business (ContainerSpec in packages/docker). */
export interface SandboxSpec {
  readonly name: string
  readonly image: string
  readonly command: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly workingDir: string
  /** "uid:gid" */
  readonly user: string
  readonly labels: Readonly<Record<string, string>>
  readonly limits: SandboxLimits
  readonly network: boolean
  /** Keep stdin open for the program (the runner reads the code from it). */
  readonly openStdin: boolean
  /** Capabilities added back after dropping all; empty by default. */
  readonly capAdd: ReadonlyArray<string>
  /** OCI runtime name, e.g. "runsc" for gVisor; undefined = the engine's default (runc). */
  readonly runtime?: string | undefined
  /** Bind mounts; read-only unless mode is "rw". */
  readonly mounts: ReadonlyArray<{
    readonly hostPath: string
    readonly containerPath: string
    readonly mode: "ro" | "rw"
  }>
  /**
   * What the image's supervisor must be able to do beyond runner protocol 2's base (the kernel
   * fills it in: kernel/Sandbox.ts). The runtime checks it against the image's label
   * (RUNNER_FEATURES_LABEL) and fails the create with ContainerFailed reason "protocol", before
   * any container exists, when one is missing.
   */
  readonly requires?: ReadonlyArray<RunnerFeature> | undefined
}

export interface SandboxLimits {
  readonly memoryBytes: number
  readonly nanoCpus: number
  readonly pidsLimit: number
  readonly tmpBytes: number
  readonly workspaceBytes: number
  /** Writable-layer quota; only where the engine supports it (overlay2 on XFS with pquota). */
  readonly diskBytes?: number | undefined
}

export interface SandboxRef {
  readonly id: string
  readonly name: string
}

export interface SandboxCreated extends SandboxRef {
  readonly imageId: string
}

/** Receives the program's output as it arrives. Chunks are not retained by the runtime. */
export interface OutputReceiver {
  readonly stdout: (chunk: Uint8Array) => void
  readonly stderr: (chunk: Uint8Array) => void
  /**
   * What the supervised run behind these streams asks of the image's supervisor beyond runner
   * protocol 2's base (kernel/SupervisedRun.ts says it). `exec` fails with ContainerFailed reason
   * "protocol", before the process exists, when the sandbox's image lacks one; the kernel adds it
   * to the spec of a sandbox created for the run (SandboxSpec.requires).
   */
  readonly requires?: ReadonlyArray<RunnerFeature> | undefined
}

export interface AttachedIO {
  readonly write: (data: Uint8Array) => Effect.Effect<void, SandboxError>
  /** Close the program's stdin (EOF). */
  readonly end: Effect.Effect<void, SandboxError>
  /**
   * Completes when both output streams have ended (the program exited and all output was
   * delivered), or the connection to them was lost. The cheap way to learn that a sandbox has
   * ended when its exit status is not needed (see `armExit`).
   */
  readonly closed: Effect.Effect<void>
}

export interface ExitStatus {
  readonly exitCode: number
}

export interface SandboxState {
  readonly status: "created" | "running" | "paused" | "restarting" | "exited" | "dead" | "removing"
  readonly exitCode: number
  readonly oomKilled: boolean
}

export interface SandboxInfo extends SandboxRef {
  readonly labels: Readonly<Record<string, string>>
  readonly status: SandboxState["status"]
  readonly createdAt: number
}

/**
 * A command to run inside a RUNNING sandbox (`docker exec`), next to its main process.
 * The sandbox's hardening applies (same user, limits, seccomp, no new privileges);
 * the process gets its own stdin/stdout/stderr.
 */
export interface ExecSpec {
  /** argv; never interpreted by a shell unless argv[0] is one. */
  readonly command: ReadonlyArray<string>
  /** Variables added to the sandbox's environment for this process only. */
  readonly env: Readonly<Record<string, string>>
  /** Default: the sandbox's working directory. */
  readonly workingDir?: string | undefined
  /** "uid:gid"; default: the sandbox's user. */
  readonly user?: string | undefined
  /** Attach stdin (write/end); otherwise the process reads EOF at once. */
  readonly stdin: boolean
}

/**
 * A process started by `exec`.
 *
 * Kill semantics (the host is the authority, not a `timeout` inside the sandbox): the engine
 * cannot signal an exec'd process, so `kill` starts a SECOND exec, as the same user, that
 * SIGKILLs every process still carrying this exec's marker variable (`HERMES_EXEC_ID`,
 * inherited by its children, including ones that left the process group) and the process
 * group of each. A process that both scrubbed its environment and left the group survives
 * that; callers that must be sure (sessions on a deadline) kill the whole sandbox when
 * `exit` does not follow within a grace period.
 */
export interface ExecProcess {
  readonly write: (data: Uint8Array) => Effect.Effect<void, SandboxError>
  /** Close the process's stdin (EOF). */
  readonly end: Effect.Effect<void, SandboxError>
  /**
   * Completes with the exit status once the process has exited and its output streams
   * ended. A background child still holding stdout open delays the end of the streams
   * (and so this); callers that know when their command is done should not wait for it.
   */
  readonly exit: Effect.Effect<ExitStatus, SandboxError>
  /** SIGKILL the process tree from inside (see above). Idempotent; a finished process is not an error. */
  readonly kill: Effect.Effect<void, SandboxError>
  /** Stop delivering output and release the connection; the process is not signalled. Idempotent. */
  readonly detach: Effect.Effect<void>
}

/**
 * Which machine the engine runs on, as far as bind mounts are concerned: a mount's host path is a
 * path on the engine's machine, and the socket the runtime talks to hands that machine over. The
 * mount check (Mounts.mountDanger) judges host paths against it.
 *
 * - "local": the engine runs on this machine; `socketPath` is the unix socket the runtime talks to
 *   (absent when it talks tcp to a loopback address: only the usual sockets are known then).
 *   Paths are judged as written and with this machine's symlinks resolved.
 * - "remote": the engine runs on another host (tcp, tls or ssh to a non-loopback address), named
 *   by `endpoint` (no secrets). Its filesystem cannot be seen from here: paths are judged as
 *   written only.
 */
export type EngineHost =
  | { readonly kind: "local"; readonly socketPath?: string | undefined }
  | { readonly kind: "remote"; readonly endpoint: string }

/**
 * The environment every sandbox starts with, under the spec's own `env` (which wins), whatever the
 * runtime: home in the workspace, UTF-8, and Python unbuffered without bytecode files.
 */
export const SANDBOX_BASE_ENV: Readonly<Record<string, string>> = {
  HOME: "/workspace",
  LANG: "C.UTF-8",
  PYTHONDONTWRITEBYTECODE: "1",
  PYTHONUNBUFFERED: "1"
}

/** The variable `exec` sets on every process it starts; `kill` finds the process tree by it. */
export const ExecMarkerVariable = "HERMES_EXEC_ID"

/**
 * Kills the process tree of one exec from inside (`sh -c ExecKillScript hermes-kill HERMES_EXEC_ID=<marker>`,
 * every runtime's ExecProcess.kill): $1 = the marker assignment to look for.
 * POSIX sh, coreutils tr/sed and grep (every Debian-based image has them). No `--` after
 * `kill`: dash's builtin takes it for a pid and gives up.
 */
export const ExecKillScript = String.raw`m=$1
for d in /proc/[0-9]*; do
  p=${"${"}d#/proc/}
  [ "$p" = "$$" ] && continue
  if tr '\0' '\n' 2>/dev/null < "$d/environ" | grep -qxF -- "$m"; then
    g=$(sed -n 's/.*) [A-Za-z] [0-9-]* \([0-9-]*\) .*/\1/p' "$d/stat" 2>/dev/null)
    if [ -n "$g" ] && [ "$g" -gt 1 ] && [ "$g" != "$$" ]; then kill -9 "-$g" 2>/dev/null; fi
    kill -9 "$p" 2>/dev/null
  fi
done
exit 0
`

export class SandboxRuntime extends Context.Tag("@hermes-sandbox/core/SandboxRuntime")<
  SandboxRuntime,
  {
    /** A short name for messages and events ("docker", "fake"). */
    readonly name: string
    /**
     * Whether `AttachedIO.end` and `ExecProcess.end` give the process an end of file (default
     * true). Kubernetes' attach and exec (stream protocol v4) cannot close stdin alone: there the
     * kernel sends the program's stdin in the supervisor's header (runner feature `stdin`), and the
     * supervisor needs no end of its own stdin.
     */
    readonly stdinEnds?: boolean | undefined
    /** The engine's machine and socket: what a bind mount must not hand over (see EngineHost). */
    readonly engine: EngineHost
    /** Image id for an image reference; fails with ImageNotFound when absent. */
    readonly resolveImage: (image: string) => Effect.Effect<string, SandboxError>
    readonly create: (spec: SandboxSpec) => Effect.Effect<SandboxCreated, SandboxError>
    /** Attach stdin/stdout/stderr. Must be called before start, so no early output is lost. */
    readonly attach: (ref: SandboxRef, output: OutputReceiver) => Effect.Effect<AttachedIO, SandboxError>
    /**
     * Register interest in the next exit and return an effect that completes with it.
     * The registration is in place when the outer effect completes, so calling it
     * before `start` cannot miss a fast exit. The status is the program's own: an exit
     * someone else caused (an engine restart, `docker kill`) fails with ContainerFailed
     * (Docker: told by the engine's event stream), and one nobody can vouch for any more
     * fails with DockerUnavailable. To learn only that the sandbox ended, `AttachedIO.closed`.
     */
    readonly armExit: (ref: SandboxRef) => Effect.Effect<Effect.Effect<ExitStatus, SandboxError>, SandboxError>
    /**
     * The signal of a kill someone other than this SDK sent to the sandbox since `armExit`
     * (an engine stopping, `docker stop/kill`), as far as the runtime has seen so far. For an
     * end the runner reported itself, which comes before the engine's exit verdict: a program
     * can trap the signal and exit 0, and that is not its result.
     */
    readonly outsideKill: (ref: SandboxRef) => Effect.Effect<Option.Option<string>>
    readonly start: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    /** SIGKILL the whole sandbox. Killing a sandbox that is not running is not an error. */
    readonly kill: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    readonly inspect: (ref: SandboxRef) => Effect.Effect<SandboxState, SandboxError>
    /**
     * Whether the engine saw its OOM killer take a process inside the sandbox since `sinceMs` (this
     * host's clock), while the sandbox may still run. For what a supervisor inside cannot count:
     * under gVisor its cgroup counter is the Sentry's own, and the host's OOM killer can take one of
     * the sandbox's host processes (a program's ptrace stub) and leave the sandbox running. False
     * where the runtime cannot tell (a Kubernetes pod reports an OOM only as its container's end).
     */
    readonly oomKillsSince: (ref: SandboxRef, sinceMs: number) => Effect.Effect<boolean>
    /** Force-remove. Removing a sandbox that is already gone is not an error. */
    readonly remove: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    /** Every sandbox (any state) carrying all the given labels. */
    readonly list: (labels: Readonly<Record<string, string>>) => Effect.Effect<ReadonlyArray<SandboxInfo>, SandboxError>
    /**
     * Start a process in a running sandbox (see ExecSpec, ExecProcess). Fails with
     * ContainerFailed 409 when the sandbox is not running, 404 when it is gone. Output is
     * delivered to `output` as it arrives, never retained by the runtime.
     */
    readonly exec: (ref: SandboxRef, spec: ExecSpec, output: OutputReceiver) => Effect.Effect<ExecProcess, SandboxError>
  }
>() {}

/**
 * What every runtime does before it creates or execs anything for a request that `requires` features
 * of the image's supervisor: if the image's labels lack one, the request fails ContainerFailed reason
 * "protocol", naming the image, the features and `buildCommand` (the one that rebuilds the images).
 */
export const refuseMissingFeatures = (
  image: string,
  labels: Readonly<Record<string, string>> | undefined,
  requires: ReadonlyArray<RunnerFeature> | undefined,
  at: { readonly operation: string; readonly containerName: string },
  buildCommand: string
): Effect.Effect<void, ContainerFailed> => {
  const missing = missingFeatures(labels, requires)
  return missing.length === 0
    ? Effect.void
    : Effect.fail(
        new ContainerFailed({
          ...at,
          reason: "protocol",
          message: missingFeaturesMessage(image, labels, missing, buildCommand)
        })
      )
}
