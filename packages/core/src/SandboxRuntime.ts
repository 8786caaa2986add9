/**
 * The port between the executor and a container engine. It speaks in
 * sandboxes, not in Docker calls; `@hermes-sandbox/docker` implements it over
 * dockerode and `FakeRuntime` implements it in memory, and one contract suite
 * runs against both so the fake cannot drift from the engine.
 */
import { Context, type Effect } from "effect"
import type { SandboxError } from "./Errors.js"

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
  readonly mounts: ReadonlyArray<{ readonly hostPath: string; readonly containerPath: string; readonly mode: "ro" | "rw" }>
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
}

export interface AttachedIO {
  readonly write: (data: Uint8Array) => Effect.Effect<void, SandboxError>
  /** Close the program's stdin (EOF). */
  readonly end: Effect.Effect<void, SandboxError>
  /** Completes when both output streams have ended (the program exited and all output was delivered). */
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

export class SandboxRuntime extends Context.Tag("@hermes-sandbox/core/SandboxRuntime")<
  SandboxRuntime,
  {
    /** A short name for messages and events ("docker", "fake"). */
    readonly name: string
    /** Image id for an image reference; fails with ImageNotFound when absent. */
    readonly resolveImage: (image: string) => Effect.Effect<string, SandboxError>
    readonly create: (spec: SandboxSpec) => Effect.Effect<SandboxCreated, SandboxError>
    /** Attach stdin/stdout/stderr. Must be called before start, so no early output is lost. */
    readonly attach: (ref: SandboxRef, output: OutputReceiver) => Effect.Effect<AttachedIO, SandboxError>
    /**
     * Register interest in the next exit and return an effect that completes with it.
     * The registration is in place when the outer effect completes, so calling it
     * before `start` cannot miss a fast exit.
     */
    readonly armExit: (ref: SandboxRef) => Effect.Effect<Effect.Effect<ExitStatus, SandboxError>, SandboxError>
    readonly start: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    /** SIGKILL the whole sandbox. Killing a sandbox that is not running is not an error. */
    readonly kill: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    readonly inspect: (ref: SandboxRef) => Effect.Effect<SandboxState, SandboxError>
    /** Force-remove. Removing a sandbox that is already gone is not an error. */
    readonly remove: (ref: SandboxRef) => Effect.Effect<void, SandboxError>
    /** Every sandbox (any state) carrying all the given labels. */
    readonly list: (labels: Readonly<Record<string, string>>) => Effect.Effect<ReadonlyArray<SandboxInfo>, SandboxError>
  }
>() {}
