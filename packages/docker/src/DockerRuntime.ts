/**
 * SandboxRuntime over dockerode. The order that matters (see
 * machine-and-pitfalls): attach with a hijacked stream and arm the exit wait
 * BEFORE start, or early output and fast exits are lost; no TTY, so stdout and
 * stderr arrive demultiplexed; every call has its own deadline.
 */
import { Deferred, Effect, Layer, Option, Schedule } from "effect"
import type { IncomingMessage } from "node:http"
import { Writable } from "node:stream"
import type { Duplex } from "node:stream"
import {
  type AttachedIO,
  ContainerFailed,
  DockerUnavailable,
  type ExitStatus,
  type SandboxError,
  SandboxRuntime,
  type SandboxInfo,
  type SandboxRef,
  type SandboxSpec,
  type SandboxState
} from "@hermes-sandbox/core"
import { SUPERVISOR } from "@hermes-sandbox/core/RunnerProtocol"
import { refuseMissingFeatures } from "@hermes-sandbox/core/SandboxRuntime"
import { RUNNER_PROTOCOL_LABEL, RUNNER_PROTOCOL_VERSION } from "@hermes-sandbox/core/RunnerProtocolTable"
import { toCreateOptions } from "./ContainerSpec.js"
import { DockerEngine, startEngineHint } from "./DockerEngine.js"
import * as EngineEndpoint from "./EngineEndpoint.js"
import { dockerCall, IMAGE_BUILD_COMMAND, isGone, isNotRunning, isRemovalInProgress } from "./internal/dockerCall.js"
import { queryEvents } from "./internal/engineEvents.js"
import { type ExitWitness, ExitWitnesses } from "./internal/exitWitness.js"
import { makeDockerExec } from "./internal/dockerExec.js"
import * as DiskQuota from "./DiskQuota.js"
import * as ResourceLimits from "./ResourceLimits.js"
import * as SandboxUid from "./SandboxUid.js"
import { loadSeccompProfile } from "./Seccomp.js"
import { imageNotFound } from "./ImageBuild.js"

export interface DockerRuntimeOptions {
  /** "hermes" (the shipped allow-list, default), "engine-default", or a profile's JSON text. */
  readonly seccomp?: "hermes" | "engine-default" | (string & {})
  /** When a disk quota is asked for but the engine cannot apply it: fail (default) or warn and run without. */
  readonly diskQuotaUnsupported?: "fail" | "warn"
  /**
   * When the engine creates a sandbox but discards one of its resource limits (memory, swap, pids,
   * CPU: a kernel or engine without that cgroup controller, rootless on cgroup v1): fail (default;
   * the container is removed, the program never runs) or warn and run without the limit.
   */
  readonly limitsUnsupported?: "fail" | "warn"
  /**
   * "shared" (default): every sandbox runs as uid/gid 1001, and so shares the kernel's per-uid
   * counters (inotify instances, POSIX mqueue bytes, pending signals) with every other one.
   * "per-sandbox": each sandbox gets a uid (= gid) of its own from SandboxUid.RANGE, distinct from
   * every live sandbox of this runtime; its /workspace belongs to that uid. See SandboxUid.ts.
   */
  readonly sandboxUid?: SandboxUid.SandboxUidMode
}

/** How long after an unexplained exit 137 an OOM event may still arrive in the engine's event log. */
const OOM_EVENT_GRACE_MS = 500

/** How long after the exit the engine's `die` event may take to reach us before its event log is asked instead. */
const TESTIMONY_TIMEOUT_MS = 5_000

/** A wait stream can stay quiet for as long as the program runs: the executor's deadline bounds it, not a call timeout. */
const WAIT_ARM_TIMEOUT_MS = 10_000

