/**
 * SandboxRuntime over the Kubernetes API: one bare Pod per sandbox (PodSpec.ts), so the executor,
 * the warm pool, the sweep and the journal run on it unchanged.
 *
 * The order that matters differs from Docker's. A pod starts as soon as it is scheduled: there is
 * no separate start, and the supervisor simply waits for its header on stdin. So `attach` waits for
 * the container to run and opens the ONE stream the sandbox will have (stdin, stdout and stderr on a
 * v4 WebSocket: internal/channel.ts); nothing is lost before it, because the supervisor writes
 * nothing before its header. `start` is a no-op. The stream cannot close stdin alone, so this
 * runtime says `stdinEnds: false` and the kernel puts the program's stdin in the header.
 *
 * The exit comes from the pod's status (a watch per pod): the container's terminated exit code, and
 * OOMKilled from its reason. A pod deleted by anyone but this runtime is a kill from outside. Kill
 * and remove are one thing here, a delete with grace 0; remove waits until the pod is gone.
 */
import * as k8s from "@kubernetes/client-node"
import { Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import {
  type AttachedIO,
  ContainerFailed,
  DockerUnavailable,
  ExecKillScript,
  ExecMarkerVariable,
  type ExecProcess,
  type ExitStatus,
  ImageNotFound,
  type InvalidRequest,
  type SandboxError,
  SandboxRuntime,
  type SandboxInfo,
  type SandboxRef,
  type SandboxState
} from "@hermes-sandbox/core"
import { invalidRequest } from "@hermes-sandbox/core/Errors"
import * as Guarantees from "./Guarantees.js"
import { type Channel, exitCodeOf, openChannel } from "./internal/channel.js"
import * as PodSpec from "./PodSpec.js"

export interface KubernetesRuntimeOptions {
  /** A kubeconfig file; default: as kubectl reads it (KUBECONFIG, then ~/.kube/config, then in-cluster). */
  readonly kubeconfig?: string | undefined
  /** A context of that kubeconfig; default: its current context. */
  readonly context?: string | undefined
  /** Where the sandbox pods live; default: the context's namespace, else "default" (as kubectl). */
  readonly namespace?: string | undefined
  /** A RuntimeClass for every pod (gVisor: one whose handler is runsc). */
  readonly runtimeClassName?: string | undefined
  /** The guarantees a pod cannot give that the executor may run without (Guarantees.ts); none by default. */
  readonly allowDegraded?: ReadonlyArray<Guarantees.DegradedGuarantee> | undefined
  /** Default "IfNotPresent"; "Never" where images are loaded on the nodes (no registry). */
  readonly imagePullPolicy?: "Never" | "IfNotPresent" | "Always" | undefined
  /** The Localhost seccomp profile's name under the kubelet's seccomp root; default "hermes-sandbox.json". */
  readonly seccompProfile?: string | undefined
  /** How long one API call, or a pod's way to running, may take (ms); default 60,000. */
  readonly callTimeoutMs?: number | undefined
}

/** Waiting reasons after which a container never starts by itself. */
const IMAGE_REASONS = new Set(["ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName"])
const STUCK_REASONS = new Set(["CreateContainerConfigError", "CreateContainerError", "RunContainerError"])

/**
 * While something waits on a pod, it is also read (the watch's safety net): a second after the
 * last change, then each time twice as late, up to 8 s. A long wait (a run's exit) costs the API
 * server a read per 8 s, not per second.
 */
const POLL_FIRST_MS = 1_000
const POLL_MAX_MS = 8_000

/** A watch that ended (the server closes them now and then) is opened again after this pause. */
const REWATCH_MS = 200

/** How long `inspect` waits, after the container's stream ended, for its status to say so. */
const STATUS_AFTER_END_MS = 5_000

/** How long `remove` waits for a deleted pod to be gone from the API. */
const GONE_TIMEOUT_MS = 30_000

interface Track {
  pod: k8s.V1Pod | undefined
  gone: boolean
  deletedByUs: boolean
  channel: Channel | undefined
  /** The attach stream ended: the container has exited, though its status may not say so yet. */
  streamEnded: boolean
  readonly listeners: Set<() => void>
  stop: () => void
}

const statusCode = (error: unknown): number | undefined => {
  const e = error as { code?: unknown; statusCode?: unknown }
  return typeof e?.code === "number" ? e.code : typeof e?.statusCode === "number" ? e.statusCode : undefined
}

const messageOf = (error: unknown): string => {
  const body = (error as { body?: unknown })?.body
  if (typeof body === "string") {
    try {
      const parsed = JSON.parse(body) as { message?: string }
      if (typeof parsed.message === "string") return parsed.message
    } catch {}
  }
  return error instanceof Error ? error.message : String(error)
}

/** How a missing image gets onto the nodes (there is no `docker build` on a node). */
const getImageCommand = (image: string): string =>
  `${image.startsWith("hermes-sandbox/") ? "hermes-sandbox image build" : `docker pull ${image}`}, then import it into every node's image store (docker save ${image} | ctr -n k8s.io images import -; scripts/kubernetes-local.sh does this for the local cluster) or push it to a registry the nodes pull from`

const containerOf = (pod: k8s.V1Pod | undefined) =>
  pod?.status?.containerStatuses?.find((c) => c.name === PodSpec.CONTAINER)

export const make = (options: KubernetesRuntimeOptions) =>
  Effect.gen(function* () {
    const unknownGuarantees = (options.allowDegraded ?? []).filter((g) => !Guarantees.isDegradedGuarantee(g))
    if (unknownGuarantees.length > 0)
      return yield* invalidRequest(
        "runtime.kubernetes.allowDegraded",
        unknownGuarantees,
        `the guarantees a pod cannot give: ${Object.keys(Guarantees.DEGRADED_GUARANTEES).join(", ")}`
      )
    const kc = new k8s.KubeConfig()
    yield* Effect.try({
      try: () => {
        if (options.kubeconfig !== undefined) kc.loadFromFile(options.kubeconfig)
        else kc.loadFromDefault()
        if (options.context !== undefined) kc.setCurrentContext(options.context)
      },
      catch: (error) =>
        new DockerUnavailable({
          endpoint: options.kubeconfig ?? "the default kubeconfig",
          operation: "load kubeconfig",
          message: messageOf(error),
          hint: "name a kubeconfig (runtime.kubernetes.kubeconfig or KUBECONFIG) whose context reaches the cluster"
        })
    })
    const cluster = kc.getCurrentCluster()
    const endpoint = cluster?.server ?? "no cluster"
    const namespace = options.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? "default"
    const core = kc.makeApiClient(k8s.CoreV1Api)
    const watcher = new k8s.Watch(kc)
    const timeoutMs = options.callTimeoutMs ?? 60_000
    const allowed = new Set(options.allowDegraded ?? [])
    const podOptions: PodSpec.PodOptions = {
      namespace,
      runtimeClassName: options.runtimeClassName,
      imagePullPolicy: options.imagePullPolicy ?? "IfNotPresent",
      seccompProfile: options.seccompProfile ?? PodSpec.DEFAULT_SECCOMP_PROFILE
    }

    /** One API call, bounded; an unreachable API server is DockerUnavailable, anything else ContainerFailed. */
    const call = <A>(
      operation: string,
      containerName: string,
      f: () => Promise<A>,
      cut: "interruptible" | "atomic" = "interruptible"
    ) =>
      // Interruptible inside a caller's uninterruptible region too, so the timeout always cuts it;
      // except an "atomic" call (create), whose effect on the cluster must be known once it was sent.
      (cut === "atomic"
        ? Effect.tryPromise({ try: f, catch: (error) => error })
        : Effect.interruptible(Effect.tryPromise({ try: f, catch: (error) => error }))
      ).pipe(
        Effect.timeoutFail({
          duration: timeoutMs,
          onTimeout: () => new Error(`no answer from the API server within ${timeoutMs} ms`)
        }),
        Effect.mapError((error): SandboxError => {
          const code = statusCode(error)
          if (code === undefined)
            return new DockerUnavailable({
              endpoint,
              operation,
              message: messageOf(error),
              hint: "check that the cluster's API server answers (kubectl --kubeconfig … get --raw /healthz)"
            })
          return new ContainerFailed({
            operation,
            containerName,
            statusCode: code,
            reason: code === 404 ? "not-found" : code === 409 ? "conflict" : "engine",
            message: messageOf(error)
          })
        })
      )

    const tracks = new Map<string, Track>()
    /** The pod's state as a watch keeps it, from the first call that needs it until `remove`. */
    const track = (name: string): Track => {
      const existing = tracks.get(name)
      if (existing !== undefined) return existing
      const t: Track = {
        pod: undefined,
        gone: false,
        deletedByUs: false,
        channel: undefined,
        streamEnded: false,
        listeners: new Set(),
        stop: () => {}
      }
      tracks.set(name, t)
      let stopped = false
      let controller: AbortController | undefined
      let pollDelay = POLL_FIRST_MS
      const notify = () => {
        pollDelay = POLL_FIRST_MS
        for (const listener of [...t.listeners]) listener()
      }
      const open = () => {
        if (stopped) return
        watcher
          .watch(
            `/api/v1/namespaces/${namespace}/pods`,
            { fieldSelector: `metadata.name=${name}` },
            (phase, obj: k8s.V1Pod) => {
              if (phase === "DELETED") t.gone = true
              else if (phase === "ADDED" || phase === "MODIFIED") t.pod = obj
              notify()
            },
            () => {
              if (!stopped && !t.gone) setTimeout(open, REWATCH_MS)
            }
          )
          .then(
            (c) => {
              controller = c
              if (stopped) c.abort()
            },
            () => {
              if (!stopped && !t.gone) setTimeout(open, REWATCH_MS)
            }
          )
      }
      open()
      // A read now (a watch of a pod already gone says nothing), and again while someone waits
      // (POLL_FIRST_MS, backing off): a watch that stalls (a loaded API server, a reconnect) never
      // leaves a wait to its timeout.
      const read = () =>
        core.readNamespacedPod({ name, namespace }).then(
          (pod) => {
            if (stopped || t.gone) return
            const seen = t.pod?.metadata?.resourceVersion
            if (seen === undefined || Number(pod.metadata?.resourceVersion) > Number(seen)) {
              t.pod = pod
              notify()
            }
          },
          (error) => {
            if (!stopped && statusCode(error) === 404) {
              t.gone = true
              notify()
            }
          }
        )
      void read()
      let poll: ReturnType<typeof setTimeout> | undefined
      const tick = () => {
        if (stopped) return
        if (t.listeners.size > 0) {
          void read()
          pollDelay = Math.min(pollDelay * 2, POLL_MAX_MS)
        } else pollDelay = POLL_FIRST_MS
        poll = setTimeout(tick, pollDelay)
        poll.unref()
      }
      poll = setTimeout(tick, pollDelay)
      poll.unref()
      t.stop = () => {
        stopped = true
        clearTimeout(poll)
        controller?.abort()
      }
      return t
    }
    const untrack = (name: string) => {
      const t = tracks.get(name)
      if (t === undefined) return
      tracks.delete(name)
      t.stop()
      t.channel?.close()
      for (const listener of [...t.listeners]) listener()
    }
    /** Completes with `decide`'s first defined answer, asked at once and after each change of the pod. */
    // Interruptible even inside an uninterruptible region (a caller's acquireRelease), so the
    // timeouts around it always cut it.
    const until = <A>(t: Track, decide: (t: Track) => A | undefined): Effect.Effect<A> =>
      Effect.interruptible(
        Effect.async<A>((resume) => {
          const check = () => {
            const answer = decide(t)
            if (answer === undefined) return
            t.listeners.delete(check)
            resume(Effect.succeed(answer))
          }
          t.listeners.add(check)
          check()
          return Effect.sync(() => t.listeners.delete(check))
        })
      )

    /**
     * Sandboxes killed and not yet removed. A kill is a delete here (no API signals a container), so
     * the pod may be gone; to the port it is an exited sandbox until `remove`.
     */
    const killed = new Set<string>()
    const deletePod = (ref: SandboxRef) =>
      Effect.suspend(() => {
        const t = tracks.get(ref.name)
        if (t !== undefined) t.deletedByUs = true
        return call("remove", ref.name, () =>
          core.deleteNamespacedPod({ name: ref.name, namespace, gracePeriodSeconds: 0 })
        ).pipe(
          Effect.asVoid,
          Effect.catchIf(
            (e) => e._tag === "ContainerFailed" && e.reason === "not-found",
            () => Effect.void
          )
        )
      })

    /** Stdin of a stream (attach or exec): bytes written, or a ContainerFailed. */
    const writeTo = (channel: Channel, containerName: string) => (data: Uint8Array) =>
      Effect.tryPromise({
        try: () => channel.write(data),
        catch: (error) =>
          new ContainerFailed({ operation: "write stdin", containerName, reason: "engine", message: messageOf(error) })
      })

    const notRunning = (name: string, operation: string, message: string) =>
      new ContainerFailed({ operation, containerName: name, statusCode: 409, reason: "conflict", message })

    /** Waits until the container runs (or already ended); fails on a pod that can never start. */
    const awaitStarted = (ref: SandboxRef, image: string | undefined) =>
      until(track(ref.name), (t): Effect.Effect<"running" | "ended", SandboxError> | undefined => {
        if (t.gone)
          return Effect.fail(
            new ContainerFailed({
              operation: "attach",
              containerName: ref.name,
              statusCode: 404,
              reason: "not-found",
              message: `the pod ${ref.name} is gone`
            })
          )
        const state = containerOf(t.pod)?.state
        if (state?.running !== undefined) return Effect.succeed("running")
        if (
          state?.terminated !== undefined ||
          t.pod?.status?.phase === "Failed" ||
          t.pod?.status?.phase === "Succeeded"
        )
          return Effect.succeed("ended")
        const reason = state?.waiting?.reason
        if (reason !== undefined && IMAGE_REASONS.has(reason))
          return Effect.fail(
            new ImageNotFound({
              image: image ?? "",
              buildCommand: getImageCommand(image ?? ""),
              message: `the pod ${ref.name} cannot get its image ${image ?? ""}: ${reason}: ${state?.waiting?.message ?? ""}`
            })
          )
        if (reason !== undefined && STUCK_REASONS.has(reason))
          return Effect.fail(
            new ContainerFailed({
              operation: "create",
              containerName: ref.name,
              reason: "engine",
              message: `the pod ${ref.name} cannot start: ${reason}: ${state?.waiting?.message ?? ""}`
            })
          )
        return undefined
      }).pipe(
        Effect.flatten,
        Effect.timeoutFail({
          duration: timeoutMs,
          onTimeout: () =>
            new ContainerFailed({
              operation: "attach",
              containerName: ref.name,
              reason: "engine",
              message: `the pod ${ref.name} did not start within ${timeoutMs} ms (${JSON.stringify(track(ref.name).pod?.status?.conditions ?? [])})`
            })
        })
      )

    const stateOf = (pod: k8s.V1Pod): SandboxState => {
      const c = containerOf(pod)?.state
      const terminated = c?.terminated
      const status: SandboxState["status"] =
        pod.metadata?.deletionTimestamp !== undefined
          ? "removing"
          : c?.running !== undefined
            ? "running"
            : terminated !== undefined
              ? "exited"
              : "created"
      return { status, exitCode: terminated?.exitCode ?? 0, oomKilled: terminated?.reason === "OOMKilled" }
    }

    // Every watch and stream of this runtime ends with it.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const name of [...tracks.keys()]) untrack(name)
      })
    )

    const execChannelPath = (name: string) => `/api/v1/namespaces/${namespace}/pods/${name}/exec`

    return SandboxRuntime.of({
      name: "kubernetes",
      engine: { kind: "remote", endpoint },
      stdinEnds: false,
      // There is no image API: the node resolves the reference when the pod starts (ImageNotFound then).
      resolveImage: (image) => Effect.succeed(image),
      create: (spec) =>
        Effect.gen(function* () {
          const refused = Guarantees.refuseUnallowed(spec, allowed)
          if (refused !== undefined) return yield* Effect.fail(refused)
          if (spec.mounts.length > 0)
            return yield* Effect.fail(
              new ContainerFailed({
                operation: "create",
                containerName: spec.name,
                reason: "guarantee-unavailable",
                message:
                  "bind mounts are not available on Kubernetes (a hostPath volume would hand a node's directory to the sandbox)"
              })
            )
          // The create is not cut once sent: an interruption (an executor closing, a pool's refill
          // ended) waits for the API server's answer, so a pod it made is known. Then a pod starts by
          // itself: wait until it runs (its supervisor then waits for the header), so a missing image
          // or an unschedulable pod fails here, as a create; on any failure or interruption of that
          // wait the pod is deleted, and none is left behind.
          const ref = yield* Effect.uninterruptibleMask((restore) =>
            call(
              "create",
              spec.name,
              () => core.createNamespacedPod({ namespace, body: PodSpec.toPod(spec, podOptions) }),
              "atomic"
            ).pipe(
              Effect.map((pod) => ({ id: pod.metadata?.uid ?? spec.name, name: spec.name })),
              Effect.tap((ref) =>
                restore(awaitStarted(ref, spec.image)).pipe(
                  Effect.onError(() =>
                    deletePod(ref).pipe(Effect.zipRight(Effect.sync(() => untrack(ref.name))), Effect.ignore)
                  )
                )
              )
            )
          )
          return { ...ref, imageId: spec.image }
        }),
      attach: (ref, output) =>
        Effect.gen(function* () {
          const started = yield* awaitStarted(ref, undefined)
          const t = track(ref.name)
          if (started === "ended") {
            return { write: () => Effect.void, end: Effect.void, closed: Effect.void } satisfies AttachedIO
          }
          const query = new URLSearchParams({
            container: PodSpec.CONTAINER,
            stdin: "true",
            stdout: "true",
            stderr: "true",
            tty: "false"
          })
          const channel = yield* Effect.tryPromise({
            try: (signal) =>
              openChannel(kc, `/api/v1/namespaces/${namespace}/pods/${ref.name}/attach`, query, output, signal),
            catch: (error) =>
              new ContainerFailed({
                operation: "attach",
                containerName: ref.name,
                ...(statusCode(error) === undefined ? {} : { statusCode: statusCode(error)! }),
                reason: statusCode(error) === 404 ? "not-found" : "engine",
                message: messageOf(error)
              })
          })
          t.channel = channel
          void channel.closed.then(() => {
            t.streamEnded = true
          })
          return {
            write: writeTo(channel, ref.name),
            // Stream protocol v4 cannot end stdin alone (stdinEnds: false): the supervisor needs no end.
            end: Effect.void,
            closed: Effect.promise(() => channel.closed).pipe(Effect.asVoid)
          } satisfies AttachedIO
        }),
      armExit: (ref) =>
        Effect.sync(() => {
          const t = track(ref.name)
          return until(t, (t): Effect.Effect<ExitStatus, SandboxError> | undefined => {
            const terminated = containerOf(t.pod)?.state?.terminated
            if (terminated !== undefined) return Effect.succeed({ exitCode: terminated.exitCode })
            if (t.gone || t.pod?.metadata?.deletionTimestamp !== undefined) {
              return t.deletedByUs
                ? Effect.succeed({ exitCode: 137 })
                : Effect.fail(
                    new ContainerFailed({
                      operation: "wait",
                      containerName: ref.name,
                      reason: "killed-externally",
                      message: `the pod ${ref.name} was deleted by something outside this SDK; the program did not finish`
                    })
                  )
            }
            return undefined
          }).pipe(Effect.flatten)
        }),
      outsideKill: (ref) =>
        Effect.sync(() => {
          const t = tracks.get(ref.name)
          if (t === undefined || t.deletedByUs) return Option.none()
          if (t.gone || t.pod?.metadata?.deletionTimestamp !== undefined) return Option.some("SIGKILL")
          // activeDeadlineSeconds passed: the kubelet killed it, not the program's own end.
          return t.pod?.status?.reason === "DeadlineExceeded" ? Option.some("SIGKILL") : Option.none()
        }),
      start: () => Effect.void,
      kill: (ref) =>
        Effect.suspend(() => {
          killed.add(ref.name)
          return deletePod(ref)
        }),
      inspect: (ref) =>
        Effect.gen(function* () {
          // After the stream ended the kubelet reports the end at its next status sync (up to ~1 s
          // later): wait for it, so an exit's details (OOMKilled) are there to read.
          const t = tracks.get(ref.name)
          if (t?.streamEnded === true)
            yield* until(t, (t) =>
              t.gone || containerOf(t.pod)?.state?.terminated !== undefined ? true : undefined
            ).pipe(Effect.timeoutTo({ duration: STATUS_AFTER_END_MS, onSuccess: () => true, onTimeout: () => false }))
          const pod = yield* call("inspect", ref.name, () =>
            core.readNamespacedPod({ name: ref.name, namespace })
          ).pipe(
            Effect.catchIf(
              (e) => killed.has(ref.name) && e._tag === "ContainerFailed" && e.reason === "not-found",
              () => Effect.succeed(undefined)
            )
          )
          if (pod === undefined) return { status: "exited", exitCode: 137, oomKilled: false } satisfies SandboxState
          const state = stateOf(pod)
          return killed.has(ref.name) && state.status === "removing"
            ? { ...state, status: "exited" as const, exitCode: 137 }
            : state
        }),
      // The pod's status names an OOM only as its container's end (terminated reason OOMKilled).
      oomKillsSince: () => Effect.succeed(false),
      remove: (ref) =>
        Effect.gen(function* () {
          const t = track(ref.name)
          yield* deletePod(ref)
          // Confirmed gone: the watch saw DELETED, or a read says 404.
          const gone = yield* until(t, (t) => (t.gone ? true : undefined)).pipe(
            Effect.timeoutTo({ duration: GONE_TIMEOUT_MS, onSuccess: () => true, onTimeout: () => false })
          )
          if (!gone) {
            const stillThere = yield* call("inspect", ref.name, () =>
              core.readNamespacedPod({ name: ref.name, namespace })
            ).pipe(
              Effect.as(true),
              Effect.catchAll(() => Effect.succeed(false))
            )
            if (stillThere)
              return yield* Effect.fail(
                new ContainerFailed({
                  operation: "remove",
                  containerName: ref.name,
                  reason: "engine",
                  message: `the pod ${ref.name} was deleted but is still there after ${GONE_TIMEOUT_MS} ms`
                })
              )
          }
        }).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              killed.delete(ref.name)
              untrack(ref.name)
            })
          )
        ),
      list: (labels) =>
        Effect.gen(function* () {
          const selectable = PodSpec.podLabels(labels).labels
          const labelSelector = Object.entries(selectable)
            .map(([k, v]) => `${k}=${v}`)
            .join(",")
          const pods = yield* call("list", "", () =>
            core.listNamespacedPod({ namespace, ...(labelSelector === "" ? {} : { labelSelector }) })
          )
          return pods.items
            .filter((pod) => Object.entries(labels).every(([k, v]) => pod.metadata?.annotations?.[k] === v))
            .map(
              (pod): SandboxInfo => ({
                id: pod.metadata?.uid ?? "",
                name: pod.metadata?.name ?? "",
                labels: { ...(pod.metadata?.annotations ?? {}) },
                status: stateOf(pod).status,
                createdAt: Math.floor((pod.metadata?.creationTimestamp?.getTime() ?? 0) / 1000)
              })
            )
        }),
      exec: (ref, spec, output) =>
        Effect.gen(function* () {
          if (spec.user !== undefined)
            return yield* Effect.fail(
              new ContainerFailed({
                operation: "exec",
                containerName: ref.name,
                reason: "guarantee-unavailable",
                message: "an exec as another user is not available on Kubernetes (the exec API has no user)"
              })
            )
          const marker = randomBytes(16).toString("hex")
          // The exec API has no environment and no working directory: coreutils' env sets both.
          const argv = [
            "env",
            ...(spec.workingDir === undefined ? [] : ["-C", spec.workingDir]),
            ...Object.entries({ ...spec.env, [ExecMarkerVariable]: marker }).map(([k, v]) => `${k}=${v}`),
            ...spec.command
          ]
          const open = (
            command: ReadonlyArray<string>,
            stdin: boolean,
            handlers: Parameters<typeof openChannel>[3]
          ) => {
            const query = new URLSearchParams({
              container: PodSpec.CONTAINER,
              stdin: String(stdin),
              stdout: "true",
              stderr: "true",
              tty: "false"
            })
            for (const word of command) query.append("command", word)
            return Effect.tryPromise({
              try: (signal) => openChannel(kc, execChannelPath(ref.name), query, handlers, signal),
              catch: (error): SandboxError => {
                const code = statusCode(error)
                return code === 404
                  ? new ContainerFailed({
                      operation: "exec",
                      containerName: ref.name,
                      statusCode: 404,
                      reason: "not-found",
                      message: messageOf(error)
                    })
                  : notRunning(ref.name, "exec", messageOf(error))
              }
            })
          }
          const channel = yield* open(argv, spec.stdin, output)
          let killed = false
          return {
            write: writeTo(channel, ref.name),
            end: Effect.void,
            exit: Effect.promise(() => channel.closed).pipe(
              Effect.map((end) => ({ exitCode: exitCodeOf(end) ?? (killed ? 137 : 1) }))
            ),
            kill: Effect.gen(function* () {
              killed = true
              const killer = yield* open(
                ["sh", "-c", ExecKillScript, "hermes-kill", `${ExecMarkerVariable}=${marker}`],
                false,
                { stdout: () => {}, stderr: () => {} }
              )
              yield* Effect.promise(() => killer.closed).pipe(Effect.timeout("10 seconds"), Effect.ignore)
            }).pipe(Effect.catchAll(() => Effect.void)),
            detach: Effect.sync(() => channel.close())
          } satisfies ExecProcess
        })
    })
  })

export const layer = (options: KubernetesRuntimeOptions): Layer.Layer<SandboxRuntime, SandboxError | InvalidRequest> =>
  Layer.scoped(SandboxRuntime, make(options))