export const make = (options: DockerRuntimeOptions = {}) =>
  Effect.gen(function* () {
    const engine = yield* DockerEngine
    const { docker, endpoint, callTimeoutMs } = engine
    const seccomp =
      options.seccomp === undefined || options.seccomp === "hermes" ? loadSeccompProfile() : options.seccomp
    const ctx = (operation: string, containerName: string, image?: string) => ({
      endpoint,
      operation,
      containerName,
      timeoutMs: callTimeoutMs,
      ...(image === undefined ? {} : { image })
    })

    const info = yield* dockerCall(ctx("info", ""), (signal) =>
      (
        docker as unknown as {
          info(
            o: object
          ): Promise<{ Driver: string; DriverStatus?: Array<[string, string]> } & ResourceLimits.EngineLimitInfo>
        }
      ).info({ abortSignal: signal })
    )
    // The writable-layer quota needs overlay2 on XFS with pquota. The storage driver rules out what
    // it can; on overlay2 on XFS the first create with a quota tells (see DiskQuota).
    let diskQuota = DiskQuota.fromInfo(info)
    /** A quota the storage cannot apply: a typed failure, or (diskQuotaUnsupported: "warn") a warning and no quota. */
    const withoutQuota = (spec: SandboxSpec, storage: string) =>
      options.diskQuotaUnsupported === "warn"
        ? Effect.logWarning(
            `${DiskQuota.unsupportedMessage(storage)}; running without it because diskQuotaUnsupported is "warn"`
          )
        : Effect.fail(
            new ContainerFailed({
              operation: "create",
              containerName: spec.name,
              reason: "quota-unsupported",
              message: DiskQuota.unsupportedMessage(storage)
            })
          )
    // Raw, not dockerode's createContainer, which drops the engine's Warnings and (docker-modem)
    // copies the whole create body, seccomp profile included, into the query string as well.
    const createContainer = (spec: SandboxSpec, applyDiskQuota: boolean) =>
      dockerCall(
        ctx("create", spec.name, spec.image),
        (signal) =>
          new Promise<{ readonly id: string; readonly warnings: ReadonlyArray<string> }>((resolve, reject) =>
            docker.modem.dial(
              {
                path: "/containers/create?",
                method: "POST",
                options: { _query: { name: spec.name }, _body: toCreateOptions(spec, { seccomp, applyDiskQuota }) },
                abortSignal: signal,
                statusCodes: {
                  200: true,
                  201: true,
                  400: "bad parameter",
                  404: "no such image",
                  409: "conflict",
                  500: "server error"
                }
              },
              (error: unknown, data: unknown) => {
                if (error) return reject(error)
                const created = data as { Id: string; Warnings?: ReadonlyArray<string> | null }
                resolve({ id: created.Id, warnings: created.Warnings ?? [] })
              }
            )
          )
      )
    // Hard limits the engine cannot apply (see ResourceLimits): known from `info` before any
    // create, and from a create's warnings after it.
    const missingLimits = ResourceLimits.unsupported(info)
    const refuseWithoutLimits = (spec: SandboxSpec, why: string) =>
      new ContainerFailed({
        operation: "create",
        containerName: spec.name,
        reason: "limits-unsupported",
        message: `${why}. The program was not run: a sandbox without its hard limits is not one. Run 'hermes-sandbox doctor'; to run anyway, set ${ResourceLimits.WARN_OPTION}.`
      })
    let warnedMissingLimits = false
    const checkEngineLimits = (spec: SandboxSpec) => {
      if (missingLimits.length === 0) return Effect.void
      const why = ResourceLimits.unsupportedMessage(info, missingLimits)
      if (options.limitsUnsupported !== "warn") return Effect.fail(refuseWithoutLimits(spec, why))
      if (warnedMissingLimits) return Effect.void
      warnedMissingLimits = true
      return Effect.logWarning(`${why}; sandboxes run without them because limitsUnsupported is "warn"`)
    }
    const checkCreateKeptLimits = (
      spec: SandboxSpec,
      created: { readonly id: string; readonly warnings: ReadonlyArray<string> }
    ) => {
      const discarded = ResourceLimits.discardedByCreate(created.warnings)
      if (discarded.length === 0) return Effect.void
      const why = `the engine did not apply every resource limit of ${spec.name}: ${discarded.join(" ")}`
      return options.limitsUnsupported === "warn"
        ? Effect.logWarning(`${why}; running without it because limitsUnsupported is "warn"`)
        : dockerCall(ctx("remove", spec.name), (signal) =>
            docker.getContainer(created.id).remove({ force: true, v: true, abortSignal: signal })
          ).pipe(Effect.ignore, Effect.zipRight(Effect.fail(refuseWithoutLimits(spec, why))))
    }

    // sandboxUid "per-sandbox": the uid each live container holds, until its removal.
    const uids = options.sandboxUid === "per-sandbox" ? SandboxUid.makeAllocator() : undefined
    const uidOfContainer = new Map<string, number>()
    const takeUid = (
      spec: SandboxSpec
    ): Effect.Effect<{ readonly spec: SandboxSpec; readonly uid?: number }, ContainerFailed> => {
      if (uids === undefined) return Effect.succeed({ spec })
      const uid = uids.take()
      return uid === undefined
        ? Effect.fail(
            new ContainerFailed({
              operation: "create",
              containerName: spec.name,
              reason: "uids-exhausted",
              message: `every uid of the per-sandbox range ${SandboxUid.RANGE.first}-${SandboxUid.RANGE.last} is held by a live sandbox of this executor`
            })
          )
        : Effect.succeed({ spec: { ...spec, user: `${uid}:${uid}` }, uid })
    }
    const releaseUid = (id: string) =>
      Effect.sync(() => {
        const uid = uidOfContainer.get(id)
        if (uid === undefined) return
        uidOfContainer.delete(id)
        uids?.release(uid)
      })

    type Labels = Readonly<Record<string, string>> | undefined
    const imageIds = new Map<string, { readonly id: string; readonly labels: Labels }>()
    const inspectImage = (image: string) =>
      Effect.suspend(() => {
        const cached = imageIds.get(image)
        if (cached !== undefined) return Effect.succeed(cached)
        return dockerCall(ctx("inspect image", "", image), (signal) =>
          docker.getImage(image).inspect({ abortSignal: signal } as object)
        ).pipe(
          // Every program runs through the image's supervisor (runner protocol 2): an image without
          // it would fail at start or, worse, run something else; say so before any container exists.
          Effect.filterOrFail(
            (i) => i.Config?.Labels?.[RUNNER_PROTOCOL_LABEL] === String(RUNNER_PROTOCOL_VERSION),
            (i) => {
              const found = i.Config?.Labels?.[RUNNER_PROTOCOL_LABEL]
              return new ContainerFailed({
                operation: "inspect image",
                containerName: "",
                reason: "protocol",
                message:
                  `image ${image} does not speak runner protocol ${RUNNER_PROTOCOL_VERSION} (its label ${RUNNER_PROTOCOL_LABEL} is ` +
                  `${found === undefined ? "absent" : JSON.stringify(found)}): every program runs through the supervisor ${SUPERVISOR}. ` +
                  `Build it FROM a hermes-sandbox image (docs/custom-images.md), or rebuild the SDK's images: ${IMAGE_BUILD_COMMAND}`
              })
            }
          ),
          Effect.map((i) => ({ id: i.Id, labels: i.Config?.Labels ?? undefined })),
          Effect.tap((found) => Effect.sync(() => imageIds.set(image, found))),
          Effect.catchIf(
            (e): e is ContainerFailed => e._tag === "ContainerFailed" && e.reason === "not-found",
            () => Effect.fail(imageNotFound(image))
          )
        )
      })
    const resolveImage = (image: string) => Effect.map(inspectImage(image), (i) => i.id)

    /** Each container's image and labels (the image's, which a container inherits), for the exec check; until removed. */
    const containerImages = new Map<string, { readonly image: string; readonly labels: Labels }>()
    const containerImage = (ref: SandboxRef) =>
      Effect.suspend(() => {
        const known = containerImages.get(ref.id)
        if (known !== undefined) return Effect.succeed(known)
        // A container this runtime did not create (a persistent session reattached): asked once.
        return dockerCall(ctx("inspect", ref.name), (signal) =>
          docker.getContainer(ref.id).inspect({ abortSignal: signal } as object)
        ).pipe(
          Effect.map((c) => ({ image: c.Config?.Image ?? c.Image, labels: c.Config?.Labels ?? undefined })),
          Effect.tap((found) => Effect.sync(() => containerImages.set(ref.id, found)))
        )
      })
    const dockerExec = makeDockerExec(docker, (operation, containerName) => ctx(operation, containerName))

    // The engine's clock (for the event-log query below), from `info`, so a remote engine's skew does not matter.
    const serverTime = Date.parse((info as { SystemTime?: string }).SystemTime ?? "")
    const clockOffsetMs = Number.isFinite(serverTime) ? serverTime - Date.now() : 0

    /**
     * Armed containers by id, until removed (`outsideKill` reads the witness after the verdict too);
     * a kill or removal we send marks its wait.
     */
    interface ArmedWait {
      killedByUs: boolean
      readonly sinceServerMs: number
      readonly witness: ExitWitness
    }
    const armedWaits = new Map<string, ArmedWait>()
    const witnesses = new ExitWitnesses(docker, clockOffsetMs)
    yield* Effect.addFinalizer(() => Effect.sync(() => witnesses.close()))
    const markKilledByUs = (id: string) => {
      const armed = armedWaits.get(id)
      if (armed !== undefined) armed.killedByUs = true
    }

    /** Events of these actions the engine logged for the container between two engine-clock times. */
    const containerEvents = (
      id: string,
      actions: ReadonlyArray<string>,
      sinceServerMs: number,
      untilServerMs: number
    ) =>
      queryEvents(docker, {
        filter: { actions, container: id },
        sinceMs: sinceServerMs,
        untilMs: untilServerMs,
        signal: AbortSignal.timeout(callTimeoutMs + Math.max(0, untilServerMs - (Date.now() + clockOffsetMs)))
      })

    /** The signal of a `kill` the engine logged for the container since `sinceServerMs`, if any. */
    const externalKill = (id: string, sinceServerMs: number): Promise<string | undefined> =>
      containerEvents(id, ["kill"], sinceServerMs, Date.now() + clockOffsetMs).then((events) => {
        const kill = events.find((e) => e.Action === "kill")
        return kill === undefined ? undefined : (kill.Actor?.Attributes?.["signal"] ?? "?")
      })

    return SandboxRuntime.of({
      name: "docker",
      engine: EngineEndpoint.engineHost(engine),
      resolveImage,
      create: (requested) =>
        Effect.gen(function* () {
          const image = yield* inspectImage(requested.image)
          // A request that needs more of the supervisor than its image can do is refused before the
          // container exists, naming what is missing and how to rebuild.
          yield* refuseMissingFeatures(
            requested.image,
            image.labels,
            requested.requires,
            { operation: "create", containerName: requested.name },
            IMAGE_BUILD_COMMAND
          )
          const imageId = image.id
          yield* checkEngineLimits(requested)
          const { spec, uid } = yield* takeUid(requested)
          const releaseOnFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
            uid === undefined ? effect : Effect.tapError(effect, () => Effect.sync(() => uids?.release(uid)))
          const wantsQuota = spec.limits.diskBytes !== undefined
          if (wantsQuota && diskQuota._tag === "Unsupported") yield* withoutQuota(spec, diskQuota.storage)
          const created = yield* releaseOnFailure(
            createContainer(spec, wantsQuota && diskQuota._tag !== "Unsupported").pipe(
              // overlay2 on XFS mounted without pquota: the engine refuses the quota (and creates nothing).
              Effect.catchIf(
                (e) => wantsQuota && e._tag === "ContainerFailed" && e.reason === "quota-unsupported",
                () => {
                  diskQuota = { _tag: "Unsupported", storage: DiskQuota.XFS_WITHOUT_PQUOTA }
                  return withoutQuota(spec, DiskQuota.XFS_WITHOUT_PQUOTA).pipe(
                    Effect.zipRight(createContainer(spec, false))
                  )
                }
              )
            )
          )
          if (uid !== undefined) uidOfContainer.set(created.id, uid)
          containerImages.set(created.id, { image: requested.image, labels: image.labels })
          const keptLimits: Effect.Effect<void, ContainerFailed> = checkCreateKeptLimits(spec, created)
          yield* Effect.tapError(keptLimits, () => releaseUid(created.id))
          return { id: created.id, name: spec.name, imageId }
        }).pipe(
          Effect.tapError((e) =>
            e._tag === "ImageNotFound" ? Effect.sync(() => imageIds.delete(requested.image)) : Effect.void
          )
        ),

      attach: (ref, output) =>
        Effect.gen(function* () {
          const stream = (yield* dockerCall(ctx("attach", ref.name), (signal) =>
            docker
              .getContainer(ref.id)
              .attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true, abortSignal: signal })
          )) as unknown as Duplex
          const sink = (deliver: (chunk: Uint8Array) => void) =>
            new Writable({
              write(chunk: Buffer, _encoding, callback) {
                deliver(chunk)
                callback()
              }
            })
          docker.modem.demuxStream(stream, sink(output.stdout), sink(output.stderr))
          const closed = new Promise<void>((resolve) => {
            stream.once("end", resolve)
            stream.once("close", resolve)
            stream.once("error", () => resolve())
          })
          const io: AttachedIO = {
            write: (data) =>
              Effect.async<void, SandboxError>((resume) => {
                stream.write(data, (error) =>
                  resume(
                    error
                      ? Effect.fail(
                          new ContainerFailed({
                            operation: "write stdin",
                            containerName: ref.name,
                            reason: "engine",
                            message: error.message
                          })
                        )
                      : Effect.void
                  )
                )
              }),
            end: Effect.sync(() => {
              stream.end()
            }),
            closed: Effect.promise(() => closed)
          }
          // The socket lives until the container exits or is removed; the engine closes it then.
          return io
        }),

      armExit: (ref) =>
        Effect.gen(function* () {
          // The engine writes the response headers only once the waiter is registered,
          // so when this resolves a fast exit can no longer be missed.
          const response = yield* dockerCall(
            { ...ctx("wait", ref.name), timeoutMs: WAIT_ARM_TIMEOUT_MS },
            (signal) =>
              new Promise<IncomingMessage>((resolve, reject) =>
                docker.modem.dial(
                  {
                    path: `/containers/${ref.id}/wait?`,
                    method: "POST",
                    isStream: true,
                    abortSignal: signal,
                    statusCodes: { 200: true, 400: "bad parameter", 404: "no such container", 500: "server error" },
                    options: { condition: "next-exit" }
                  },
                  (error: unknown, res: unknown) => (error ? reject(error) : resolve(res as IncomingMessage))
                )
              )
          )
          // The outcome is settled once; awaiting it (and abandoning the await, e.g. on a deadline)
          // never touches the response, so it can be awaited again.
          const outcome = yield* Deferred.make<ExitStatus, SandboxError>()
          // An exit we did not cause may still not be the program's own (see ExitWitnesses):
          // the engine's event stream tells whether it killed the container before it died.
          const witness = witnesses.watch(ref.id)
          const armed: ArmedWait = { killedByUs: false, sinceServerMs: Date.now() + clockOffsetMs - 2_000, witness }
          armedWaits.set(ref.id, armed)
          const settle = (effect: Effect.Effect<ExitStatus, SandboxError>) => {
            witness.release()
            Deferred.unsafeDone(outcome, effect)
          }
          const testify = (exitCode: number) => {
            const fallback = setTimeout(() => {
              // The die event is late (an engine under heavy load): ask its event log instead.
              externalKill(ref.id, armed.sinceServerMs).then(
                (signal) =>
                  settle(signal === undefined ? Effect.succeed({ exitCode }) : killedFromOutside(signal, exitCode)),
                (error: unknown) =>
                  lost(
                    `the container exited (code ${exitCode}) but the engine could not confirm why: ${error instanceof Error ? error.message : String(error)}`
                  )
              )
            }, TESTIMONY_TIMEOUT_MS)
            void witness.testimony.then((t) => {
              clearTimeout(fallback)
              if (t._tag === "OwnExit") settle(Effect.succeed({ exitCode }))
              else if (t._tag === "Killed") settle(killedFromOutside(t.signal, exitCode))
              else
                lost(
                  `the container exited (code ${exitCode}) but whether the engine killed it cannot be told: ${t.reason}`
                )
            })
          }
          const killedFromOutside = (signal: string, exitCode: number) =>
            Effect.fail(
              new ContainerFailed({
                operation: "wait",
                containerName: ref.name,
                reason: "killed-externally",
                message:
                  `${ref.name} was killed from outside the SDK (signal ${signal}, exit code ${exitCode}): ` +
                  "the engine is stopping or restarting, or someone ran docker stop/kill; the program did not finish"
              })
            )
          const chunks: Array<Buffer> = []
          let ended = false
          const lost = (message: string) =>
            settle(
              Effect.fail(
                new DockerUnavailable({
                  endpoint,
                  operation: "wait",
                  message: `wait ${ref.name}: ${message}`,
                  hint: startEngineHint
                })
              )
            )
          response.on("data", (chunk: Buffer) => chunks.push(chunk))
          response.on("end", () => {
            ended = true
            const body = Buffer.concat(chunks).toString("utf8").trim()
            let parsed: { StatusCode?: number; Error?: { Message?: string } | null }
            try {
              parsed = JSON.parse(body)
            } catch {
              return lost(
                `the engine ended the wait without an exit status (${JSON.stringify(body.slice(0, 200))}); it may have restarted`
              )
            }
            if (parsed.Error?.Message) {
              return settle(
                Effect.fail(
                  new ContainerFailed({
                    operation: "wait",
                    containerName: ref.name,
                    reason: "engine",
                    message: parsed.Error.Message
                  })
                )
              )
            }
            const exitCode = parsed.StatusCode ?? -1
            if (armed.killedByUs) return settle(Effect.succeed({ exitCode }))
            testify(exitCode)
          })
          response.on("error", (error) => lost(error.message))
          response.on("close", () => {
            if (!ended) lost("the connection to the engine closed before the container exited")
          })
          return Deferred.await(outcome)
        }),

      outsideKill: (ref) =>
        Effect.sync(() => {
          const armed = armedWaits.get(ref.id)
          return armed === undefined || armed.killedByUs ? Option.none() : Option.fromNullable(armed.witness.killSeen())
        }),

      start: (ref) =>
        dockerCall(ctx("start", ref.name), (signal) => docker.getContainer(ref.id).start({ abortSignal: signal })).pipe(
          Effect.catchIf(
            (e) => e._tag === "ContainerFailed" && e.reason === "already-started",
            () => Effect.void
          ),
          Effect.asVoid
        ),

      kill: (ref) =>
        Effect.suspend(() => {
          markKilledByUs(ref.id)
          return dockerCall(ctx("kill", ref.name), (signal) =>
            docker.getContainer(ref.id).kill({ signal: "SIGKILL", abortSignal: signal })
          )
        }).pipe(
          // Not running, or already gone: either way it is not running any more.
          Effect.catchIf(isNotRunning, () => Effect.void),
          Effect.asVoid
        ),

      inspect: (ref) =>
        dockerCall(ctx("inspect", ref.name), (signal) =>
          docker.getContainer(ref.id).inspect({ abortSignal: signal })
        ).pipe(
          Effect.flatMap((i) => {
            const state: SandboxState = {
              status: i.State.Status as SandboxState["status"],
              exitCode: i.State.ExitCode,
              oomKilled: i.State.OOMKilled
            }
            if (state.oomKilled || state.status !== "exited" || state.exitCode !== 137) return Effect.succeed(state)
            // Docker 20.10 sets State.OOMKilled only when containerd's OOM event is handled before the
            // exit; under load, and when gVisor's whole sandbox is the OOM killer's victim, it can come
            // just after. The engine's event log still has it: look, allowing it a moment to arrive.
            const startedServerMs = Date.parse(i.State.StartedAt)
            return Effect.tryPromise(() =>
              containerEvents(
                ref.id,
                ["oom"],
                (Number.isFinite(startedServerMs) ? startedServerMs : Date.now() + clockOffsetMs - 60_000) - 1_000,
                Date.now() + clockOffsetMs + OOM_EVENT_GRACE_MS
              )
            ).pipe(
              Effect.map((events): SandboxState => ({ ...state, oomKilled: events.some((e) => e.Action === "oom") })),
              Effect.orElseSucceed(() => state)
            )
          })
        ),

      // The engine logs an "oom" event for every kill of its OOM killer in the container's cgroup,
      // also one that leaves the container running (a gVisor sandbox whose ptrace stub was taken).
      oomKillsSince: (ref, sinceMs) =>
        Effect.tryPromise(() =>
          containerEvents(
            ref.id,
            ["oom"],
            sinceMs + clockOffsetMs - 1_000,
            Date.now() + clockOffsetMs + OOM_EVENT_GRACE_MS
          )
        ).pipe(
          Effect.map((events) => events.some((e) => e.Action === "oom")),
          Effect.orElseSucceed(() => false)
        ),
      remove: (ref) =>
        Effect.suspend(() => {
          markKilledByUs(ref.id)
          return dockerCall(ctx("remove", ref.name), (signal) =>
            docker.getContainer(ref.id).remove({ force: true, v: true, abortSignal: signal })
          )
        }).pipe(
          // Another remover got there first: ask again until that removal is done (then: not found).
          Effect.retry({
            while: isRemovalInProgress,
            schedule: Schedule.spaced("200 millis").pipe(Schedule.intersect(Schedule.recurs(50)))
          }),
          Effect.catchIf(isGone, () => Effect.void),
          Effect.tap(() => Effect.sync(() => (armedWaits.delete(ref.id), containerImages.delete(ref.id)))),
          // The container and its processes are gone: its uid may serve another sandbox.
          Effect.tap(() => releaseUid(ref.id)),
          Effect.asVoid
        ),

      list: (labels) =>
        dockerCall(ctx("list", ""), (signal) =>
          docker.listContainers({
            all: true,
            filters: { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) },
            abortSignal: signal
          })
        ).pipe(
          Effect.map((containers) =>
            containers.map(
              (c): SandboxInfo => ({
                id: c.Id,
                name: (c.Names[0] ?? "").replace(/^\//, ""),
                labels: c.Labels,
                status: c.State as SandboxInfo["status"],
                createdAt: c.Created * 1000
              })
            )
          )
        ),

      // A process next to the main one (sessions); killed from inside, see internal/dockerExec.ts.
      exec: (ref, spec, output) =>
        output.requires === undefined || output.requires.length === 0
          ? dockerExec(ref, spec, output)
          : containerImage(ref).pipe(
              Effect.flatMap(({ image, labels }) =>
                refuseMissingFeatures(
                  image,
                  labels,
                  output.requires,
                  { operation: "exec", containerName: ref.name },
                  IMAGE_BUILD_COMMAND
                )
              ),
              Effect.zipRight(dockerExec(ref, spec, output))
            )
    })
  })

/** The Docker runtime; needs a DockerEngine. */
export const layer = (options: DockerRuntimeOptions = {}): Layer.Layer<SandboxRuntime, SandboxError, DockerEngine> =>
  Layer.scoped(SandboxRuntime, make(options))
